"""Jinja's tree of a template, for what reads templates without rendering them: the checks
of `validate`, the budget's loop analysis and `explore`'s reading of route conditions.

Parsing needs only Jinja's lexer and parser, set to lex as the engine's environment does
(`make_environment`: the default delimiters, no line statements or extensions, trailing
newlines kept). Nothing of the sandbox, podium's filters, the render bounds or the partial
loader takes part in a parse (Jinja looks filters and tests up when it compiles a tree), so
this module parses with a plain `jinja2.Environment` of those settings, and `validate` never
imports the engine (engine.py, sandbox.py, filters.py, budget.py). Decision 0045's addendum;
tests/test_template_trees.py checks that both environments give the same trees and errors.
"""

from __future__ import annotations

from jinja2 import Environment, TemplateSyntaxError, nodes

from podium.templating.quickparse import quick_parse
from podium.templating.text import TOO_DEEP, WALK_FROM, RenderFailure


def parsing_environment() -> Environment:
    """An environment that lexes and parses as make_environment's, and renders nothing."""
    return Environment(autoescape=False, keep_trailing_newline=True)


class TemplateParser:
    """The Jinja AST of each template text, parsed once (several checks walk the same
    template: references, enums, partials, loops, model names). The trees are shared: callers
    only read them. Syntax errors come back as RenderFailure, with Jinja's message and line."""

    def __init__(self, env: Environment | None = None) -> None:
        self.env = env if env is not None else parsing_environment()
        self._parsed: dict[str, nodes.Template | RenderFailure] = {}

    def parse(self, source: str) -> nodes.Template:
        """The Jinja AST of a template; raises RenderFailure on a syntax error."""
        found = self._parsed.get(source)
        if found is None:
            found = self._parsed[source] = self._parse(source)
        if isinstance(found, RenderFailure):  # a fresh one: the stored one keeps no frames
            raise RenderFailure(found.kind, str(found), lineno=found.lineno)
        return found

    def _parse(self, source: str) -> nodes.Template | RenderFailure:
        try:
            found = quick_parse(self.env, source) or self.env.parse(source)
            if len(source) > WALK_FROM:  # deep enough to matter: walked once, as the
                for _ in found.find_all(nodes.Node):  # checks and compile recurse
                    pass
        except TemplateSyntaxError as exc:
            return RenderFailure("syntax", exc.message or "syntax error", lineno=exc.lineno)
        except RecursionError:
            return RenderFailure("syntax", TOO_DEEP)
        return found

    def parse_expression(self, source: str) -> nodes.Expr:
        """The Jinja AST of a bare expression; raises RenderFailure when `source` is not one
        expression."""
        try:
            template = self.env.parse("{{ " + source + " }}")
        except TemplateSyntaxError as exc:
            raise RenderFailure("syntax", exc.message or "syntax error", lineno=exc.lineno) \
                from None
        except RecursionError:
            raise RenderFailure("syntax", TOO_DEEP) from None
        body = template.body
        if len(body) != 1 or not isinstance(body[0], nodes.Output) or len(body[0].nodes) != 1:
            raise RenderFailure("syntax", "not a single expression")
        node = body[0].nodes[0]
        assert isinstance(node, nodes.Expr)
        return node
