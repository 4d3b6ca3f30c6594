"""Run store integrity and run ownership, with real processes on a real SQLite file.

- No check of podium's opens the store file beside a connection of the same process (POSIX
  locks belong to the process: closing any descriptor of the file drops them all).
- A write the store cannot make (the file size limit, as a full disk gives) stops the run: exit
  3, one line naming the store and the reason, never a success that the store does not hold.
- One process advances a run: a second resume is refused while the owner lives; an owner that
  died (pid gone, pid reused, heartbeat stale) no longer owns it, and the run reads
  `interrupted`.
- Bad store files get one clear line naming the path and are left as they were.

The ownership cases through the CLI (a killed run reads interrupted, two resumes at once, a
resume of a live run, an answer racing a resume) run on both backends (the `store` fixture:
SQLite in PODIUM_HOME, or PODIUM_STORE naming a database on the real PostgreSQL server); the
lease protocol itself is in tests/store_conformance.py. The rest is about the SQLite file.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from helpers_engine import cli_env, podium_argv, wait_until, write
from podium.app import owners
from podium.store import files
from podium.store.base import Lease, Owner, RunRecord
from podium.store.sqlite import SQLiteStore
from store_backends import Store

TIMEOUT = 60.0

# A probe in another process: can it take the store file's exclusive lock (switching the
# journal mode needs it)? Never while a connection in WAL mode holds its shared lock.
_PROBE = """
import sqlite3, sys
con = sqlite3.connect(sys.argv[1], timeout=0, isolation_level=None)
try:
    print(con.execute("PRAGMA journal_mode=DELETE").fetchone()[0])
except sqlite3.OperationalError as exc:
    print("refused:", exc)
"""


def _probe(path: Path) -> str:
    out = subprocess.run([sys.executable, "-c", _PROBE, str(path)], capture_output=True,
                         text=True, timeout=30, check=True)
    return out.stdout.strip()


def test_a_second_store_in_one_process_keeps_the_first_ones_locks(tmp_path: Path) -> None:
    """`podium run --web` opens the store for its run and again for its console."""
    path = tmp_path / "podium.db"
    SQLiteStore(path).close()
    first = SQLiteStore(path)
    try:
        first.create_run(RunRecord("r1", "w", "/w.yaml", "sha256:0", {}))
        assert first.list_runs()
        second = SQLiteStore(path)  # checks the file before connecting: must not open it
        try:
            assert [r.id for r in second.list_runs()] == ["r1"]
            assert _probe(path) == "refused: database is locked"
        finally:
            second.close()
        assert _probe(path) == "refused: database is locked"  # the first still holds it
    finally:
        first.close()
    assert _probe(path) == "delete"  # nobody holds it now


def test_the_store_knows_a_file_left_by_a_killed_process(tmp_path: Path) -> None:
    path = tmp_path / "podium.db"
    SQLiteStore(path).close()
    assert not files.closed_uncleanly(path)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, sys, time\n"
         "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
         "c.execute('PRAGMA journal_mode=WAL')\n"
         "c.execute(\"INSERT INTO runs (id, workflow_name, workflow_path, workflow_hash, "
         "inputs, status, created_at, updated_at) VALUES ('x', 'w', 'p', 'h', '{}', "
         "'running', 1, 1)\")\n"
         "print('ready', flush=True)\n"
         "time.sleep(60)\n", str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "ready"
        assert not files.closed_uncleanly(path)  # open elsewhere: its log is in use
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.communicate()
    assert files.closed_uncleanly(path)  # a log nobody holds: the last user was killed
    store = SQLiteStore(path)  # checks every page first, then recovers the log
    try:
        assert [r.id for r in store.list_runs()] == ["x"]
    finally:
        store.close()
    assert not files.closed_uncleanly(path)


# ---------------------------------------------------------------------- liveness


def _lease(owner: Owner, beat: float) -> Lease:
    return Lease("r", owner, beat, beat)


def test_an_owner_is_alive_only_as_the_process_that_took_the_lease() -> None:
    me = owners.this_process("run")
    now = time.time()
    assert owners.owner_alive(_lease(me, now))
    reused = Owner(me.pid, me.pid_start - 1000.0, me.host, "run")  # the pid, another process
    assert not owners.owner_alive(_lease(reused, now))
    assert not owners.owner_alive(_lease(me, now - owners.STALE - 1))  # a hung owner
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    start = owners.process_start(os.getpid()) or 0.0
    assert not owners.owner_alive(_lease(Owner(gone.pid, start, me.host, "run"), now))
    elsewhere = Owner(1, 0.0, me.host + "-other", "run")  # only its heartbeat tells
    assert owners.owner_alive(_lease(elsewhere, now))
    assert not owners.owner_alive(_lease(elsewhere, now - owners.STALE - 1))


# ---------------------------------------------------------------------- through the CLI


SLOW_WF = """
workflow:
  name: slow
  entry_point: first
  input: {hold: {type: number, default: 2}}
