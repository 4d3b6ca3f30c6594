"""How many store transactions a scripted for-each commits (issue 33): the in-process run of
bench_foreach.py's workflow (ITEMS x 50 ms x max_concurrent 100), counting the SQLite store's
`_flush` calls (one transaction each). A count, not a timing: it does not move with the load.

Usage:
    .venv/bin/python bench/fanout_commits.py [ITEMS]     (PYTHONPATH=DIR/src for another tree)
"""

from __future__ import annotations

import io
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_foreach as bf


def main() -> None:
    items = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    tmp = Path(tempfile.mkdtemp(prefix="podium-commits-"))
    paths = bf.lab(tmp, items, 100, 0.05, "scripted")
    import podium.store.sqlite as sqlite_store

    count = [0]
    flush = sqlite_store.SQLiteStore._flush

    def counted(self: sqlite_store.SQLiteStore, run_ids: list[str]) -> None:
        count[0] += 1
        flush(self, run_ids)

    sqlite_store.SQLiteStore._flush = counted  # type: ignore[method-assign]
    err, sys.stderr = sys.stderr, io.StringIO()  # the console sink at -q
    _, store, engine = bf.inprocess_engine(paths["workflow"], paths["inputs"],
                                           paths["responses"], tmp / "home")
    t0, cpu0 = time.perf_counter(), time.process_time()
    engine.run()
    store.commit()
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    store.close()
    sys.stderr = err
    check = bf.store_check(tmp / "home", None)
    print(f"{items} items: {count[0]} transactions, {check['events_in_store']} events "
          f"(contiguous: {check['contiguous']}), wall {wall:.3f} s, CPU {cpu:.3f} s")


if __name__ == "__main__":
    main()
