"""The console's live reads: what a running step streamed so far (the store's live rows), at
GET /api/runs/{id}/live and as `live` messages on the run's stream, whenever a row changes
and once more when it is cleared; never for a run no live process runs."""

from __future__ import annotations

import json
import os
from pathlib import Path

from conftest import start_console
from podium.app.owners import process_start, this_host
from podium.store.base import Owner, RunRecord
from podium.store.sqlite import SQLiteStore


def _body(text: str) -> dict[str, object]:
    return {"step": "a", "iteration": 1, "text": text, "tools": [], "tokens_used": 10,
            "context_window": 1000, "estimated": True}


def test_live_rows_are_read_and_streamed_while_the_run_runs(tmp_path: Path) -> None:
    home = tmp_path / "home"
    store = SQLiteStore(home / "podium.db")
    live = None
    try:
        pid = os.getpid()  # this process runs it, as far as the console can tell
        store.create_run(RunRecord("r1", "flow", "/f.yaml", "sha256:00", {}),
                         Owner(pid, process_start(pid) or 0.0, this_host(), "run"))
        store.put_live("r1", "a#1", _body("<b>so far</b>"))
        live = start_console(home)
        c = live.client()
        assert c.get("/api/runs/r1/live").json() == {"live": {"a#1": _body("<b>so far</b>")}}
        assert c.get("/api/runs/nope/live").status == 404
        assert live.client(token=False).get("/api/runs/r1/live").status == 401
        with live.sse("/api/runs/r1/stream") as sse:
            got = sse.until(lambda m: m[0] == "live")
            assert json.loads(got[-1][2]) == {"a#1": _body("<b>so far</b>")}
            store.put_live("r1", "a#1", _body("<b>so far</b> and more"))
            got = sse.until(lambda m: m[0] == "live")
            assert json.loads(got[-1][2])["a#1"]["text"] == "<b>so far</b> and more"
            store.clear_live("r1")
            got = sse.until(lambda m: m[0] == "live")
            assert json.loads(got[-1][2]) == {}
        store.put_live("r1", "a#1", _body("left by a crashed run"))
        store.release_lease("r1", Owner(pid, process_start(pid) or 0.0, this_host(), "run"))
        assert c.get("/api/runs/r1/live").json() == {"live": {}}  # no process runs it
        store.update_run("r1", status="interrupted")
        assert c.get("/api/runs/r1/live").json() == {"live": {}}
    finally:
        if live is not None:
            live.stop()
        store.close()
