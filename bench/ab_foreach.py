"""A/B of the in-process for-each through a real SDK: source trees interleaved run by run.

Each variant is a folder holding a `src/` (e.g. `git archive REV src | tar -x -C DIR`, then
`compileall`), put first on PYTHONPATH for its runs; `tree` is the checkout as it is. The SDK is
imported before timing (as `bench_foreach.py --warm-sdk`), one stub (bench/_stub_llm.py) serves
every run, and the first round is dropped.

Usage:
    .venv/bin/python bench/ab_foreach.py PROVIDER ITEMS CONCURRENCY LATENCY ROUNDS VARIANT...
    e.g. ab_foreach.py openai 1000 100 0.05 3 /tmp/before tree

Prints per variant the median and best engine wall time and CPU per item (all threads).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_foreach as bf


def one(variant: str, prov: str, items: int, conc: int, lat: float) -> tuple[float, float]:
    tmp = Path(tempfile.mkdtemp(prefix="podium-ab-"))
    paths = bf.lab(tmp, items, conc, lat, prov)
    env = dict(os.environ)
    if variant != "tree":
        env["PYTHONPATH"] = str(Path(variant) / "src")
    out = subprocess.run([bf.PYTHON, __file__.replace("ab_foreach.py", "bench_foreach.py"),
                          "--child", str(paths["workflow"]), str(paths["inputs"]),
                          str(paths["responses"]), str(tmp / "home")],
                         env=env, capture_output=True, text=True, check=False)
    if out.returncode:
        raise SystemExit(f"{variant}: the run failed:\n{out.stderr[-2000:]}")
    m = json.loads(out.stdout.strip().splitlines()[-1])
    return m["engine_wall_s"], m["engine_cpu_s"] / items * 1000


def main() -> None:
    if len(sys.argv) < 7:
        raise SystemExit(__doc__)
    prov, items, conc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    lat, rounds, variants = float(sys.argv[4]), int(sys.argv[5]), sys.argv[6:]
    stub = bf.Stub(lat, prov)
    os.environ["PODIUM_BENCH_WARM_SDK"] = "1"
    res: dict[str, list[tuple[float, float]]] = {v: [] for v in variants}
    try:
        for r in range(rounds + 1):
            for v in variants:
                row = one(v, prov, items, conc, lat)
                if r:
                    res[v].append(row)
    finally:
        stub.close()
    for v, rows in res.items():
        walls, cpus = [x[0] for x in rows], [x[1] for x in rows]
        print(f"{v}: wall median {statistics.median(walls):.3f} s (best {min(walls):.3f}), "
              f"CPU per item median {statistics.median(cpus):.3f} ms (best {min(cpus):.3f})")


if __name__ == "__main__":
    main()
