"""podium.templating.lightparse against Jinja's parser, beyond the parts' shapes
(tests/test_quickparse.py): generated expressions of the whole grammar it takes, in
`{% if %}` / `{% elif %}` / `{% else %}` blocks, give Jinja's tree; what it declines goes to
Jinja; and the checks find in its trees what they find in Jinja's."""

from __future__ import annotations

import random
from typing import Any

import pytest
from ruamel.yaml import YAML

from podium.check.enums import _jinja
from podium.check.providers import _printed
from podium.check.references import collect_refs
from podium.templating import kinds, make_environment
from podium.templating.lightparse import MAX_DEPTH, light_parse
from test_quickparse import EDGES, REPO, _corpus_templates, _same, _strings

ENV = make_environment()


class _Grammar:
    """Random templates of the shapes lightparse.py takes (and some it refuses)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def ws(self) -> str:
        return self.rng.choice(["", " ", " ", "  ", "\n", "\t"])

    def atom(self, depth: int) -> str:
        r = self.rng
        roll = r.random()
        if roll < 0.35:
            return ".".join(r.choice(["a", "step", "output", "x_1", "loop", "else", "in"])
                            for _ in range(r.randint(1, 3)))
        if roll < 0.5:
            return r.choice(["'s'", '"t u"', "'it''s'", "''", "0", "7", "2.5", "true", "None",
                             "False", "none"])
        if roll < 0.6 and depth < 3:
            return "(" + self.expr(depth + 1) + r.choice(["", ",", ", b"]) + ")"
        if roll < 0.68 and depth < 3:
            return "[" + ", ".join(self.expr(depth + 1) for _ in range(r.randint(0, 2))) + "]"
        if roll < 0.74 and depth < 3:
            return "a[" + self.expr(depth + 1) + "]"
        if roll < 0.8 and depth < 3:
            args = [self.expr(depth + 1) for _ in range(r.randint(0, 2))]
            if r.random() < 0.4:
                args.append("k=" + self.expr(depth + 1))
            return "x.get(" + ", ".join(args) + ")"
        return r.choice(["-", "+", "not ", "- -"]) + self.atom(depth + 1) if depth < 3 \
            else "n"

    def postfix(self, depth: int) -> str:
        r = self.rng
        e = self.atom(depth)
        for _ in range(r.randint(0, 2)):
            roll = r.random()
            if roll < 0.4:
                e += self.ws() + "|" + self.ws() + r.choice(["tojson", "length", "d", "join"])
                if r.random() < 0.4 and depth < 3:
                    e += "(" + self.expr(depth + 1) + ")"
            elif roll < 0.7:
                e += " is " + r.choice(["", "not "]) + r.choice(
                    ["defined", "none", "number", "sameas x", "divisibleby 3", "in [1]"])
            else:
                e += "." + r.choice(["attr", "output"])
        return e

    def expr(self, depth: int = 0) -> str:
        r = self.rng
        e = self.postfix(depth)
        for _ in range(r.randint(0, 2)):
            op = r.choice([" and ", " or ", " == ", " != ", " < ", " >= ", " in ", " not in ",
                           " + ", " - ", " * ", " / ", " // ", " % ", " ** ", " ~ ", "==",
                           " if "])
            if op == " if ":
                e += " if " + self.postfix(depth) + (" else " + self.postfix(depth)
                                                     if r.random() < 0.7 else "")
            else:
                e += op + self.postfix(depth)
        return e

    def template(self) -> str:
        r = self.rng
        out: list[str] = []
        for _ in range(r.randint(1, 3)):
            out.append(r.choice(["", "text ", "\n", "line\n\n", "é ", "a: "]))
            if r.random() < 0.3:
                out.append("{% if " + self.expr() + " %}" + self.body())
                for _ in range(r.randint(0, 2)):
                    out.append("{% elif " + self.expr() + " %}" + self.body())
                if r.random() < 0.5:
                    out.append("{%else%}" + self.body())
                out.append("{% endif %}")
            else:
                out.append("{{" + self.ws() + self.expr() + self.ws() + "}}")
        return "".join(out)

    def body(self, depth: int = 0) -> str:
        if depth < 2 and self.rng.random() < 0.2:  # a nested block
            return ("t\n{% if " + self.expr() + " %}" + self.body(depth + 1)
                    + self.rng.choice(["", "{% else %}" + self.body(depth + 1)]) + "{% endif %}")
        return self.rng.choice(["", "x", "\n", "{{ a }}", "y {{ b.c | d }}\n"])


def _outcome(source: str) -> Any:
    try:
        return ENV.parse(source)
    except Exception as exc:  # what Jinja says of it, whatever it is
        return exc


def test_generated_templates_of_the_whole_grammar_parse_alike() -> None:
    """Every generated template the light parser takes is valid, with Jinja's tree; it
    declines every one Jinja refuses (over half of them: the grammar above is loose) and
    takes most of the others (it declines `7.attr` and the like)."""
    grammar = _Grammar(46)
    taken = valid = 0
    for _ in range(3000):
        source = grammar.template()
        light = light_parse(source)
        jinja = _outcome(source)
        valid += not isinstance(jinja, Exception)
        if light is None:
            continue
        assert not isinstance(jinja, Exception), f"{source!r}: light took it, Jinja: {jinja}"
        _same(light, jinja, repr(source))
        taken += 1
    assert valid > 1000
    assert taken > valid * 0.75


THE_ARTICLES = [
    "Implement ticket {{ workflow.input.ticket }} in {{ workflow.input.repo_dir }}.\n"
    "{% if run_tests is defined and run_tests.output.exit_code != 0 %}\nThe tests are "
    "failing:\n{{ run_tests.output.stdout }}\n{% elif reviewer is defined %}\nAddress these "
    "findings from the previous review:\n{{ reviewer.output.findings | tojson }}\n"
    "{% endif %}\n",
    "{{ 'gpt-5-mini' if validate_ticket.output.complexity == 'small' else 'gpt-5.5' }}",
    "{{ (review_count.output if review_count is defined and review_count.output is not none "
    "else 0) + 1 }}",
]


def test_the_articles_templates_are_taken() -> None:
    """Every template of the flagship workflow has a light tree (so `validate` of it imports
    no Jinja2: tests/test_provider_imports.py), Jinja's."""
    text = (REPO / "examples" / "dev-review" / "workflow.yaml").read_text(encoding="utf-8")
    data = YAML(typ="safe", pure=True).load(text)
    found = [s for s in _strings(data) if "{{" in s or "{%" in s]
    assert set(THE_ARTICLES) <= set(found)
    for source in found:
        light = light_parse(source)
        assert light is not None, repr(source)
        _same(light, ENV.parse(source), repr(source))


