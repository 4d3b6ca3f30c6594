"""Consecutive `set` steps commit together (engine/run.py `_InstantSteps`), a short script
step is one transaction (events/commits.py), and neither loses anything.

A run of instant steps holds its run's commits: one transaction at most every COMMIT_WINDOW,
and what waits commits before a step that is not instant starts, and when the run ends. These
tests run the real CLI in a subprocess, through a wrapper that can set the window and counts
the store's transactions (each `BEGIN IMMEDIATE` of the SQLite store), or kills the process
with SIGKILL as one of them begins: what waited then is lost, and `podium resume` must run it
again to the same end, every event numbered once.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from helpers_engine import cli_env, podium_argv, write

STEPS = 120

# `python -m podium ARGS`, with WINDOW (seconds) as the commit window of instant steps,
# SCRIPT_WINDOW as how long a script runs before its start commits, the number of
# transactions written to COUNT_OUT at exit, and with KILL_AT=N the process killed (SIGKILL)
# as its N-th transaction begins
WRAPPER = """\
import atexit, os, runpy, signal
import podium.engine.run as run
import podium.steps.script as script
import podium.store.sqlite as sqlite
if os.environ.get("WINDOW"):
    run.COMMIT_WINDOW = float(os.environ["WINDOW"])
if os.environ.get("SCRIPT_WINDOW"):
    script.COMMIT_WINDOW = float(os.environ["SCRIPT_WINDOW"])
kill_at = int(os.environ.get("KILL_AT") or 0)
begun = [0]
write = sqlite.SQLiteStore._write
def counted(self, sql, params):
    if sql == "BEGIN IMMEDIATE":
        begun[0] += 1
        if begun[0] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
    return write(self, sql, params)
sqlite.SQLiteStore._write = counted
atexit.register(lambda: open(os.environ["COUNT_OUT"], "w").write(str(begun[0])))
runpy.run_module("podium", run_name="__main__", alter_sys=True)
"""

# a loop of STEPS set steps, then a script step that reads the store as an outsider would
# (its own connection, read-only): how many of the loop's steps it finds committed
WORKFLOW = f"""\
workflow:
  name: instant-steps
  entry_point: count
  limits:
    max_iterations: 200
agents:
  - name: count
    type: set
    value: "{{{{ (count.output | int if count is defined else 0) + 1 }}}}"
    routes:
      - to: look
        when: "{{{{ count.output | int >= {STEPS} }}}}"
      - to: count
  - name: look
    type: script
    command: python
    args: ["{{{{ workflow.input.reader }}}}"]
    routes: [{{to: $end}}]
output:
  count: "{{{{ count.output }}}}"
  seen: "{{{{ look.output.stdout | trim }}}}"
"""

READER = """\
import json, os, sqlite3
db = sqlite3.connect("file:" + os.environ["PODIUM_HOME"] + "/podium.db?mode=ro", uri=True)
bodies = [json.loads(b) for (b,) in db.execute(
    "SELECT body FROM events WHERE type = 'step_finished'")]
