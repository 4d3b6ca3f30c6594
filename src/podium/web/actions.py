"""What the console can do to runs: answer a gate (and resume the run), stop a run, resume an
interrupted run.

Both go through the application layer (app/runs.py), as `podium gate answer` and `podium stop`
do. After an answer, a run that no live process advances is resumed by a detached
`python -m podium resume RUN` (app/spawn.py: no terminal, its output in
$PODIUM_HOME/logs/RUN.log); a live run
(`podium run --web`, waiting for its console) picks the answer up itself.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from podium.app.runs import Refused, stop_run
from podium.app.spawn import answer_and_resume, resume_detached
from podium.errors import PodiumError
from podium.records import record
from podium.store.base import RunNotFound, RunStore
from podium.web.queries import Reader

_STATUS = {"invalid": 400, "missing": 404, "conflict": 409, "too_large": 413}


class ActionError(Exception):
    """An action that cannot be done: an HTTP status and a message a person can act on."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@record
class Actions:
    store: RunStore
    reader: Reader
    home: Path
    python: str = sys.executable

    # ------------------------------------------------------------------ gates

    def answer(self, run_id: str, gate_id: int, body: dict[str, Any],
               by: str = "console") -> dict[str, Any]:
        value = body.get("value")
        text = body.get("text")
        if text is not None and not isinstance(text, str):
            raise ActionError(400, "'text' must be a string")
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise ActionError(400, "'value' must be a string (an option) or a whole number")
        if self.reader.run_row(run_id) is None:
            raise ActionError(404, f"no run '{run_id}'")
        try:  # the same rule as the fleet TUI's: answer, then resume unless a live process
            done = answer_and_resume(self.store, run_id, str(value), text, home=self.home,
                                     by=by, gate_id=gate_id, python=self.python)
        except Refused as exc:
            raise ActionError(_STATUS.get(exc.kind, 400), str(exc)) from None
        except RunNotFound as exc:
            raise ActionError(404, str(exc)) from None
        except PodiumError as exc:
            raise ActionError(409, str(exc)) from None
        reply: dict[str, Any] = {"answered": done.answer, "resumed": done.resumed,
                                 "run_id": done.run_id}
        if done.spawned is not None:
            reply.update(pid=done.spawned.pid, log=str(done.spawned.log))
        return reply

    # ------------------------------------------------------------------ stop

    def stop(self, run_id: str) -> dict[str, Any]:
        if self.reader.run_row(run_id) is None:
            raise ActionError(404, f"no run '{run_id}'")
        try:
            stopped = stop_run(self.store, run_id, wait=0)
        except Refused as exc:
            raise ActionError(_STATUS.get(exc.kind, 409), str(exc)) from None
        except PodiumError as exc:
            raise ActionError(409, str(exc)) from None
        if stopped.signalled is None and not stopped.marked:
            raise ActionError(409, stopped.message)
        return {"stopped": stopped.run_id, "signalled": stopped.signalled,
                "message": ("asked to stop; it keeps its checkpoint and stays resumable"
                            if stopped.signalled else
                            "its process was gone; marked interrupted (resumable)")}

    # ------------------------------------------------------------------ resume

    def resume(self, run_id: str) -> dict[str, Any]:
        """Resume a run no live process advances (interrupted: stopped, killed, crashed), as
        the fleet TUI does: app/spawn.py `resume_detached` (409 when it finished or is live)."""
        if self.reader.run_row(run_id) is None:
            raise ActionError(404, f"no run '{run_id}'")
        try:
            spawned = resume_detached(self.store, run_id, home=self.home, by="console",
                                      python=self.python)
        except Refused as exc:
            raise ActionError(_STATUS.get(exc.kind, 409), str(exc)) from None
        except RunNotFound as exc:
            raise ActionError(404, str(exc)) from None
        except PodiumError as exc:
            raise ActionError(409, str(exc)) from None
        root = self.reader.root_of(self.reader.run_row(run_id) or {"id": run_id})["id"]
        return {"resumed": root, "pid": spawned.pid, "log": str(spawned.log),
                "message": f"resuming in the background (log: {spawned.log})"}
