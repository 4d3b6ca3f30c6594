"""Proof under faults: `podium run` is SIGKILLed at many points, `podium resume` finishes it.

A workflow of script, set, wait, human-gate and terminate steps with a loop runs once without
interruption for the reference output. Then, for each kill point below, it runs again as a
subprocess, is SIGKILLed at that point (several times in some cases, `podium resume` in
between), and is resumed until it finishes. Every kill point is reached deterministically, by a
hook, never by timing:

- `pre` / `post`: the script step with that tag writes a `ready` file and blocks before / after
  its side effect; the test kills podium once it sees the file.
- `selfkill`: the script kills its parent (podium) with SIGKILL after printing its output,
  while podium waits for it: podium dies while it would record that step's completion.
- `lock`: the test holds the SQLite write lock, lets the held script finish, and waits until
  podium is blocked in the store write that would record the script's output (its main thread
  sleeps in SQLite's busy handler), then kills it: killed during a store write.
- `pause`: the wait step sleeps 60 s (`FAULTS_PAUSE`); killed right after the step boundary.
- `firstwrite`: the test holds the write lock before a resume (or `gate answer`) starts; the
  process is killed blocked on its first store write.
- the human gate parks a run started without answers (exit 5); `podium gate answer` is killed.

The rule for side effects (each script appends "<step>:<context.iteration>" to side.txt):
a step execution that completed and was committed (it has a step_finished event in the
store) never runs again, so its line appears exactly once; an execution that was in flight
when the process died was not committed and runs again on resume, so its line appears at most
one extra time per kill that hit it after its side effect (the `post`, `selfkill` and `lock`
points), and exactly once when the kill came before the side effect (`pre`). Every line in
side.txt belongs to a committed execution, and the committed path and outputs equal the
uninterrupted run's.

On PostgreSQL (PODIUM_STORE names a database of the real server the tests start) a chosen
set of the cases runs too, every kind of kill point among them: there `lock` and `firstwrite`
hold an EXCLUSIVE lock on the store's tables (reads go on, writes wait) and the process is
killed once the server shows its write waiting for that lock.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import textwrap
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from helpers_engine import cli_env, podium_argv, wait_until
from store_backends import Store, make_store, pg_query

STEP_PY = '''
"""A test script step: side effect "<step>:<tag>" in side.txt, hooks, one JSON line."""
import json, os, signal, sys, time
from pathlib import Path

name, tag, value = sys.argv[1], sys.argv[2], int(sys.argv[3])
here = Path(__file__).parent
me = f"{name}:{tag}"
ppid = os.getppid()


def hold(phase):
    if os.environ.get("FAULTS_HOLD") != f"{me}:{phase}":
        return
    (here / "ready.tmp").write_text(str(os.getpid()))
    os.replace(here / "ready.tmp", here / "ready")
    for _ in range(12000):  # bounded: 60 s
        if (here / "go").exists():
            (here / "go").unlink()
            return
        if os.getppid() != ppid:  # podium was killed: leave without a trace
            sys.exit(9)
        time.sleep(0.005)
    sys.exit(8)


hold("pre")
with open(here / "side.txt", "a", encoding="utf-8") as fh:
    fh.write(me + "\\n")
hold("post")
print(json.dumps({"tag": tag, "value": value}), flush=True)
if os.environ.get("FAULTS_SELFKILL") == me:
    # a script that runs past podium's commit window (5 ms) has its start committed by then
    # (decision 0042): die well past it, so a loaded machine's late commit is not the kill's
    time.sleep(0.25)
    os.kill(ppid, signal.SIGKILL)
'''

WORKFLOW = """
workflow:
  name: faults
  entry_point: init
  limits: {max_iterations: 40}
  runtime:
    checkpoint: {every_agent: true, keep_last: 3}
