"""Cold whole-process cost of podium's CLI: wall time and peak RSS per fresh process.

Measures `podium --help`, `podium validate` of the article's example and of generated linear
workflows (50/200/800 steps), against two baselines: the bare interpreter and the interpreter
importing podium's libraries. Every sample is a new process (2 warmups first, so the OS file
cache is warm: "cold" means a cold interpreter, not a cold disk). Peak RSS is the child's own
ru_maxrss from wait4().

podium is installed editable and this machine sets PYTHONDONTWRITEBYTECODE=1: when src/ has
no up-to-date __pycache__, podium's own modules are compiled from source in every process. The
JSON records how many have fresh bytecode (machine.podium_bytecode), and an interleaved A/B
repeats the small commands with a private, warm PYTHONPYCACHEPREFIX to show the cost.

Also audits what `podium validate` imports (python -X importtime): no model SDK, web or TUI
library may load.

Usage:
    .venv/bin/python bench/bench_cli.py [--runs 15] [--no-bytecode-variant]

Prints a Markdown report on stdout; writes bench/results/cli.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    PODIUM,
    PYTHON,
    REPO,
    bytecode_env,
    eprint,
    importtime,
    machine_info,
    md_table,
    measure,
    measure_interleaved,
    wait_for_quiet,
    write_json,
)
from gen_workflows import generate

ARTICLE = "examples/dev-review/workflow.yaml"
SIZES = (50, 200, 800)
FORBIDDEN = ("openai", "anthropic", "httpx", "starlette", "fastapi", "uvicorn", "textual", "mcp")
NOTABLE = ("rich", "pygments", "markdown_it", "email", "importlib.metadata", "inspect", "asyncio",
           "subprocess", "threading", "typing_extensions", "annotated_types", "pydantic_core",
           "ruamel", "jinja2", "markupsafe", "typer", "click", "shellingham", "json", "dataclasses")
TARGETS = {  # label -> (median ms limit, description)
    "podium --help": (100.0, "--help < 100 ms"),
    f"podium validate {ARTICLE}": (150.0, "validate of the article's file < 150 ms"),
    "podium validate linear-800": (1000.0, "validate of the 800-step file < 1 s"),
}


def top_level(name: str) -> str:
    return name.split(".", 1)[0]


def import_audit(argv: list[str], repeats: int = 5) -> dict[str, Any]:
    """Modules a command imports, and per-package self time (median over `repeats`)."""
    per_module: dict[str, list[int]] = {}
    cumulative: dict[str, list[int]] = {}
    order: list[str] = []
    for _ in range(repeats):
        for raw, self_us, cum_us in importtime(argv):
            name = raw.strip()
            if name not in per_module:
                per_module[name] = []
                cumulative[name] = []
                order.append(name)
            per_module[name].append(self_us)
            cumulative[name].append(cum_us)
    med = {n: statistics.median(v) for n, v in per_module.items()}
    cmed = {n: statistics.median(v) for n, v in cumulative.items()}
    packages: dict[str, float] = {}
    for n, us in med.items():
        packages[top_level(n)] = packages.get(top_level(n), 0.0) + us
    tops = {top_level(n) for n in order}
    forbidden = sorted(t for t in tops if t in FORBIDDEN)
    stdlib = set(sys.stdlib_module_names)
    # "org" is copy.py's failed optional `org.python.core` import; sitecustomize is the
    # machine's own start-up hook
    third_party = sorted(t for t in tops if t not in stdlib and t != "podium"
                         and not t.startswith("_") and t not in ("org", "sitecustomize"))
    notable = [n for n in NOTABLE if n in order]
    total_us = sum(med.values())
    return {
        "argv": argv, "modules": len(order), "total_self_ms": round(total_us / 1000, 2),
        "forbidden_loaded": forbidden, "rich_loaded": "rich" in tops,
        "third_party_packages": third_party, "notable_modules": notable,
        "by_package_ms": {k: round(v / 1000, 2) for k, v in
                          sorted(packages.items(), key=lambda kv: -kv[1])},
        "top_modules_self_ms": [[n, round(med[n] / 1000, 2)] for n in
                                sorted(med, key=lambda n: -med[n])[:25]],
        "top_modules_cumulative_ms": [[n, round(cmed[n] / 1000, 2)] for n in
                                      sorted(cmed, key=lambda n: -cmed[n])[:25]],
        "podium_modules_self_ms": [[n, round(med[n] / 1000, 2)] for n in
                                   sorted(med, key=lambda n: -med[n]) if top_level(n) == "podium"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="Cold whole-process CLI benchmark")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--warmups", type=int, default=2)
    parser.add_argument("--no-bytecode-variant", action="store_true")
    args = parser.parse_args()
    started = time.perf_counter()

    tmp = Path(tempfile.mkdtemp(prefix="podium-bench-cli-"))
    files = dict(zip(SIZES, generate(tmp / "workflows", SIZES), strict=True))
    env_home = {"PODIUM_HOME": str(tmp / "home")}
    base_env = {**os.environ, **env_home}

    commands: list[tuple[str, list[str], bool]] = [  # label, argv, is_podium
        ("python -c pass", [PYTHON, "-c", "pass"], False),
        ("python -c 'import pydantic, jinja2, typer, ruamel.yaml'",
         [PYTHON, "-c", "import pydantic, jinja2, typer, ruamel.yaml"], False),
        ("podium --help", [PODIUM, "--help"], True),
        (f"podium validate {ARTICLE}", [PODIUM, "validate", ARTICLE], True),
    ]
    commands += [(f"podium validate linear-{n}", [PODIUM, "validate", str(files[n])], True)
                  for n in SIZES]

    results: dict[str, Any] = {"machine": machine_info(), "runs": args.runs,
                               "warmups": args.warmups, "commands": [], "bytecode_cached": []}
    for label, argv, _ in commands:
        eprint(f"measuring: {label}")
        results["commands"].append(measure(label, argv, runs=args.runs, warmups=args.warmups,
                                           env=base_env).summary())
    if not args.no_bytecode_variant:
        # compiling podium's own modules is a fixed cost per process: compare on the small
        # commands, interleaved so that load drift affects both variants alike
        cache_env = {**bytecode_env(tmp / "pycache"), **env_home}
        for label, argv, is_podium in commands[:5]:
            if not is_podium:
                continue
            eprint(f"measuring (as is vs bytecode cached, interleaved): {label}")
            pair = measure_interleaved(label, {"as is": (argv, base_env),
                                               "bytecode cached": (argv, cache_env)},
                                       runs=args.runs, warmups=args.warmups)
            results["bytecode_cached"].append({
                "label": label, "as_is": pair["as is"].summary(),
                "cached": pair["bytecode cached"].summary()})

    eprint("import audit")
    audits = {
        "validate": import_audit(["-m", "podium", "validate", ARTICLE]),
        "help": import_audit(["-m", "podium", "--help"], repeats=3),
        "baseline_libs": import_audit(["-c", "import pydantic, jinja2, typer, ruamel.yaml"],
                                      repeats=3),
    }
    results["imports"] = audits

    by_label = {c["label"]: c for c in results["commands"]}
    cached = {c["label"]: c["cached"] for c in results["bytecode_cached"]}
    # in-process validate_file (steady, best of 5): the precise view of cost per step
    eprint("in-process validate_file per size")
    wait_for_quiet()
    from podium.check.validate import validate_file

    inproc: dict[int, float] = {}
    for n in SIZES:
        validate_file(files[n])
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            validate_file(files[n])
            best = min(best, time.perf_counter() - t0)
        inproc[n] = round(best * 1000, 2)
    in_lo = (inproc[200] - inproc[50]) / 150
    in_hi = (inproc[800] - inproc[200]) / 600
    med = {n: by_label[f"podium validate linear-{n}"]["median_ms"] for n in SIZES}
    mins = {n: by_label[f"podium validate linear-{n}"]["min_ms"] for n in SIZES}
    slope_lo = (med[200] - med[50]) / 150
    slope_hi = (med[800] - med[200]) / 600
    # the verdict uses the minima: the least disturbed estimate when other work shares the CPUs
    min_lo = (mins[200] - mins[50]) / 150
    min_hi = (mins[800] - mins[200]) / 600
    results["scaling"] = {
        "median_ms": med, "min_ms": mins,
        "ms_per_step_50_to_200": round(slope_lo, 3),
        "ms_per_step_200_to_800": round(slope_hi, 3),
        "ratio": round(slope_hi / slope_lo, 2) if slope_lo > 0 else None,
        "min_ms_per_step_50_to_200": round(min_lo, 3),
        "min_ms_per_step_200_to_800": round(min_hi, 3),
        "min_ratio": round(min_hi / min_lo, 2) if min_lo > 0 else None,
        "in_process_best_ms": inproc,
        "in_process_ms_per_step_50_to_200": round(in_lo, 3),
        "in_process_ms_per_step_200_to_800": round(in_hi, 3),
        "in_process_ratio": round(in_hi / in_lo, 2) if in_lo > 0 else None,
        # the verdict uses the in-process timings: differences of whole-process times carry
        # a few ms of noise each, which is 10-20 % of the 50→200 difference
        "linear": bool(in_lo > 0 and in_hi / in_lo <= 1.25),
    }
    verdicts = []
    for label, (limit, desc) in TARGETS.items():
        m = by_label[label]["median_ms"]
        verdicts.append({"target": desc, "measured_median_ms": m, "limit_ms": limit,
                         "pass": m < limit,
                         "bytecode_cached_median_ms": cached.get(label, {}).get("median_ms")})
    verdicts.append({"target": "validate cost linear in steps (marginal ms/step 200→800 within "
                               "1.25x of 50→200, in-process validate_file)",
                     "measured": f"{in_lo:.3f} → {in_hi:.3f} ms/step (whole processes, "
                                 f"minima: {min_lo:.3f} → {min_hi:.3f})",
                     "pass": results["scaling"]["linear"]})
    results["targets"] = verdicts
    results["elapsed_s"] = round(time.perf_counter() - started, 1)
    out = write_json("cli.json", results)

    # ------------------------------------------------------------------ report
    m = results["machine"]
    print(f"## podium CLI, cold processes ({args.runs} runs after {args.warmups} warmups)\n")
    print(f"Machine: {m['nproc']} CPUs, {m['cpu_model']}, Python {m['python']}, "
          f"git {m['git']['head']}{' (dirty: ' + ', '.join(m['git']['dirty']) + ')' if m['git']['dirty'] else ''}\n")
    rows = []
    for c in results["commands"]:
        rows.append([c["label"], c["median_ms"], c["min_ms"], c["max_ms"], c["rss_median_mib"]])
    print(md_table(["command", "median ms", "min ms", "max ms", "peak RSS MiB"], rows))
    if results["bytecode_cached"]:
        bc = m.get("podium_bytecode", {})
        print(f"\npodium's bytecode: {bc.get('with_fresh_bytecode', '?')} of "
              f"{bc.get('podium_py_files', '?')} source files have up-to-date bytecode as "
              "measured; interleaved A/B against a private, warm PYTHONPYCACHEPREFIX:\n")
        print(md_table(["command", "as is median ms", "bytecode cached median ms",
                        "difference ms"],
                       [[c["label"], c["as_is"]["median_ms"], c["cached"]["median_ms"],
                         round(c["as_is"]["median_ms"] - c["cached"]["median_ms"], 1)]
                        for c in results["bytecode_cached"]]))
    s = results["scaling"]
    print(f"\nScaling (validate): medians {s['median_ms']} ms, marginal "
          f"{s['ms_per_step_50_to_200']} ms/step (50→200), {s['ms_per_step_200_to_800']} "
          f"ms/step (200→800), ratio {s['ratio']}; minima {s['min_ms']} ms, marginal "
          f"{s['min_ms_per_step_50_to_200']} → {s['min_ms_per_step_200_to_800']} ms/step, ratio "
          f"{s['min_ratio']}; in-process validate_file {s['in_process_best_ms']} ms, marginal "
          f"{s['in_process_ms_per_step_50_to_200']} → {s['in_process_ms_per_step_200_to_800']} "
          f"ms/step, ratio {s['in_process_ratio']} → {'linear' if s['linear'] else 'NOT linear'}")
    print("\n### Targets\n")
    print(md_table(["target", "measured", "result"],
                   [[v["target"], v.get("measured", f"{v.get('measured_median_ms')} ms median"),
                     "PASS" if v["pass"] else "FAIL"] for v in verdicts]))
    a = audits["validate"]
    print("\n### Imports of `podium validate`\n")
    print(f"- modules imported: {a['modules']} (sum of self import time "
          f"{a['total_self_ms']} ms under -X importtime)")
    print(f"- forbidden (model SDK / web / TUI) loaded: {a['forbidden_loaded'] or 'none'}")
    print(f"- rich loaded: {'yes' if a['rich_loaded'] else 'no'}")
    print(f"- third-party packages: {', '.join(a['third_party_packages'])}")
    print(f"- notable modules: {', '.join(a['notable_modules'])}")
    print("- self import time by top-level package (ms, median of 5): " + ", ".join(
        f"{k} {v}" for k, v in list(a["by_package_ms"].items())[:12]))
    print("- podium modules (self ms, includes compiling from source): " + ", ".join(
        f"{n} {v}" for n, v in a["podium_modules_self_ms"][:8]))
    h = audits["help"]
    print(f"\n`podium --help` imports {h['modules']} modules; third-party: "
          f"{', '.join(h['third_party_packages'])}; forbidden: {h['forbidden_loaded'] or 'none'}")
    print(f"\nJSON: {out.relative_to(REPO)} · elapsed {results['elapsed_s']} s")
    assert not a["forbidden_loaded"], f"podium validate imported {a['forbidden_loaded']}"


if __name__ == "__main__":
    main()
