"""For-each under load: 1,000 items, `max_concurrent: 100`, an agent answering after 50 ms, on
the SQLite run store. The agent is scripted (the responses file's `every:` form) by default;
with `--provider openai` or `--provider anthropic` it goes through the real SDK (podium's
adapter, streamed) to bench/_stub_llm.py, a local endpoint in its own process that holds each
answer 50 ms without holding up other connections (asyncio, TCP_NODELAY, backlog 4096).

The ideal wall time is items / concurrency x latency = 1000 / 100 x 0.05 s = 0.5 s. Measured:

  cli        - `podium run` as a fresh process (PODIUM_HOME in a temp folder, -q): the
               process's wall time and peak RSS (wait4), and the run's own elapsed time from
               its run_finished event (the engine, without interpreter start-up);
  in-process - the same run built as `podium run` builds it (make_engine on the SQLite store,
               console sink at -q) inside a fresh child process: the engine's wall time and that
               process's peak RSS.

After each run the store is checked: the events table holds exactly the events the run
emitted (count = last seq = run_finished's seq, seqs 1..N without a gap), i.e. no event was
lost under load; the first (untimed) CLI run also writes the JSONL log, whose line count must
be the same N.

max_iterations caps at 500 and podium refuses a for-each that would pass it before starting
it, so the scripted person (`iteration_limit: [1000]`) grants 1,000 more iterations.

--breakdown also runs the in-process case with parts of the cost taken away, each in a fresh
process (the first wave of items pays one-time costs, so warm processes would hide them):
  as is | +warm pricing (genai-prices' table loaded before the fan-out) | +compile once (the
  prompt template compiled under a lock, not by each of the first 100 threads) | +commit per
  step (the store commits with checkpoints, not after every event) | no store (the SQLite sink
  removed). These variants patch podium in the child process; they measure, they fix nothing.

Usage:
    .venv/bin/python bench/bench_foreach.py [--runs 5] [--items 1000] [--concurrency 100]
                                            [--latency 0.05] [--breakdown]
                                            [--provider scripted|openai|anthropic]
                                            [--warm-sdk]

Prints a Markdown report on stdout; writes bench/results/foreach.json (foreach-openai.json,
foreach-anthropic.json with --provider).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    PYTHON,
    REPO,
    eprint,
    machine_info,
    md_table,
    run_child,
    wait_for_quiet,
    write_json,
)

WORKFLOW = """\
workflow:
  name: fanout
  entry_point: fan
  input:
    items: {{type: array}}
  runtime: {{provider: {provider}, default_model: {model}}}
  limits: {{max_iterations: 500}}
for_each:
  - name: fan
    type: for_each
    source: workflow.input.items
    as: item
    max_concurrent: {concurrency}
    agent:
      name: worker
      prompt: "Handle item {{{{ item }}}} (index {{{{ _index }}}})"
      output:
        ok: {{type: boolean}}
agents: []
output:
  count: "{{{{ fan.count }}}}"
  ok: "{{{{ fan.outputs | selectattr('ok') | list | length }}}}"
"""

RESPONSES = """\
agents:
  worker:
    every:
      output: {{ok: true}}
      usage: {{input_tokens: 120, output_tokens: 8}}
      delay: {latency}