agents:
  - name: init
    type: script
    command: python
    args: ["{{ workflow.dir }}/step.py", init, "{{ context.iteration }}", "1"]
    routes: [{to: seed}]
  - name: seed
    type: set
    value: "{{ init.output.value + 10 }}"
    output_type: integer
    routes: [{to: pause}]
  - name: pause
    type: wait
    duration: "${FAULTS_PAUSE:-0.001}"
    routes: [{to: work}]
  - name: work
    type: script
    command: python
    args: ["{{ workflow.dir }}/step.py", work, "{{ context.iteration }}",
           "{{ seed.output + (context.history | select('equalto', 'work') | list | length) }}"]
    routes: [{to: grade}]
  - name: grade
    type: script
    command: python
    args: ["{{ workflow.dir }}/step.py", grade, "{{ context.iteration }}",
           "{{ work.output.value * 2 }}"]
    routes:
      - to: work
        when: "{{ (context.history | select('equalto', 'grade') | list | length) < 3 }}"
      - to: bump
  - name: bump
    type: set
    value: "{{ grade.output.value + 1 }}"
    output_type: integer
    routes: [{to: approve}]
  - name: approve
    type: human_gate
    prompt: "Ship {{ bump.output }}?"
    options:
      - {label: Ship, value: ship, route: final}
      - {label: Drop, value: drop, route: dropped}
  - name: final
    type: script
    command: python
    args: ["{{ workflow.dir }}/step.py", final, "{{ context.iteration }}",
           "{{ bump.output * 3 }}"]
    routes: [{to: done}]
  - name: dropped
    type: terminate
    status: failed
    reason: "dropped"
  - name: done
    type: terminate
    status: success
    reason: "finished"
    output_template:
      values: "{{ [init.output.value, seed.output, work.output.value, grade.output.value,
                  bump.output, final.output.value] | tojson }}"
      approved: "{{ approve.output.selected }}"
      path: "{{ context.history | join(',') }}"
