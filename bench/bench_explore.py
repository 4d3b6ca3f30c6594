"""`podium explore` of the article's dev-review: the whole command in a fresh process (wall
time, CPU time and peak RSS) and the search alone in-process, with the number of states.

Usage:
    .venv/bin/python bench/bench_explore.py [--runs 5]

Prints a Markdown table on stdout.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / "examples" / "dev-review" / "workflow.yaml"


def _process(runs: int) -> tuple[list[float], list[float], int]:
    walls, cpus, rss = [], [], 0
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "podium", "explore", str(WORKFLOW), "--require",
                        "human_acceptance before accepted"], check=True,
                       stdout=subprocess.DEVNULL, env={**os.environ, "NO_COLOR": "1"})
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        rss = max(rss, after.ru_maxrss)
    return walls, cpus, rss


def _in_process(runs: int) -> tuple[list[float], int]:
    from podium.check.validate import validate_file
    from podium.explore import explore

    times, states = [], 0
    for _ in range(runs):
        result = validate_file(WORKFLOW)
        start = time.perf_counter()
        found = explore(result, ["human_acceptance before accepted"])
        times.append(time.perf_counter() - start)
        states = found.states
    return times, states


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    walls, cpus, rss = _process(args.runs)
    search, states = _in_process(args.runs)
    print("| measure | median | min |")
    print("|---|---:|---:|")
    print(f"| `podium explore` dev-review, wall | {statistics.median(walls):.2f} s | "
          f"{min(walls):.2f} s |")
    print(f"| `podium explore` dev-review, CPU | {statistics.median(cpus):.2f} s | "
          f"{min(cpus):.2f} s |")
    print(f"| the search alone (in-process, {states:,} states) | "
          f"{statistics.median(search):.2f} s | {min(search):.2f} s |")
    print(f"| peak RSS of the command | {rss / 1024:.0f} MB | |")


if __name__ == "__main__":
    main()
