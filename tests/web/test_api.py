"""The console's API over a real store and real runs: lists and filters, a run's detail and
graph, answering gates (a parked run resumes to its terminal in a detached process), granting
iterations, stopping a run, the event stream and its resumption with Last-Event-ID, and the
token those streams take in their Authorization header (as every read does)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from console_helpers import (
    LOOP_FLOW,
    SSE,
    Client,
    block_flow,
    gate_flow,
    latest_run,
    run_id_of,
    run_podium,
    start_podium,
    stop_process,
    store_row,
    wait_status,
    write_flow,
)

from conftest import Live, Store, start_console
from helpers_engine import wait_until


def test_runs_lists_every_run_with_state_counts_and_gates(console: Live, store: Store) -> None:
    data = console.client().get("/api/runs").json()
    by_id = {r["id"]: r for r in data["runs"]}
    assert set(by_id) >= {store.success, store.parked}
    parked = by_id[store.parked]
    assert parked["state"] == "waiting"
    assert parked["gate"]["step"] == "approval"
    assert parked["input_tokens"] == 1200
    assert parked["output_tokens"] == 340
    assert by_id[store.success]["state"] == "success"
    assert by_id[store.success]["iterations"] == 7
    assert data["counts"]["gates"] >= 1
    assert "release-approval" in data["workflows"]


@pytest.mark.parametrize(("query", "expect"), [
    ("status=waiting", "parked"), ("status=success", "success"), ("status=active", "parked"),
    ("workflow=review-counter", "success"), ("q=release", "parked"),
])
def test_runs_filters(console: Live, store: Store, query: str, expect: str) -> None:
    rows = console.client().get(f"/api/runs?{query}").json()["runs"]
    assert getattr(store, expect) in {r["id"] for r in rows}
    other = store.success if expect == "parked" else store.parked
    assert other not in {r["id"] for r in rows}


def test_run_detail_and_events(console: Live, store: Store) -> None:
    c = console.client()
    detail = c.get(f"/api/runs/{store.parked}").json()
    assert detail["run"]["state"] == "waiting"
    gate = detail["gates"][0]
    assert gate["step"] == "approval"
    assert [o["value"] for o in gate["options"]] == ["approved", "changes", "aborted"]
    assert "<script>window.__xss=1</script>" in gate["prompt"]  # data, shown as text
    events = c.get(f"/api/runs/{store.parked}/events").json()
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert {"run_started", "prompt_rendered", "model_exchange", "gate_opened"} <= {
        e["type"] for e in events}
    later = c.get(f"/api/runs/{store.parked}/events?after=3").json()
    assert later[0]["seq"] == 4
    assert c.get("/api/runs/nope").status == 404
    assert c.get("/api/runs/nope/events").status == 404


def test_graph_of_a_run(console: Live, store: Store) -> None:
    data = console.client().get(f"/api/runs/{store.success}/graph").json()
    assert data["source"] == "workflow"
    assert data["warning"] is None
    g = data["graph"]
    kinds = {n["id"]: n["kind"] for n in g["nodes"]}
    assert kinds == {"__start__": "start", "previous": "set", "count": "set",
                     "success": "terminate", "counter_reset": "terminate"}
    edges = {e["id"]: e for e in g["edges"]}
    assert edges["count->previous#2"]["back"] is True
    assert edges["count->previous#2"]["label"] == "otherwise"
    assert edges["count->success#1"]["label"] == "count.output >= 3"
    assert all(e["path"].startswith("M") for e in g["edges"])
    # podium explore's overlay: the counter's guard can never hold, so its route is greyed,
    # and each terminal carries its step range
    assert edges["count->counter_reset#0"]["unreachable"] is True
    assert edges["count->success#1"]["unreachable"] is False
    steps = {n["id"]: n["detail"].get("steps") for n in g["nodes"]}
    assert steps["success"] == "7 steps"
    assert steps["counter_reset"] == "unreachable"


def test_graph_falls_back_to_the_events_when_the_file_is_gone(tmp_path: Path) -> None:
    home = tmp_path / "home"
    flow = write_flow(tmp_path / "flows", "loop.yaml", LOOP_FLOW.replace("max_iterations: 3",
                                                                         "max_iterations: 30"))
    done = run_podium(home, "run", flow)
    assert done.returncode == 0, done.stderr
    flow.write_text(flow.read_text() + "\n# changed\n")
    live = start_console(home)
    try:
        c = live.client()
        changed = c.get(f"/api/runs/{run_id_of(done)}/graph").json()
        assert changed["source"] == "workflow"
        assert "changed" in changed["warning"]
        flow.unlink()
        gone = c.get(f"/api/runs/{run_id_of(done)}/graph").json()
        assert gone["source"] == "events"
        assert "gone" in gone["warning"]
        assert {n["id"] for n in gone["graph"]["nodes"]} == {"__start__", "count", "done"}
    finally:
        live.stop()


def test_answering_a_parked_gate_resumes_the_run_to_its_terminal(tmp_path: Path) -> None:
    home = tmp_path / "home"
    flow, responses = gate_flow(tmp_path / "flows")
    parked = run_podium(home, "run", flow, "--responses", responses)
    assert parked.returncode == 5, parked.stderr
    rid = run_id_of(parked)
    live = start_console(home)
    try:
        c = live.client()
        gate = c.get(f"/api/runs/{rid}").json()["gates"][0]
        path = f"/api/runs/{rid}/gates/{gate['id']}/answer"
        assert c.post(path, {"value": "nope"}).status == 400
        assert c.post(path, {"value": True}).status == 400
        assert c.post(f"/api/runs/{rid}/gates/99999/answer", {"value": "approved"}).status == 404
        reply = c.post(path, {"value": "approved", "text": None})
        assert reply.status == 200, reply.body
        result = reply.json()
        assert result["resumed"] == "started"
        assert result["answered"] == "approved"
        assert c.post(path, {"value": "approved"}).status == 409  # answered once only
        wait_status(home, rid, ("success",))
        row = store_row(home, rid)
        assert row["terminal"] == "released"
        log = Path(result["log"])
        assert log == home / "logs" / f"{rid}.log"
        assert "released" in log.read_text()
        events = c.get(f"/api/runs/{rid}/events").json()
        answered = [e for e in events if e["type"] == "gate_answered"]
        assert answered[0]["selected"] == "approved"
        assert answered[0]["answered_by"] == "console"
    finally:
        live.stop()


def test_an_option_with_prompt_for_records_the_text(tmp_path: Path) -> None:
    home = tmp_path / "home"
    flow, responses = gate_flow(tmp_path / "flows")
    rid = run_id_of(run_podium(home, "run", flow, "--responses", responses))
    live = start_console(home)
    try:
        c = live.client()
        gate = c.get(f"/api/runs/{rid}").json()["gates"][0]
        reply = c.post(f"/api/runs/{rid}/gates/{gate['id']}/answer",
                       {"value": "changes", "text": "mention the <b>parser</b>"})
        assert reply.status == 200
        # It loops back to the draft and parks at the gate again.
        assert wait_until(lambda: len(c.get(f"/api/runs/{rid}").json()["gates"]) == 1
                          and c.get(f"/api/runs/{rid}").json()["gates"][0]["id"] != gate["id"],
                          30)
        events = c.get(f"/api/runs/{rid}/events").json()
        answered = next(e for e in events if e["type"] == "gate_answered")
        assert answered["additional_input"] == {"feedback": "mention the <b>parser</b>"}
    finally:
        live.stop()


def test_granting_iterations_is_answered_the_same_way(tmp_path: Path) -> None:
    home = tmp_path / "home"
    flow = write_flow(tmp_path / "flows", "loop.yaml", LOOP_FLOW)
    parked = run_podium(home, "run", flow, "--no-interactive")  # asked to park
    assert parked.returncode == 5, parked.stderr
    rid = run_id_of(parked)
    live = start_console(home)
    try:
        c = live.client()
        gate = c.get(f"/api/runs/{rid}").json()["gates"][0]
        assert gate["kind"] == "iteration_limit"
        path = f"/api/runs/{rid}/gates/{gate['id']}/answer"
        assert c.post(path, {"value": "lots"}).status == 400
        assert c.post(path, {"value": "-1"}).status == 400
        assert c.post(path, {"value": "10"}).json()["answered"] == "10"
        wait_status(home, rid, ("success",))
        assert store_row(home, rid)["terminal"] == "done"
    finally:
        live.stop()


def test_stop_a_running_run(tmp_path: Path) -> None:
    home = tmp_path / "home"
    flow = block_flow(tmp_path / "flows")
    proc = start_podium(home, "run", flow)
    live = None
    try:
        assert wait_until(lambda: latest_run(home).get("current_step") == "hold", 30)
        rid = latest_run(home)["id"]
        live = start_console(home)
        c = live.client()
        run = c.get(f"/api/runs/{rid}").json()["run"]
        assert run["state"] == "running"
        assert run["live"] is True
        reply = c.post(f"/api/runs/{rid}/stop", {})
        assert reply.status == 202, reply.body
        assert reply.json()["signalled"] == proc.pid
        proc.wait(30)
        assert proc.returncode == 130
        assert store_row(home, rid)["status"] == "interrupted"
        assert c.post(f"/api/runs/{rid}/stop", {}).status == 409
    finally:
        stop_process(proc)
        if live is not None:
            live.stop()


def test_a_dead_run_shows_interrupted_and_stop_marks_it_so(tmp_path: Path) -> None:
    import os
    import signal

    home = tmp_path / "home"
    flow = block_flow(tmp_path / "flows")
    proc = start_podium(home, "run", flow)
    try:
        assert wait_until(lambda: latest_run(home).get("current_step") == "hold", 30)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        stop_process(proc)
    rid = latest_run(home)["id"]
    live = start_console(home)
    try:
        c = live.client()
        run = c.get(f"/api/runs/{rid}").json()["run"]
        assert (run["state"], run["status"], run["live"]) == ("interrupted", "running", False)
        assert c.post(f"/api/runs/{rid}/stop", {}).json()["signalled"] is None
        assert store_row(home, rid)["status"] == "interrupted"
    finally:
        live.stop()


def _frames(sse: SSE, until_seq: int) -> list[tuple[str, str | None, str]]:
    return sse.until(lambda m: m[0] == "ev" and m[1] is not None and int(m[1]) >= until_seq)


def test_the_run_stream_resumes_after_last_event_id(console: Live, store: Store) -> None:
    events = console.client().get(f"/api/runs/{store.success}/events").json()
    last = events[-1]["seq"]
    with console.sse(f"/api/runs/{store.success}/stream") as sse:
        assert sse.res is not None
        assert sse.res.status == 200
        assert sse.res.getheader("content-type", "").startswith("text/event-stream")
        got = _frames(sse, last)
        ids = [int(m[1]) for m in got if m[0] == "ev" and m[1]]
        assert ids == list(range(1, last + 1))
        assert json.loads(got[-1][2])["type"] == "run_finished"
        kind, _, data = sse.next()
        assert kind == "run"
        assert json.loads(data)["run"]["state"] == "success"
    with console.sse(f"/api/runs/{store.success}/stream",
                     {"Last-Event-ID": str(last - 3)}) as sse:
        got = _frames(sse, last)
        assert [int(m[1]) for m in got if m[0] == "ev" and m[1]] == [last - 2, last - 1, last]
    with console.sse(f"/api/runs/{store.success}/stream?after={last - 1}") as sse:
        assert [int(m[1]) for m in _frames(sse, last) if m[1]] == [last]


@pytest.mark.parametrize("path", ["/api/stream", "/api/runs/{run}/stream"])
def test_the_streams_take_the_token_in_their_header_only(console: Live, store: Store,
                                                         path: str) -> None:
    """The page reads its streams with fetch, the token in the Authorization header; without
    it (or with it in the query string, or in a cookie) a stream is refused at once."""
    p = path.format(run=store.success)
    for sse in (SSE(console.port, p),
                SSE(console.port, f"{p}?token={console.token}"),
                SSE(console.port, p, {"Cookie": f"token={console.token}"}),
                SSE(console.port, p, {"Last-Event-ID": "1"}, token="x" * 43)):
        with sse:
            assert sse.res is not None
            assert sse.res.status == 401
            assert "console token" in json.loads(sse.res.read())["error"]
    with console.sse(p, {"Last-Event-ID": "1"}) as sse:
        assert sse.res is not None
        assert sse.res.status == 200
        kind, ident, _ = sse.next()
        assert (kind, ident) in (("runs", None), ("ev", "2"))


def test_the_stream_delivers_events_as_another_process_writes_them(tmp_path: Path) -> None:
    home = tmp_path / "home"
    flow = block_flow(tmp_path / "flows")
    proc = start_podium(home, "run", flow)
    live = None
    try:
        assert wait_until(lambda: latest_run(home).get("current_step") == "hold", 30)
        rid = latest_run(home)["id"]
        live = start_console(home)
        with live.sse(f"/api/runs/{rid}/stream") as sse:
            sse.until(lambda m: m[0] == "ev" and json.loads(m[2]).get("step") == "hold"
                      and json.loads(m[2])["type"] == "step_started")
            (flow.parent / "go").write_text("go")
            rest = sse.until(lambda m: m[0] == "ev" and json.loads(m[2])["type"]
                             == "run_finished")
            steps = [json.loads(m[2]).get("step") for m in rest if m[0] == "ev"
                     and json.loads(m[2])["type"] == "step_started"]
            assert steps == ["finish", "done"]
        proc.wait(30)
        assert proc.returncode == 0
    finally:
        stop_process(proc)
        if live is not None:
            live.stop()


def test_the_runs_stream_sends_the_list_then_changes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    flow = write_flow(tmp_path / "flows", "loop.yaml", LOOP_FLOW.replace("max_iterations: 3",
                                                                         "max_iterations: 30"))
    first = run_podium(home, "run", flow)
    live = start_console(home)
    try:
        with live.sse("/api/stream") as sse:
            _kind, _, data = sse.until(lambda m: m[0] == "runs")[-1]
            payload = json.loads(data)
            assert payload["full"] is True
            assert [r["id"] for r in payload["runs"]] == [run_id_of(first)]
            second = run_podium(home, "run", flow)
            change = json.loads(sse.until(lambda m: m[0] == "runs" and run_id_of(second) in {
                r["id"] for r in json.loads(m[2])["runs"]})[-1][2])
            assert change["full"] is False
            assert change["order"][0] == run_id_of(second)
    finally:
        live.stop()


def test_validate_and_run_never_load_the_web_stack(tmp_path: Path) -> None:
    flow = write_flow(tmp_path, "loop.yaml", LOOP_FLOW.replace("max_iterations: 3",
                                                              "max_iterations: 30"))
    code = (
        "import sys\n"
        "from podium.cli.main import app\n"
        f"for args in (['validate', {str(flow)!r}], ['run', {str(flow)!r}]):\n"
        "    try:\n"
        "        app(args, standalone_mode=False)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('starlette', 'uvicorn')\n"
        "             or m.startswith('podium.web'))\n"
        "print('LOADED', bad)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PODIUM_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"},
                         stdin=subprocess.DEVNULL, timeout=60, check=False)
    assert "LOADED []" in res.stdout, res.stdout + res.stderr


def test_info(console: Live) -> None:
    data = Client(console.port).get("/api/info").json()  # no token: it tells no run
    assert data["remote"] is False
    assert data["pid"] > 0


PARENT = """
workflow:
  name: parent
  entry_point: prep
