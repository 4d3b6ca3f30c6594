"""Engine overhead per step: set steps, script steps, a whole small run, and linearity.

(a) set loop: one set step counts up and routes back to itself until it reaches N (100, 490),
    then $end (max_iterations 500). Measured three ways:
      core     - in-process `Engine.run()` with no sinks and no store (best of 5, total / N);
      podium run path - in-process `run_command()` (validation, run store, console sink at -q,
                 summary), marginal cost per step = (T(490) - T(100)) / 390 (best of 5);
      process  - whole `podium run -q` processes (median of R), marginal per step likewise.
(b) script loop: 50 iterations of a script step running /bin/true. podium's overhead per step
    = core time per step - time to spawn the same child directly with subprocess.run()
    (stdin /dev/null, stdout/stderr captured). Also shown: a bare subprocess.run() and a
    Popen configured as podium configures it (new session, copied env, two reader threads).
(c) a whole `podium run` of a 2-step workflow (set, then terminate): wall time, peak RSS.
(d) linearity: per-step cost at 100 vs 490 iterations on each path.

Every process run gets PODIUM_HOME in a temporary directory (nothing is written to ~/.podium).

Usage:
    .venv/bin/python bench/bench_engine.py [--runs 15] [--repeats 5]

Prints a Markdown report on stdout; writes bench/results/engine.json.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    PODIUM,
    REPO,
    eprint,
    importtime,
    machine_info,
    md_table,
    measure_interleaved,
    wait_for_quiet,
    write_json,
)

SET_SIZES = (100, 490)
SCRIPT_ITERATIONS = 50
TRUE = shutil.which("true") or "/bin/true"
FORBIDDEN = ("openai", "anthropic", "httpx", "starlette", "fastapi", "uvicorn", "textual", "mcp")


def set_loop_yaml(n: int) -> str:
    return f"""\
workflow:
  name: set-loop-{n}
  description: One set step counting to {n}, routing back to itself
  entry_point: count
  limits:
    max_iterations: 500
agents:
  - name: count
    type: set
    value: "{{{{ (count.output if count is defined else 0) + 1 }}}}"
    output_type: integer
    routes:
      - to: $end
        when: "{{{{ count.output >= {n} }}}}"
      - to: count
output:
  count: "{{{{ count.output }}}}"
"""


def script_loop_yaml(n: int) -> str:
    return f"""\
workflow:
  name: script-loop-{n}
  description: One script step running {TRUE}, {n} times
  entry_point: tick
  limits:
    max_iterations: 500
agents:
  - name: tick
    type: script
    command: {TRUE}
    routes:
      - to: $end
        when: "{{{{ context.iteration >= {n} }}}}"
      - to: tick
output:
  exit_code: "{{{{ tick.output.exit_code }}}}"
"""


TWO_STEP_YAML = """\
workflow:
  name: two-step
  description: A set step, then a terminate step
  entry_point: greet
  input:
    who:
      type: string
      required: true
agents:
  - name: greet
    type: set
    value: "hello {{ workflow.input.who }}"
    routes:
      - to: finish
  - name: finish
    type: terminate
    status: success
    reason: "done: {{ greet.output }}"
output:
  greeting: "{{ greet.output }}"