agents:
  - {name: first, type: set, value: 1, routes: [{to: slow}]}
  - name: slow
    type: script
    command: python
    args: ["-c", "import pathlib, time, sys; p = pathlib.Path(sys.argv[1]);
            again = p.exists(); p.open('a').write('ran\\\\n');
            time.sleep(1.5 if again else float(sys.argv[2])); print('{}')",
           "{{ workflow.dir }}/slow.log", "{{ workflow.input.hold }}"]
    routes: [{to: done}]
  - {name: done, type: terminate, status: success, reason: finished}
"""


def _podium(root: Path, *args: str | Path, env: dict[str, str] | None = None,
            **popen: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(podium_argv(*args), cwd=root, env=cli_env(root / "home", env),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **popen)


def _cli(root: Path, *args: str | Path, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(podium_argv(*args), cwd=root, env=cli_env(root / "home", env),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=TIMEOUT, check=False)


def _runs(root: Path, env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    proc = _cli(root, "runs", "--format", "json", env=env)
    assert proc.returncode == 0, proc.stderr
    rows: list[dict[str, Any]] = json.loads(proc.stdout)
    return rows


def _killed_at_slow(root: Path, env: dict[str, str] | None = None) -> str:
    """A run SIGKILLed while its `slow` step runs: the id of that interrupted run."""
    wf = write(root, SLOW_WF)
    proc = _podium(root, "run", wf, "-i", "hold=30", env=env)
    try:
        assert wait_until((root / "slow.log").exists, TIMEOUT)
        # the step's start is committed once its script has run past the commit window
        # (decision 0042): a loaded machine may commit it a little after the log appears
        assert wait_until(lambda: [r["current_step"] for r in _runs(root, env)] == ["slow"],
                          TIMEOUT)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    (row,) = _runs(root, env)
    return str(row["id"])


def test_a_killed_run_reads_interrupted_and_says_how_to_resume(tmp_path: Path,
                                                               store: Store) -> None:
    env = store.env
    run_id = _killed_at_slow(tmp_path, env)
    (row,) = _runs(tmp_path, env)
    assert (row["status"], row["current_step"]) == ("interrupted", "slow")
    listed = _cli(tmp_path, "runs", env=env)
    assert "interrupted" in listed.stdout
    assert f"podium resume {run_id}" in listed.stdout
    shown = _cli(tmp_path, "show", run_id, env=env)
    assert "· interrupted" in shown.stdout.splitlines()[0]
    assert f"podium resume {run_id}" in shown.stdout
    data = json.loads(_cli(tmp_path, "show", run_id, "--format", "json", env=env).stdout)
    assert (data["run"]["status"], data["run"]["live"]) == ("interrupted", False)
    listed_json = json.loads(_cli(tmp_path, "runs", "--status", "interrupted", "--format",
                                  "json", env=env).stdout)
    assert [r["run_id"] for r in listed_json] == [run_id]


def test_two_resumes_at_once_advance_the_run_once(tmp_path: Path, store: Store) -> None:
    env = store.env
    run_id = _killed_at_slow(tmp_path, env)
    first = _podium(tmp_path, "resume", run_id, env=env)
    second = _podium(tmp_path, "resume", run_id, env=env)
    outs = [p.communicate(timeout=TIMEOUT) for p in (first, second)]
    codes = sorted(p.returncode for p in (first, second))
    assert codes == [0, 2], outs
    refused = next(err for p, (_, err) in zip((first, second), outs, strict=True)
                   if p.returncode == 2)
    assert "Traceback" not in refused
    # refused while the other owned the run (naming its pid), or after it had finished
    assert "still running in another process (pid " in refused or "already finished" in \
        refused, refused
    assert (tmp_path / "slow.log").read_text().splitlines() == ["ran", "ran"]  # kill + once
    (row,) = _runs(tmp_path, env)
    assert (row["status"], row["terminal"]) == ("success", "done")
    events = json.loads("[" + ",".join(_cli(tmp_path, "events", run_id, env=env).stdout.split())
                        + "]")
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert sum(e["type"] == "run_started" for e in events) == 2


def test_a_resume_of_a_live_run_is_refused_naming_its_owner(tmp_path: Path,
                                                            store: Store) -> None:
    wf = write(tmp_path, SLOW_WF)
    proc = _podium(tmp_path, "run", wf, "-i", "hold=30", env=store.env)
    try:
        assert wait_until((tmp_path / "slow.log").exists, TIMEOUT)
        (row,) = _runs(tmp_path, store.env)
        assert row["status"] == "running"
        refused = _cli(tmp_path, "resume", row["id"], env=store.env)
        assert refused.returncode == 2
        assert refused.stderr.count("\n") == 1
        assert f"pid {proc.pid}" in refused.stderr
    finally:
        proc.kill()
        proc.communicate()


BIG_WF = """
workflow: {name: big, entry_point: a}
agents:
  - name: a
    type: script
    command: python
    args: ["-c", "print('{\\"blob\\": \\"' + 'x' * 300000 + '\\"}')"]
    routes: [{to: b}]
  - name: b
    type: script
    command: python
    args: ["-c", "print('{\\"blob\\": \\"' + 'y' * 300000 + '\\"}')"]
    routes: [{to: done}]
  - {name: done, type: terminate, status: success, reason: written}
