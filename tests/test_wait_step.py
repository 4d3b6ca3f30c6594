"""Wait steps (spec 3.8) on the injected clock: what is slept, what is stored, how the run's
timeout (its own, or its parent's for a sub-workflow) cuts a wait short, and a wait stopped by
`podium stop` (SIGTERM) and resumed. No test sleeps: FakeClock advances instantly, and the one
real-clock case is driven by polling the store. Section-15 cases 32 and 33.

Deliberate difference from Conductor: a wait cut short by the run's timeout is a limit
(exit 4), where Conductor raises a TimeoutError (exit 1)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

from helpers_engine import (
    InvalidWorkflow,
    cli_env,
    diagnostics,
    podium_argv,
    run_cli,
    run_workflow,
    run_yaml,
    wait_until,
    write,
)
from podium.clock import FakeClock
from podium.errors import LimitExceeded
from podium.events.model import LimitReached, StepFailed, StepFinished


@pytest.mark.parametrize(("duration", "seconds"), [
    ('"500ms"', 0.5),
    ('"2.5m"', 150.0),
    ('"{{ workflow.input.minutes * 2 }}m"', 6.0 * 60),
    ('"{{ workflow.input.minutes }}"', 3.0),
    ("45", 45.0),
    ("86400", 86400.0),
    ('"1h"', 3600.0),
    ('" 3 s "', 3.0),
    ("0.25", 0.25),
    ('"{{ workflow.input.d }}s"', 7.0),
])
def test_wait_sleeps_on_the_clock_and_stores_what_it_waited(tmp_path: Path, duration: str,
                                                            seconds: float) -> None:
    # case 32 (valid durations; a template is resolved at run time)
    clock = FakeClock()
    run = run_yaml(tmp_path, f"""
        workflow:
          name: w
          entry_point: pause
          input:
            minutes: {{type: number, default: 3}}
            d: {{type: number, default: 7}}
        agents:
          - name: pause
            type: wait
            duration: {duration}
            reason: "cooling down for {{{{ workflow.input.minutes }}}}"
            routes:
              - {{to: long, when: "{{{{ pause.output.waited_seconds >= 60 }}}}"}}
              - {{to: short}}
          - {{name: long, type: set, value: long}}
          - {{name: short, type: set, value: short}}
        output:
          waited: "{{{{ pause.output.waited_seconds }}}}"
    """, clock=clock)
    assert run.exit_code == 0, run.error_text()
    assert clock.sleeps == [seconds]
    # case 33 (first half): the output is only waited_seconds
    assert run.outputs["pause"] == {"waited_seconds": seconds}
    assert run.output == {"waited": seconds}
    assert run.result.path == ["pause", "long" if seconds >= 60 else "short"]
    assert run.result.iterations == 2  # a wait counts as one execution
    (finished,) = [e for e in run.of(StepFinished) if e.step == "pause"]
    assert finished.elapsed == seconds  # measured on the same clock
    assert run.result.elapsed == seconds


def test_run_timeout_cuts_a_wait_short(tmp_path: Path) -> None:
    clock = FakeClock()
    run = run_yaml(tmp_path, """
        workflow:
          name: w
          entry_point: first
          limits: {timeout_seconds: 30}
        agents:
          - {name: first, type: wait, duration: "10s", routes: [{to: pause}]}
          - {name: pause, type: wait, duration: "1m", routes: [{to: after}]}
          - {name: after, type: set, value: 1}
    """, clock=clock)
    assert run.exit_code == 4
    assert isinstance(run.result.error, LimitExceeded)
    assert run.result.error.limit == "timeout"
    assert clock.sleeps == [10.0, 20.0]  # only what was left of the run
    assert "step 'pause'" in run.error_text()
    assert "timeout expires during this 60s wait" in run.error_text()


CHILD = """
workflow:
  name: nap
  entry_point: pause
  limits: {{{limits}}}
