"""Every view of a run reads the same status and the same steps: `podium runs --format json`,
`podium show --format json`, `podium status --json`, the console's /api/runs and
/api/runs/{id}, the fleet TUI's data (app/fleet.py) and the MCP server's status, over a corpus
of a completed run, a failed one, one parked at a gate, one whose owner was SIGKILLed, one a
live process advances, and one whose row records Temporal workers as its executor."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from console_helpers import (
    block_flow,
    gate_flow,
    latest_run,
    run_id_of,
    run_podium,
    start_podium,
    stop_process,
    write_flow,
)

from conftest import start_console
from helpers_engine import wait_until

DONE = """
workflow: {name: done-flow, entry_point: prepare}
agents:
  - name: prepare
    type: set
    value: "ready"
    routes: [{to: failed, when: "{{ workflow.input.how == 'failed' }}"}, {to: finish}]
  - {name: finish, type: terminate, status: success, reason: "asked"}
  - {name: failed, type: terminate, status: failed, reason: "asked"}
"""


@dataclass
class Corpus:
    home: Path
    expected: dict[str, str]  # run id -> the status every view reads
    live_proc: subprocess.Popen[str]


def _blocked(home: Path, folder: Path) -> tuple[str, subprocess.Popen[str]]:
    """A run of the blocker workflow, held in its script step by a live podium process."""
    proc = start_podium(home, "run", block_flow(folder))
    assert wait_until(lambda: latest_run(home).get("current_step") == "hold", 60)
    return str(latest_run(home)["id"]), proc


def _on_temporal(home: Path, workflow: Path) -> str:
    """A run whose row records that Temporal workers advance it (as temporal/follow.py writes
    it), running, with no local lease: through the real store API, without a cluster."""
    from podium.app.home import open_store
    from podium.engine.run import file_hash, new_run_id
    from podium.store.base import RunRecord

    store = open_store(home=home)
    try:
        rid = new_run_id()
        store.create_run(RunRecord(rid, "done-flow", str(workflow), file_hash(workflow),
                                   {"how": "success"}, options={
                                       "executor": "temporal", "temporal": {
                                           "address": "127.0.0.1:7233",
                                           "namespace": "default",
                                           "task_queue": "podium"}}))
        store.update_run(rid, current_step="prepare")
        store.commit()
    finally:
        store.close()
    return rid


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Corpus]:
    root = tmp_path_factory.mktemp("truth")
    home, flows = root / "home", root / "flows"
    done_flow = write_flow(flows, "done.yaml", DONE)
    expected: dict[str, str] = {}
    for how in ("success", "failed"):
        proc = run_podium(home, "run", done_flow, "--input", f"how={how}")
        assert proc.returncode == (0 if how == "success" else 1), proc.stderr
        expected[run_id_of(proc)] = how
    flow, responses = gate_flow(flows, hostile=False)
    parked = run_podium(home, "run", flow, "--responses", responses)
    assert parked.returncode == 5, parked.stderr
    expected[run_id_of(parked)] = "waiting"
    killed, proc = _blocked(home, root / "killed")
    os.killpg(proc.pid, signal.SIGKILL)  # the owner and its script die: nothing advances it
    proc.wait(10)
    stop_process(proc)
    expected[killed] = "interrupted"
    expected[_on_temporal(home, done_flow)] = "running"
    live, live_proc = _blocked(home, root / "live")
    expected[live] = "running"
    try:
        yield Corpus(home, expected, live_proc)
    finally:
        (root / "live" / "go").write_text("", encoding="utf-8")  # let it finish
        live_proc.wait(60)
        stop_process(live_proc)


def _cli_json(home: Path, *args: str) -> Any:
    proc = run_podium(home, *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _fleet_view(home: Path) -> tuple[dict[str, str], dict[str, tuple[str, list[str]]]]:
    """What the fleet TUI shows: its table's status, and each run's detail (status, steps)."""
    from podium.app.fleet import detail, fleet
    from podium.app.home import open_store

    store = open_store(home=home)
    try:
        table = {r.id: r.status for r in fleet(store)}
        details = {}
        for rid in table:
            d = detail(store, rid)
            details[rid] = (d.row.status, [p.step for p in d.path])
        return table, details
    finally:
        store.close()


def test_every_view_reads_the_same_status_and_steps(corpus: Corpus) -> None:
    from podium.mcp.server import status as mcp_status

    home, expected = corpus.home, corpus.expected
    runs = {r["id"]: r["status"] for r in _cli_json(home, "runs", "--format", "json")}
    shown = {rid: _cli_json(home, "show", rid, "--format", "json") for rid in expected}
    advancing = {r["id"] for r in _cli_json(home, "status", "--json")}
    table, details = _fleet_view(home)
    live = start_console(home)
    try:
        c = live.client()
        page = {r["id"]: r["state"] for r in c.get("/api/runs").json()["runs"]}
        one = {rid: c.get(f"/api/runs/{rid}").json()["run"] for rid in expected}
    finally:
        live.stop()
    for rid, status in expected.items():
        steps = [s["step"] for s in shown[rid]["steps"]]
        seen = {"runs": runs[rid], "show": shown[rid]["run"]["status"], "console list":
                page[rid], "console run": one[rid]["state"], "fleet table": table[rid],
                "fleet detail": details[rid][0], "mcp": mcp_status(rid, home)["status"]}
        assert seen == dict.fromkeys(seen, status), (rid, status, seen)
        assert details[rid][1] == steps, rid
        assert one[rid]["live"] == shown[rid]["run"]["live"], rid
    assert advancing == {rid for rid, s in expected.items() if s == "running"}
    assert shown[next(r for r, s in expected.items() if s == "success")]["steps"][0][
        "step"] == "prepare"