print(sum(1 for b in bodies if b["step"] == "count"))
"""


def _run(tmp_path: Path, *args: str, **env: str) -> tuple[subprocess.CompletedProcess[str], int]:
    out = tmp_path / "transactions.txt"
    out.unlink(missing_ok=True)
    argv = podium_argv(*args)
    proc = subprocess.run([argv[0], "-c", WRAPPER, *argv[3:]],
                          env={**cli_env(tmp_path / "home"), "COUNT_OUT": str(out), **env},
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=120, check=False)
    return proc, int(out.read_text()) if out.exists() else -1


def _start(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], int]:
    wf = write(tmp_path, WORKFLOW)
    reader = write(tmp_path, READER, "reader.py")
    return _run(tmp_path, "run", "-q", str(wf), "--input", f"reader={reader}", **env)


def _events(tmp_path: Path) -> list[dict[str, Any]]:
    db = sqlite3.connect(tmp_path / "home" / "podium.db")
    try:
        rows = db.execute("SELECT seq, body FROM events ORDER BY seq").fetchall()
    finally:
        db.close()
    return [{**json.loads(body), "seq": seq} for seq, body in rows]


def _run_id(tmp_path: Path) -> str:
    db = sqlite3.connect(tmp_path / "home" / "podium.db")
    try:
        (run_id,) = db.execute("SELECT id FROM runs").fetchone()
    finally:
        db.close()
    return str(run_id)


def _whole(events: list[dict[str, Any]]) -> None:
    """Numbered 1..n; every execution of `count` finished once, each with its checkpoint."""
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    finished = [e["iteration"] for e in events
                if e["type"] == "step_finished" and e["step"] == "count"]
    assert finished == list(range(1, STEPS + 1))
    checkpoints = [e for e in events if e["type"] == "checkpoint" and e["step"] == "count"]
    assert len(checkpoints) == STEPS
    assert events[-1]["type"] == "run_finished"
    assert events[-1]["status"] == "success"
    assert events[-1]["output"] == {"count": STEPS, "seen": STEPS}


def test_a_run_of_set_steps_commits_in_a_few_transactions_before_the_next_step(
        tmp_path: Path) -> None:
    """With a window longer than the run, the 120 set steps commit in one transaction,
    when the script step after them is about to start: the script, reading the store on
    its own connection, finds all 120. Before the hold, each step was a transaction."""
    proc, transactions = _start(tmp_path, WINDOW="3600")
    assert proc.returncode == 0, proc.stderr[-2000:]
    _whole(_events(tmp_path))
    # the run's row, run_started, the held steps (before the script), the script's start
    # (it runs longer than the window), its end with the run's end; with a transaction per
    # step it was 125
    assert transactions == 5, transactions


def test_the_default_window_commits_every_step_and_the_script_sees_them(
        tmp_path: Path) -> None:
    proc, transactions = _start(tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    _whole(_events(tmp_path))
    assert 0 < transactions <= STEPS + 5  # at most one per step, however slow the machine


def test_a_kill_while_set_steps_wait_loses_them_and_resume_runs_them_again(
        tmp_path: Path) -> None:
    """SIGKILL as the held steps' transaction begins (the third, after the run's row and
    run_started's): none of the 120 steps is in the store. `podium resume` runs them again
    from the start and ends as an uninterrupted run does, each event numbered once."""
    proc, _ = _start(tmp_path, WINDOW="3600", KILL_AT="3")
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stderr[-2000:])
    before = _events(tmp_path)
    assert [e["type"] for e in before] == ["run_started"]
    resumed, _ = _run(tmp_path, "resume", _run_id(tmp_path), "-q")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    _whole(_events(tmp_path))


def test_a_kill_between_batches_keeps_the_committed_steps(tmp_path: Path) -> None:
    """With a window of 0 every set step is its own transaction (as before the hold): a
    kill as the 40th transaction begins (step 38's) keeps the 37 steps committed before it,
    and resume goes on from the last of them."""
    proc, _ = _start(tmp_path, WINDOW="0", KILL_AT="40")
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stderr[-2000:])
    before = _events(tmp_path)
    kept = [e["iteration"] for e in before if e["type"] == "step_finished"]
    assert kept == list(range(1, 38))
    resumed, _ = _run(tmp_path, "resume", _run_id(tmp_path), "-q")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    events = _events(tmp_path)
    _whole(events)
    resumed_at = [e for e in events if e["type"] == "run_started"][-1]
    assert resumed_at["resumed"] is True


# SCRIPTS script steps, each appending a line to a file (an effect a re-run repeats)
SCRIPTS = 30
SCRIPT_LOOP = f"""\
workflow:
  name: script-steps
  entry_point: tick
  limits:
    max_iterations: 200
agents:
  - name: tick
    type: script
    command: python
    args: ["-c", "open('{{{{ workflow.input.log }}}}', 'a').write('x\\\\n')"]
    routes:
      - to: $end
        when: "{{{{ context.iteration >= {SCRIPTS} }}}}"
      - to: tick
output:
  exit_code: "{{{{ tick.output.exit_code }}}}"
"""


def _scripts(tmp_path: Path, *args: str, **env: str) -> tuple[subprocess.CompletedProcess[str],
                                                                 int]:
    wf = write(tmp_path, SCRIPT_LOOP, "scripts.yaml")
    return _run(tmp_path, *args, str(wf), "--input", f"log={tmp_path / 'log.txt'}", **env)


def _whole_scripts(events: list[dict[str, Any]]) -> None:
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    finished = [e["iteration"] for e in events if e["type"] == "step_finished"]
    assert finished == list(range(1, SCRIPTS + 1))
    outputs = [e["iteration"] for e in events if e["type"] == "script_output"]
    assert outputs[-SCRIPTS:] == list(range(1, SCRIPTS + 1))
    assert events[-1]["status"] == "success"


def test_a_short_script_step_is_one_transaction(tmp_path: Path) -> None:
    """A script that ends within the window commits its start, its output and its end in
    one transaction: 30 steps take 32 (the run's row, run_started, then one per step, the
    last with the run's end); before, a start, an output and an end each had their own."""
    proc, transactions = _scripts(tmp_path, "run", "-q", SCRIPT_WINDOW="3600")
    assert proc.returncode == 0, proc.stderr[-2000:]
    _whole_scripts(_events(tmp_path))
    assert transactions == SCRIPTS + 2, transactions
    assert (tmp_path / "log.txt").read_text() == "x\n" * SCRIPTS


def test_a_script_that_runs_on_is_seen_running(tmp_path: Path) -> None:
    """A script still running after the window commits its start while it runs: a reader
    of the store sees the step running (its step_started, the run row's current step)
    before the script ends."""
    wf = write(tmp_path, """\
workflow:
  name: slow-script
  entry_point: wait
agents:
  - name: wait
    type: script
    command: python
    args: ["-c", "import os, time\\nwhile not os.path.exists('{{ workflow.input.go }}'): time.sleep(0.01)"]
    routes: [{to: $end}]
output:
  code: "{{ wait.output.exit_code }}"
""", "slow.yaml")
    go = tmp_path / "go"
    argv = podium_argv("run", "-q", str(wf), "--input", f"go={go}")
    proc = subprocess.Popen(argv, env=cli_env(tmp_path / "home"), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        seen: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if (tmp_path / "home" / "podium.db").exists():
                with contextlib.suppress(sqlite3.OperationalError):
                    db = sqlite3.connect(tmp_path / "home" / "podium.db")
                    try:
                        seen = [t for (t,) in db.execute("SELECT type FROM events ORDER BY seq")]
                        step = db.execute("SELECT current_step FROM runs").fetchone()
                    finally:
                        db.close()
                    if "step_started" in seen:
                        break
            time.sleep(0.02)
        assert seen == ["run_started", "step_started"], seen
        assert step == ("wait",)
        go.touch()
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    types = [e["type"] for e in _events(tmp_path)]
    assert types == ["run_started", "step_started", "script_output", "step_finished",
                     "route_taken", "checkpoint", "run_finished"]


def test_a_kill_before_a_scripts_end_commits_runs_it_again(tmp_path: Path) -> None:
    """SIGKILL as the 12th step's transaction begins: its start and output were never
    committed, the 11 steps before it are. `podium resume` runs the 12th again (its effect
    happens twice: a script runs at least once) and ends as an uninterrupted run does."""
    proc, _ = _scripts(tmp_path, "run", "-q", SCRIPT_WINDOW="3600", KILL_AT="14")
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stderr[-2000:])
    before = _events(tmp_path)
    assert [e["iteration"] for e in before if e["type"] == "step_started"] == list(range(1, 12))
    assert before[-1]["type"] == "checkpoint"
    assert (tmp_path / "log.txt").read_text() == "x\n" * 12
    resumed, _ = _run(tmp_path, "resume", _run_id(tmp_path), "-q", SCRIPT_WINDOW="3600")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    _whole_scripts(_events(tmp_path))
    assert (tmp_path / "log.txt").read_text() == "x\n" * (SCRIPTS + 1)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("run with pytest")