"""

RESPONSES = "gates:\n  approve: [ship]\n"

TIMEOUT = 30.0


def _alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return False
    return text[text.rfind(")") + 2:].split()[0] != "Z"


def _blocked_in_sqlite(pid: int) -> bool:
    """True when the main thread of `pid` sleeps in SQLite's busy handler (nanosleep; podium's
    main thread sleeps nowhere else). Unknown (no wchan) counts as blocked."""
    try:
        with open(f"/proc/{pid}/wchan", encoding="ascii", errors="replace") as fh:
            wchan = fh.read().strip()
    except OSError:
        return True
    return wchan in ("", "0") or "nanosleep" in wchan


# The tables whose writes `lock` and `firstwrite` hold back on PostgreSQL (not `live`: a
# running step's streamed text, which never waits for, nor stops, a run's writes).
PG_TABLES = "runs, events, checkpoints, gates, leases"


def _pg_write_waits(url: str) -> bool:
    """Whether a session on the database waits for a lock (only podium's can: the test's own
    session holds it)."""
    return bool(pg_query(url, "SELECT 1 FROM pg_stat_activity WHERE datname = "
                              "current_database() AND wait_event_type = 'Lock' AND "
                              "pid <> pg_backend_pid()"))


@dataclass
class Lab:
    """One case's folder: the workflow, the script, PODIUM_HOME, side.txt and the hooks; the
    run store is SQLite in PODIUM_HOME, or the PostgreSQL database `store` names."""

    root: Path
    store: Store = field(default_factory=lambda: Store("sqlite"))
    run_id: str | None = None
    inflight: Counter[str] = field(default_factory=Counter)  # tag -> kills after its effect
    log: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        (self.root / "wf.yaml").write_text(textwrap.dedent(WORKFLOW).lstrip(), encoding="utf-8")
        (self.root / "step.py").write_text(STEP_PY.lstrip(), encoding="utf-8")
        (self.root / "responses.yaml").write_text(RESPONSES, encoding="utf-8")

    @property
    def db(self) -> Path:
        return self.root / "home" / "podium.db"

    def start(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        n = len(self.log)
        self.log.append(" ".join(args))
        with (self.root / f"out{n}.txt").open("w") as out, \
                (self.root / f"err{n}.txt").open("w") as err:
            return subprocess.Popen(
                podium_argv(*args), cwd=self.root,
                env=cli_env(self.root / "home", {**self.store.env, **(env or {})}),
                stdin=subprocess.DEVNULL, stdout=out, stderr=err)

    def stderr(self) -> str:
        n = len(self.log) - 1
        return f"$ podium {self.log[-1]}\n" + (self.root / f"err{n}.txt").read_text()

    def stdout(self) -> str:
        return (self.root / f"out{len(self.log) - 1}.txt").read_text()

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if self.store.url is not None:
            return pg_query(self.store.url, sql, params)
        if not self.db.exists():
            return []
        con = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=10)
        try:
            return con.execute(sql, params).fetchall()
        except sqlite3.OperationalError:  # no tables yet
            return []
        finally:
            con.close()

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(b) for (b,) in self.query("SELECT body FROM events ORDER BY seq")]

    def _wait_started(self, tag: str, point: str) -> None:
        """Until the start of the script step `tag` ("step:iteration") is the last committed
        event. A script that runs past the commit window has its start committed while it
        runs (decision 0042); the hook in the script can signal ready sooner than a loaded
        machine commits it, so a kill at the hook comes once it is committed."""
        step, _, iteration = tag.partition(":")
        want = ("step_started", step, int(iteration) + 1)

        def started() -> bool:
            got = self.query("SELECT body FROM events ORDER BY seq DESC LIMIT 1")
            last = json.loads(got[0][0]) if got else {}
            return (last.get("type"), last.get("step"), last.get("run_iteration")) == want

        assert wait_until(started, TIMEOUT), (point, self.events()[-1:])

    def find_run_id(self) -> str:
        if self.run_id is None:
            assert wait_until(lambda: bool(self.query("SELECT id FROM runs")), TIMEOUT)
            self.run_id = self.query("SELECT id FROM runs")[0][0]
        return self.run_id

    @contextlib.contextmanager
    def write_lock(self) -> Any:
        """Hold the store's write lock (podium's writes wait in SQLite's busy handler; on
        PostgreSQL, for the tables' lock)."""
        if self.store.url is not None:
            import psycopg

            with psycopg.connect(self.store.url, autocommit=True) as pg, pg.transaction():
                pg.execute(f"LOCK TABLE {PG_TABLES} IN EXCLUSIVE MODE".encode())
                yield
            return
        con = sqlite3.connect(self.db, isolation_level=None, timeout=10)
        con.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            con.execute("ROLLBACK")
            con.close()

    # -------------------------------------------------------------- kill points

    def _wait_ready(self, proc: subprocess.Popen[str]) -> int:
        ready = self.root / "ready"
        assert wait_until(lambda: ready.exists() or proc.poll() is not None, TIMEOUT), \
            self.stderr()
        assert proc.poll() is None, f"podium ended before the hook: {self.stderr()}"
        pid = int(ready.read_text())
        ready.unlink()
        return pid

    def write_waits(self, pid: int) -> bool:
        """Whether podium (pid) waits for the store's write lock."""
        if self.store.url is not None:
            return _pg_write_waits(self.store.url)
        return _blocked_in_sqlite(pid)

    def wait_write_dropped(self, pid: int) -> None:
        """Once podium was killed waiting for the write lock: on PostgreSQL, until the server
        has cancelled the write it had sent (it checks every second that the client is there:
        store/postgres.py), which otherwise would commit, the process dead, when the lock is
        released. On SQLite a dead process's write never was anywhere but in the process."""
        if self.store.url is not None:
            assert wait_until(lambda: not self.write_waits(pid), TIMEOUT), \
                "the write of a killed process still waits on the server"

    def _kill(self, proc: subprocess.Popen[str], script: int | None = None) -> None:
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(TIMEOUT) == -signal.SIGKILL
        if script is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(script, signal.SIGKILL)
            assert wait_until(lambda: not _alive(script), TIMEOUT)

    def kill_at(self, point: str, args: list[str]) -> None:
        """Start podium ARGS and SIGKILL it at `point` ("pre:TAG", "post:TAG",
        "selfkill:TAG", "lock:TAG", "pause" or "firstwrite"); check where it died."""
        how, _, tag = point.partition(":")
        before = self.events()
        if how in ("pre", "post"):
            proc = self.start(*args, env={"FAULTS_HOLD": f"{tag}:{how}"})
            script = self._wait_ready(proc)
            self._wait_started(tag, point)
            self._kill(proc, script)
        elif how == "selfkill":
            proc = self.start(*args, env={"FAULTS_SELFKILL": tag})
            assert proc.wait(TIMEOUT) == -signal.SIGKILL, self.stderr()
        elif how == "lock":
            proc = self.start(*args, env={"FAULTS_HOLD": f"{tag}:post"})
            script = self._wait_ready(proc)
            self._wait_started(tag, point)  # or the lock taken next would hold its commit
            with self.write_lock():
                (self.root / "go").touch()
                assert wait_until(lambda: not _alive(script), TIMEOUT)
                assert wait_until(lambda: self.write_waits(proc.pid), TIMEOUT)
                self._kill(proc)
                self.wait_write_dropped(proc.pid)
        elif how == "pause":
            proc = self.start(*args, env={"FAULTS_PAUSE": "60"})
            assert wait_until(lambda: (self.events() or [{}])[-1].get("step") == "pause"
                              or proc.poll() is not None, TIMEOUT)
            self._kill(proc)
        elif how == "firstwrite":
            with self.write_lock():
                proc = self.start(*args)
                assert wait_until(lambda: self.write_waits(proc.pid), TIMEOUT)
                # Blocked means: its first write waits. Reads before it went through.
                self._kill(proc)
                self.wait_write_dropped(proc.pid)
        else:
            raise AssertionError(point)
        self.find_run_id()
        after = self.events()
        if how == "firstwrite":
            assert after == before, "a process blocked on its first write changed the store"
            return
        last = after[-1]
        if how == "pause":
            assert (last["type"], last["step"]) == ("step_started", "pause")
            return
        # Died inside the script step `tag`: its start is the last committed fact.
        step, _, iteration = tag.partition(":")
        assert (last["type"], last["step"], last["run_iteration"]) == \
            ("step_started", step, int(iteration) + 1), (point, last)
        if how != "pre":
            self.inflight[tag] += 1

    def resume(self, *extra: str) -> subprocess.Popen[str]:
        return self.start("resume", self.find_run_id(), *extra)