agents:
  - {{name: pause, type: wait, duration: 10}}
output:
  waited: "{{{{ pause.output.waited_seconds }}}}"
"""


@pytest.mark.parametrize(("parent_limits", "child_limits", "slept"), [
    ("timeout_seconds: 100", "timeout_seconds: 4", [4.0]),   # the child's own timeout
    ("timeout_seconds: 6", "", [6.0]),                         # the parent's bounds the child
    ("timeout_seconds: 100", "", [10.0]),                      # room enough: it finishes
])
def test_timeouts_bound_a_wait_inside_a_subworkflow(tmp_path: Path, parent_limits: str,
                                                    child_limits: str,
                                                    slept: list[float]) -> None:
    write(tmp_path, CHILD.format(limits=child_limits), "nap.yaml")
    clock = FakeClock()
    run = run_workflow(write(tmp_path, f"""
        workflow:
          name: parent
          entry_point: sub
          limits: {{{parent_limits}}}
        agents:
          - {{name: sub, type: workflow, workflow: nap.yaml}}
        output:
          waited: "{{{{ sub.output.waited }}}}"
    """, "parent.yaml"), clock=clock)
    assert clock.sleeps == slept
    if slept == [10.0]:
        assert run.exit_code == 0, run.error_text()
        assert run.output == {"waited": 10.0}
        return
    assert run.exit_code == 4
    assert isinstance(run.result.error, LimitExceeded)
    assert run.result.error.limit == "timeout"
    assert "sub-workflow 'nap.yaml'" in run.error_text()
    assert "timeout expires during this 10s wait" in run.error_text()


STOPPABLE = """
workflow:
  name: w
  entry_point: pause
agents:
  - {name: pause, type: wait, duration: "${PODIUM_TEST_PAUSE:-0.001}", routes: [{to: after}]}
  - {name: after, type: set, value: done}
output:
  result: "{{ after.output }}"
"""


def _started_steps(db: Path) -> list[str]:
    if not db.exists():
        return []
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        rows = con.execute("SELECT body FROM events WHERE type = 'step_started' ORDER BY seq")
        return [json.loads(b)["step"] for (b,) in rows]
    except sqlite3.OperationalError:
        return []
    finally:
        con.close()


def test_cli_wait_longer_than_the_timeout_is_exit_4(tmp_path: Path) -> None:
    path = write(tmp_path, """
        workflow:
          name: w
          entry_point: pause
          limits: {timeout_seconds: 1}
        agents:
          - {name: pause, type: wait, duration: "2h"}
    """)
    proc = run_cli(tmp_path / "home", "run", path, "--json")
    assert proc.returncode == 4, proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "limit"
    assert "timeout expires during this 7200s wait" in result["error"]


def test_stop_interrupts_a_wait_and_resume_finishes(tmp_path: Path) -> None:
    path = write(tmp_path, STOPPABLE)
    home = tmp_path / "home"
    with (tmp_path / "err.txt").open("w") as err, (tmp_path / "out.txt").open("w") as out:
        proc = subprocess.Popen(podium_argv("run", path),
                                env=cli_env(home, {"PODIUM_TEST_PAUSE": "1h"}),
                                stdin=subprocess.DEVNULL, stdout=out, stderr=err)
    try:
        db = home / "podium.db"
        assert wait_until(lambda: _started_steps(db) == ["pause"] or proc.poll() is not None,
                          30), (tmp_path / "err.txt").read_text()
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
        (run_id,) = con.execute("SELECT id FROM runs").fetchone()
        con.close()
        stopped = run_cli(home, "stop", run_id)
        assert stopped.returncode == 0, stopped.stderr
        assert proc.wait(30) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # the interrupted wait is not committed: resume runs it again (now 1 ms) and finishes
    resumed = run_cli(home, "resume", run_id)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout) == {"result": "done"}
    assert _started_steps(home / "podium.db") == ["pause", "pause", "after"]


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
