"""The terminate step: success and failed outcomes, templated reasons, output_template
(spec 3.9; section-15 cases 34-36).

Deliberate differences from Conductor: a failed terminate is exit 1 (a named business outcome)
and podium emits step_started, step_finished, run_finished(failed) where Conductor emits
agent_started, agent_failed, workflow_failed.
"""

from __future__ import annotations

from pathlib import Path

from helpers_engine import run_cli, run_yaml, write
from podium.events.model import RouteTaken, RunFinished, StepFinished


def test_success_with_output_template_replaces_the_workflow_output(tmp_path: Path) -> None:
    # case 34
    run = run_yaml(tmp_path, """
        workflow: {name: t, entry_point: s}
        agents:
          - {name: s, type: set, value: 5, routes: [{to: stop}]}
          - name: stop
            type: terminate
            status: success
            reason: "stopped at {{ s.output }}"
            output_template:
              aborted: "true"
              value: "{{ s.output }}"
        output:
          never: "this workflow output is replaced"
    """)
    assert run.exit_code == 0
    assert run.result.status == "success"
    assert run.output == {"aborted": True, "value": 5}
    assert (run.result.terminal, run.result.reason) == ("stop", "stopped at 5")
    finished = run.of(RunFinished)[-1]
    assert (finished.status, finished.terminal, finished.reason, finished.exit_code) == \
        ("success", "stop", "stopped at 5", 0)
    # a terminate step has no route_taken
    assert run.routes() == [("s", "stop")]


def test_failed_terminate_is_exit_1_with_the_reason(tmp_path: Path) -> None:
    # case 35
    run = run_yaml(tmp_path, """
        workflow:
          name: t
          entry_point: check
          input:
            ticket: {type: string}
        agents:
          - name: check
            type: set
            values: {ok: false, why: "no criteria"}
            routes:
              - {to: $end, when: "{{ output.ok }}"}
              - {to: invalid}
          - name: invalid
            type: terminate
            status: failed
            reason: "{{ workflow.input.ticket }}: {{ check.output.why }}"
        output:
          ticket: "{{ workflow.input.ticket }}"
    """, inputs={"ticket": "T-1"})
    assert run.exit_code == 1
    assert run.result.status == "failed"
    assert run.result.reason == "T-1: no criteria"
    assert run.result.error is None
    assert run.output == {"ticket": "T-1"}
    assert run.types()[-3:] == ["step_started", "step_finished", "run_finished"]
    finished = run.of(RunFinished)[-1]
    assert (finished.status, finished.terminal, finished.exit_code) == ("failed", "invalid", 1)
    assert run.of(StepFinished)[-1].output == {"status": "failed", "reason": "T-1: no criteria",
                                               "terminated_by": "invalid"}


def test_failed_terminate_through_the_cli(tmp_path: Path) -> None:
    path = write(tmp_path, """
        workflow: {name: t, entry_point: stop}
        agents:
          - name: stop
            type: terminate
            status: failed
            reason: "nope"
    """)
    home = tmp_path / "home"
    proc = run_cli(home, "run", path)
    assert proc.returncode == 1
    assert proc.stdout.strip() == "{}"
    assert "run failed at 'stop': nope" in proc.stderr


def test_terminate_as_entry_point_exposes_its_own_output(tmp_path: Path) -> None:
    # case 36
    run = run_yaml(tmp_path, """
        workflow: {name: t, entry_point: done}
        agents:
          - name: done
            type: terminate
            status: success
            reason: "nothing to do"
        output:
          status: "{{ done.output.status }}"
          reason: "{{ done.output.reason }}"
          by: "{{ done.output.terminated_by }}"
    """)
    assert run.exit_code == 0
    assert run.steps() == ["done"]
    assert run.result.iterations == 1
    assert run.output == {"status": "success", "reason": "nothing to do", "by": "done"}
    assert run.of(RouteTaken) == []


def test_explicit_mode_reason_needs_declared_inputs(tmp_path: Path) -> None:
    # terminate is not a local-render step: its reason sees only what it declares
    run = run_yaml(tmp_path, """
        workflow:
          name: t
          entry_point: s
          context: {mode: explicit}
        agents:
          - {name: s, type: set, values: {why: broken}, routes: [{to: stop}]}
          - name: stop
            type: terminate
            status: failed
            input: [s.output.why]
            reason: "because {{ s.output.why }}"
            output_template:
              # output templates see the full context
              all: "{{ s.output | tojson }}"
    """)
    assert run.exit_code == 1
    assert run.result.reason == "because broken"
    assert run.output == {"all": {"why": "broken"}}
