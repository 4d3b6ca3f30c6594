"""A/B of the in-process for-each through a real SDK: source trees interleaved run by run.

Each variant is a folder holding a `src/` (e.g. `git archive REV src | tar -x -C DIR`, then
`compileall`), put first on PYTHONPATH for its runs; a git revision (a commit, a tag,
`HEAD~1`), which is archived and compiled so into a temporary folder; or `tree`, the checkout
as it is. The SDK is
imported before timing (as `bench_foreach.py --warm-sdk`), one stub (bench/_stub_llm.py) serves
every run, and the first round is dropped.

Usage:
    .venv/bin/python bench/ab_foreach.py PROVIDER ITEMS CONCURRENCY LATENCY ROUNDS VARIANT...
    e.g. ab_foreach.py openai 1000 100 0.05 3 /tmp/before tree
         ab_foreach.py scripted 1000 100 0.05 8 v0.9.0 tree

Prints per variant the median and best engine wall time and CPU per item (all threads),
and each later variant's medians against the first's (above 1: slower).
"""

from __future__ import annotations

import json
import os
import shutil
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


def _source(variant: str, scratch: Path) -> str:
    """`variant` as a folder holding a `src/` (or `tree`): a git revision is archived there."""
    if variant == "tree" or Path(variant).is_dir():
        return variant
    root = Path(__file__).resolve().parent.parent
    rev = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{variant}^{{commit}}"],
                         cwd=root, capture_output=True, text=True, check=False)
    if rev.returncode:
        raise SystemExit(f"{variant}: neither a folder, `tree` nor a git revision")
    into = scratch / rev.stdout.strip()[:12]
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "archive", rev.stdout.strip(), "src"], cwd=root,
                             capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    subprocess.run([bf.PYTHON, "-m", "compileall", "-q", str(into / "src")], check=True)
    return str(into)


def main() -> None:
    if len(sys.argv) < 7:
        raise SystemExit(__doc__)
    prov, items, conc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    lat, rounds, named = float(sys.argv[4]), int(sys.argv[5]), sys.argv[6:]
    scratch = Path(tempfile.mkdtemp(prefix="podium-ab-revs-"))
    try:
        _compare(prov, items, conc, lat, rounds, sources={v: _source(v, scratch) for v in named})
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _compare(prov: str, items: int, conc: int, lat: float, rounds: int, *,
             sources: dict[str, str]) -> None:
    """Each variant's runs, interleaved; `sources`: a variant's name -> its folder (or tree)."""
    named, variants = list(sources), list(sources.values())
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
    first: tuple[float, float] | None = None
    for name, v in sources.items():
        walls, cpus = [x[0] for x in res[v]], [x[1] for x in res[v]]
        wall, cpu = statistics.median(walls), statistics.median(cpus)
        against = "" if first is None else \
            f"; against {named[0]}: wall {wall / first[0]:.3f}, CPU {cpu / first[1]:.3f}"
        first = first or (wall, cpu)
        print(f"{name}: wall median {wall:.3f} s (best {min(walls):.3f}), "
              f"CPU per item median {cpu:.3f} ms (best {min(cpus):.3f}){against}")


if __name__ == "__main__":
    main()
