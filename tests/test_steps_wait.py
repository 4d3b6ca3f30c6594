"""The wait step on a FakeClock: the sleep requested, durations, and the run's timeout
(spec 3.8; section-15 cases 32, 33).

Deliberate difference from Conductor: a wait cut short by the run's timeout is a limit
(exit 4), where Conductor raises a TimeoutError (exit 1).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers_engine import InvalidWorkflow, diagnostics, run_workflow, run_yaml, write
from podium.engine.clock import FakeClock
from podium.errors import LimitExceeded
from podium.events.model import LimitReached, StepFailed


@pytest.mark.parametrize(("duration", "seconds"), [
    ('"500ms"', 0.5), ('"2.5m"', 150.0), ("86400", 86400.0), ('"1h"', 3600.0),
    ('" 3 s "', 3.0), ("0.25", 0.25), ('"{{ workflow.input.d }}s"', 7.0),
])
def test_duration_is_slept_on_the_clock(tmp_path: Path, duration: str,
                                        seconds: float) -> None:
    # case 32 (valid durations; the template is resolved at run time)
    clock = FakeClock()
    run = run_yaml(tmp_path, f"""
        workflow:
          name: w
          entry_point: pause
          input:
            d: {{type: number, default: 7}}
        agents:
          - name: pause
            type: wait
            duration: {duration}
            reason: "waiting {{{{ workflow.input.d }}}}"
        output:
          waited: "{{{{ pause.output.waited_seconds }}}}"
    """, clock=clock)
    assert run.exit_code == 0, run.error_text()
    assert clock.sleeps == [seconds]
    # case 33 (first half): the output is only waited_seconds
    assert run.outputs["pause"] == {"waited_seconds": seconds}
    assert run.output == {"waited": seconds}


@pytest.mark.parametrize("duration", ["0", "-1", "86401", "true", '"soon"', '"5 d"'])
def test_invalid_duration_is_a_load_error(tmp_path: Path, duration: str) -> None:
    # case 32 (invalid durations)
    path = write(tmp_path, f"""
        workflow: {{name: w, entry_point: pause}}
        agents:
          - {{name: pause, type: wait, duration: {duration}}}
    """)
    found = [d for d in diagnostics(path)
             if "agents[0].duration:" in d and "warning" not in d]
    assert found, diagnostics(path)
    with pytest.raises(InvalidWorkflow):
        run_workflow(path)


def test_templated_duration_is_checked_after_rendering(tmp_path: Path) -> None:
    run = run_yaml(tmp_path, """
        workflow:
          name: w
          entry_point: pause
          input:
            d: {type: number, default: 90000}
        agents:
          - {name: pause, type: wait, duration: "{{ workflow.input.d }}"}
    """)
    assert run.exit_code == 3
    assert "duration: must be more than 0 and at most 86400 seconds" in run.error_text()
    assert run.of(StepFailed)[0].step == "pause"


def test_run_timeout_during_a_wait_is_a_limit(tmp_path: Path) -> None:
    # case 33 (second half): timeout_seconds 1 with a 10 s wait
    clock = FakeClock()
    run = run_yaml(tmp_path, """
        workflow:
          name: w
          entry_point: pause
          limits: {timeout_seconds: 1}
        agents:
          - {name: pause, type: wait, duration: 10, routes: [{to: after}]}
          - {name: after, type: set, value: 1}
    """, clock=clock)
    assert run.exit_code == 4
    assert run.result.status == "limit"
    assert isinstance(run.result.error, LimitExceeded)
    assert run.result.error.limit == "timeout"
    assert clock.sleeps == [1.0]  # it slept what was left of the run, not 10 s
    assert "step 'pause'" in run.error_text()
    assert run.steps() == ["pause"]


def test_run_timeout_is_checked_between_steps(tmp_path: Path) -> None:
    clock = FakeClock()
    run = run_yaml(tmp_path, """
        workflow:
          name: w
          entry_point: a
          limits: {timeout_seconds: 5}
        agents:
          - {name: a, type: wait, duration: 3, routes: [{to: b}]}
          - {name: b, type: wait, duration: 2, routes: [{to: c}]}
          - {name: c, type: set, value: 1}
    """, clock=clock)
    assert run.exit_code == 4
    assert clock.sleeps == [3.0, 2.0]
    assert run.steps() == ["a", "b"]
    (reached,) = run.of(LimitReached)
    assert (reached.limit, reached.maximum) == ("timeout", 5.0)