agents:
  - name: prep
    type: set
    value: 1
    routes: [{to: child}]
  - name: child
    type: workflow
    workflow: child.yaml
    routes: [{to: fin}]
  - name: fin
    type: terminate
    status: success
    reason: "parent done"
"""

CHILD = """
workflow:
  name: child
  entry_point: ask
agents:
  - name: ask
    type: human_gate
    prompt: "Go on?"
    options:
      - {label: Yes, value: "yes", route: $end}
"""


def test_a_gate_in_a_sub_workflow_is_shown_and_answered_on_the_parent(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_flow(tmp_path / "flows", "child.yaml", CHILD)
    parent = write_flow(tmp_path / "flows", "parent.yaml", PARENT)
    parked = run_podium(home, "run", parent)
    assert parked.returncode == 5, parked.stderr
    rid = run_id_of(parked)
    live = start_console(home)
    try:
        c = live.client()
        listed = {r["id"]: r for r in c.get("/api/runs").json()["runs"]}
        assert list(listed) == [rid]  # sub-runs are not listed by default...
        assert listed[rid]["state"] == "waiting"
        assert listed[rid]["gate"]["step"] == "ask"
        assert len(c.get("/api/runs?children=1").json()["runs"]) == 2  # ...but can be
        detail = c.get(f"/api/runs/{rid}").json()
        child = detail["children"][0]
        assert child["parent_step"] == "child"
        assert child["workflow"] == "child"
        gate = detail["gates"][0]
        assert gate["run_id"] == child["id"]
        sub = c.get(f"/api/runs/{child['id']}").json()
        assert sub["parents"] == [{"id": rid, "workflow": "parent"}]
        graph = c.get(f"/api/runs/{rid}/graph").json()["graph"]
        assert {n["id"]: n["kind"] for n in graph["nodes"]}["child"] == "workflow"
        reply = c.post(f"/api/runs/{rid}/gates/{gate['id']}/answer", {"value": "yes"})
        assert reply.json()["run_id"] == rid
        wait_status(home, rid, ("success",))
        assert store_row(home, child["id"])["status"] == "success"
    finally:
        live.stop()