DECLINED = [
    "{# a comment #}{{ a }}", "{%- if a %}x{% endif %}", "{{ a -}}", "{% for x in y %}{% endfor %}",
    "{% set a = 1 %}", "{{ {'k': 1} }}", "{{ a[1:2] }}", "{{ 'it\\'s' }}", "{{ é }}",
    "{{ 1e3 }}", "{{ 1_000 }}", "{{ a.0 }}", "{{ 'x\ny' }}", "a\r\nb {{ c }}", "{{ f(*a) }}",
    "{% raw %}{{ a }}{% endraw %}", "{{ a ; b }}", "{% if a %}unclosed", "{{ (a }}",
    "{{ " + "(" * (MAX_DEPTH + 1) + "a" + ")" * (MAX_DEPTH + 1) + " }}",
    "{{ " + "not " * (MAX_DEPTH + 1) + "a }}",
]


@pytest.mark.parametrize("source", DECLINED)
def test_other_shapes_are_left_to_jinja(source: str) -> None:
    assert light_parse(source) is None


def test_a_long_else_chain_is_declined_or_taken_never_a_crash() -> None:
    chain = "{{ " + " else ".join(f"{i} if a == {i}" for i in range(400)) + " else 0 }}"
    light = light_parse(chain)  # recursion past the limit declines; Jinja's parse decides
    if light is not None:
        _same(light, ENV.parse(chain))


def _everything() -> list[str]:
    grammar = _Grammar(47)
    return [*EDGES, *THE_ARTICLES, *_corpus_templates(),
            *(grammar.template() for _ in range(1500))]  # half of these are invalid


def test_the_checks_read_the_same_from_both_trees() -> None:
    """References and filter uses (check/references.py), enum comparisons (check/enums.py)
    and the strings a model template prints (check/providers.py) are the same from the light
    tree as from Jinja's."""
    compared = 0
    for source in _everything():
        light = light_parse(source)
        if light is None:
            continue
        jinja = ENV.parse(source)
        assert collect_refs(light) == collect_refs(jinja), repr(source)
        assert list(_jinja(light)) == list(_jinja(jinja)), repr(source)
        printed: list[list[Any]] = []
        for tree in (light, jinja):
            found: list[str] = []
            complete = [_printed(n, found) for out in tree.find_all(kinds.Output)
                        for n in out.nodes]
            printed.append([found, complete])
        assert printed[0] == printed[1], repr(source)
        compared += 1
    assert compared > 1200


def test_random_text_is_never_taken_wrongly() -> None:
    """Hostile input: strings drawn from the characters and words of template syntax. Any
    one the light parser takes, Jinja parses to the same tree; the rest go to Jinja."""
    rng = random.Random(48)
    alphabet = ["{{", "}}", "{%", "%}", "{", "}", "(", ")", "[", "]", "'", '"', "|", ".",
                ",", "=", "==", "!=", "<", ">", "+", "-", "*", "/", "%", "~", "\n", " ", " ",
                "a", "b.c", "if", "elif", "else", "endif", "is", "not", "in", "and", "or",
                "defined", "none", "1", "2.5", "x", "#", "\\", "é", ":", "for", "endfor"]
    frames = ["{}", "{{{{ {} }}}}", "{{{{{}}}}}", "t {{% if {} %}}x{{% endif %}}",
              "{{% if a %}}{{{{ {} }}}}{{% else %}}y{{% endif %}}"]
    tags = 0
    for _ in range(30000):
        noise = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 10)))
        source = rng.choice(frames).format(noise)
        light = light_parse(source)
        if light is None:
            continue
        jinja = _outcome(source)
        assert not isinstance(jinja, Exception), f"{source!r}: light took it, Jinja: {jinja}"
        _same(light, jinja, repr(source))
        tags += "{{" in source or "{%" in source
    assert tags > 1500  # expressions taken among the noise, not only plain text
