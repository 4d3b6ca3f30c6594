"""Routing through the real loader and engine: spec section 4 and section-15 cases 1-9, 69.

Podium differs from Conductor on purpose in one place here: a run that stops because no route
matched, or because a condition cannot be evaluated, is a runtime error (exit 3, RouteError),
not Conductor's generic exit 1; the message names the step and every condition with its value.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers_engine import Run, run_cli, run_yaml, write
from podium.errors import RouteError
from podium.events.model import RouteTaken, RunFinished

SET_THEN_ROUTES = """
workflow:
  name: routing
  entry_point: s
agents:
  - name: s
    type: set
    values: {value}
    routes:
{routes}
  - name: a
    type: set
    value: "a"
  - name: b
    type: set
    value: "b"
output:
  last: "{{{{ context.history[-1] }}}}"
"""


def route_run(tmp_path: Path, values: str, routes: str, **kwargs: object) -> Run:
    text = SET_THEN_ROUTES.format(value=values, routes=routes)
    return run_yaml(tmp_path, text, **kwargs)


def test_step_without_routes_ends_the_run_and_renders_the_output(tmp_path: Path) -> None:
    # case 1
    run = run_yaml(tmp_path, """
        workflow: {name: one, entry_point: only}
        agents:
          - name: only
            type: set
            values: {greeting: hello}
        output:
          said: "{{ only.output.greeting }} world"
    """)
    assert run.exit_code == 0
    assert run.output == {"said": "hello world"}
    assert run.steps() == ["only"]
    (route,) = run.of(RouteTaken)
    assert (route.from_step, route.to_step, route.kind) == ("only", "$end", "implicit")
    assert run.of(RunFinished)[-1].terminal == "$end"


def test_no_matching_route_is_a_runtime_error_listing_each_condition(tmp_path: Path) -> None:
    # case 2; podium: RouteError, exit 3 (Conductor: ValueError, exit 1)
    run = route_run(tmp_path, "{flag: false, n: 2}", """
      - to: a
        when: "{{ output.flag }}"
      - to: b
        when: "n > 5"
""")
    assert run.exit_code == 3
    assert run.result.status == "error"
    assert isinstance(run.result.error, RouteError)
    text = run.error_text()
    assert "step 's'" in text
    assert "no route matched" in text
    assert "'{{ output.flag }}' -> 'False'" in text
    assert "'n > 5' -> False" in text
    assert run.steps() == ["s"]
    assert run.of(RouteTaken) == []
    finished = run.of(RunFinished)[-1]
    assert (finished.status, finished.error_type, finished.step) == ("error", "RouteError", "s")


@pytest.mark.parametrize(("score", "target"), [(8, "a"), (5, "b")])
def test_bare_condition_then_catch_all(tmp_path: Path, score: int, target: str) -> None:
    # case 3: bare names are the output's keys
    run = route_run(tmp_path, f"{{score: {score}}}", """
      - to: a
        when: "score > 7"
      - to: b
""")
    assert run.exit_code == 0
    assert run.routes()[0] == ("s", target)
    assert run.steps() == ["s", target]
    first = run.of(RouteTaken)[0]
    if target == "a":
        assert (first.route_index, first.kind, first.condition) == (0, "when", "score > 7")
    else:
        assert (first.route_index, first.kind, first.condition) == (1, "default", None)
        assert first.evaluated == [{"index": 0, "to": "a", "when": "score > 7", "value": False,
                                    "holds": False}]


def test_prefixed_flattened_names(tmp_path: Path) -> None:
    # case 4: `output_score` is output.score, `s_output` the step's own output
    run = route_run(tmp_path, "{score: 8}", """
      - to: a
        when: "output_score > 7 and workflow_name == 'routing'"
      - to: b
""")
    assert run.routes()[0] == ("s", "a")


@pytest.mark.parametrize(("value", "target"), [
    ("0", "b"), ("1", "a"), ("''", "b"), ("something", "a"),
])
def test_jinja_condition_text_is_read_as_a_boolean(tmp_path: Path, value: str,
                                                   target: str) -> None:
    # case 5: count 0 -> false, 1 -> true; "" -> false, "something" -> true
    run = route_run(tmp_path, f"{{count: {value}}}", """
      - to: a
        when: "{{ output.count }}"
      - to: b
""")
    assert run.routes()[0] == ("s", target)


def test_unconditional_route_first_wins_and_later_conditions_are_not_evaluated(
        tmp_path: Path) -> None:
    # case 6: the second condition would fail (undefined name) if it were evaluated
    run = route_run(tmp_path, "{x: 1}", """
      - to: a
      - to: b
        when: "{{ b.output.nothing }}"
""")
    assert run.exit_code == 0
    route = run.of(RouteTaken)[0]
    assert (route.to_step, route.route_index, route.kind, route.evaluated) == \
        ("a", 0, "default", [])


def test_first_matching_route_wins_in_declaration_order(tmp_path: Path) -> None:
    run = route_run(tmp_path, "{n: 9}", """
      - to: a
        when: "n > 5"
      - to: b
        when: "n > 1"
      - to: $end
