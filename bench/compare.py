"""Regression guard: the cold paths of the working tree against a revision, interleaved.

Builds REV's `src/` into a temp dir (`git archive REV src | tar -x`) and runs every cold path
of bench_conductor.py (--help, validate of the article and of 800 steps, a 2-step run, and the
per-step cost of set and script steps through the whole `run`) with REV first on PYTHONPATH
and with the tree as it is (uncommitted changes included), alternating run by run (and which
goes first, round by round), so load drift hits both. Both use one private bytecode cache
(PYTHONPYCACHEPREFIX in the temp dir, filled by the warm-up rounds), as an install has.
Prints per path both medians and the ratio tree / REV (above 1: the tree is slower), of wall
time and of the child's CPU time (user + system, from wait4: steadier on a shared machine).

REV defaults to the newest release tag (`git describe --tags --abbrev=0 --match 'v*'`);
without one it says so and compares with HEAD, which shows what uncommitted changes cost.
REV runs with this venv's libraries: a revision that needs other versions is not comparable.

Usage:
    .venv/bin/python bench/compare.py [--against REV] [--rounds 7] [--warmups 2]
                                      [--path LABEL ...] [--json FILE]

LABEL is one of: help, "validate article", "validate linear-800", "run two-step",
"run set-10", "run set-410", "run script-10", "run script-410" (the per-step rows need both
lengths of a loop). Writes bench/results/compare.json (or --json FILE).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _cold_paths import Samples, podium_paths, write_workflows
from _common import PODIUM, REPO, eprint, md_table, run_child, wait_for_quiet, write_json


def git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True,
                          check=False)


def default_rev() -> tuple[str, str]:
    """(rev, why): the newest v* tag, else HEAD."""
    tag = git("describe", "--tags", "--abbrev=0", "--match", "v*")
    if tag.returncode == 0 and tag.stdout.strip():
        return tag.stdout.strip(), "the newest release tag"
    return "HEAD", "no release tag (v*) in this repository: comparing with HEAD"


def export(rev: str, into: Path) -> str:
    """REV's src/ under `into`; returns its short commit id."""
    commit = git("rev-parse", "--short", f"{rev}^{{commit}}")
    if commit.returncode != 0:
        raise SystemExit(f"compare: unknown revision {rev!r}: {commit.stderr.strip()}")
    into.mkdir(parents=True)
    archive = subprocess.Popen(["git", "archive", rev, "src"], cwd=REPO, stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", str(into)], stdin=archive.stdout, check=True)
    if archive.wait() != 0:
        raise SystemExit(f"compare: git archive {rev} src failed")
    return commit.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--against", help="a revision (default: newest v* tag, else HEAD)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--warmups", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None,
                        help="where to write the JSON (default: bench/results/compare.json)")
    parser.add_argument("--path", action="append", dest="paths",
                        help="time only this path (repeatable), e.g. --path help")
    args = parser.parse_args()
    started = time.perf_counter()
    rev, why = (args.against, "given") if args.against else default_rev()
    eprint(f"compare: the tree against {rev} ({why})")

    tmp = Path(tempfile.mkdtemp(prefix="podium-compare-"))
    commit = export(rev, tmp / "rev")
    files = write_workflows(tmp / "workflows")
    base = dict(os.environ)
    base.pop("PYTHONDONTWRITEBYTECODE", None)
    base.pop("PYTHONPATH", None)
    base.update({"PYTHONPYCACHEPREFIX": str(tmp / "pycache"), "PODIUM_HOME": str(tmp / "home"),
                 "NO_COLOR": "1"})
    envs = {"rev": {**base, "PYTHONPATH": str(tmp / "rev" / "src")}, "tree": base}
    paths = podium_paths(args.paths)
    samples = {"rev": Samples(), "tree": Samples()}
    cpu = {"rev": Samples(), "tree": Samples()}
    busy = wait_for_quiet()
    for rnd in range(args.warmups + args.rounds):
        eprint(f"round {rnd + 1}/{args.warmups + args.rounds}"
               f"{' (warm-up)' if rnd < args.warmups else ''}")
        order = ("rev", "tree") if rnd % 2 == 0 else ("tree", "rev")
        for p in paths:
            argv = p.argv(PODIUM, files)
            for side in order:
                r = run_child(argv, env=envs[side])
                if r.returncode != 0:
                    raise SystemExit(f"compare: {side} {p.label}: exit code {r.returncode}: "
                                     f"{argv}")
                if rnd >= args.warmups:
                    samples[side].add(p.label, r.wall_s * 1000)
                    cpu[side].add(p.label, r.cpu_s * 1000)

    rows: list[list[Any]] = []
    for p in paths:
        a, b = samples["rev"].median(p.label), samples["tree"].median(p.label)
        ca, cb = cpu["rev"].median(p.label), cpu["tree"].median(p.label)
        assert a is not None
        assert b is not None
        assert ca is not None
        assert cb is not None
        rows.append([p.label, round(a, 1), round(b, 1), f"{b / a:.3f}", round(ca, 1),
                     round(cb, 1), f"{cb / ca:.3f}" if ca > 0 else "-"])
    slopes = {side: s.slopes() for side, s in samples.items()}
    cpu_slopes = {side: s.slopes() for side, s in cpu.items()}
    for key, a in slopes["rev"].items():
        b = slopes["tree"][key]
        ca, cb = cpu_slopes["rev"][key], cpu_slopes["tree"][key]
        rows.append([key + " (ms, slope)", round(a, 3), round(b, 3),
                     f"{b / a:.3f}" if a > 0 else "-", round(ca, 3), round(cb, 3),
                     f"{cb / ca:.3f}" if ca > 0 else "-"])
    results = {"against": rev, "why": why, "commit": commit, "rounds": args.rounds,
               "warmups": args.warmups, "cpu_busy_before": busy,
               "loadavg": os.getloadavg(),
               "samples_ms": {side: s.ms for side, s in samples.items()},
               "cpu_samples_ms": {side: s.ms for side, s in cpu.items()},
               "cpu_per_step_ms": cpu_slopes,
               "medians_ms": {side: {k: statistics.median(v) for k, v in s.ms.items()}
                              for side, s in samples.items()},
               "per_step_ms": slopes, "elapsed_s": round(time.perf_counter() - started, 1)}
    if args.json is not None:
        out = args.json
        out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    else:
        out = write_json("compare.json", results)
    print(f"## The tree against {rev} ({commit}; {why})\n")
    print(f"{args.rounds} interleaved rounds after {args.warmups} warm-ups, cold processes, "
          f"bytecode cached for both; CPUs busy before {busy:.0%}, load average "
          f"{results['loadavg'][0]:.2f}\n")
    print(md_table(["path", f"{rev} median ms", "tree median ms", "tree / rev",
                    f"{rev} CPU ms", "tree CPU ms", "CPU tree / rev"], rows))
    print("\nCPU: the child's user + system time (wait4), median; steadier than wall time "
          "when other work shares the CPUs.")
    print(f"\nJSON: {out} · elapsed {results['elapsed_s']} s")


if __name__ == "__main__":
    main()
