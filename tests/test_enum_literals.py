"""The enum check reads a route condition of quickparse.py's shapes from its parts, with no
tree made and no Jinja2 imported (check/enums.py `_quick`): what it finds must be what the
walk of Jinja's tree finds (`_jinja`), for every template of the examples and the corpus and
for generated conditions, and a workflow whose conditions are all of those shapes is checked
without loading Jinja2."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from helpers_engine import imported, run_cli, write
from podium.check.enums import _jinja, _quick
from podium.templating.text import WALK_FROM
from podium.templating.trees import TemplateParser
from test_provider_imports import loaded
from test_quickparse import EDGES, _corpus_templates

PARSER = TemplateParser()


def _tree(text: str) -> list[object]:
    return list(_jinja(PARSER.parse(text)))


MORE = [
    "{{ a.output.v == 'x' }}", "{{ a.output.v != 'y z' }}", "{{ a.v == 1 }}{{ b.w != 2.5 }}",
    "{{ a.v == true }}", "{{ a.v != None }}", "{{ a.v == b.w }}", "{{ a.v >= 3 }}",
    "{% if a is defined %}{{ a.v == 'x' }}{% endif %}", "{{ a.v | length }}", "{{ a.v + 1 }}",
]


@pytest.mark.parametrize("text", [*EDGES, *MORE])
def test_an_edge_reads_as_its_tree(text: str) -> None:
    quick = _quick(text)
    if quick is not None:
        assert quick == _tree(text)


def test_the_corpus_reads_as_its_trees() -> None:
    taken = compared = 0
    for text in _corpus_templates():
        quick = _quick(text)
        if quick is None:
            continue
        taken += 1
        assert quick == _tree(text), repr(text)
        compared += bool(quick)
    assert taken > 50
    assert compared > 10  # comparisons found, not only templates without one


def test_generated_conditions_read_as_their_trees() -> None:
    rng = random.Random(45)
    rights = ["'approve'", '"re vise"', "0", "12", "0.5", "true", "False", "none", "None",
              "other.output.v", "''"]
    for _ in range(2000):
        parts = []
        for _ in range(rng.randint(1, 3)):
            dotted = ".".join(rng.choice(["s", "output", "verdict", "x_1"])
                              for _ in range(rng.randint(1, 3)))
            op = rng.choice(["==", "!=", ">=", "<", "=="])
            parts.append(rng.choice(["", "text ", "\n"]) + "{{ " + dotted
                         + rng.choice(["", " "]) + op + rng.choice(["", " "])
                         + rng.choice(rights) + " }}")
        text = "".join(parts)
        quick = _quick(text)
        assert quick is not None, repr(text)
        assert quick == _tree(text), repr(text)


def test_a_condition_longer_than_the_walk_limit_goes_to_the_tree() -> None:
    long = "{{ a" + ".b" * WALK_FROM + " == 'x' }}"
    assert _quick(long) is None


def test_an_enum_condition_is_checked_without_jinja(tmp_path: Path) -> None:
    text = """
        workflow: {name: judge, entry_point: review}
        agents:
          - name: review
            prompt: "Review {{ workflow.input.ticket }}."
            tools: []
            output:
              verdict: {type: string, enum: [approve, revise]}
            routes:
              - {to: $end, when: "{{ review.output.verdict == 'approved' }}"}
              - {to: $end, when: "{{ review.output.verdict != 'revise' }}"}
              - {to: review}
        """
    flow = write(tmp_path, text)
    got = run_cli(tmp_path / "home", "validate", flow)
    assert got.returncode == 2, got.stdout
    assert "'approved' is not a value of review.output.verdict" in got.stdout
    assert "'revise' is not a value" not in got.stdout
    valid = write(tmp_path, text.replace("'approved'", "'approve'"), "valid.yaml")
    assert loaded(imported(tmp_path, "validate", valid), ("jinja2",)) == []
