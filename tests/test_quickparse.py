"""podium.templating.quickparse's parts: the references quick_refs reads from them are what
the walk of Jinja's tree finds; and podium.templating.lightparse builds the tree Jinja's
parser builds (every node kind, field and line number) for the templates it takes, among
them every template of the parts' shapes, and declines every other one."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from jinja2 import nodes
from ruamel.yaml import YAML

from podium.templating import WALK_FROM, RenderFailure, make_environment
from podium.templating.lightparse import Node, light_parse
from podium.templating.quickparse import scan
from podium.templating.trees import TemplateParser

REPO = Path(__file__).resolve().parent.parent
ENV = make_environment()


def _same(a: Any, b: Any, where: str = "tree") -> None:
    """a (lightparse.py's tree) and b (Jinja's) are the same tree: node kinds by name,
    fields and line numbers, all the way down."""
    if isinstance(a, list):
        assert isinstance(b, list), where
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{where}[{i}]")
        return
    if not isinstance(a, Node):
        assert not isinstance(b, nodes.Node), where
        assert a == b, where
        assert type(a) is type(b), where
        return
    assert isinstance(b, nodes.Node), where
    assert type(a).__name__ == type(b).__name__, \
        f"{where}: {type(a).__name__} != {type(b).__name__}"
    assert a.lineno == b.lineno, f"{where}: line {a.lineno} != {b.lineno}"
    assert [n for n, _ in a.iter_fields()] == [n for n, _ in b.iter_fields()], where
    for (name, x), (_, y) in zip(a.iter_fields(), b.iter_fields(), strict=True):
        _same(x, y, f"{where}.{name}")


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _corpus_templates() -> list[str]:
    """Every string holding `{{` in the examples' and the test corpus's workflows."""
    found: set[str] = set()
    yaml = YAML(typ="safe", pure=True)
    for folder in (REPO / "examples", REPO / "tests" / "corpus"):
        for path in sorted(folder.rglob("*.yaml")):
            try:
                data = yaml.load(path.read_text(encoding="utf-8"))
            except Exception:  # hostile or broken files are part of the corpus
                continue
            found.update(s for s in _strings(data) if "{{" in s)
    return sorted(found)


EDGES = [
    "{{ a }}", "{{a}}", "x{{ a.b }}y", "{{ a.b.c }}\n", "line 1\nline 2 {{ s.output.x }}\n",
    "{{\n  a.b\n}} and {{ c }}", "\n\n{{ a }}\n{{ b.c }}\n\n", "{{ a }}{{ b }}", "\t{{ a }}\t",
    "{{ true }}", "{{ none.x }}", "{{ a.true }}", "{{ not }}", "{{ a.0 }}", "{{ a['b'] }}",
    "{{ a | upper }}", "{{ a.b() }}", "{{- a }}", "{{ a -}}", "{% if a %}x{% endif %}",
    "{# c #}{{ a }}", "}} {{ a }}", "{ {{ a }}", "{{ a }} }", "a\r\n{{ b }}", "{{ a }", "{{ }}",
    "{{ a. b }}", "{{ a .b }}", "{{ é }}", "plain text", "", "{{ a\r}}",
    "{{ a.b >= 0.5 }}", "{{ a.b == 0 }}", "{{ a.b != 'x' }}", '{{ a == "y z" }}', "{{ a<b.c }}",
    "{{ a > 1 }}", "{{ a <= 10 }}", "{{ a == true }}", "{{ a == None }}", "{{ a == -1 }}",
    "{{ a == 1.5.x }}", "{{ a == 01 }}", "{{ a == 1e3 }}", "{{ a == 1_0 }}", "{{ a ==\n 1 }}",
    "{{ a\n == 1 }}", "{{ a == b == c }}", "{{ a == 'it''s' }}", "{{ a == 'x\\n' }}",
    "{{ true == a }}", "{{ a == not }}", "{{ a == 'é' }}", "{{ a.b==0 }}", "x {{ a >= 1 }} y",
    "{{ a | tojson }}", "{{ a.b|length }}", "{{ a | trim | upper }}", "{{\n a | d\n}}",
    "{{ a |\n f }}", "{{ a | f(1) }}", "{{ a | not }}", "{{ a | f.g }}", "{{ a | length > 1 }}",
    "{% if a is defined %}x {{ a.b }}{% endif %}", "t\n{% if a.b is defined %}{% endif %}\nu",
    "{%if a is defined%}{{ a }}{%endif%}", "{% if a is defined %}x", "x{% endif %}",
    "{% if a is defined %}{% if b is defined %}y{% endif %}{% endif %}",
    "{% if a is not defined %}x{% endif %}", "{%- if a is defined %}x{% endif %}",
    "{% if a is defined -%}x{% endif %}", "{% if a is defined %}x{% else %}y{% endif %}",
    "{% if a\n is defined %}x{% endif %}", "{% if true is defined %}x{% endif %}",
    "{% if a is defined %}\n{{ a >= 1 }}\n{% endif %}\n{% if b is defined %}{{ b }}{% endif %}",
    "{{ a + 1 }}", "{{ (a|f) + 1 }}", "{{ a | f + 1 }}", "{{ a * 2 }}", "{{ a / 2 }}",
    "{{ a - 1.5 }}", "{{ (a) + 1 }}", "{{ (a.b | f | g) - 2 }}", "{{ a // 2 }}", "{{ a ** 2 }}",
    "{{ a + -1 }}", "{{ a + 1 + 2 }}", "{{ (a + 1) }}", "{{ (a | f }} + 1", "{{ a) + 1 }}",
    "{{ (a + 1 }}", "{{ (true) + 1 }}", "{{ a | not + 1 }}", "{{\n a + 1 }}", "{{ a +\n1 }}",
    "{{ a + 1 >= 2 }}", "{{ a % 2 }}", "{{ a + 01 }}", "{{ (s0.output.summary | length) + 1 }}",
]


@pytest.mark.parametrize("source", EDGES)
def test_light_parse_gives_jinjas_tree_or_declines(source: str) -> None:
    light = light_parse(source)
    if light is None:
        return
    _same(light, ENV.parse(source))
    if scan(ENV, source) is not None:  # every template of the parts' shapes is taken
        assert light is not None


def test_the_corpus_templates_parse_alike() -> None:
    templates = _corpus_templates()
    assert len(templates) > 200
    taken = 0
    for source in templates:
        light = light_parse(source)
        assert light is not None or scan(ENV, source) is None, repr(source)
        if light is not None:
            taken += 1
            _same(light, ENV.parse(source), repr(source))
    assert taken > len(templates) * 0.8  # the light path is the common one


def test_generated_templates_parse_alike() -> None:
    rng = random.Random(33)
    pieces = ["", "text ", "\n", "  ", "a: ", "x.y ", "#", "%", "-", "'\"", "\t", "é"]
    names = ["a", "s0001", "output", "summary", "_x", "workflow", "input", "B2"]
    for _ in range(3000):
        out = []
        for _ in range(rng.randint(1, 4)):
            out.append(rng.choice(pieces))
            ws = [rng.choice(["", " ", "  ", "\n", " \n "]) for _ in range(2)]
            dotted = ".".join(rng.choice(names) for _ in range(rng.randint(1, 4)))
            if rng.random() < 0.5:
                right = rng.choice(["0", "0.5", "12", "'ok'", '"a b"', "true", "None",
                                    "s0001.output", "x"])
                op = rng.choice(["==", "!=", ">=", "<=", ">", "<"])
                dotted += rng.choice(["", " ", "  "]) + op + rng.choice(["", " "]) + right
                ws = [w.replace("\n", "") for w in ws]
            out.append("{{" + ws[0] + dotted + ws[1] + "}}")
        out.append(rng.choice(pieces))
        source = "".join(out)
        assert scan(ENV, source) is not None, repr(source)
        light = light_parse(source)
        assert light is not None, repr(source)
        _same(light, ENV.parse(source), repr(source))


def test_generated_filters_arithmetic_and_blocks_parse_alike() -> None:
    """Names through filters without arguments, one operation with a number, and
    `{% if x is defined %}` blocks of text and expressions, give Jinja's tree (every one of
    these shapes is taken)."""
    rng = random.Random(34)
    pieces = ["", "text ", "\n", "  ", "a: ", "x.y ", "#", "%", "-", "'\"", "\t", "é", "\n\n"]
    names = ["a", "s0001", "output", "summary", "_x", "workflow", "input", "B2"]

    def expr() -> str:
        ws = [rng.choice(["", " ", "  ", "\n", " \n "]) for _ in range(2)]
        dotted = ".".join(rng.choice(names) for _ in range(rng.randint(1, 3)))
        if rng.random() < 0.4:
            dotted += "".join(rng.choice([" | ", "|", " |", "\t|\t"]) +
                              rng.choice(["tojson", "length", "upper", "d", "trim"])
                              for _ in range(rng.randint(1, 3)))
        if rng.random() < 0.3:  # one operation with a number, on one line
            if rng.random() < 0.5:
                dotted = "(" + rng.choice(["", " "]) + dotted + rng.choice(["", " "]) + ")"
            dotted += rng.choice(["", " "]) + rng.choice("+-*/") + rng.choice(["", " ", "\t"]) \
                + rng.choice(["0", "1", "12", "0.5"])
            ws = [w.replace("\n", "") for w in ws]
        return "{{" + ws[0] + dotted + ws[1] + "}}"

    for _ in range(3000):
        out = []
        for _ in range(rng.randint(1, 4)):
            out.append(rng.choice(pieces))
            if rng.random() < 0.35:
                dotted = ".".join(rng.choice(names) for _ in range(rng.randint(1, 3)))
                sp = [rng.choice([" ", "  ", "\t"]) for _ in range(5)]
                inner = "".join(rng.choice(pieces) + (expr() if rng.random() < 0.6 else "")
                                for _ in range(rng.randint(0, 3)))
                out.append("{%" + sp[0] + "if" + sp[1] + dotted + sp[2] + "is" + sp[3] +
                           "defined" + sp[4] + "%}" + inner + "{%" + rng.choice(["", " "]) +
                           "endif" + rng.choice(["", " "]) + "%}")
            else:
                out.append(expr())
        out.append(rng.choice(pieces))
        source = "".join(out)
        assert scan(ENV, source) is not None, repr(source)
        light = light_parse(source)
        assert light is not None, repr(source)
        _same(light, ENV.parse(source), repr(source))


def test_another_environment_is_left_to_jinja() -> None:
    """The parts, and the light trees, are read as make_environment's lexer reads; a parser
    over an environment that lexes otherwise hands every template to Jinja."""
    from jinja2 import Environment

    assert scan(Environment(), "{{ a }}") is None  # keep_trailing_newline off
    other = Environment(keep_trailing_newline=True, variable_start_string="<<",
                        variable_end_string=">>")
    assert scan(other, "{{ a }}") is None
    tree = TemplateParser(other).parse("<< a >> and {{ b }}")
    assert isinstance(tree, nodes.Template)  # Jinja's own tree, `{{ b }}` left as text
    assert [type(n).__name__ for n in tree.body[0].nodes] == ["Name", "TemplateData"]


def test_the_parser_parses_once_and_reports_syntax_errors_each_time() -> None:
    parser = TemplateParser()
    assert parser.parse("{{ a.b }}") is parser.parse("{{ a.b }}")
    raised = []
    for _ in range(2):
        with pytest.raises(RenderFailure, match="expected name or number") as info:
            parser.parse("{{ a. }}")
        assert info.value.kind == "syntax"
        raised.append(info.value)
    assert raised[0] is not raised[1]  # a fresh one each time: the stored one keeps no frames


BINDING = [
    "{% set a = 1 %}{{ a }}", "{% for i in l %}{% set d = i %}{% else %}{% set e = 1 %}{% endfor %}",
    "{% if x %}{% set b = 2 %}{% elif y %}{% set c %}hi{% endset %}{% else %}"
    "{% macro m(q) %}{% set inner = 1 %}{% endmacro %}{% endif %}",
    "{% call m() %}{% set f = 1 %}{% endcall %}", "{% filter upper %}{% set g = 1 %}{% endfilter %}",
    "{% with h = 1 %}{% set i = h %}{% endwith %}", "{% block b %}{% set j = 1 %}{% endblock %}",
    "{% import 'x' as k %}{% from 'y' import l1, l2 as l3 %}",
    "{% for a, b in c %}{% set (m1, m2) = (1, 2) %}{% endfor %}{{ (a | f(b))[0].x }}",
    "{% include 'a.md' %}{% if x %}{% include ['b.md', 'c.md'] %}{% else %}"
    "{% extends 'd' %}{% endif %}{% for i in l %}{% from 'e' import f %}{% endfor %}",
]


def test_the_binder_walk_finds_what_find_all_finds() -> None:
    """check/references.py looks for the names a template binds (and check/partials.py for
    its includes) by walking its statements only; Jinja's find_all walks every node. Both
    find the same statements, in the same order, in every template of the corpus and in each
    kind of binding statement."""
    from podium.check.partials import _loader_tags
    from podium.check.references import _binders, _bound, statements

    walked = 0
    for source in BINDING + _corpus_templates():
        try:
            tree = ENV.parse(source)
        except Exception:  # a broken template of the corpus: nothing to walk
            continue
        for kinds in (_binders(), _loader_tags()):
            found = [id(n) for n in statements(tree.body) if isinstance(n, kinds)]
            assert found == [id(n) for n in tree.find_all(kinds)], repr(source)  # in order
            walked += bool(found)
    assert walked >= len(BINDING)
    assert _bound(ENV.parse(BINDING[2])) == {"b", "c", "m", "inner"}


def _every_template() -> list[str]:
    """The edge cases, the corpus's templates and the generated ones of the tests above."""
    rng = random.Random(35)
    names = ["a", "s0001", "output", "summary", "workflow", "input", "loop", "range"]
    pieces = ["", "text ", "\n", "  ", "é", "\n\n"]

    def dotted() -> str:
        return ".".join(rng.choice(names) for _ in range(rng.randint(1, 3)))

    def expr() -> str:
        e = dotted()
        roll = rng.random()
        if roll < 0.3:
            e += "".join(rng.choice([" | ", "|"]) + rng.choice(["tojson", "d", "default",
                                                                 "length", "trim"])
                         for _ in range(rng.randint(1, 3)))
        elif roll < 0.5:
            e += rng.choice([" == ", " >= ", "<"]) + rng.choice(["0", "'x'", "true", dotted()])
        elif roll < 0.6:
            e = rng.choice(["", "("]) + e + rng.choice([" | length", ""])
            e = (e + ")" if e.startswith("(") else e) + " + 1"
        return "{{ " + e + " }}"

    generated = []
    for _ in range(3000):
        out = []
        for _ in range(rng.randint(1, 4)):
            out.append(rng.choice(pieces))
            if rng.random() < 0.35:
                inner = "".join(rng.choice(pieces) + expr() for _ in range(rng.randint(0, 3)))
                out.append("{% if " + dotted() + " is defined %}" + inner + "{% endif %}")
            else:
                out.append(expr())
        generated.append("".join(out))
    return [*EDGES, *BINDING, *_corpus_templates(), *generated]


def test_quick_refs_are_what_the_tree_gives() -> None:
    """quick_refs reads a template's references from its parts, without a tree: for every
    template it takes they are collect_refs's on Jinja's own tree (the same references, guard
    status, lines, known names and filter uses, in the same order), and it takes exactly the
    templates scan takes, up to the length from which the parser checks the tree's depth."""
    from podium.check.references import collect_refs, quick_refs

    taken = 0
    for source in _every_template():
        quick = quick_refs(ENV, source)
        taken_by_parse = scan(ENV, source) is not None and len(source) <= WALK_FROM
        assert (quick is not None) == taken_by_parse, repr(source)
        if quick is None:
            continue
        taken += 1
        assert quick == collect_refs(ENV.parse(source)), repr(source)
    assert taken > 2000


def test_a_long_template_goes_through_the_parsers_depth_check() -> None:
    from podium.check.references import quick_refs

    deep = "{{ a" + ".b" * WALK_FROM + " }}"
    assert scan(ENV, deep) is not None
    assert quick_refs(ENV, deep) is None
    with pytest.raises(RenderFailure, match="too deep"):
        TemplateParser().parse(deep)
