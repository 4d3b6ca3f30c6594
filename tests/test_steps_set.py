"""The set step: rendering, every output_type coercion and its errors, the optional output
schema (spec 3.7; section-15 cases 28-31)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from helpers_engine import Run, run_yaml
from podium.errors import OutputContractError, StepError
from podium.events.model import StepFailed


def set_run(tmp_path: Path, value: Any, output_type: str | None = None,
            extra: str = "") -> Run:
    typ = f"\n            output_type: {output_type}" if output_type else ""
    return run_yaml(tmp_path, f"""
        workflow: {{name: set, entry_point: s}}
        agents:
          - name: s
            type: set
            value: {json.dumps(value)}{typ}
{extra}
    """)


def set_value(tmp_path: Path, value: Any, output_type: str | None = None) -> Any:
    run = set_run(tmp_path, value, output_type)
    assert run.exit_code == 0, run.error_text()
    return run.outputs["s"]


@pytest.mark.parametrize(("rendered", "expected"), [
    ("42", 42),
    ("true", True),
    ("[1, 2]", [1, 2]),
    ("", ""),
    ("   ", ""),
    ("null", None),
    ("~", None),
    ("2024-01-02", "2024-01-02"),
    ("# c", "# c"),
    ("3.5", 3.5),
    ("{a: 1, b: [x]}", {"a": 1, "b": ["x"]}),
    ("key: [unclosed", "key: [unclosed"),
    ("hello world", "hello world"),
])
def test_auto_coercion(tmp_path: Path, rendered: str, expected: Any) -> None:
    # case 28
    assert set_value(tmp_path, rendered) == expected


@pytest.mark.parametrize(("output_type", "rendered", "expected"), [
    ("string", " 42 ", " 42 "),
    ("string", "true", "true"),
    ("integer", " 7 ", 7),
    ("integer", "-3", -3),
    ("number", "4", 4),
    ("number", "4.25", 4.25),
    ("boolean", "YES", True),
    ("boolean", "off", False),
    ("boolean", "1", True),
    ("boolean", "n", False),
    ("list", "[1, two]", [1, "two"]),
    ("list", "- a\n- b", ["a", "b"]),
    ("dict", "{k: v}", {"k": "v"}),
    ("auto", "007", 7),
])
def test_declared_output_types(tmp_path: Path, output_type: str, rendered: str,
                               expected: Any) -> None:
    value = set_value(tmp_path, rendered, output_type)
    assert value == expected
    assert type(value) is type(expected)


@pytest.mark.parametrize(("output_type", "rendered"), [
    ("boolean", "maybe"),  # case 30
    ("integer", "4.2"),  # case 30
    ("integer", "seven"),
    ("number", "1,5"),
    ("list", "{a: 1}"),
    ("dict", "[1, 2]"),
    ("list", "[unclosed"),
])
def test_coercion_errors(tmp_path: Path, output_type: str, rendered: str) -> None:
    run = set_run(tmp_path, rendered, output_type)
    assert run.exit_code == 3
    assert isinstance(run.result.error, StepError)
    text = run.error_text()
    assert "step 's'" in text
    assert f"value: cannot coerce {rendered!r} to {output_type}" in text
    assert run.of(StepFailed)[0].step == "s"
    assert "s" not in run.outputs


def test_non_string_mapping_keys_are_rejected(tmp_path: Path) -> None:
    run = set_run(tmp_path, "{1: one}", "dict")
    assert run.exit_code == 3
    assert "mapping key 1 is not a string" in run.error_text()


@pytest.mark.parametrize(("literal", "output_type", "expected"), [
    ("5", "string", "5"),
    ("true", "string", "true"),
    ("5", "number", 5),
    ("1", "boolean", True),
    ("[1, 2]", "list", [1, 2]),
    ("[1, 2]", "auto", [1, 2]),
    ("{a: 1}", "dict", {"a": 1}),
])
def test_literal_yaml_values_get_the_declared_type(tmp_path: Path, literal: str,
                                                    output_type: str, expected: Any) -> None:
    run = run_yaml(tmp_path, f"""
        workflow: {{name: set, entry_point: s}}
        agents:
          - name: s
            type: set
            value: {literal}
            output_type: {output_type}
    """)
    assert run.exit_code == 0, run.error_text()
    assert run.outputs["s"] == expected
    assert type(run.outputs["s"]) is type(expected)


def test_literal_yaml_value_of_the_wrong_type_fails(tmp_path: Path) -> None:
    run = set_run(tmp_path, 2.5, "integer")
    assert run.exit_code == 3
    assert "value: cannot coerce '2.5' to integer" in run.error_text()


def test_templated_value_is_coerced(tmp_path: Path) -> None:
    run = run_yaml(tmp_path, """
        workflow: {name: set, entry_point: a}
        agents:
          - {name: a, type: set, value: 20, routes: [{to: b}]}
          - name: b
            type: set
            value: "{{ a.output + 22 }}"
            output_type: integer
    """)
    assert run.outputs["a"] == 20
    assert run.outputs["b"] == 42


def test_values_render_against_the_pre_step_context(tmp_path: Path) -> None:
    # case 29
    run = run_yaml(tmp_path, """
        workflow: {name: set, entry_point: a}
        agents:
          - {name: a, type: set, value: hello, routes: [{to: b}]}
          - name: b
            type: set
            values:
              first: "{{ a.output }}-modified"
              second: "{{ a.output }}"
              count: "3"
    """)
    assert run.outputs["b"] == {"first": "hello-modified", "second": "hello", "count": 3}


def test_scalar_value_with_an_output_schema_fails(tmp_path: Path) -> None:
    # case 31 (first half)
    run = set_run(tmp_path, "5", extra="""
            output:
              n: {type: number}
    """)
    assert run.exit_code == 3
    assert isinstance(run.result.error, OutputContractError)
    assert "its value is a number, not a mapping" in run.error_text()


def test_values_breaking_the_output_schema_name_the_field(tmp_path: Path) -> None:
    run = run_yaml(tmp_path, """
        workflow: {name: set, entry_point: s}
        agents:
          - name: s
            type: set
            values:
              n: "not a number"
            output:
              n: {type: number}
    """)
    assert run.exit_code == 3
    assert "output field 'n' has wrong type: expected number, got string" in run.error_text()


@pytest.mark.parametrize(("value", "target"), [("true", "yes"), ("false", "no")])
def test_boolean_set_output_routes_through_a_jinja_condition(tmp_path: Path, value: str,
                                                             target: str) -> None:
    # case 31 (second half)
    run = run_yaml(tmp_path, f"""
        workflow: {{name: set, entry_point: s}}
        agents:
          - name: s
            type: set
            value: "{value}"
            output_type: boolean
            routes:
              - to: "yes"
                when: "{{{{ output }}}}"
              - to: "no"
          - {{name: "yes", type: set, value: 1}}
          - {{name: "no", type: set, value: 0}}
    """)
    assert run.routes()[0] == ("s", target)


def test_each_execution_overwrites_the_stored_value_and_counts(tmp_path: Path) -> None:
    run = run_yaml(tmp_path, """
        workflow: {name: loop, entry_point: n}
        agents:
          - name: n
            type: set
            value: "{{ (n.output if n is defined else 0) + 1 }}"
            routes:
              - to: $end
                when: "{{ n.output == 4 }}"
              - to: n
        output:
          n: "{{ n.output }}"
    """)
    assert run.output == {"n": 4}
    assert run.result.iterations == 4
    assert [r.output for r in run.engine.state.records] == [1, 2, 3, 4]


def test_a_failed_yaml_value_leaves_nothing_for_the_next_one() -> None:
    """The set step reuses its thread's YAML loader: after a value that failed to load (an
    anchor defined, then a syntax error), the next value does not see that anchor."""
    from podium.steps.set_step import coerce

    assert coerce("a: &x 1\nb: [1", "auto", "v") == "a: &x 1\nb: [1"  # not YAML: the text
    assert coerce("*x", "auto", "v") == "*x"  # an undefined alias, not 1
    assert coerce("a: &y 2\nb: *y", "auto", "v") == {"a": 2, "b": 2}
    assert coerce("[1, 2]", "list", "v") == [1, 2]
    assert coerce("-17", "auto", "v") == -17
    assert coerce("007", "auto", "v") == 7  # YAML's reading, not the plain-integer shortcut
