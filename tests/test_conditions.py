"""Route conditions in Conductor's language, through the real loader, checks and engine:
conditions without `{{ }}` (`verdict is None`, `int(count) > 2`), dict methods in templates,
set steps typing block lists, what `validate` says about conditions (and does not say about
valid ones), and the sandbox and bounds that conditions keep. Value-by-value parity with
Conductor is pinned by test_conductor_parity.py."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from helpers_engine import diagnostics, run_yaml, write
from podium.conditions import evaluate, flatten, parse, references
from podium.templating import RenderFailure

RESEARCH = """
workflow: {name: research, entry_point: plan}
agents:
  - name: plan
    type: set
    values:
      verdict: "null"
      count: "'3'"
    routes: [{to: research}]
  - name: web
    type: set
    values: {confidence: high}
  - name: papers
    type: set
    values: {confidence: low}
  - name: summary
    type: set
    value: |
      {% for name, out in research.outputs.items() %}
        - {{ name }}:{{ out.confidence }}:{{ research.outputs.get(name).confidence }}
      {% endfor %}
    routes:
      - {to: $end, when: "WHEN"}
      - to: $end
parallel:
  - name: research
    agents: [web, papers]
    routes:
      - {to: summary, when: "plan_output['verdict'] is None and int(plan_output['count']) > 2"}
      - to: $end
"""


def test_a_workflow_with_conductor_conditions_dict_methods_and_a_block_list_runs(
        tmp_path: Path) -> None:
    run = run_yaml(tmp_path, RESEARCH.replace("WHEN", "'web:high:high' in output"))
    assert run.exit_code == 0, run.error_text()
    steps = run.steps()
    assert (steps[:2], sorted(steps[2:4]), steps[4:]) == (["plan", "research"],
                                                           ["papers", "web"], ["summary"])
    assert run.outputs["plan"] == {"verdict": None, "count": "3"}
    assert run.outputs["summary"] == ["web:high:high", "papers:low:low"]


def test_validate_rejects_a_function_conductor_does_not_have(tmp_path: Path) -> None:
    lines = diagnostics(write(tmp_path, RESEARCH.replace("WHEN", "len(output) == 2")))
    assert any("agents[3].routes[0].when: unknown function 'len' in condition" in line
               for line in lines), lines


VALID = [
    "verdict is None",
    "verdict is not None and 'x' not in verdict",
    "int(count) > 2",
    "1 < score < 10",
    "float(workflow_input['ratio']) <= 0.5",
    "str(score) == '7' and f'{score}' == '7'",
    "review_output.get('score', 0) > 1 and review_output['verdict'] == 'ok'",
    "review_output.verdict.upper() == 'OK'",
    "verdict.startswith('ap') or verdict.split(',')[0] == 'a'",
    "output_score > 5 and context_iteration < 3 and workflow_name == 'v'",
    "'a' in review_output.keys() and not notes",
    "score if verdict else 0",
    "rand() < 2 and randint(3) < 3",
]

INVALID = [
    ("len(verdict) > 2", "unknown function 'len'"),
    ("output.score > 2", "'output' is not a name in a condition without {{ }}"),
    ("review.output.score > 2", "'review' is not a name"),
    ("workflow.input.ratio", "'workflow' is not a name"),
    ("score in [1, 2]", "a list literal is not available"),
    ("verdict in ('a', 'b')", "a tuple literal is not available"),
    ("[s for s in verdict]", "a comprehension is not available"),
    ("score = 1", "condition syntax error: a condition is one expression"),
    ("score > 1; True", "condition syntax error"),
    ("score >", "condition syntax error"),
    ("review_output.verdct == 'a'", "'review' has no output field 'verdct'"),
    ("scroe > 1", "unknown name 'scroe' in condition (did you mean 'score'?)"),
    ("verdict.__class__", "'.__class__' is not allowed"),
    ("{% if score %}yes{% endif %}", "a condition is Jinja only with both '{{' and '}}'"),
]


def _validate(tmp_path: Path, when: str) -> list[str]:
    text = f"""
workflow:
  name: v
  entry_point: review
  input:
    ratio: {{type: string, default: "0.5"}}
agents:
  - name: review
    prompt: "review"
    output:
      verdict: {{type: string}}
      score: {{type: number}}
      count: {{type: string}}
      notes: {{type: string}}
    routes:
      - to: $end
        when: {when!r}
      - to: $end