"""


def _limit_file_size(limit: int) -> None:
    """In the child: files may not grow past `limit` bytes, and passing it is an error
    (EFBIG, as a full disk gives) rather than the SIGXFSZ that would kill the process."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_a_store_write_that_fails_stops_the_run(tmp_path: Path) -> None:
    small = write(tmp_path, "workflow: {name: tiny, entry_point: a}\n"
                            "agents:\n  - {name: a, type: set, value: 1}\n", "tiny.yaml")
    assert _cli(tmp_path, "run", small).returncode == 0
    store = tmp_path / "home" / "podium.db"
    size = store.stat().st_size
    wf = write(tmp_path, BIG_WF, "big.yaml")
    proc = subprocess.run(podium_argv("run", wf), cwd=tmp_path,
                          env=cli_env(tmp_path / "home"), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=TIMEOUT, check=False,
                          preexec_fn=lambda: _limit_file_size(size + 200_000))
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""  # no final output: the run did not end
    line = next(x for x in proc.stderr.splitlines() if "cannot write to the run store" in x)
    assert str(store) in line
    assert "full" in line or "I/O" in line or "too large" in line, line
    rows = {r["workflow"]: r for r in _runs(tmp_path)}
    assert rows["tiny"]["status"] == "success"  # what was recorded before is kept
    assert rows["big"]["status"] in ("interrupted", "error")  # never a success
    con = sqlite3.connect(store)
    try:
        assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        con.close()


# ---------------------------------------------------------------------- bad store files


def _store_file(root: Path) -> Path:
    tiny = write(root, "workflow: {name: tiny, entry_point: a}\n"
                       "agents:\n  - {name: a, type: set, value: 1}\n", "tiny.yaml")
    assert _cli(root, "run", tiny).returncode == 0
    return root / "home" / "podium.db"


