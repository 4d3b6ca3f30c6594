"""Starting podium in a process of its own: the one rule for every surface that must not run
the engine itself (the web console, the fleet TUI).

A run is resumed by `python -m podium resume RUN`, a new run started by
`python -m podium run FILE -i NAME=VALUE ...`, each in its own session (no terminal, detached
from the surface: closing the surface does not stop the run), its output appended to
$PODIUM_HOME/logs/NAME.log. The process takes the run's lease itself (app/owners.py), so two
surfaces resuming one run at once find each other as `podium resume` would.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import threading
import time
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING

from podium.records import record

if TYPE_CHECKING:
    from collections.abc import Callable

    from podium.store.base import RunStore

_started = itertools.count(1)  # new runs this process started (their log names)


@record(frozen=True)
class Spawned:
    pid: int
    log: Path
    # its exit code once it ended, None while it runs (a surface that started it says how
    # it ended instead of leaving that to the log)
    exit_code: Callable[[], int | None] = field(default=lambda: None, compare=False,
                                                repr=False)


def spawn_podium(args: list[str], *, home: Path, log_name: str, why: str,
                 cwd: Path | None = None, python: str | None = None) -> Spawned:
    """`python -m podium ARGS` in its own session, its output appended to logs/LOG_NAME.log
    under `home` (after a line saying `why`)."""
    logs = home / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{log_name}.log"
    env = dict(os.environ, PODIUM_HOME=str(home))
    with log.open("ab") as fh:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        fh.write(f"--- {stamp} {why} ---\n".encode())
        fh.flush()
        proc = subprocess.Popen(
            [python or sys.executable, "-m", "podium", *args], stdin=subprocess.DEVNULL,
            stdout=fh, stderr=subprocess.STDOUT, start_new_session=True, close_fds=True,
            env=env, cwd=str(cwd) if cwd is not None else None)
    # reap it when it ends (no zombie while the surface lives on)
    threading.Thread(target=proc.wait, name=f"reap-{proc.pid}", daemon=True).start()
    return Spawned(proc.pid, log, proc.poll)


def spawn_resume(run_id: str, *, home: Path, by: str = "console",
                 python: str | None = None) -> Spawned:
    """Resume a run in a detached `python -m podium resume RUN`."""
    return spawn_podium(["resume", run_id], home=home, log_name=run_id,
                        why=f"podium {by}: resuming run {run_id}", python=python)


def spawn_run(file: Path, inputs: dict[str, str], *, home: Path, cwd: Path | None = None,
              by: str = "fleet", python: str | None = None) -> Spawned:
    """Start a new run of `file` in a detached `python -m podium run FILE -i NAME=VALUE ...`,
    in `cwd` (the run's working directory; relative paths of the workflow resolve there).
    Its run id is known once the process has recorded it: the surface sees it in the store."""
    base = cwd if cwd is not None else Path.cwd()
    path = file if file.is_absolute() else base / file
    args = ["run", str(path), "--no-interactive"]  # its gates and limits park for the surface
    for name, value in inputs.items():
        args += ["-i", f"{name}={value}"]
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return spawn_podium(args, home=home, log_name=f"new-{stamp}-{os.getpid()}-{next(_started)}",
                        why=f"podium {by}: starting {path}", cwd=cwd, python=python)


# ----------------------------------------------------------------------------- for surfaces


@record(frozen=True)
class AnswerOutcome:
    answer: str
    run_id: str  # the top-level run that goes on
    resumed: str  # `live` (its own process picks the answer up) or `started`
    spawned: Spawned | None


def answer_and_resume(store: RunStore, run_id: str, value: str, text: str | None = None,
                      *, home: Path, by: str, gate_id: int | None = None,
                      python: str | None = None) -> AnswerOutcome:
    """Answer a run's open gate (app/runs.py answer_gate: Refused as it refuses) and, unless
    a live process goes on with the answer (app/runs.py owner_takes), resume the run in a
    detached process."""
    from podium.app.runs import answer_gate, owner_takes

    answered = answer_gate(store, run_id, value, text, by=by, gate_id=gate_id)
    if owner_takes(store, answered):
        return AnswerOutcome(answered.answer, answered.root.id, "live", None)
    return AnswerOutcome(answered.answer, answered.root.id, "started",
                         spawn_resume(answered.root.id, home=home, by=by, python=python))


def resume_detached(store: RunStore, run_id: str, *, home: Path, by: str,
                    python: str | None = None) -> Spawned:
    """Resume a run that no live process advances, in a detached process; Refused (conflict)
    when it finished or a live process advances it."""
    from podium.app.family import root_of
    from podium.app.owners import liveness
    from podium.app.runs import Refused

    run = root_of(store, store.find_run(run_id))
    live = liveness(store, run)
    if live.live:
        raise Refused(f"run {run.id} is running in a live process; nothing to resume",
                      kind="conflict")
    if live.status in ("success", "failed"):
        raise Refused(f"run {run.id} already finished ({live.status}); nothing to resume",
                      kind="conflict")
    return spawn_resume(run.id, home=home, by=by, python=python)
