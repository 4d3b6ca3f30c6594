"""Nothing lost to maintenance, on real processes: `podium fleet prune` and `podium resume` are
serialised by the run's lease (on both stores), and a run whose store file is taken away from
under it stops with exit 3 instead of committing into nothing.

- prune looks at a finished run, a resume takes it, then prune removes: the removal decides
  again inside its transaction, so the run stays (before: its row went, the resume ended
  "success" and the run was gone from `runs` and `show`, its events orphaned);
- prune and resume started at the same moment, several times: the run is either removed
  before the resume took it (the resume refuses it, no side effect) or resumed and kept;
- the store file deleted, replaced or its write-ahead log truncated while a run is at its
  third of eight steps: the run stops at its next commit, exit 3, naming the store.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from helpers_engine import cli_env, podium_argv, wait_until, write
from podium.store.base import RunStore
from store_backends import Store, pg_query

TIMEOUT = 60.0

# `work` fails until the folder `allow` (its working_dir) exists; resumed, it says it started, waits for the
# file `release` (when there is a `hold` file), then leaves its side effect.
FLAKY_WF = """
workflow: {name: flaky, entry_point: first}
agents:
  - {name: first, type: set, value: 1, routes: [{to: work}]}
  - name: work
    type: script
    command: python
    working_dir: "{{ workflow.dir }}/allow"
    args: ["-c", "import pathlib, sys, time; d = pathlib.Path(sys.argv[1]);
            (d / 'started').write_text('1');
            hold = (d / 'hold').exists();
            [time.sleep(0.02) for _ in range(3000) if hold and not (d / 'release').exists()];
            (d / 'effect.txt').write_text('done'); print('{}')",
           "{{ workflow.dir }}"]
    routes: [{to: done}]
  - {name: done, type: terminate, status: success, reason: finished}
"""


def _cli(root: Path, *args: str | Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(podium_argv(*args), cwd=root, env=cli_env(root / "home", env),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=TIMEOUT, check=False)


def _start(root: Path, *args: str | Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(podium_argv(*args), cwd=root, env=cli_env(root / "home", env),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _failed_run(root: Path, env: dict[str, str]) -> str:
    """A run that ended `error` at its `work` step: finished, so prune may remove it."""
    wf = write(root, FLAKY_WF)
    for name in ("started", "effect.txt", "hold", "release"):
        (root / name).unlink(missing_ok=True)
    if (root / "allow").exists():
        (root / "allow").rmdir()
    failed = _cli(root, "run", wf, "--json", env=env)
    assert failed.returncode != 0, failed.stdout
    run_id = str(json.loads(failed.stdout)["run_id"])
    shown = json.loads(_cli(root, "show", run_id, "--format", "json", env=env).stdout)
    assert shown["run"]["status"] == "error", shown
    (root / "allow").mkdir()
    return run_id


def _open(store: Store, root: Path) -> RunStore:
    if store.url is not None:
        from podium.store.postgres import PostgresStore

        return PostgresStore(store.url, folder=root / "home")
    from podium.store.sqlite import SQLiteStore

    return SQLiteStore(root / "home" / "podium.db")


class ResumedBeforeRemoval:
    """The store prune uses, with a real `podium resume` of the run started, and holding
    the run, between prune's look at the run and its removal (the window of the race)."""

    def __init__(self, store: RunStore, start_resume: Any, started: Path, *,
                 finished: bool = False) -> None:
        self.store = store
        self.start_resume = start_resume
        self.started = started
        self.finished = finished  # the resume also ends (the run `success`) before removal
        self.resume: subprocess.Popen[str] | None = None
        self.resume_out: tuple[str, str] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def delete_runs(self, run_ids: list[str], **how: Any) -> int:
        self.resume = self.start_resume()
        assert wait_until(self.started.exists, TIMEOUT), "the resume never reached its step"
        if self.finished:
            self.resume_out = self.resume.communicate(timeout=TIMEOUT)
        return self.store.delete_runs(run_ids, **how)