def _refused_in_one_line(root: Path, path: Path, *why: str) -> None:
    for args in (["runs"], ["run", root / "tiny.yaml"], ["gate", "list"]):
        proc = _cli(root, *args)
        assert proc.returncode == 3, (args, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, (args, proc.stderr)
        assert str(path) in lines[0]
        assert any(w in lines[0] for w in why), lines[0]


def test_a_store_path_that_is_a_folder_is_refused(tmp_path: Path) -> None:
    write(tmp_path, "workflow: {name: tiny, entry_point: a}\n"
                    "agents:\n  - {name: a, type: set, value: 1}\n", "tiny.yaml")
    path = tmp_path / "home" / "podium.db"
    path.mkdir(parents=True)
    _refused_in_one_line(tmp_path, path, "is a directory")
    assert list(path.iterdir()) == []


def test_an_emptied_store_whose_log_remains_is_refused(tmp_path: Path) -> None:
    path = _store_file(tmp_path)
    wal = path.with_name("podium.db-wal")
    wal.write_bytes(b"\x37\x7f\x06\x82" + b"\0" * 28)  # a log that belonged to the store
    path.write_bytes(b"")
    _refused_in_one_line(tmp_path, path, "lost its contents")
    assert path.read_bytes() == b""
    assert wal.read_bytes()[:4] == b"\x37\x7f\x06\x82"


def test_a_foreign_file_named_by_podium_store_is_refused(tmp_path: Path) -> None:
    write(tmp_path, "workflow: {name: tiny, entry_point: a}\n"
                    "agents:\n  - {name: a, type: set, value: 1}\n", "tiny.yaml")
    foreign = tmp_path / "notes.txt"
    foreign.write_text("my notes\n" * 200)
    proc = subprocess.run(podium_argv("runs"), cwd=tmp_path,
                          env=cli_env(tmp_path / "home", {"PODIUM_STORE": str(foreign)}),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=TIMEOUT, check=False)
    assert proc.returncode == 3
    assert proc.stderr.count("\n") == 1
    assert f"{foreign} is not a SQLite database" in proc.stderr
    assert foreign.read_text() == "my notes\n" * 200


def test_podium_store_names_the_store_file(tmp_path: Path) -> None:
    store = tmp_path / "elsewhere" / "runs.db"
    tiny = write(tmp_path, "workflow: {name: tiny, entry_point: a}\n"
                           "agents:\n  - {name: a, type: set, value: 1}\n", "tiny.yaml")
    for value in (str(store), f"sqlite:///{store}"):
        env = {"PODIUM_STORE": value}
        proc = subprocess.run(podium_argv("run", tiny), cwd=tmp_path,
                              env=cli_env(tmp_path / "home", env), stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=TIMEOUT, check=False)
        assert proc.returncode == 0, proc.stderr
    assert store.is_file()
    assert not (tmp_path / "home" / "podium.db").exists()
    con = sqlite3.connect(store)
    try:
        assert con.execute("SELECT count(*) FROM runs").fetchone() == (2,)
    finally:
        con.close()


GATE_WF = """
workflow: {name: gated, entry_point: approval}
agents:
  - name: approval
    type: human_gate
    prompt: "Release?"
    options:
      - {label: Approve, value: approved, route: released}
      - {label: Reject, value: rejected, route: $end}
  - {name: released, type: terminate, status: success, reason: released}
"""


def test_an_answer_racing_a_resume_is_used_or_refused_never_lost(tmp_path: Path,
                                                                 store: Store) -> None:
    """`resume` and `gate answer` at the same moment: either the answer lands first and the
    resumed run uses it, or the resume withdrew the gate first and the answer is refused
    (exit 2) and the run parks at it again; an accepted answer is never left unused."""
    env = store.env
    wf = write(tmp_path, GATE_WF)
    for _ in range(5):
        parked = _cli(tmp_path, "run", wf, "--json", env=env)
        assert parked.returncode == 5, parked.stderr
        run_id = json.loads(parked.stdout)["run_id"]
        resume = _podium(tmp_path, "resume", run_id, env=env)
        answer = _podium(tmp_path, "gate", "answer", run_id, "approved", env=env)
        (_, resume_err), (_, answer_err) = (resume.communicate(timeout=TIMEOUT),
                                            answer.communicate(timeout=TIMEOUT))
        assert "Traceback" not in resume_err + answer_err
        if answer.returncode == 2:
            assert "no gate waiting" in answer_err, answer_err
            assert resume.returncode == 5, resume_err  # it asked again and parks
            again = _cli(tmp_path, "gate", "answer", run_id, "approved", env=env)
            assert again.returncode == 0, again.stderr
        else:
            assert answer.returncode in (0, 5), answer_err
        row = next(r for r in _runs(tmp_path, env) if r["id"] == run_id)
        assert (row["status"], row["terminal"]) == ("success", "released"), (
            row, resume_err, answer_err)
        gates = _cli(tmp_path, "gate", "list", env=env)
        assert run_id not in gates.stdout


def test_an_answer_while_the_owner_parks_resumes_the_run(tmp_path: Path, store: Store,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The window the race above can only hit by chance, held open: a process owns the run
    while its gate is open (a resume that asked the gate again and is about to park). An
    answer then is not left to that process, which takes no answer once it parks: `gate
    answer` waits for it to let go, resumes the run and it ends at `released`."""
    from podium.app.home import open_store

    wf = write(tmp_path, GATE_WF)
    parked = _cli(tmp_path, "run", wf, "--json", env=store.env)
    assert parked.returncode == 5, parked.stderr
    run_id = json.loads(parked.stdout)["run_id"]
    monkeypatch.setenv("PODIUM_HOME", str(tmp_path / "home"))
    for key, value in store.env.items():
        monkeypatch.setenv(key, value)
    held = open_store()
    try:
        with owners.owning(held, run_id, "resume"):  # this process is the live owner
            answer = _podium(tmp_path, "gate", "answer", run_id, "approved", env=store.env)
            # the answer is recorded, and its command waits for the owner to let go
            assert wait_until(lambda: any(g.status == "answered"
                                          for g in held.gates(run_id=run_id)), TIMEOUT)
            time.sleep(0.5)
            assert answer.poll() is None, answer.communicate()
        _, err = answer.communicate(timeout=TIMEOUT)
    finally:
        held.close()
    assert answer.returncode == 0, err
    assert "goes on with the answer itself" not in err
    row = next(r for r in _runs(tmp_path, store.env) if r["id"] == run_id)
    assert (row["status"], row["terminal"]) == ("success", "released"), (row, err)


def test_an_answer_that_loses_its_gate_to_a_resume_says_so(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The other side of the race: the answer read the gate open, then a resume withdrew it
    before the answer was written. Refused as `no gate waiting` (the resume asks it again),
    not as a gate somebody already answered."""
    from podium.app.home import open_store
    from podium.app.runs import Refused, answer_gate

    wf = write(tmp_path, GATE_WF)
    parked = _cli(tmp_path, "run", wf, "--json")
    assert parked.returncode == 5, parked.stderr
    run_id = json.loads(parked.stdout)["run_id"]
    monkeypatch.setenv("PODIUM_HOME", str(tmp_path / "home"))
    store = open_store()
    try:
        write_answer = store.answer_gate

        def withdrawn_first(*args: Any, **kwargs: Any) -> None:
            store.withdraw_gates(run_id)  # the resume, a moment before the answer lands
            write_answer(*args, **kwargs)

        monkeypatch.setattr(store, "answer_gate", withdrawn_first)
        with pytest.raises(Refused, match="no gate waiting") as refused:
            answer_gate(store, run_id, "approved")
        assert refused.value.kind == "conflict"
        assert "already answered" not in str(refused.value)
    finally:
        store.close()
