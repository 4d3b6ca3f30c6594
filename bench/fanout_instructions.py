"""Instructions per fanned-out member (issue 33): a count that the machine's speed does not
move, for comparing two source trees on a VM whose wall and CPU times drift by 10-25 %
between runs of the same code.

For each tree, two processes run under valgrind's cachegrind (`--cache-sim=no`, the main
process only, `PYTHONHASHSEED=0`, one shared bytecode cache): one runs a WARM-member
scripted for-each and then an ITEMS-member one in-process (bench_foreach.py's workflow, as
`podium run` builds it), the other runs the warm-up alone. The difference, divided by ITEMS,
is what one member of a warm run costs: imports and first-use costs stay in the warm-up.
The trees alternate, ROUNDS times; the report gives each tree's median and the ratio.

The members' commits batch by time (a 5 ms window), and valgrind runs the code about 50
times slower, so a batch holds fewer members than it does natively: compare trees with the
same settings, not these counts with native CPU times.

Usage:
    .venv/bin/python bench/fanout_instructions.py [--items 500] [--warm 50] [--rounds 2]
        [--against DIR]     (DIR holds another tree's src/, e.g. from `git archive REV src`)

Needs valgrind (`apt-get install -y valgrind`). Prints Markdown on stdout.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PYTHON, eprint, md_table

ROOT = Path(__file__).resolve().parent.parent


def child(sizes: list[int]) -> None:
    """Run one scripted fan-out of each size in turn, in this process."""
    import bench_foreach as bf

    root = Path(tempfile.mkdtemp(prefix="podium-fanout-ir-"))
    for i, items in enumerate(sizes):
        (root / f"lab{i}").mkdir()
        paths = bf.lab(root / f"lab{i}", items, 100, 0.05, "scripted")
        _, store, engine = bf.inprocess_engine(paths["workflow"], paths["inputs"],
                                               paths["responses"], root / f"home{i}")
        shown, sys.stderr = sys.stderr, io.StringIO()  # the console sink at -q
        try:
            result = engine.run()
            store.commit()
        finally:
            sys.stderr = shown
            store.close()
        if result.exit_code != 0:
            raise SystemExit(f"the {items}-member fan-out ended with {result.exit_code}")
    shutil.rmtree(root, ignore_errors=True)


def instructions(src: Path, sizes: list[int], cache: Path) -> int:
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": "0",
           "PYTHONPYCACHEPREFIX": str(cache)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the first run fills the cache
    done = subprocess.run(
        ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
         PYTHON, __file__, "--child", *map(str, sizes)],
        env=env, cwd=ROOT, capture_output=True, text=True, check=False)
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"valgrind failed ({done.returncode}): {done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child([int(n) for n in sys.argv[2:]])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", type=int, default=500)
    ap.add_argument("--warm", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--against", type=Path, help="a directory holding another tree's src/")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install -y valgrind)")
    trees = {"tree": ROOT / "src"}
    if args.against is not None:
        trees = {str(args.against): args.against / "src", **trees}
    per: dict[str, list[float]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory(prefix="podium-fanout-ir-cache-") as cache_dir:
        cache = Path(cache_dir)
        for src in trees.values():  # bytecode first, so no round pays for compiling
            instructions(src, [args.warm], cache)
        for r in range(args.rounds):
            for name, src in trees.items():
                warm = instructions(src, [args.warm], cache)
                both = instructions(src, [args.warm, args.items], cache)
                per[name].append((both - warm) / args.items)
                eprint(f"round {r + 1}/{args.rounds} {name}: {per[name][-1] / 1e6:.3f} M "
                       "instructions per member")
    rows = [[name, f"{statistics.median(v) / 1e6:.3f} M", f"{min(v) / 1e6:.3f} M"]
            for name, v in per.items()]
    print(f"Instructions per member of a warm {args.items}-member scripted fan-out (after a "
          f"{args.warm}-member warm-up), {args.rounds} interleaved round(s):\n")
    print(md_table(["tree", "median", "min"], rows))
    if len(trees) == 2:
        before, after = (statistics.median(v) for v in per.values())
        print(f"\ntree / {next(iter(trees))}: {after / before:.3f}")


if __name__ == "__main__":
    main()
