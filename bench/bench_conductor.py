"""podium side by side with Conductor (issue 33): every cold path, both tools, one run.

Paths, each a fresh process (Conductor's equivalent in brackets):
  --help                      (conductor --help)
  validate article            (conductor validate examples/dev-review/workflow.yaml)
  validate linear-800         (conductor validate, bench/gen_workflows.py's 800 steps)
  run two-step                podium --silent run (conductor --silent run): two set steps, no model
  per set / script step       the slope between a short and a long loop of one set step (one
                              script step running /usr/bin/true) through the whole `run`
Rounds interleave the tools path by path, so a drift in machine load hits both. Both run with
bytecode, as an installed package has it: a private PYTHONPYCACHEPREFIX (a temp dir, filled by
the warm-up rounds), since this machine sets PYTHONDONTWRITEBYTECODE=1 and neither tree ships
__pycache__. The same rounds time the four libraries `podium validate` needs
(`python -c "import pydantic, jinja2, typer, ruamel.yaml"`), for the 1.25x target.

Conductor: --conductor PATH, else $PODIUM_BENCH_CONDUCTOR, else /tmp/conductor-venv/bin/conductor.
Without it the report gives podium's figures alone and says so. To install it the way the
differential corpus does (tests/corpus/conductor/record.py), outside this repository:

    git -C <conductor mirror> archive 3c07139 | tar -x -C /tmp/conductor-src
    cd /tmp/conductor-src && UV_PROJECT_ENVIRONMENT=/tmp/conductor-venv \\
        uv sync --frozen --no-dev --python 3.12

Usage:
    .venv/bin/python bench/bench_conductor.py [--conductor PATH] [--rounds 7] [--warmups 2]

Prints a Markdown report on stdout; writes bench/results/conductor.json.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _cold_paths import (
    BIG,
    SCRIPT_STEPS,
    SET_STEPS,
    Samples,
    conductor_paths,
    podium_paths,
    write_workflows,
)
from _common import (
    PODIUM,
    PYTHON,
    eprint,
    importtime,
    machine_info,
    md_table,
    run_child,
    wait_for_quiet,
    write_json,
)

DEFAULT_CONDUCTOR = "/tmp/conductor-venv/bin/conductor"
LIBS = "import pydantic, jinja2, typer, ruamel.yaml"
# the floor under a script step: a Python process that only spawns /usr/bin/true and waits
# for it, SPAWNS times (the per-spawn figure is its time less `python -c pass`'s, / SPAWNS)
SPAWNS = 100
SPAWN = (f"import subprocess\nfor _ in range({SPAWNS}): "
         "subprocess.run(['/usr/bin/true'], check=True)")
TARGET_RATIO = 10.0
LIBS_TARGET = 1.25


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--conductor", default=os.environ.get("PODIUM_BENCH_CONDUCTOR",
                                                              DEFAULT_CONDUCTOR))
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--warmups", type=int, default=2)
    args = parser.parse_args()
    started = time.perf_counter()
    conductor = args.conductor if os.access(args.conductor, os.X_OK) else None
    if conductor is None:
        eprint(f"Conductor not found at {args.conductor}: podium's figures alone")

    tmp = Path(tempfile.mkdtemp(prefix="podium-bench-conductor-"))
    files = write_workflows(tmp / "workflows")
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update({"PYTHONPYCACHEPREFIX": str(tmp / "pycache"), "PODIUM_HOME": str(tmp / "home"),
                "NO_COLOR": "1"})

    loaded = library_modules(["-m", "podium", "validate", str(files["article"])], env)
    tools: dict[str, list[tuple[str, list[str]]]] = {
        "podium": [(p.label, p.argv(PODIUM, files)) for p in podium_paths()]
                  + [("libraries", [PYTHON, "-c", LIBS]),
                     ("library modules validate loads", [PYTHON, "-c", loaded]),
                     (f"spawn /usr/bin/true x{SPAWNS}", [PYTHON, "-c", SPAWN]),
                     ("python -c pass", [PYTHON, "-c", "pass"])],
    }
    if conductor:
        tools["conductor"] = [(p.label, p.argv(conductor, files)) for p in conductor_paths()]
    samples = {tool: Samples() for tool in tools}
    cpu = {tool: Samples() for tool in tools}
    busy = wait_for_quiet()
    for rnd in range(args.warmups + args.rounds):
        eprint(f"round {rnd + 1}/{args.warmups + args.rounds}"
               f"{' (warm-up)' if rnd < args.warmups else ''}")
        for i in range(len(tools["podium"])):
            for tool, cmds in tools.items():
                if i >= len(cmds):
                    continue
                label, argv = cmds[i]
                r = run_child(argv, env=env)
                if r.returncode != 0:
                    raise SystemExit(f"{tool} {label}: exit code {r.returncode}: {argv}")
                if rnd >= args.warmups:
                    samples[tool].add(label, r.wall_s * 1000)
                    cpu[tool].add(label, r.cpu_s * 1000)

    rows, verdicts = [], []
    p, c = samples["podium"], samples.get("conductor")
    pc, cc = cpu["podium"], cpu.get("conductor")
    labels = [label for label, _ in tools["podium"]][:-4]

    def cells(a: float | None, b: float | None, digits: int) -> list[Any]:
        return [round(a, digits) if a is not None else "-",
                round(b, digits) if b is not None else "-",
                f"{b / a:.1f}x" if a and b and a > 0 else "-"]

    for label in labels:
        rows.append([label, *cells(p.median(label), c.median(label) if c else None, 1),
                     *cells(pc.median(label), cc.median(label) if cc else None, 1)])
    ps, cs = p.slopes(), (c.slopes() if c else {})
    pcs, ccs = pc.slopes(), (cc.slopes() if cc else {})
    for key, pv in ps.items():
        rows.append([key + " (ms, slope)", *cells(pv, cs.get(key), 3),
                     *cells(pcs[key], ccs.get(key), 3)])
    if c:
        for label in ["help", "validate article", f"validate linear-{BIG}", "run two-step"]:
            pm, cm = p.median(label), c.median(label)
            assert pm
            assert cm
            verdicts.append({"target": f"{label}: Conductor / podium >= {TARGET_RATIO:g}",
                             "ratio": round(cm / pm, 2), "pass": cm / pm >= TARGET_RATIO})
        for key, pv in ps.items():
            cv = cs[key]
            verdicts.append({"target": f"{key}: Conductor / podium >= {TARGET_RATIO:g}",
                             "ratio": round(cv / pv, 2) if pv > 0 else None,
                             "pass": pv > 0 and cv / pv >= TARGET_RATIO})
    libs, article = p.median("libraries"), p.median("validate article")
    assert libs
    assert article
    verdicts.append({"target": f"validate article within {LIBS_TARGET}x of its libraries' import",
                     "ratio": round(article / libs, 3), "pass": article / libs <= LIBS_TARGET})
    # the stricter reading: what validate loads outside podium (BaseModel's machinery, which
    # `import pydantic` defers, included; the libraries it does not load left out)
    outside = p.median("library modules validate loads")
    assert outside
    verdicts.append({"target": f"validate article within {LIBS_TARGET}x of every module "
                               f"outside podium it loads",
                     "ratio": round(article / outside, 3),
                     "pass": article / outside <= LIBS_TARGET})

    spawn = ((p.median(f"spawn /usr/bin/true x{SPAWNS}") or 0)
             - (p.median("python -c pass") or 0)) / SPAWNS

    results: dict[str, Any] = {
        "machine": machine_info(), "cpu_busy_before": busy, "rounds": args.rounds,
        "warmups": args.warmups, "conductor": conductor or None,
        "set_steps": SET_STEPS, "script_steps": SCRIPT_STEPS,
        "argv": {tool: dict(cmds) for tool, cmds in tools.items()},
        "samples_ms": {tool: s.ms for tool, s in samples.items()},
        "medians_ms": {tool: {k: s.median(k) for k in s.ms} for tool, s in samples.items()},
        "per_step_ms": {"podium": ps, "conductor": cs},
        "cpu_samples_ms": {tool: s.ms for tool, s in cpu.items()},
        "cpu_per_step_ms": {"podium": pcs, "conductor": ccs}, "targets": verdicts,
        "spawn_floor_ms": round(spawn, 3), "library_modules_line": loaded,
        "elapsed_s": round(time.perf_counter() - started, 1),
    }
    out = write_json("conductor.json", results)

    m = results["machine"]
    print(f"## podium and Conductor, cold processes ({args.rounds} interleaved rounds after "
          f"{args.warmups} warm-ups, bytecode cached for both)\n")
    print(f"Machine: {m['nproc']} CPUs, {m['cpu_model']}, load average {m['loadavg']}, "
          f"CPUs busy before {busy:.0%}; podium {m['git']['head']}"
          f"{' (dirty)' if m['git']['dirty'] else ''}; Conductor: "
          f"{conductor or 'NOT FOUND (podium alone)'}\n")
    print(md_table(["path", "podium median ms", "Conductor median ms", "Conductor / podium",
                    "podium CPU ms", "Conductor CPU ms", "CPU Conductor / podium"], rows))
    print("\nCPU: each child's user + system time (wait4), median; steadier than wall time "
          "when other work shares the CPUs. The targets below are judged on wall time.")
    print(f"\nlibraries alone (`python -c \"{LIBS}\"`): {libs:.1f} ms; `python -c pass`: "
          f"{p.median('python -c pass'):.1f} ms; validate article / libraries: "
          f"{article / libs:.2f} (CPU time: {pc.median('validate article') or 0:.1f} / "
          f"{pc.median('libraries') or 0:.1f} ms = "
          f"{(pc.median('validate article') or 0) / (pc.median('libraries') or 1):.2f})")
    needed = p.median("library modules validate loads") or 0
    unused = [lib for lib in ("pydantic", "jinja2", "typer", "ruamel.yaml")
              if f"'{lib}'" not in loaded]
    print(f"Every module outside podium that `podium validate` of the article loads, imported "
          f"alone (the line above leaves out what `import pydantic` defers: BaseModel's "
          f"machinery, pydantic.types; and it imports "
          f"{', '.join(unused) if unused else 'nothing'} of the four, which validate does not "
          f"load): {needed:.1f} ms; validate article / those: "
          f"{article / needed if needed else 0:.2f}.")
    print(f"Per-step slopes: set steps {SET_STEPS[0]} → {SET_STEPS[1]}, script steps "
          f"{SCRIPT_STEPS[0]} → {SCRIPT_STEPS[1]} ({'/usr/bin/true'}).")
    script_target = (cs.get("per script step") or 0) / TARGET_RATIO
    print(f"The floor under a script step: a Python process that only spawns /usr/bin/true "
          f"and waits for it takes {spawn:.3f} ms a spawn; the script slope's "
          f"{TARGET_RATIO:g}x target asks for {script_target:.3f} ms a step"
          f"{' (below that floor)' if c and script_target < spawn else ''}.\n")
    print("### Targets\n")
    print(md_table(["target", "measured", "result"],
                   [[v["target"], v["ratio"], "PASS" if v["pass"] else "FAIL"]
                    for v in verdicts]))
    print(f"\nJSON: bench/results/{out.name} · elapsed {results['elapsed_s']} s")


def library_modules(argv_after_python: list[str], env: dict[str, str]) -> str:
    """A `python -c` line that imports every module outside podium a podium command loads
    (from `-X importtime`), in the order they finished loading."""
    names = [name for name, _, _ in importtime(argv_after_python, env=env)
             if name.split(".", 1)[0] not in ("podium", "__main__")]
    return ("import importlib\n"
            f"for name in {names!r}:\n"
            "    try:\n"
            "        importlib.import_module(name)\n"
            "    except Exception:\n"
            "        pass\n")


if __name__ == "__main__":
    main()