def test_a_run_a_resume_took_after_prune_looked_is_kept(tmp_path: Path, store: Store) -> None:
    from podium.app.fleet import prune

    run_id = _failed_run(tmp_path, store.env)
    (tmp_path / "hold").write_text("1")
    handle = _open(store, tmp_path)
    racing = ResumedBeforeRemoval(
        handle, lambda: _start(tmp_path, "resume", run_id, env=store.env),
        tmp_path / "started")
    try:
        pruned = prune(racing, 0.0)  # type: ignore[arg-type]
    finally:
        (tmp_path / "release").write_text("1")
        handle.close()
    assert racing.resume is not None
    _, err = racing.resume.communicate(timeout=TIMEOUT)
    assert racing.resume.returncode == 0, err
    assert (tmp_path / "effect.txt").read_text() == "done"
    assert (pruned.removed, pruned.kept_unfinished, pruned.runs) == (0, 1, [])
    shown = _cli(tmp_path, "show", run_id, "--format", "json", env=store.env)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["run"]["status"] == "success"
    listed = _cli(tmp_path, "runs", "--format", "json", env=store.env)
    assert [r["id"] for r in json.loads(listed.stdout)] == [run_id]


def test_a_run_a_resume_took_and_finished_after_prune_looked_is_kept(tmp_path: Path,
                                                                    store: Store) -> None:
    """The run ended `error` long before prune's cutoff; a resume takes it and ends it
    `success` after the cutoff, between prune's look and its removal: the removal's own
    decision sees a run that ended after the cutoff and keeps it (before: it saw a finished
    run no lease held and removed it, the resume having exited 0)."""
    from podium.app.fleet import prune

    run_id = _failed_run(tmp_path, store.env)
    handle = _open(store, tmp_path)
    racing = ResumedBeforeRemoval(
        handle, lambda: _start(tmp_path, "resume", run_id, env=store.env),
        tmp_path / "started", finished=True)
    try:
        pruned = prune(racing, 0.0)  # type: ignore[arg-type]
    finally:
        handle.close()
    assert racing.resume is not None
    assert racing.resume_out is not None
    assert racing.resume.returncode == 0, racing.resume_out[1]
    assert (tmp_path / "effect.txt").read_text() == "done"
    assert (pruned.removed, pruned.kept_unfinished, pruned.runs) == (0, 1, [])
    shown = _cli(tmp_path, "show", run_id, "--format", "json", env=store.env)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["run"]["status"] == "success"


def _orphans(store: Store, root: Path) -> list[Any]:
    """Events, checkpoints, gates or leases of a run that is not in the store."""
    sql = ("SELECT run_id FROM events WHERE run_id NOT IN (SELECT id FROM runs) UNION "
           "SELECT run_id FROM checkpoints WHERE run_id NOT IN (SELECT id FROM runs) UNION "
           "SELECT run_id FROM leases WHERE run_id NOT IN (SELECT id FROM runs)")
    if store.url is not None:
        return pg_query(store.url, sql)
    import sqlite3

    con = sqlite3.connect(root / "home" / "podium.db")
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


