"""What the console can do to runs: answer a gate (and resume the run), stop a run.

An answer is recorded in the store exactly like `podium gate answer --no-resume` records it;
a parked run is then resumed by a detached `python -m podium resume RUN` (no terminal, its
output in $PODIUM_HOME/logs/RUN.log), while a live run that waits for the console (started by
`podium run --web`) picks the answer up itself. Stopping verifies the process identity (pid and
kernel start time) before SIGTERM, so a recycled pid is never signalled.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from podium.cli.launch import ancestors
from podium.store.base import StoreError
from podium.store.sqlite import SQLiteStore
from podium.web.queries import IDENTITY_CHECKS, Reader, alive


class ActionError(Exception):
    """An action that cannot be done: an HTTP status and a message a person can act on."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Actions:
    store: SQLiteStore
    reader: Reader
    home: Path
    python: str = sys.executable

    # ------------------------------------------------------------------ gates

    def answer(self, run_id: str, gate_id: int, body: dict[str, Any],
               by: str = "console") -> dict[str, Any]:
        run = self.reader.run_row(run_id)
        if run is None:
            raise ActionError(404, f"no run '{run_id}'")
        gate = self.reader.gate(gate_id)
        if gate is None or gate["run_id"] not in self.reader.family(run_id):
            raise ActionError(404, f"run {run_id} has no gate {gate_id}")
        if gate["status"] != "open":
            raise ActionError(409, f"gate '{gate['step']}' was already answered")
        value = body.get("value")
        text = body.get("text")
        if text is not None and not isinstance(text, str):
            raise ActionError(400, "'text' must be a string")
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise ActionError(400, "'value' must be a string (an option) or a whole number")
        extra: dict[str, str] = {}
        if gate["kind"] == "iteration_limit":
            raw = str(value).strip()
            if not raw.isdigit() or int(raw) > 100_000:
                raise ActionError(400, "grant a whole number of iterations (0 stops the run)")
            answer = str(int(raw))
        else:
            option = next((o for o in gate["options"] if str(o.get("value")) == str(value)),
                          None)
            if option is None:
                allowed = ", ".join(str(o.get("value")) for o in gate["options"])
                raise ActionError(400, f"'{value}' is not an option of gate '{gate['step']}' "
                                       f"(options: {allowed})")
            answer = str(option["value"])
            if option.get("prompt_for"):
                if len(text or "") > 100_000:
                    raise ActionError(413, "the text is too long (100,000 characters at most)")
                extra[str(option["prompt_for"])] = text or ""
        try:
            self.store.answer_gate(gate_id, answer, extra, by)
        except StoreError:
            raise ActionError(409, f"gate '{gate['step']}' was already answered") from None
        root = self.reader.root_of(run)
        if root["status"] == "running" and alive(root):
            return {"answered": answer, "resumed": "live", "run_id": root["id"]}
        pid, log = self.spawn_resume(root["id"])
        return {"answered": answer, "resumed": "started", "run_id": root["id"], "pid": pid,
                "log": str(log)}

    def spawn_resume(self, run_id: str) -> tuple[int, Path]:
        """`python -m podium resume RUN` in its own session, detached from the console."""
        logs = self.home / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        log = logs / f"{run_id}.log"
        env = dict(os.environ, PODIUM_HOME=str(self.home))
        with log.open("ab") as fh:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S")
            fh.write(f"--- {stamp} podium console: resuming run {run_id} ---\n".encode())
            fh.flush()
            proc = subprocess.Popen(
                [self.python, "-m", "podium", "resume", run_id], stdin=subprocess.DEVNULL,
                stdout=fh, stderr=subprocess.STDOUT, start_new_session=True, close_fds=True,
                env=env)
        threading.Thread(target=proc.wait, name=f"reap-{proc.pid}", daemon=True).start()
        return proc.pid, log

    # ------------------------------------------------------------------ stop

    def stop(self, run_id: str) -> dict[str, Any]:
        row = self.reader.run_row(run_id)
        if row is None:
            raise ActionError(404, f"no run '{run_id}'")
        root = self.reader.root_of(row)
        if root["status"] != "running":
            raise ActionError(409, f"run {root['id']} is not running (status: "
                                   f"{root['status']})")
        if not IDENTITY_CHECKS:
            raise ActionError(409, "this system cannot verify which process runs it; stop it "
                                   f"from a terminal: podium stop {root['id']}")
        if not alive(root):
            self.store.update_run(root["id"], status="interrupted")
            return {"stopped": root["id"], "signalled": None,
                    "message": "its process was gone; marked interrupted (resumable)"}
        pid = int(root["pid"])
        if pid != os.getpid() and pid in ancestors():
            raise ActionError(409, f"run {root['id']} is a parent of this console "
                                   f"(pid {pid}); not stopping it")
        os.kill(pid, signal.SIGTERM)
        return {"stopped": root["id"], "signalled": pid,
                "message": "asked to stop; it keeps its checkpoint and stays resumable"}


