"""CPU per agent call, without what a run pays once: the marginal cost of a call.

`bench_foreach.py --items N --concurrency 1 --latency 0.0001 --warm-sdk` divides a whole
run's CPU by its N calls, so a short run also charges each call a share of the run's one-time
work (the first template compile, the output validator's import, the collector's full
passes). This runs the same in-process for-each at two sizes, interleaved with the other
variants, and reports (CPU(large) - CPU(small)) / (large - small): what one more call costs.

Usage:
    .venv/bin/python bench/cpu_per_call.py PROVIDER ROUNDS VARIANT... [--sizes 400,2000]
    e.g. cpu_per_call.py openai 3 /tmp/before0 tree

A variant is a folder holding a `src/` put first on PYTHONPATH (see ab_foreach.py), or `tree`.
Prints per variant the median over the rounds of the marginal CPU per call, and the CPU per
item of each size.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ab_foreach
import bench_foreach as bf


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("provider", choices=["openai", "anthropic"])
    ap.add_argument("rounds", type=int)
    ap.add_argument("variants", nargs="+", help="source folders (with src/), or `tree`")
    ap.add_argument("--sizes", default="400,2000", help="the two run sizes, in calls")
    a = ap.parse_args()
    small, large = (int(n) for n in a.sizes.split(","))
    prov, rounds, variants = a.provider, a.rounds, a.variants
    stub = bf.Stub(0.0001, prov)
    os.environ["PODIUM_BENCH_WARM_SDK"] = "1"
    rows: dict[str, list[tuple[float, float, float]]] = {v: [] for v in variants}
    try:
        for r in range(rounds + 1):  # the first round warms the caches and is dropped
            for v in variants:
                per_small = ab_foreach.one(v, prov, small, 1, 0.0001)[1]
                per_large = ab_foreach.one(v, prov, large, 1, 0.0001)[1]
                marginal = (per_large * large - per_small * small) / (large - small)
                if r:
                    rows[v].append((marginal, per_small, per_large))
    finally:
        stub.close()
    print(f"{prov}: CPU per call, one at a time, answers after 0.1 ms; median of {rounds}")
    for v, got in rows.items():
        m, s, lg = (statistics.median(x[i] for x in got) for i in range(3))
        print(f"  {v}: marginal {m:.3f} ms per call (per item: {s:.3f} ms at {small}, "
              f"{lg:.3f} ms at {large})")


if __name__ == "__main__":
    main()