@pytest.mark.parametrize("rounds", [3])
def test_prune_and_resume_at_once_never_lose_a_resumed_run(tmp_path: Path, store: Store,
                                                           rounds: int) -> None:
    for _ in range(rounds):
        run_id = _failed_run(tmp_path, store.env)
        # A resume that took the run holds it at its step until prune has ended: on a loaded
        # machine it could otherwise end the run before prune even took its cutoff, and
        # prune would then rightly remove a run finished before it (the test that the
        # removal keeps a run finished after its look is the one above).
        (tmp_path / "hold").write_text("1")
        resume = _start(tmp_path, "resume", run_id, env=store.env)
        pruner = _start(tmp_path, "fleet", "prune", "--older-than", "0s", "--yes",
                        env=store.env)
        _, perr = pruner.communicate(timeout=TIMEOUT)
        (tmp_path / "release").write_text("1")
        _, rerr = resume.communicate(timeout=TIMEOUT)
        assert pruner.returncode == 0, perr
        assert "Traceback" not in rerr + perr
        shown = _cli(tmp_path, "show", run_id, "--format", "json", env=store.env)
        if shown.returncode == 0:  # the resume took it first: resumed, and kept
            assert resume.returncode == 0, rerr
            assert json.loads(shown.stdout)["run"]["status"] == "success"
            assert (tmp_path / "effect.txt").exists()
            _cli(tmp_path, "fleet", "prune", "--older-than", "0s", "--yes", env=store.env)
        else:  # removed first: the resume found no run and did nothing
            assert resume.returncode == 2, rerr
            assert not (tmp_path / "effect.txt").exists()
        assert _orphans(store, tmp_path) == []
    assert os.listdir(tmp_path)  # the rounds ran in this folder


# ---------------------------------------------------------------------- the store file

# Eight steps; the third does to the store file what `action` says (run by a real script).
EIGHT_WF = """
workflow: {name: eight, entry_point: s1}
agents:
  - {name: s1, type: set, value: 1, routes: [{to: s2}]}
  - {name: s2, type: set, value: 2, routes: [{to: s3}]}
  - name: s3
    type: script
    command: python
    args: ["-c", "%s", "%s"]
    routes: [{to: s4}]
  - {name: s4, type: set, value: 4, routes: [{to: s5}]}
  - {name: s5, type: set, value: 5, routes: [{to: s6}]}
  - {name: s6, type: set, value: 6, routes: [{to: s7}]}
  - {name: s7, type: set, value: 7, routes: [{to: done}]}
  - {name: done, type: terminate, status: success, reason: all eight}
"""

ACTIONS = {
    "deleted": "import os, sys; [os.unlink(sys.argv[1] + s) for s in ('', '-wal', '-shm') "
               "if os.path.exists(sys.argv[1] + s)]; print('{}')",
    "replaced": "import os, sys; os.replace(sys.argv[1] + '.new', sys.argv[1]); print('{}')",
    "truncated": "import os, sys; os.truncate(sys.argv[1] + '-wal', 0); print('{}')",
}
WORDS = {"deleted": "was deleted while this process used it",
         "replaced": "was replaced by another file while this process used it",
         "truncated": "had its write-ahead log truncated while this process used it"}


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_a_run_whose_store_file_is_taken_away_stops_with_exit_3(tmp_path: Path,
                                                                 action: str) -> None:
    db = tmp_path / "home" / "podium.db"
    earlier = _cli(tmp_path, "run", write(tmp_path, EIGHT_WF % ("print('{}')", db), "ok.yaml"),
                   env={})
    assert earlier.returncode == 0, earlier.stderr
    other = b"another program's file, not a store\n"
    (tmp_path / "home" / "podium.db.new").write_bytes(other)
    wf = write(tmp_path, EIGHT_WF % (ACTIONS[action], db))
    run = _cli(tmp_path, "run", wf, env={})
    assert run.returncode == 3, (run.stdout, run.stderr)
    assert "Traceback" not in run.stderr
    assert f"the run store {db} {WORDS[action]}" in run.stderr
    assert "run success" not in run.stderr
    assert "[4] s4" not in run.stderr  # nothing ran on after the commit that found it
    if action == "replaced":
        assert db.read_bytes() == other  # the other file is left as it was
    if action == "truncated":  # what the log held is lost, but the store is not malformed
        from podium.store.sqlite import SQLiteStore

        SQLiteStore(db, verify=True).close()
        doctor = _cli(tmp_path, "doctor", env={})
        assert "malformed" not in doctor.stdout + doctor.stderr
