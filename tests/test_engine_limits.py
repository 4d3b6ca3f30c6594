"""max_iterations: what counts, the default, the limit decision and granting more (spec 6.1;
section-15 cases 12, 13, 15).

Deliberate difference from Conductor: an exhausted limit is exit 4 (LimitExceeded), not 1.
"""

from __future__ import annotations

from pathlib import Path

from helpers_engine import run_workflow, run_yaml, write
from podium.errors import LimitExceeded
from podium.events.model import GateAnswered, LimitReached, LimitResolved, StepStarted

LOOP_WF = """
workflow:
  name: loop
  entry_point: ping
  {limits}
agents:
  - {name: ping, type: set, value: "{{ (ping.output if ping is defined else 0) + 1 }}",
     routes: [{to: pong}]}
  - name: pong
    type: set
    value: "{{ ping.output }}"
    routes:
      - to: $end
        when: "{{ pong.output >= 4 }}"
      - to: ping
output:
  n: "{{ pong.output }}"
"""


def loop_path(tmp_path: Path, limits: str = "") -> Path:
    return write(tmp_path, LOOP_WF.replace("{limits}", limits))


def test_endless_loop_stops_at_max_iterations_with_skip_gates(tmp_path: Path) -> None:
    # case 12: max_iterations 5, --skip-gates -> stop after 5 executions
    text = LOOP_WF.replace("{limits}", "limits: {max_iterations: 5}").replace(
        "pong.output >= 4", "pong.output >= 100")
    run = run_workflow(write(tmp_path, text), skip_gates=True)
    assert run.exit_code == 4
    assert run.result.status == "limit"
    assert isinstance(run.result.error, LimitExceeded)
    assert run.result.error.limit == "iterations"
    assert run.result.iterations == 5
    assert run.steps() == ["ping", "pong", "ping", "pong", "ping"]
    (reached,) = run.of(LimitReached)
    assert (reached.limit, reached.step, reached.current, reached.maximum) == \
        ("iterations", "pong", 5, 5)
    assert reached.recent_steps == ["ping", "pong", "ping", "pong", "ping"]
    (resolved,) = run.of(LimitResolved)
    assert (resolved.granted, resolved.new_maximum, resolved.answered_by) == \
        (0, 5, "skip-gates")
    types = run.types()
    assert types.index("limit_reached") < types.index("limit_resolved") < \
        types.index("run_finished")
    text = run.error_text()
    assert "max_iterations (5)" in text
    assert "before 'pong'" in text
    assert "ping → pong → ping → pong → ping" in text


def test_default_limit_is_ten_and_counts_every_step_execution(tmp_path: Path) -> None:
    text = LOOP_WF.replace("{limits}", "").replace("pong.output >= 4", "pong.output >= 100")
    run = run_workflow(write(tmp_path, text), skip_gates=True)
    assert run.exit_code == 4
    assert run.result.iterations == 10
    assert len(run.of(StepStarted)) == 10
    assert run.of(LimitReached)[0].maximum == 10
    assert [e.run_iteration for e in run.of(StepStarted)] == list(range(1, 11))


def test_exactly_max_iterations_steps_may_run(tmp_path: Path) -> None:
    # 4 loops = 8 executions: fits in max_iterations 8
    run = run_workflow(loop_path(tmp_path, "limits: {max_iterations: 8}"), skip_gates=True)
    assert run.exit_code == 0
    assert run.output == {"n": 4}
    assert run.result.iterations == 8
    assert run.of(LimitReached) == []


def test_scripted_grant_from_a_responses_file_continues_the_run(tmp_path: Path) -> None:
    # case 13: `iteration_limit: [3]` grants 3 more and the run continues
    responses = write(tmp_path, "iteration_limit: [3]\n", name="responses.yaml")
    run = run_workflow(loop_path(tmp_path, "limits: {max_iterations: 5}"), responses=responses)
    assert run.exit_code == 0, run.error_text()
    assert run.output == {"n": 4}
    assert run.result.iterations == 8
    (reached,) = run.of(LimitReached)
    assert reached.current == 5
    (answered,) = run.of(GateAnswered)
    assert (answered.kind, answered.selected, answered.answered_by) == \
        ("iteration_limit", "3", "responses")
    (resolved,) = run.of(LimitResolved)
    assert (resolved.granted, resolved.new_maximum) == (3, 8)
    assert run.engine.state.max_iterations == 8


def test_a_grant_too_small_hits_the_limit_again(tmp_path: Path) -> None:
    responses = write(tmp_path, "iteration_limit: [1]\n", name="responses.yaml")
    run = run_workflow(loop_path(tmp_path, "limits: {max_iterations: 5}"), responses=responses,
                       skip_gates=True)
    assert run.exit_code == 4
    assert run.result.iterations == 6
    assert [e.granted for e in run.of(LimitResolved)] == [1, 0]
    assert [e.current for e in run.of(LimitReached)] == [5, 6]


def test_each_script_set_wait_gate_and_terminate_counts_once(tmp_path: Path) -> None:
    # case 15 (the step types podium runs today)
    run = run_yaml(tmp_path, """
        workflow: {name: count, entry_point: sc}
        agents:
          - {name: sc, type: script, command: python, args: ["-c", "pass"], routes: [{to: st}]}
          - {name: st, type: set, value: 1, routes: [{to: w}]}
          - {name: w, type: wait, duration: 1, routes: [{to: ag}]}
          - {name: ag, prompt: "hi", routes: [{to: g}]}
          - name: g
            type: human_gate
            prompt: "ok?"
            options: [{label: Ok, value: ok, route: done}]
          - {name: done, type: terminate, status: success, reason: done}
    """, skip_gates=True, responses={"agents": {"ag": [{"attempts": [
        {"text": "x"}]}]}})
    assert run.exit_code == 0, run.error_text()
    assert run.result.iterations == 6
    assert [e.run_iteration for e in run.of(StepStarted)] == [1, 2, 3, 4, 5, 6]


def test_failed_step_is_not_counted(tmp_path: Path) -> None:
    run = run_yaml(tmp_path, """
        workflow: {name: count, entry_point: a}
        agents:
          - {name: a, type: set, value: 1, routes: [{to: b}]}
          - {name: b, type: set, value: "x", output_type: integer}
    """)
    assert run.exit_code == 3
    assert run.result.iterations == 1