def _finish(lab: Lab, proc: subprocess.Popen[str]) -> dict[str, Any]:
    assert proc.wait(TIMEOUT * 2) == 0, lab.stderr()
    output: dict[str, Any] = json.loads(lab.stdout())
    return output


def _committed(lab: Lab) -> list[tuple[str, Any]]:
    """(step, output) of every committed step execution, in order (wait outputs blanked)."""
    return [(e["step"], None if e["step_type"] == "wait" else e["output"])
            for e in lab.events() if e["type"] == "step_finished"]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    lab = Lab(tmp_path_factory.mktemp("reference"))
    output = _finish(lab, lab.start("run", "wf.yaml", "--responses", "responses.yaml"))
    lines = (lab.root / "side.txt").read_text().split()
    assert len(lines) == len(set(lines)) == 8
    return {"output": output, "committed": _committed(lab), "lines": sorted(lines)}


def _check(lab: Lab, output: dict[str, Any], reference: dict[str, Any]) -> None:
    assert output == reference["output"]
    assert _committed(lab) == reference["committed"]
    events = lab.events()
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    finished = [e for e in events if e["type"] == "run_finished"]
    assert finished[-1]["status"] == "success"
    assert lab.query("SELECT status FROM runs") == [("success",)]
    committed = {f"{step}:{out['tag']}" for step, out in _committed(lab)
                 if isinstance(out, dict) and "tag" in out}
    seen = Counter((lab.root / "side.txt").read_text().split())
    assert set(seen) == committed == set(reference["lines"])
    for tag, count in seen.items():
        assert count == 1 + lab.inflight[tag], (tag, count, dict(lab.inflight))


RUN = ["run", "wf.yaml", "--responses", "responses.yaml"]