"""


# --------------------------------------------------------------------------- in-process


def load_model(path: Path) -> Any:
    from podium.check.validate import validate_file

    result = validate_file(path)
    problems = [d.format() for d in result.sink.sorted()]
    if result.model is None or result.sink.errors:
        raise SystemExit(f"{path} is invalid:\n" + "\n".join(problems))
    return result.model, problems


def core_engine_run(wf: Any, path: Path, inputs: dict[str, Any]) -> tuple[float, Any]:
    """One in-process run on a fresh Engine with no sinks, no store, no checkpointer."""
    from podium.engine.run import Engine
    from podium.gates.base import ChainAnswerer
    from podium.providers.base import ProviderRegistry

    engine = Engine(wf, path, inputs=inputs, providers=ProviderRegistry(None),
                    answerer=ChainAnswerer([]))
    t0 = time.perf_counter()
    result = engine.run()
    return time.perf_counter() - t0, result


def best_core(wf: Any, path: Path, inputs: dict[str, Any], repeats: int,
              expect_iterations: int) -> dict[str, Any]:
    times = []
    for _ in range(repeats):
        dt, result = core_engine_run(wf, path, inputs)
        if result.status != "success" or result.iterations != expect_iterations:
            raise SystemExit(f"{path.name}: {result.status} after {result.iterations} "
                             f"iterations (expected success after {expect_iterations}): "
                             f"{result.error}")
        times.append(dt)
    best = min(times)
    return {"iterations": expect_iterations, "best_total_ms": round(best * 1000, 3),
            "median_total_ms": round(statistics.median(times) * 1000, 3),
            "per_step_ms": round(best * 1000 / expect_iterations, 4),
            "samples_ms": [round(t * 1000, 3) for t in times]}


def run_command_in_process(path: Path, inputs: list[str], repeats: int) -> dict[str, Any]:
    """`podium run -q FILE` in this process: best of `repeats` (stdout/stderr discarded)."""
    from podium.cli.run_cmd import RunRequest, run_command

    times = []
    for _ in range(repeats):
        sink = io.StringIO()
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            t0 = time.perf_counter()
            code = run_command(RunRequest(path, inputs=list(inputs), verbosity=0))
            times.append(time.perf_counter() - t0)
        if code != 0:
            raise SystemExit(f"run_command({path.name}) exited {code}:\n{sink.getvalue()[-3000:]}")
    return {"best_ms": round(min(times) * 1000, 3),
            "median_ms": round(statistics.median(times) * 1000, 3),
            "samples_ms": [round(t * 1000, 3) for t in times]}


def script_comparison(wf: Any, path: Path, n: int, repeats: int) -> tuple[dict[str, Any],
                                                                          dict[str, float]]:
    """podium's script loop and direct spawns of the same child, interleaved round by round
    (so a change in machine load hits every variant alike); best round of each, ms per spawn.
    """

    def bare() -> None:
        subprocess.run([TRUE], check=False)

    def captured() -> None:
        subprocess.run([TRUE], stdin=subprocess.DEVNULL, capture_output=True, check=False)

    def like_podium() -> None:
        env = dict(os.environ)
        env["PYTHONUTF8"] = "1"
        exe = shutil.which(TRUE, path=env.get("PATH", os.defpath)) or TRUE
        proc = subprocess.Popen([exe], env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        assert proc.stdout is not None
        assert proc.stderr is not None
        chunks: list[bytes] = []
        readers = [threading.Thread(target=lambda s=s: chunks.append(s.read()), daemon=True)
                   for s in (proc.stdout, proc.stderr)]
        for r in readers:
            r.start()
        proc.wait()
        for r in readers:
            r.join()
        proc.stdout.close()
        proc.stderr.close()

    variants = (("subprocess.run, no pipes", bare),
                ("subprocess.run, stdin devnull + capture_output", captured),
                ("Popen as podium configures it (env copy, new session, 2 reader "
                 "threads)", like_podium))
    best = {label: float("inf") for label, _ in variants}
    core_times = []
    core_engine_run(wf, path, {})  # warm
    for _ in range(repeats):
        dt, result = core_engine_run(wf, path, {})
        if result.status != "success" or result.iterations != n:
            raise SystemExit(f"{path.name}: {result.status} after {result.iterations} "
                             f"iterations: {result.error}")
        core_times.append(dt)
        for label, fn in variants:
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            best[label] = min(best[label], time.perf_counter() - t0)
    core = {"iterations": n, "best_total_ms": round(min(core_times) * 1000, 3),
            "median_total_ms": round(statistics.median(core_times) * 1000, 3),
            "per_step_ms": round(min(core_times) * 1000 / n, 4),
            "samples_ms": [round(t * 1000, 3) for t in core_times]}
    return core, {label: round(v * 1000 / n, 4) for label, v in best.items()}


# --------------------------------------------------------------------------- report


def main() -> None:
    parser = argparse.ArgumentParser(description="Engine overhead benchmark")
    parser.add_argument("--runs", type=int, default=15, help="process runs per command")
    parser.add_argument("--warmups", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5, help="in-process repeats (best of)")
    args = parser.parse_args()
    started = time.perf_counter()

    tmp = Path(tempfile.mkdtemp(prefix="podium-bench-engine-"))
    home = tmp / "home"
    os.environ["PODIUM_HOME"] = str(home)  # for run_command() in this process and children
    env = dict(os.environ)
    files: dict[str, Path] = {}
    for n in SET_SIZES:
        files[f"set-{n}"] = tmp / f"set-loop-{n}.yaml"
        files[f"set-{n}"].write_text(set_loop_yaml(n), encoding="utf-8")
    files["script"] = tmp / f"script-loop-{SCRIPT_ITERATIONS}.yaml"
    files["script"].write_text(script_loop_yaml(SCRIPT_ITERATIONS), encoding="utf-8")
    files["two"] = tmp / "two-step.yaml"
    files["two"].write_text(TWO_STEP_YAML, encoding="utf-8")

    results: dict[str, Any] = {"machine": machine_info(), "runs": args.runs,
                               "repeats": args.repeats, "workflows": {}}
    for key, path in files.items():
        _, problems = load_model(path)
        results["workflows"][key] = {"yaml": path.read_text(encoding="utf-8"),
                                     "diagnostics": problems}

    # (a) + (d) set loop, in-process core
    eprint("set loop, in-process core")
    busy_core = wait_for_quiet()
    core: dict[int, Any] = {}
    for n in SET_SIZES:
        wf, _ = load_model(files[f"set-{n}"])
        core_engine_run(wf, files[f"set-{n}"], {})  # warm: first-run imports, template compile
        core[n] = best_core(wf, files[f"set-{n}"], {}, args.repeats, n)
    # (a) + (d) set loop through the podium run path, in-process
    eprint("set loop, in-process run_command")
    busy_run_cmd = wait_for_quiet()
    run_cmd: dict[int, Any] = {}
    for n in SET_SIZES:
        run_command_in_process(files[f"set-{n}"], [], 1)  # warm
        run_cmd[n] = run_command_in_process(files[f"set-{n}"], [], args.repeats)
    run_cmd_two = run_command_in_process(files["two"], ["who=bench"], args.repeats)
    lo, hi = SET_SIZES
    run_cmd_marginal = (run_cmd[hi]["best_ms"] - run_cmd[lo]["best_ms"]) / (hi - lo)
    # per-step cost in the first 100 steps (run_command(100) minus a 2-step run's fixed cost)
    run_cmd_first = (run_cmd[lo]["best_ms"] - run_cmd_two["best_ms"]) / (lo - 2)

    # (b) script loop
    eprint("script loop, in-process core and direct spawns (interleaved)")
    busy_script = wait_for_quiet()
    wf_script, _ = load_model(files["script"])
    core_script, spawns = script_comparison(wf_script, files["script"], SCRIPT_ITERATIONS,
                                            max(args.repeats, 7))
    direct = spawns["subprocess.run, stdin devnull + capture_output"]
    script_overhead = core_script["per_step_ms"] - direct

    # (a) + (c) whole processes
    # interleaved round by round, so that differences between these series (the per-step
    # figures below) are not differences between moments of the machine
    eprint("processes: podium run (5 workflows, interleaved)")
    variants = {
        "two-step": ([PODIUM, "run", str(files["two"]), "--input", "who=bench"], env),
        "two-step -q": ([PODIUM, "run", str(files["two"]), "--input", "who=bench", "-q"], env),
        f"set-loop-{lo} -q": ([PODIUM, "run", str(files[f"set-{lo}"]), "-q"], env),
        f"set-loop-{hi} -q": ([PODIUM, "run", str(files[f"set-{hi}"]), "-q"], env),
        f"script-loop-{SCRIPT_ITERATIONS} -q": ([PODIUM, "run", str(files["script"]), "-q"],
                                                env),
    }
    series = measure_interleaved("podium run", variants, runs=args.runs, warmups=args.warmups)
    proc: dict[str, Any] = {}
    for key, ser in series.items():
        summary = ser.summary()
        summary["label"] = f"podium run {key}"
        proc[key] = summary
    proc_marginal = (proc[f"set-loop-{hi} -q"]["median_ms"]
                     - proc[f"set-loop-{lo} -q"]["median_ms"]) / (hi - lo)
    proc_first = (proc[f"set-loop-{lo} -q"]["median_ms"]
                  - proc["two-step -q"]["median_ms"]) / (lo - 2)
    proc_script = (proc[f"script-loop-{SCRIPT_ITERATIONS} -q"]["median_ms"]
                   - proc["two-step -q"]["median_ms"]) / (SCRIPT_ITERATIONS - 2)

    # imports of `podium run`
    eprint("import audit: podium run")
    rows = importtime(["-m", "podium", "run", str(files["two"]), "--input", "who=bench", "-q"],
                      env=env)
    tops = sorted({r[0].strip().split(".")[0] for r in rows})
    forbidden = [t for t in tops if t in FORBIDDEN]

    core_ratio = core[hi]["per_step_ms"] / core[lo]["per_step_ms"]
    run_ratio = run_cmd_marginal / run_cmd_first if run_cmd_first > 0 else None
    proc_ratio = proc_marginal / proc_first if proc_first > 0 else None
    two = proc["two-step"]
    results.update({
        "set_loop": {
            "core": core,
            "run_command": {"runs": run_cmd, "two_step": run_cmd_two,
                            "per_step_ms_first_100": round(run_cmd_first, 4),
                            "per_step_ms_100_to_490": round(run_cmd_marginal, 4)},
            "process": {"per_step_ms_first_100": round(proc_first, 4),
                        "per_step_ms_100_to_490": round(proc_marginal, 4)},
        },
        "cpu_busy_before": {"core": busy_core, "run_command": busy_run_cmd,
                            "script": busy_script},
        "script_loop": {"core": core_script, "direct_spawn_ms": spawns,
                        "overhead_per_step_ms": round(script_overhead, 4),
                        "process_per_step_ms": round(proc_script, 4),
                        "command": TRUE},
        "processes": proc,
        "linearity": {"core_ratio_490_vs_100": round(core_ratio, 3),
                      "run_command_ratio": round(run_ratio, 3) if run_ratio else None,
                      "process_ratio": round(proc_ratio, 3) if proc_ratio else None},
        "imports_run": {"modules": len(rows), "top_level": tops, "forbidden": forbidden,
                        "rich_loaded": "rich" in tops},
    })
    targets = [
        {"target": "engine < 0.2 ms per set step in-process (core, 490 iterations)",
         "measured": f"{core[hi]['per_step_ms']:.4f} ms", "pass": core[hi]["per_step_ms"] < 0.2},
        {"target": "same, through the `podium run` path in-process (store, sinks), marginal",
         "measured": f"{run_cmd_marginal:.4f} ms", "pass": run_cmd_marginal < 0.2},
        {"target": "< 2 ms overhead per script step beyond the child's own start",
         "measured": f"{script_overhead:.3f} ms ({core_script['per_step_ms']:.3f} - "
                     f"{direct:.3f})", "pass": script_overhead < 2.0},
        {"target": "whole 2-step `podium run` < 0.4 s",
         "measured": f"{two['median_ms']:.1f} ms median", "pass": two["median_ms"] < 400},
        {"target": "whole 2-step `podium run` < 60 MiB peak RSS",
         "measured": f"{two['rss_max_mib']:.1f} MiB max", "pass": two["rss_max_mib"] < 60},
        {"target": "linear in iterations: core per-step 490 vs 100 within 1.25x",
         "measured": f"{core_ratio:.2f}x", "pass": core_ratio <= 1.25},
        {"target": "linear in iterations: `podium run` path marginal (100→490 vs 2→100) "
                   "within 1.25x",
         "measured": f"{run_ratio:.2f}x" if run_ratio else "n/a",
         "pass": bool(run_ratio and run_ratio <= 1.25)},
    ]
    results["targets"] = targets
    results["elapsed_s"] = round(time.perf_counter() - started, 1)
    out = write_json("engine.json", results)

    m = results["machine"]
    print(f"## podium engine overhead\n\nMachine: {m['nproc']} CPUs, {m['cpu_model']}, Python "
          f"{m['python']}, git {m['git']['head']}"
          f"{' (dirty: ' + ', '.join(m['git']['dirty']) + ')' if m['git']['dirty'] else ''}\n")
    print("### Set steps (ms per step)\n")
    print(md_table(["path", f"N={lo}", f"N={hi}", "ratio"], [
        [f"core Engine.run(), no sinks (best of {args.repeats}, total/N)",
         core[lo]["per_step_ms"], core[hi]["per_step_ms"], round(core_ratio, 2)],
        ["`podium run` path in-process (run_command, -q), per step",
         round(run_cmd_first, 4), round(run_cmd_marginal, 4),
         round(run_ratio, 2) if run_ratio else "n/a"],
        ["whole `podium run -q` processes (median), per step",
         round(proc_first, 4), round(proc_marginal, 4),
         round(proc_ratio, 2) if proc_ratio else "n/a"],
    ]))
    print(f"\n(`podium run` path columns: N={lo} is (T({lo}) - T(2-step)) / {lo - 2}; "
          f"N={hi} is the marginal (T({hi}) - T({lo})) / {hi - lo}.)")
    print("\n### Script steps (/bin/true, ms per step)\n")
    srows = [["podium core Engine.run() per script step", core_script["per_step_ms"]]]
    srows += [[f"direct: {k}", v] for k, v in spawns.items()]
    srows += [["**podium overhead** (core - subprocess.run with capture)",
               round(script_overhead, 4)],
              ["whole `podium run -q` process, per step (vs 2-step run)", round(proc_script, 4)]]
    print(md_table(["what", "ms"], srows))
    print("\n### Whole processes\n")
    print(md_table(["command", "median ms", "min ms", "max ms", "peak RSS MiB (median)",
                    "peak RSS MiB (max)"],
                   [[p["label"], p["median_ms"], p["min_ms"], p["max_ms"], p["rss_median_mib"],
                     p["rss_max_mib"]] for p in proc.values()]))
    print("\n### Targets\n")
    print(md_table(["target", "measured", "result"],
                   [[t["target"], t["measured"], "PASS" if t["pass"] else "FAIL"]
                    for t in targets]))
    print(f"\n`podium run` imports {len(rows)} modules; forbidden loaded: "
          f"{forbidden or 'none'}; rich loaded: {'yes' if 'rich' in tops else 'no'}")
    print(f"\nJSON: {out.relative_to(REPO)} · elapsed {results['elapsed_s']} s")


if __name__ == "__main__":
    main()
