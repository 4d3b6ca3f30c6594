"""The console over a PostgreSQL run store: the runs page, a run's detail and events, the live
streams (the change feed polls the server) and a gate answered from the page, with the runs
written by `podium run --store postgresql://...` in other processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from console_helpers import gate_flow, run_id_of, run_podium

from conftest import start_console
from helpers_engine import EXAMPLES, wait_until


def test_the_console_serves_a_postgres_store(tmp_path: Path, pg_url: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    done = run_podium(home, "run", EXAMPLES / "review-counter" / "workflow.yaml",
                      "--store", pg_url)
    assert done.returncode == 0, done.stderr
    flow, responses = gate_flow(tmp_path / "flows")
    parked = run_podium(home, "run", flow, "--responses", responses, "--store", pg_url)
    assert parked.returncode == 5, parked.stderr
    rid = run_id_of(parked)
    monkeypatch.setenv("PODIUM_STORE", pg_url)  # the console, and the resume it spawns
    live = start_console(home)
    try:
        c = live.client()
        listed = c.get("/api/runs").json()
        assert {r["id"] for r in listed["runs"]} == {run_id_of(done), rid}
        assert listed["counts"]["waiting"] == 1
        assert c.get("/api/runs?search=" + rid[:6]).json()["runs"][0]["id"] == rid
        detail = c.get(f"/api/runs/{rid}").json()
        (gate,) = detail["gates"]
        assert detail["run"]["state"] == "waiting"
        events = c.get(f"/api/runs/{rid}/events").json()
        assert events[0]["type"] == "run_started"
        with live.sse("/api/stream") as sse:
            first = json.loads(sse.until(lambda m: m[0] == "runs")[-1][2])
            assert first["full"] is True
            third = run_podium(home, "run", EXAMPLES / "review-counter" / "workflow.yaml",
                               "--store", pg_url)
            assert third.returncode == 0, third.stderr
            sse.until(lambda m: m[0] == "runs" and run_id_of(third) in {
                r["id"] for r in json.loads(m[2])["runs"]})
        reply = c.post(f"/api/runs/{rid}/gates/{gate['id']}/answer", {"value": "approved"})
        assert reply.status == 200, reply.body
        assert wait_until(lambda: c.get(f"/api/runs/{rid}").json()["run"]["status"]
                          == "success", 60)
    finally:
        live.stop()
    assert not (home / "podium.db").exists()
