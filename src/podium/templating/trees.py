"""The tree of a template, for what reads templates without rendering them: the checks of
`validate`, the budget's loop analysis and `explore`'s reading of route conditions.

Most templates are read by lightparse.py, which builds the tree Jinja's parser gives out of
its own nodes, with no Jinja2 imported (about 30 ms of a cold process); the others by Jinja's
parser. Code that walks the trees names node kinds through kinds.py, which matches both.
Parsing needs only Jinja's lexer and parser, set to lex as the engine's environment does
(`make_environment`: the default delimiters, no line statements or extensions, trailing
newlines kept): nothing of the sandbox, podium's filters, the render bounds or the partial
loader takes part in a parse (Jinja looks filters and tests up when it compiles a tree), so
the fallback is a plain `jinja2.Environment` of those settings. Decision 0046;
tests/test_template_trees.py and tests/test_lightparse.py compare the trees and the errors
with those of the engine's environment.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from podium.templating.lightparse import light_parse
from podium.templating.quickparse import plain_lexing
from podium.templating.text import TOO_DEEP, WALK_FROM, RenderFailure

if TYPE_CHECKING:
    from jinja2 import Environment, nodes


def parsing_environment() -> Environment:
    """An environment that lexes and parses as make_environment's, and renders nothing."""
    from jinja2 import Environment

    return Environment(autoescape=False, keep_trailing_newline=True)


class TemplateParser:
    """The tree of each template text, parsed once (several checks walk the same template:
    references, enums, partials, loops, model names). The trees are shared: callers only
    read them, through kinds.py. Syntax errors come back as RenderFailure, with Jinja's
    message and line. `env` is the Jinja environment of the templates lightparse.py does
    not take (made at the first of them when not given); an environment that lexes otherwise
    than make_environment's has all its templates parsed by Jinja."""

    def __init__(self, env: Environment | None = None) -> None:
        self._env = env
        self._light = env is None or plain_lexing(env)
        self._parsed: dict[str, nodes.Template | RenderFailure] = {}

    @property
    def env(self) -> Environment:
        if self._env is None:
            self._env = parsing_environment()
        return self._env

    def parse(self, source: str) -> nodes.Template:
        """The tree of a template; raises RenderFailure on a syntax error."""
        found = self._parsed.get(source)
        if found is None:
            found = self._parsed[source] = self._parse(source)
        if isinstance(found, RenderFailure):  # a fresh one: the stored one keeps no frames
            raise RenderFailure(found.kind, str(found), lineno=found.lineno)
        return found

    def _parse(self, source: str) -> nodes.Template | RenderFailure:
        if self._light and len(source) <= WALK_FROM:  # a longer one may nest too deep:
            light = light_parse(source)  # Jinja's walk decides
            if light is not None:
                return cast("nodes.Template", light)
        from jinja2 import TemplateSyntaxError
        from jinja2 import nodes as jinja_nodes

        try:
            found = self.env.parse(source)
            if len(source) > WALK_FROM:  # deep enough to matter: walked once, as the
                for _ in found.find_all(jinja_nodes.Node):  # checks and compile recurse
                    pass
        except TemplateSyntaxError as exc:
            return RenderFailure("syntax", exc.message or "syntax error", lineno=exc.lineno)
        except RecursionError:
            return RenderFailure("syntax", TOO_DEEP)
        return found

    def parse_expression(self, source: str) -> nodes.Expr:
        """The tree of a bare expression; raises RenderFailure when `source` is not one
        expression (or, as `parse`, on a syntax error)."""
        from podium.templating import kinds

        body = self.parse("{{ " + source + " }}").body
        if len(body) != 1 or not isinstance(body[0], kinds.Output) or len(body[0].nodes) != 1:
            raise RenderFailure("syntax", "not a single expression")
        return cast("nodes.Expr", body[0].nodes[0])