"""
    return [line for line in diagnostics(write(tmp_path, text)) if "routes[0].when" in line]


@pytest.mark.parametrize("when", VALID)
def test_validate_accepts_conductor_conditions(tmp_path: Path, when: str) -> None:
    assert _validate(tmp_path, when) == []


@pytest.mark.parametrize(("when", "message"), INVALID)
def test_validate_reports_what_fails_in_conductor_too(tmp_path: Path, when: str,
                                                      message: str) -> None:
    lines = _validate(tmp_path, when)
    assert lines
    assert all(": warning:" not in line for line in lines), lines
    assert message in lines[0], lines


def test_output_itself_is_a_name_only_when_the_output_may_be_a_scalar(tmp_path: Path) -> None:
    path = write(tmp_path, """
        workflow: {name: s, entry_point: n}
        agents:
          - name: n
            type: set
            value: "{{ 3 }}"
            routes:
              - {to: m, when: "output > 2 and n_output > 2"}
              - to: m
          - name: m
            type: set
            values: {k: 1}
            routes:
              - {to: $end, when: "output == 1"}
              - to: $end
    """)
    lines = diagnostics(path)
    assert [line.split(": ", 1)[1] for line in lines if "when" in line] == [
        "agents[1].routes[0].when: 'output' is not a name in a condition without {{ }}: it "
        "reads 'output_<key>' names ('output_k' or just 'k') (or write the condition as "
        "{{ ... }})"]


SCOPE: dict[str, Any] = {
    "workflow": {"input": {"count": "3"}, "name": "w"},
    "context": {"iteration": 1, "history": ["review"]},
    "review": {"output": {"items": ["x"], "meta": {"a": 1}, "text": "ab"}},
    "output": {"items": ["x"], "meta": {"a": 1}, "text": "ab", "keys": 3},
}


def test_flatten_is_conductors_one_level_flattening() -> None:
    flat = flatten(SCOPE)
    assert flat["workflow_input"] == {"count": "3"}
    assert flat["context_iteration"] == 1
    assert flat["review_output"]["text"] == "ab"
    assert flat["output_text"] == flat["text"] == "ab"
    assert not {"output", "review", "workflow"} & set(flat)
    assert flatten({"output": 3})["output"] == 3


@pytest.mark.parametrize("when", [
    "items.append('y')", "meta.pop('a')", "meta.clear()",
    "meta.setdefault('b', 2)", "review_output['items'].extend(items)",
])
def test_a_condition_cannot_change_the_runs_state(when: str) -> None:
    before = repr(SCOPE)
    with pytest.raises(RenderFailure) as err:
        evaluate(when, SCOPE)
    assert err.value.kind == "security"
    assert repr(SCOPE) == before


@pytest.mark.parametrize("when", [
    "2 ** 10000000 > 1",
    "(10 ** 50000) * (10 ** 50000) > 1",
    "text.ljust(10 ** 9) == ''",
    "(text * 50000).replace('', text * 50000) == ''",
    "(text * 50000).replace('a', text * 50000) == ''",
    "(text * 40000).join(str(text * 40000)) == ''",
    "f'{1:>999999999}' == ''",
    "f'{1.5:.999999999f}' == ''",
    "text.zfill(10 ** 8) == ''",
    "text.center(99999999) == ''",
    "(1).to_bytes(10 ** 9, 'big') == b''",
    "('\\t' * 50000).expandtabs(10000) == ''",
])
def test_a_hostile_condition_fails_at_once_instead_of_exhausting_the_machine(when: str) -> None:
    start = time.monotonic()
    with pytest.raises(RenderFailure) as err:
        evaluate(when, SCOPE)
    assert err.value.kind == "size", err.value
    assert time.monotonic() - start < 5


@pytest.mark.parametrize(("when", "kind"), [
    ("str.upper(text)", "security"),
    ("int.from_bytes", "security"),
    ("text.format_map", "security"),
    ("(" * 1000 + "1" + ")" * 1000, "syntax"),
    ("x" * 100_001, "syntax"),
    ("undefined_name", "undefined"),
    ("items[5]", "error"),
    ("review_output.nope", "error"),
])
def test_other_failures_are_render_failures(when: str, kind: str) -> None:
    with pytest.raises(RenderFailure) as err:
        evaluate(when, SCOPE)
    assert err.value.kind == kind


def test_a_dict_key_comes_before_a_method_of_that_name() -> None:
    assert evaluate("keys == 3", SCOPE) is True
    assert evaluate("output_keys + 1", SCOPE) == 4
    assert evaluate("review_output.items[0] == 'x'", SCOPE) is True
    assert list(evaluate("meta.items()", SCOPE)) == [("a", 1)]


def test_references_name_each_use_once_without_the_method_called() -> None:
    tree = parse("review_output.meta['a'] == 1 and meta.get('a') and int(x.y) > z[w].q")
    assert sorted(references(tree)) == [("meta",), ("review_output", "meta", "a"), ("w",),
                                        ("x", "y"), ("z",)]


def test_validate_reads_a_method_call_in_a_template_as_a_read_of_its_object(
        tmp_path: Path) -> None:
    path = write(tmp_path, """
        workflow: {name: m, entry_point: review}
        agents:
          - name: review
            prompt: "review"
            output:
              verdict: {type: string}
              meta: {type: object}
            routes: [{to: report}]
          - name: report
            type: set
            values:
              a: "{% for k, v in review.output.meta.items() %}{{ k }}{% endfor %}"
              b: "{{ review.output.get('verdict', 'none') }} {{ review.output.keys() | list }}"
              c: "{{ review.output.verdict.upper() }}"
              d: "{{ review.output.verdct.upper() }}"
    """)
    assert [line.split(": ", 1)[1] for line in diagnostics(path)] == [
        "agents[1].values.d: 'review' has no output field 'verdct' (did you mean 'verdict'?)"]