# Each case: the kill points of successive processes (the first is `podium run`, the next
# ones `podium resume ID`); a last plain `podium resume ID` finishes the run.
CASES: dict[str, list[str]] = {
    "before-first-commit": ["pre:init:0"],
    "init-after-effect": ["post:init:0"],
    "init-selfkill": ["selfkill:init:0"],
    "after-boundary-seed": ["pause"],
    "work1-pre": ["pre:work:3"],
    "work1-store-write": ["lock:work:3"],
    "grade1-post": ["post:grade:4"],
    "grade1-selfkill": ["selfkill:grade:4"],
    "work2-pre": ["pre:work:5"],
    "work2-post": ["post:work:5"],
    "grade2-store-write": ["lock:grade:6"],
    "work3-selfkill": ["selfkill:work:7"],
    "grade3-pre": ["pre:grade:8"],
    "grade3-post": ["post:grade:8"],
    "final-after-gate": ["pre:final:11"],
    "final-selfkill": ["selfkill:final:11"],
    "final-store-write": ["lock:final:11"],
    "resume-first-write": ["post:work:5", "firstwrite"],
    "same-step-twice": ["post:grade:6", "post:grade:6", "selfkill:grade:6"],
    "many-kills": ["post:init:0", "pause", "selfkill:work:5", "lock:grade:8", "firstwrite",
                   "post:final:11"],
}


# The cases that run on PostgreSQL as well: each kind of kill point (pre, post, selfkill,
# lock, pause, firstwrite), the same step killed twice, and many kills in one run.
PG_CASES = ("init-after-effect", "work1-store-write", "grade1-selfkill", "work2-pre",
            "resume-first-write", "same-step-twice", "many-kills")
PARAMS = [pytest.param(points, "sqlite", id=name) for name, points in CASES.items()] + \
    [pytest.param(CASES[name], "postgresql", id=f"{name}-postgresql") for name in PG_CASES]


@pytest.mark.parametrize(("points", "backend"), PARAMS)
def test_killed_run_resumes_to_the_same_output(tmp_path: Path, points: list[str], backend: str,
                                               reference: dict[str, Any],
                                               request: pytest.FixtureRequest) -> None:
    lab = Lab(tmp_path, make_store(request, backend))
    lab.kill_at(points[0], RUN)
    for point in points[1:]:
        lab.kill_at(point, ["resume", lab.find_run_id()])
    _check(lab, _finish(lab, lab.resume()), reference)


def _park(lab: Lab) -> None:
    """`podium run` without answers and without a terminal: parks at the gate (exit 5)."""
    proc = lab.start("run", "wf.yaml")
    assert proc.wait(TIMEOUT) == 5, lab.stderr()
    lab.find_run_id()
    assert lab.query("SELECT step, status FROM gates") == [("approve", "open")]


def test_killed_while_answering_a_parked_gate(tmp_path: Path, reference: dict[str, Any],
                                              store: Store) -> None:
    """`gate answer` killed blocked on recording the answer: the gate stays open."""
    lab = Lab(tmp_path, store)
    _park(lab)
    lab.kill_at("firstwrite", ["gate", "answer", lab.find_run_id(), "ship"])
    assert lab.query("SELECT status FROM gates") == [("open",)]
    _check(lab, _finish(lab, lab.start("gate", "answer", lab.find_run_id(), "ship")),
           reference)


def test_killed_after_a_parked_gate_was_answered(tmp_path: Path, reference: dict[str, Any],
                                                 store: Store) -> None:
    """`gate answer` resumes the run and is killed in the step after the gate; a plain
    resume continues after the gate without asking again."""
    lab = Lab(tmp_path, store)
    _park(lab)
    lab.kill_at("post:final:11", ["gate", "answer", lab.find_run_id(), "ship"])
    _check(lab, _finish(lab, lab.resume()), reference)
    assert lab.query("SELECT status, answer FROM gates") == [("consumed", "ship")]


def test_killed_resuming_a_recorded_answer(tmp_path: Path, reference: dict[str, Any],
                                           store: Store) -> None:
    """The answer is recorded (`--no-resume`), the resume is killed on its first write, then
    killed again inside the step after the gate: the recorded answer is used once."""
    lab = Lab(tmp_path, store)
    _park(lab)
    proc = lab.start("gate", "answer", lab.find_run_id(), "ship", "--no-resume")
    assert proc.wait(TIMEOUT) == 0, lab.stderr()
    lab.kill_at("firstwrite", ["resume", lab.find_run_id()])
    lab.kill_at("selfkill:final:11", ["resume", lab.find_run_id()])
    _check(lab, _finish(lab, lab.resume()), reference)
    assert lab.query("SELECT status, answer FROM gates") == [("consumed", "ship")]