iteration_limit: [{items}]
"""

# the real-provider runs: the workflow's runtime, and the only thing the responses file
# scripts is the person granting the iterations (a file without `agents:` scripts no agent)
PROVIDERS = {"scripted": ("copilot", "gpt-5-mini"), "openai": ("openai", "gpt-5-mini"),
             "anthropic": ("claude", "claude-sonnet-4-6")}
GATES_ONLY = "iteration_limit: [{items}]\n"


def lab(root: Path, items: int, concurrency: int, latency: float,
        provider: str = "scripted") -> dict[str, Path]:
    paths = {"workflow": root / "fanout.yaml", "responses": root / "responses.yaml",
             "inputs": root / "items.json"}
    runtime, model = PROVIDERS[provider]
    paths["workflow"].write_text(WORKFLOW.format(concurrency=concurrency, provider=runtime,
                                                 model=model), encoding="utf-8")
    responses = RESPONSES if provider == "scripted" else GATES_ONLY
    paths["responses"].write_text(responses.format(latency=latency, items=items),
                                  encoding="utf-8")
    paths["inputs"].write_text(json.dumps({"items": list(range(items))}), encoding="utf-8")
    return paths


def store_check(home: Path, jsonl: Path | None) -> dict[str, Any]:
    """What the store holds for the (only) run in `home`, and whether every event is there."""
    con = sqlite3.connect(f"file:{home / 'podium.db'}?mode=ro", uri=True)
    try:
        ((run_id, status),) = con.execute("SELECT id, status FROM runs").fetchall()
        seqs = [s for (s,) in con.execute("SELECT seq FROM events WHERE run_id = ? ORDER BY seq",
                                          (run_id,))]
        (last_body,) = con.execute("SELECT body FROM events WHERE run_id = ? AND "
                                   "type = 'run_finished'", (run_id,)).fetchone()
    finally:
        con.close()
    finished = json.loads(last_body)
    emitted = int(finished["seq"])
    lines = None
    if jsonl is not None:
        lines = sum(1 for line in jsonl.read_text(encoding="utf-8").splitlines() if line)
    lost = emitted - len(seqs)
    return {"run_id": run_id, "status": status, "events_in_store": len(seqs),
            "events_emitted": emitted, "jsonl_lines": lines,
            "contiguous": seqs == list(range(1, emitted + 1)), "lost": lost,
            "run_elapsed_s": float(finished["elapsed"]), "exit_code": finished["exit_code"]}


def cli_run(paths: dict[str, Path], root: Path, *, witness: bool = False) -> dict[str, Any]:
    """`podium run` as a process; with `witness`, it also writes the JSONL log (a second,
    independent count of the events emitted; it costs a write per event, so timed runs
    leave it out)."""
    home = root / "home"
    jsonl = root / "events.jsonl" if witness else None
    env = dict(os.environ, PODIUM_HOME=str(home), NO_COLOR="1")
    argv = [PYTHON, "-m", "podium", "run", str(paths["workflow"]), "--input-file",
            str(paths["inputs"]), "--responses", str(paths["responses"]), "-q"]
    if jsonl is not None:
        argv += ["--events", str(jsonl)]
    child = run_child(argv, env=env)
    if child.returncode != 0:
        out = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        raise SystemExit(f"podium run failed ({child.returncode}):\n{out.stderr[-3000:]}")
    check = store_check(home, jsonl)
    return {"wall_s": child.wall_s, "maxrss_mib": child.maxrss_kib / 1024, **check}


VARIANTS = ("as is", "+warm pricing", "+compile once", "+commit per step", "no store")


def _patch(variant: str) -> None:
    """Take a part of the cost away (for --breakdown): each variant includes the ones before."""
    import threading

    level = VARIANTS.index(variant)
    if level >= 1:
        from podium.providers.pricing import find_price

        find_price("gpt-5-mini", {})
    if level >= 2:
        from podium import templating

        compile_ = templating.TemplateEngine.compile
        lock = threading.Lock()

        def compile_once(self: Any, source: str) -> Any:
            hit = self._cache.get((source, False))
            if hit is not None:
                return hit
            with lock:
                return compile_(self, source)

        templating.TemplateEngine.compile = compile_once  # type: ignore[method-assign]
    if level >= 3:
        from podium.store import sqlcore

        sqlcore.defers = (  # type: ignore[assignment]
            lambda e: e.type not in ("checkpoint", "run_finished", "run_started"))


def inprocess_engine(workflow: Path, inputs: Path, responses: Path, home: Path,
                     adjust: Any = None) -> tuple[Any, Any, Any]:
    """(workflow model, store, engine): the `podium run` engine for `workflow` on the SQLite
    store in `home`, its run created, as bench/ runs it in-process (`adjust` may change the
    loaded workflow before the engine is made)."""
    os.environ["PODIUM_HOME"] = str(home)
    from podium.app.home import open_store
    from podium.app.inputs import parse_inputs
    from podium.app.launch import LaunchOptions, make_engine
    from podium.app.workflows import load_valid
    from podium.engine.run import file_hash
    from podium.store.base import RunRecord

    wf, _ = load_valid(workflow)
    assert wf is not None
    if adjust is not None:
        wf = adjust(wf)
    store = open_store()
    engine = make_engine(wf, workflow, parse_inputs(wf, [], inputs),
                         LaunchOptions(responses=responses, verbosity=0), store)
    store.create_run(RunRecord(engine.run_id, wf.workflow.name, str(workflow),
                               file_hash(workflow), engine.state.inputs))
    return wf, store, engine


def warm_sdk(wf: Any, engine: Any) -> None:
    """Import the workflow's provider SDK and build its client, untimed: a run pays that
    once, whatever its fan-out."""
    from podium.providers.settings import resolve_settings

    runtime = wf.workflow.runtime
    name = str(runtime.provider)
    engine.services.providers.get(name, lambda: resolve_settings(name, runtime))


def inprocess_child(workflow: Path, inputs: Path, responses: Path, home: Path,
                    variant: str = "as is") -> None:
    """Runs in a fresh process: the `podium run` engine on the SQLite store, timed."""
    import io

    sys.stderr = io.StringIO()  # the console sink at -q: lines are formatted, not shown
    width = os.environ.get("PODIUM_BENCH_WIDTH")

    def widen(wf: Any) -> Any:  # past the language's cap of 100 (bench_fanout.py's memory
        # row): the engine's limit set on the loaded model, which no workflow file can ask for
        return wf.model_copy(update={"for_each": [
            g.model_copy(update={"max_concurrent": int(width)}) for g in wf.for_each]}) \
            if width else wf

    wf, store, engine = inprocess_engine(workflow, inputs, responses, home, widen)
    _patch("+commit per step" if variant == "no store" else variant)
    if os.environ.get("PODIUM_BENCH_WARM_SDK"):  # --warm-sdk: the SDK imported, untimed
        warm_sdk(wf, engine)
    if variant == "no store":
        engine.bus.sinks = [s for s in engine.bus.sinks if s is not store]
    t0, cpu0 = time.perf_counter(), time.process_time()
    result = engine.run()
    store.commit()
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    store.close()
    sys.stdout.write(json.dumps({"engine_wall_s": wall, "engine_cpu_s": cpu,
                                 "exit_code": result.exit_code}) + "\n")


def inprocess_run(paths: dict[str, Path], root: Path, variant: str = "as is") -> dict[str, Any]:
    home = root / "home"
    out = root / "inprocess.json"
    argv = [PYTHON, __file__, "--child", str(paths["workflow"]), str(paths["inputs"]),
            str(paths["responses"]), str(home), "--variant", variant]
    with out.open("w") as fh:
        child = run_child(argv, stdout=fh.fileno(), stderr=None)
    if child.returncode != 0:
        raise SystemExit(f"in-process run failed ({child.returncode})")
    measured = json.loads(out.read_text())
    row = {"wall_s": measured["engine_wall_s"], "cpu_s": measured["engine_cpu_s"],
           "process_wall_s": child.wall_s, "maxrss_mib": child.maxrss_kib / 1024}
    if variant == "no store":
        return row
    return {**row, **store_check(home, None)}


class Stub:
    """bench/_stub_llm.py in its own process; the runs find it through the SDKs' variables."""

    def __init__(self, latency: float, provider: str) -> None:
        self.proc = subprocess.Popen([PYTHON, str(REPO / "bench" / "_stub_llm.py"),
                                      str(latency)], stdout=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, text=True)
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())
        url = f"http://127.0.0.1:{self.port}"
        if provider == "openai":
            os.environ.update(OPENAI_BASE_URL=url + "/v1", OPENAI_API_KEY="sk-bench")
        else:
            os.environ.update(ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY="sk-bench")

    def call(self, method: str, path: str) -> dict[str, Any]:
        import http.client

        conn = http.client.HTTPConnection("127.0.0.1", self.port)
        conn.request(method, path, body=b"{}" if method == "POST" else None)
        data: dict[str, Any] = json.loads(conn.getresponse().read())
        conn.close()
        return data

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def median(rows: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(r[key] for r in rows))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--items", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=100)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--provider", default="scripted", choices=tuple(PROVIDERS),
                    help="the agent: scripted, or a real SDK against bench/_stub_llm.py")
    ap.add_argument("--warm-sdk", action="store_true",
                    help="in-process: import the SDKs and build the clients before timing "
                         "(the CPU per call without the run's one-time import)")
    ap.add_argument("--breakdown", action="store_true",
                    help="also time in-process variants with parts of the cost removed")
    ap.add_argument("--child", nargs=4, metavar=("WORKFLOW", "INPUTS", "RESPONSES", "HOME"),
                    help=argparse.SUPPRESS)
    ap.add_argument("--variant", default="as is", choices=VARIANTS, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.warm_sdk:
        os.environ["PODIUM_BENCH_WARM_SDK"] = "1"
    if args.child:
        inprocess_child(*(Path(p) for p in args.child), variant=args.variant)
        return
    ideal = args.items / args.concurrency * args.latency
    results: dict[str, list[dict[str, Any]]] = {"cli": [], "in-process": []}
    witnessed: dict[str, Any] = {}
    stub = Stub(args.latency, args.provider) if args.provider != "scripted" else None
    busy = wait_for_quiet()
    with tempfile.TemporaryDirectory(prefix="podium-bench-foreach-") as tmp:
        for i in range(args.runs + 1):  # the first round warms caches and is dropped
            for mode in ("cli", "in-process"):
                root = Path(tmp) / f"{mode}-{i}"
                root.mkdir()
                paths = lab(root, args.items, args.concurrency, args.latency, args.provider)
                if stub is not None:
                    stub.call("POST", "/reset")
                row = (cli_run(paths, root, witness=i == 0) if mode == "cli"
                       else inprocess_run(paths, root))
                if stub is not None:
                    row["endpoint"] = stub.call("GET", "/stats")
                    if row["endpoint"]["requests"] != args.items:
                        raise SystemExit(f"{mode}: the endpoint answered "
                                         f"{row['endpoint']['requests']} requests")
                if row["lost"] or not row["contiguous"] or row["status"] != "success" or \
                        row["jsonl_lines"] not in (None, row["events_emitted"]):
                    raise SystemExit(f"{mode}: events lost or run failed: {row}")
                if row["jsonl_lines"] is not None:
                    witnessed = row
                if i:
                    results[mode].append(row)
                eprint(f"  {mode} run {i}: {row['wall_s']:.3f}s, "
                       f"{row['events_in_store']} events, {row['maxrss_mib']:.0f} MiB")
        breakdown = _breakdown(args, Path(tmp)) if args.breakdown else {}
    if stub is not None:
        stub.close()
    table = []
    for mode, rows in results.items():
        key = "run_elapsed_s" if mode == "cli" else "wall_s"
        engine_wall = median(rows, key)
        best = min(r[key] for r in rows)
        table.append([mode, median(rows, "wall_s"), engine_wall, best, ideal,
                      engine_wall / ideal, best / ideal, median(rows, "maxrss_mib"),
                      int(median(rows, "events_in_store")),
                      "0" if all(r["lost"] == 0 and r["contiguous"] for r in rows) else "LOST"])
    report = md_table(["path", "process wall s", "run elapsed s (median)", "best s", "ideal s",
                       "median / ideal", "best / ideal", "peak RSS MiB", "events", "lost"],
                      table)
    agent = ("scripted agent" if stub is None else
             f"{args.provider} SDK to bench/_stub_llm.py")
    print(f"For-each: {args.items} items, max_concurrent {args.concurrency}, {agent} "
          f"answering after {args.latency * 1000:g} ms; median of {args.runs} runs "
          f"(CPU {busy:.0%} busy before).\n")
    print(report)
    inproc = results["in-process"]
    print(f"\nIn-process CPU (all threads, time.process_time): "
          f"{median(inproc, 'cpu_s') / args.items * 1000:.2f} ms per item (median).")
    if stub is not None:
        eps = [r["endpoint"] for r in inproc]
        print(f"Endpoint, in-process runs: {median(eps, 'connections'):.0f} connections for "
              f"{args.items} requests, at most {max(e['most_open'] for e in eps)} open at once; "
              f"answers went out {median(eps, 'late_ms_median'):.2f} ms late (median; worst "
              f"{max(e['late_ms_max'] for e in eps):.1f} ms); its CPU "
              f"{median(eps, 'cpu_s') / args.items * 1000:.3f} ms per request.")
    print(f"\nNo event lost: in every run the store held events 1..N without a gap, N being "
          f"run_finished's seq ({witnessed.get('events_emitted')} events); the JSONL log of the "
          f"witness run had {witnessed.get('jsonl_lines')} lines.")
    if breakdown:
        rows_b = [[v, median(r, "wall_s"), min(x["wall_s"] for x in r), median(r, "wall_s") / ideal,
                   median(r, "cpu_s"), median(r, "cpu_s") / args.items * 1000]
                  for v, r in breakdown.items()]
        print("\nIn-process, parts of the cost taken away (each row includes the ones above):\n")
        print(md_table(["variant", "elapsed s (median)", "best s", "median / ideal",
                        "CPU s", "CPU ms / item"], rows_b))
    name = "foreach.json" if stub is None else f"foreach-{args.provider}.json"
    write_json(name, {"machine": machine_info(), "args": vars(args), "ideal_s": ideal,
                                "cpu_busy_before": busy, "witness": witnessed,
                                "results": results, "breakdown": breakdown,
                                "command": " ".join(sys.argv), "repo": str(REPO)})


def _breakdown(args: argparse.Namespace, tmp: Path) -> dict[str, list[dict[str, Any]]]:
    """The in-process run with parts of the cost removed, interleaved round by round; last,
    the same fan-out with no podium at all (a ThreadPoolExecutor of sleeps)."""
    out: dict[str, list[dict[str, Any]]] = {v: [] for v in (*VARIANTS, POOL_ONLY)}
    for i in range(args.runs):
        for n, variant in enumerate(VARIANTS):
            root = tmp / f"variant-{n}-{i}"
            root.mkdir()
            paths = lab(root, args.items, args.concurrency, args.latency, args.provider)
            row = inprocess_run(paths, root, variant)
            out[variant].append(row)
            eprint(f"  {variant} run {i}: {row['wall_s']:.3f}s")
        out[POOL_ONLY].append(_pool_only(args.items, args.concurrency, args.latency))
    return out


POOL_ONLY = "thread pool only (no podium)"


def _pool_only(items: int, concurrency: int, latency: float) -> dict[str, Any]:
    import threading
    from concurrent.futures import ThreadPoolExecutor

    t0, cpu0 = time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        for _ in range(items):
            pool.submit(threading.Event().wait, latency)
    return {"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - cpu0}


if __name__ == "__main__":
    main()