""")
    route = run.of(RouteTaken)[0]
    assert (route.to_step, route.route_index) == ("a", 0)
    assert [e["index"] for e in route.evaluated] == [0]


def test_route_to_end_stops_before_other_steps(tmp_path: Path) -> None:
    run = route_run(tmp_path, "{n: 1}", """
      - to: $end
        when: "{{ output.n == 1 }}"
      - to: a
""")
    assert run.steps() == ["s"]
    assert run.routes() == [("s", "$end")]
    assert run.output == {"last": "s"}


def test_exit_code_bare_condition_on_a_script(tmp_path: Path) -> None:
    run = run_yaml(tmp_path, """
        workflow: {name: sc, entry_point: check}
        agents:
          - name: check
            type: script
            command: python
            args: ["-c", "import sys; sys.exit(3)"]
            routes:
              - to: ok
                when: "exit_code == 0"
              - to: fix
                when: "exit_code == 3 and check_output.exit_code == 3"
          - {name: ok, type: set, value: ok}
          - {name: fix, type: set, value: fix}
    """)
    assert run.routes()[0] == ("check", "fix")


def test_undefined_name_in_a_jinja_condition_names_name_step_and_condition(
        tmp_path: Path) -> None:
    # `later` is a real step that has not run yet: the checker accepts the reference, the
    # engine cannot evaluate it. podium: RouteError, exit 3.
    run = run_yaml(tmp_path, """
        workflow: {name: undef, entry_point: first}
        agents:
          - name: first
            type: set
            value: 1
            routes:
              - to: later
                when: "{{ later.output == 2 }}"
              - to: later
          - name: later
            type: set
            value: 2
    """)
    assert run.exit_code == 3
    assert isinstance(run.result.error, RouteError)
    text = run.error_text()
    assert "step 'first'" in text
    assert "'later' is undefined" in text
    assert "{{ later.output == 2 }}" in text


def test_undefined_name_in_a_bare_condition(tmp_path: Path) -> None:
    # case 7 (Conductor: ValueError "Unknown variable in expression"); run without the static
    # checks, which reject the unknown name before the run (see the CLI test below)
    path = write(tmp_path, """
        workflow: {name: undef, entry_point: first}
        agents:
          - name: first
            type: set
            values: {score: 1}
            routes:
              - to: $end
                when: "scroe > 0"
    """)
    from helpers_engine import run_workflow

    run = run_workflow(path, check=False)
    assert run.exit_code == 3
    text = run.error_text()
    assert "step 'first'" in text
    assert "'scroe' is undefined" in text
    assert "'scroe > 0'" in text


def test_unknown_name_in_a_condition_is_caught_before_the_run_by_the_cli(
        tmp_path: Path) -> None:
    path = write(tmp_path, """
        workflow: {name: undef, entry_point: first}
        agents:
          - name: first
            type: set
            values: {score: 1}
            routes:
              - to: $end
                when: "scroe > 0"
    """)
    proc = run_cli(tmp_path / "home", "run", path)
    assert proc.returncode == 2, proc.stderr
    assert "scroe" in proc.stderr
    assert proc.stdout == ""


def test_end_route_output_merges_with_the_workflow_output(tmp_path: Path) -> None:
    # case 8
    run = route_run(tmp_path, "{value: v1}", """
      - to: $end
        output:
          transformed: "T: {{ output.value }}"
          last: overridden
""")
    assert run.output == {"last": "overridden", "transformed": "T: v1"}


def test_output_values_are_coerced_like_conductor(tmp_path: Path) -> None:
    # case 9 and the output part of case 69
    run = run_yaml(tmp_path, """
        workflow: {name: coerce, entry_point: s}
        agents:
          - name: s
            type: set
            values:
              items: [1, 2]
        output:
          t: "{{ true }}"
          f: "{{ false }}"
          n: "{{ none }}"
          int: "42"
          float: "3.5"
          lst: "{{ s.output['items'] | tojson }}"
          leading_zeros: "007"
          sci: "1e3"
          text: "plain"
    """)
    assert run.output == {"t": True, "f": False, "n": None, "int": 42, "float": 3.5,
                          "lst": [1, 2], "leading_zeros": 7, "sci": "1e3", "text": "plain"}


def test_none_condition_is_false_and_route_output_is_coerced(tmp_path: Path) -> None:
    # case 69: "{{ none }}" renders "None", which Conductor reads as true and podium as false
    # (docs/compatibility.md); the route output is coerced as Conductor does
    run = route_run(tmp_path, "{x: 1}", """
      - to: a
        when: "{{ none }}"
      - to: $end
        output:
          extra: "007"
""")
    assert run.routes() == [("s", "$end")]
    assert run.output == {"last": "s", "extra": 7}
