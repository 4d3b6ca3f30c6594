"""Measures the console (not a test; run it by hand):

    .venv/bin/python tests/web/bench_console.py [--runs 500] [--loads 5] [--samples 20]

1. Page load: a store with N runs (mixed statuses, some waiting at gates, each with a few
   events), the runs page opened in headless Chromium; time from navigation start to the
   table rendered (the page marks `runs-rendered`), median of several cold loads.
2. Live latency: a run whose events another connection writes into the store; the time from
   the write (commit) to the browser showing it (the step's node becomes `current` in the
   graph), median and 95th percentile.

Prints one JSON object. Needs /usr/bin/chromium.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import textwrap
import time
from pathlib import Path

from podium.app.owners import this_process
from podium.events.model import RunStarted, StepFinished, StepStarted
from podium.store.base import GateRecord, RunRecord
from podium.store.sqlite import SQLiteStore
from podium.web.server import ConsoleServer

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--no-first-run"]
STEPS = 40


def chain_flow(folder: Path) -> Path:
    agents = "\n".join(
        f"  - name: s{i}\n    type: set\n    value: {i}\n    routes: [{{to: s{i + 1}}}]"
        for i in range(1, STEPS))
    text = textwrap.dedent("""\
        workflow:
          name: chain
          entry_point: s1
          limits: {max_iterations: 100}
        agents:
        """) + agents + f"\n  - name: s{STEPS}\n    type: set\n    value: {STEPS}\n"
    path = folder / "chain.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def fill(store: SQLiteStore, flow: Path, count: int) -> None:
    statuses = ["success"] * 6 + ["failed", "error", "limit", "interrupted", "waiting"]
    now = time.time()
    for i in range(count):
        rid = f"bench{i:07d}"
        status = statuses[i % len(statuses)]
        store.create_run(RunRecord(rid, f"workflow-{i % 7}", str(flow), "sha256:x", {},
                                   status=status, created_at=now - 60 * (count - i)))
        store.append_event(RunStarted(run_id=rid, seq=1, ts=now, workflow="chain",
                                      workflow_path=str(flow), workflow_hash="sha256:x",
                                      entry_point="s1", inputs={}, podium_version="bench",
                                      max_iterations=100))
        for k in range(3):
            store.append_event(StepStarted(run_id=rid, seq=2 + 2 * k, ts=now, step=f"s{k + 1}",
                                           step_type="set", iteration=1, run_iteration=k + 1))
            store.append_event(StepFinished(run_id=rid, seq=3 + 2 * k, ts=now,
                                            step=f"s{k + 1}", step_type="set", iteration=1,
                                            elapsed=0.01, output=k, input_tokens=100,
                                            output_tokens=50, cost_usd=0.001))
            store.commit()
        store.update_run(rid, current_step="s3", input_tokens=300, output_tokens=150,
                         cost_usd=0.003, iterations=3)
        if status == "waiting":
            store.open_gate(GateRecord(0, rid, "s3", "human_gate", "ok?",
                                       [{"label": "Yes", "value": "yes", "route": "s4"}], "open",
                                       now))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--samples", type=int, default=20)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        flow = chain_flow(Path(tmp))
        store = SQLiteStore(home / "podium.db")
        fill(store, flow, args.runs)
        live = "live0000001"
        pid = os.getpid()
        owner = this_process("bench")  # a live owner's lease: the console shows it running
        store.create_run(RunRecord(live, "chain", str(flow), "sha256:x", {}, pid=pid,
                                   pid_start=repr(owner.pid_start)), owner)
        store.append_event(RunStarted(run_id=live, seq=1, ts=time.time(), workflow="chain",
                                      workflow_path=str(flow), workflow_hash="sha256:x",
                                      entry_point="s1", inputs={}, podium_version="bench",
                                      max_iterations=100))
        console = ConsoleServer(home, "127.0.0.1", 0)
        console.prepare()
        console.start_background()
        base = f"http://127.0.0.1:{console.port}"
        loads, latencies = [], []
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
                for _ in range(args.loads):
                    ctx = browser.new_context(viewport={"width": 1360, "height": 860}, bypass_csp=True)
                    page = ctx.new_page()
                    page.goto(base + "/")
                    page.wait_for_function("document.body.dataset.runsRendered !== undefined")
                    loads.append(page.evaluate(
                        "performance.getEntriesByName('runs-rendered')[0].startTime"))
                    rows = page.locator("tr.run-row").count()
                    ctx.close()
                ctx = browser.new_context(viewport={"width": 1360, "height": 860}, bypass_csp=True)
                page = ctx.new_page()
                page.goto(f"{base}/runs/{live}")
                page.wait_for_selector('[data-node="s1"]')
                seq = 2
                rng = random.Random(7)
                for k in range(1, min(args.samples, STEPS - 1) + 1):
                    # Writes land at random points of the console's 200 ms polling cycle.
                    page.wait_for_timeout(rng.uniform(0, 250))
                    written = time.time()
                    store.append_event(StepStarted(run_id=live, seq=seq, ts=written,
                                                   step=f"s{k}", step_type="set", iteration=1,
                                                   run_iteration=k))
                    page.wait_for_function(
                        "id => document.querySelector(`[data-node=\"${id}\"]`)"
                        ".classList.contains('current')", arg=f"s{k}", polling="raf")
                    latencies.append((time.time() - written) * 1000)
                    store.append_event(StepFinished(run_id=live, seq=seq + 1, ts=time.time(),
                                                    step=f"s{k}", step_type="set", iteration=1,
                                                    elapsed=0.0, output=k))
                    store.commit()
                    seq += 2
                ctx.close()
                browser.close()
        finally:
            console.stop()
            store.close()
    lat = sorted(latencies)
    print(json.dumps({
        "runs_in_store": args.runs + 1, "rows_shown": rows,
        "runs_page_rendered_ms": {"median": round(statistics.median(loads)),
                                  "all": [round(x) for x in loads]},
        "sse_event_to_browser_ms": {"median": round(statistics.median(lat)),
                                    "p95": round(lat[int(0.95 * (len(lat) - 1))]),
                                    "max": round(lat[-1]), "samples": len(lat)},
        "poll_interval_ms": 200,
    }, indent=2))


if __name__ == "__main__":
    main()
