"""What the runs page reads from the store, over every run (not only the newest page of
them): the chips' counts by state and the runs that need a person; search that takes `%` and
`_` literally; and the Resume action (the application layer's rule, the console's token and
Origin rules)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from console_helpers import (
    block_flow,
    gate_flow,
    latest_run,
    run_id_of,
    run_podium,
    start_podium,
    stop_process,
    wait_status,
    write_flow,
)

from conftest import Live, start_console
from helpers_engine import EXAMPLES, wait_until
from podium.store.base import RunRecord
from podium.store.sqlite import SQLiteStore
from podium.web.queries import Reader


def _pad(home: Path, n: int, name: str = "filler") -> None:
    """`n` finished runs, newer than every run so far, written straight to the store."""
    store = SQLiteStore(home / "podium.db")
    try:
        now = time.time() + 10
        for k in range(n):
            store.create_run(RunRecord(
                id=f"f{k:011x}", workflow_name=name, workflow_path="/nowhere.yaml",
                workflow_hash="sha256:0", inputs={}, status="success", created_at=now + k,
                updated_at=now + k, finished_at=now + k, terminal="done"))
        store.commit()
    finally:
        store.close()


@pytest.fixture(scope="module")
def crowded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A parked run, a killed (interrupted) run, a failed run, then 260 newer runs."""
    root = tmp_path_factory.mktemp("crowded")
    home, flows = root / "home", root / "flows"
    runs: dict[str, str] = {}
    flow, responses = gate_flow(flows, hostile=False)
    runs["gate"] = run_id_of(run_podium(home, "run", flow, "--responses", responses))
    proc = start_podium(home, "run", block_flow(flows / "block"))
    try:
        assert wait_until(lambda: latest_run(home).get("current_step") == "hold", 30)
        runs["killed"] = latest_run(home)["id"]
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        stop_process(proc)
    bad = write_flow(flows, "bad.yaml", """
        workflow: {name: pay_roll_100%, entry_point: boom}
        agents:
          - {name: boom, type: script, command: no-such-command-here, routes: [{to: end}]}
          - {name: end, type: terminate, status: success, reason: paid}
        """)
    runs["failed"] = run_id_of(run_podium(home, "run", bad))
    _pad(home, 260, "payroll")
    return home, runs


def test_counts_and_attention_cover_runs_past_the_newest_page(
        crowded: tuple[Path, dict[str, str]]) -> None:
    home, runs = crowded
    reader = Reader(home / "podium.db")
    try:
        data = reader.runs(limit=200)
        assert len(data["runs"]) == 200
        shown = {r["id"] for r in data["runs"]}
        assert not shown & set(runs.values())  # all three are older than the newest 200
        attention = {a["id"]: a["state"] for a in data["attention"]}
        assert attention == {runs["gate"]: "waiting", runs["killed"]: "interrupted"}
        counts = data["counts"]
        assert counts["total"] == 263
        assert counts["waiting"] == counts["gates"] == 1
        assert counts["interrupted"] == 1
        assert counts.get("running", 0) == 0
        assert counts["success"] == 260
        assert counts["failed_all"] == 1
        assert counts["active"] == 2
        # each chip's count is the length of the list its filter shows
        for chip, key in (("waiting", "waiting"), ("interrupted", "interrupted"),
                          ("failed", "failed_all"), ("active", "active")):
            listed = reader.runs(status=chip, limit=5000)["runs"]
            assert len(listed) == counts[key], chip
    finally:
        reader.close()


def test_search_takes_percent_and_underscore_literally(
        crowded: tuple[Path, dict[str, str]]) -> None:
    home, runs = crowded
    reader = Reader(home / "podium.db")
    try:
        def found(q: str) -> set[str]:
            return {r["id"] for r in reader.runs(search=q, limit=5000)["runs"]}

        assert found("pay_roll") == {runs["failed"]}
        assert found("_100%") == {runs["failed"]}
        assert found("y_r") == {runs["failed"]}
        assert found("payr_ll") == set()  # `_` is no wildcard ...
        assert found("pa%ll") == set()  # ... nor `%`
        assert len(found("payroll")) == 260  # (and nothing is stripped: "pay_roll" is not these)
        assert found(runs["killed"][2:8]) == {runs["killed"]}  # any part of a run id
        assert reader.find(runs["gate"][:6])["id"] == runs["gate"]  # type: ignore[index]
        assert reader.find("f_") is None
    finally:
        reader.close()


def test_resume_needs_the_token_and_the_console_origin(tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = run_podium(home, "run", EXAMPLES / "review-counter" / "workflow.yaml")
    rid = run_id_of(done)
    live: Live = start_console(home)
    try:
        anon = live.client(token=False)
        assert anon.post(f"/api/runs/{rid}/resume", {}).status == 401
        c = live.client()
        evil = c.post(f"/api/runs/{rid}/resume", {}, headers={"Origin": "http://evil.example"})
        assert evil.status == 403
        assert c.post(f"/api/runs/{rid}/resume", raw=b"{}",
                      headers={"Content-Type": "text/plain"}).status == 415
        assert c.post("/api/runs/nope/resume", {}).status == 404
        finished = c.post(f"/api/runs/{rid}/resume", {})
        assert finished.status == 409
        assert "already finished" in finished.json()["error"]
        assert c.get(f"/api/runs/{rid}/resume").status == 405
    finally:
        live.stop()


def test_an_interrupted_run_is_resumed_from_the_console(tmp_path: Path) -> None:
    home = tmp_path / "home"
    flow = block_flow(tmp_path / "block")
    proc = start_podium(home, "run", flow)
    try:
        assert wait_until(lambda: latest_run(home).get("current_step") == "hold", 30)
        rid = latest_run(home)["id"]
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        stop_process(proc)
    live = start_console(home)
    try:
        c = live.client()
        assert c.get(f"/api/runs/{rid}").json()["run"]["state"] == "interrupted"
        (flow.parent / "go").write_text("go")
        reply = c.post(f"/api/runs/{rid}/resume", {})
        assert reply.status == 202, reply.json()
        body = reply.json()
        assert body["resumed"] == rid
        assert Path(body["log"]) == home / "logs" / f"{rid}.log"
        wait_status(home, rid, ("success",), timeout=60)
        again = c.post(f"/api/runs/{rid}/resume", {})
        assert again.status == 409
    finally:
        live.stop()
