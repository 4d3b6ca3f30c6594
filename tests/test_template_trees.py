"""The checks parse templates with podium.templating.trees: lightparse.py's trees for most,
a plain Jinja environment for the others, never the engine's sandboxed one
(make_environment). The trees (every node kind, field and line number) and the syntax errors
must be the ones the engine's environment gives, for every template the examples and the
test corpus hold, the quick reader's edge cases and statements of every kind."""

from __future__ import annotations

from typing import Any

import pytest
from jinja2 import nodes

from podium.templating import RenderFailure, make_environment
from podium.templating.lightparse import Node
from podium.templating.quickparse import plain_lexing
from podium.templating.trees import TemplateParser, parsing_environment
from test_quickparse import EDGES, _corpus_templates

MORE = [
    "{% for x in a %}{{ loop.index }}{{ x.y | default('-') }}{% else %}none{% endfor %}",
    "{% set n = a | length %}{{ n * 2 }}", "{% include 'p.md' %}", "{% macro m(x) %}{% endmacro %}",
    "{{ 'a' if b is defined and b.c != 0 else 'd' }}", "{{ (x if y is not none else 0) + 1 }}",
    "{% if a %}x{% elif b %}y{% else %}z{% endif %}", "{{ a[0] ~ b['c'] }}", "{{ {'k': [1, 2]} }}",
    "{{ a.b(1, k=2) }}", "{% if a %}", "{{ a | }}", "{% endfor %}", "{{ 'x' ~ }}", "{#", "{{ a\n",
    "{{ 1 + (2 }}", "{% raw %}{{ x }}{% endraw %}", "{%- if a -%}\n x \n{%- endif -%}",
    "line 1\r\nline 2 {{ x }}\r\n", "{{ a }}\n",
]


def _shape(node: Any) -> Any:
    """A tree as nested tuples: each node's kind, line and fields, all the way down (a light
    node and Jinja's of the same class name are the same kind; the environment a node names
    is left out)."""
    if isinstance(node, list):
        return [_shape(n) for n in node]
    if isinstance(node, (nodes.Node, Node)):
        return (type(node).__name__, node.lineno,
                tuple((name, _shape(value)) for name, value in node.iter_fields()))
    return (type(node), node)


def _outcome(parse: Any, source: str) -> Any:
    try:
        return _shape(parse(source))
    except RenderFailure as exc:
        return ("failure", exc.kind, str(exc), exc.lineno)


Both = tuple[TemplateParser, TemplateParser]


@pytest.fixture(scope="module")
def both() -> Both:
    """The checks' parser, and Jinja's parse over the engine's environment (the same parser
    with its light path off)."""
    engines = TemplateParser(make_environment())
    engines._light = False
    return TemplateParser(), engines


def test_the_plain_environment_lexes_as_the_engines() -> None:
    """quickparse.py takes templates only from an environment that lexes as it assumes."""
    assert plain_lexing(parsing_environment())
    assert plain_lexing(make_environment())


@pytest.mark.parametrize("source", EDGES + MORE)
def test_edges_parse_alike(both: Both, source: str) -> None:
    parser, engine = both
    assert _outcome(parser.parse, source) == _outcome(engine.parse, source)


def test_the_corpus_parses_alike(both: Both) -> None:
    parser, engine = both
    templates = _corpus_templates()
    assert len(templates) > 200
    failures = 0
    for source in templates:
        mine, theirs = _outcome(parser.parse, source), _outcome(engine.parse, source)
        assert mine == theirs, repr(source)
        failures += mine[0] == "failure"
    assert failures < len(templates) // 2  # trees compared, not only errors


@pytest.mark.parametrize("source", ["a.b >= 1", "x if y else z", "a |", "a b", "(1",
                                    "{{ a }}", "a in [1, 2] and not b"])
def test_expressions_parse_alike(both: Both,
                                 source: str) -> None:
    parser, engine = both
    assert (_outcome(parser.parse_expression, source)
            == _outcome(engine.parse_expression, source))


def test_a_template_too_deep_to_walk_is_refused_by_both(both: Both) -> None:
    parser, engine = both
    deep = "{{ " + "(" * 3000 + "a" + ")" * 3000 + " }}"
    assert _outcome(parser.parse, deep) == _outcome(engine.parse, deep)
    assert _outcome(parser.parse, deep)[0] == "failure"
