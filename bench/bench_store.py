"""What the run store costs: per-step overhead of committing every step (events + checkpoint)
on the 490-iteration set loop, in-process, against the same loop with no store; and the store's
size per 1,000 steps. With --store postgresql://..., the same on a PostgreSQL store (its size
is what the run's rows and indexes take in the database).

    .venv/bin/python bench/bench_store.py [--repeat 5] [--store postgresql://USER@HOST/DB]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

LOOP = """
workflow:
  name: store-loop
  entry_point: count
  limits: {max_iterations: 500}
agents:
  - name: count
    type: set
    value: "{{ (count.output if count is defined else 0) + 1 }}"
    output_type: integer
    routes:
      - {to: $end, when: "{{ count.output >= N }}"}
      - {to: count}
"""


def _engine(path: Path, store: object | None) -> object:
    from podium.check.validate import validate_file
    from podium.engine.run import Engine, Persistence, RunConfig
    from podium.events.sinks.jsonl import MemorySink
    from podium.gates.base import ChainAnswerer
    from podium.providers.base import ProviderRegistry

    wf = validate_file(path).model
    assert wf is not None
    # a checkpoint after every step (the step's commit point), as make_engine wires a kept run
    engine = Engine(wf, path, inputs={}, providers=ProviderRegistry(),
                    answerer=ChainAnswerer([]),
                    config=RunConfig(persistence=Persistence(checkpoints=store is not None)))
    engine.bus.add(MemorySink())
    if store is not None:  # wired as app/launch.py's make_engine wires it
        engine.bus.add_committer(store)  # type: ignore[attr-defined]
    return engine


def _pg_size(url: str) -> int:
    import psycopg

    with psycopg.connect(url) as con:
        row = con.execute("SELECT sum(pg_total_relation_size(c)) FROM unnest(ARRAY['runs', "
                          "'events', 'checkpoints', 'gates', 'leases']) AS c").fetchone()
    return int(row[0] or 0) if row else 0


def measure(steps: int, repeat: int, url: str | None = None) -> dict[str, float]:
    from podium.engine.run import file_hash
    from podium.store.base import RunRecord
    from podium.store.postgres import PostgresStore
    from podium.store.sqlite import SQLiteStore

    with tempfile.TemporaryDirectory(prefix="podium-bench-store-") as tmp:
        wf = Path(tmp) / "loop.yaml"
        wf.write_text(LOOP.replace("N", str(steps)), encoding="utf-8")
        bare, stored = [], []
        size = 0
        for i in range(repeat):
            engine = _engine(wf, None)
            t = time.perf_counter()
            result = engine.run()  # type: ignore[attr-defined]
            bare.append(time.perf_counter() - t)
            assert result.iterations == steps
            home = Path(tmp) / f"home{i}"
            store = PostgresStore(url) if url else SQLiteStore(home / "podium.db")
            before = _pg_size(url) if url else 0
            engine = _engine(wf, store)
            store.create_run(RunRecord(engine.run_id, "store-loop", str(wf),  # type: ignore[attr-defined]
                                       file_hash(wf), {}))
            t = time.perf_counter()
            result = engine.run()  # type: ignore[attr-defined]
            stored.append(time.perf_counter() - t)
            store.close()
            assert result.iterations == steps
            size = _pg_size(url) - before if url else \
                sum(p.stat().st_size for p in home.iterdir())
        best_bare, best_stored = min(bare), min(stored)
        return {
            "steps": steps,
            "bare_ms_per_step": 1000 * best_bare / steps,
            "stored_ms_per_step": 1000 * best_stored / steps,
            "store_overhead_ms_per_step": 1000 * (best_stored - best_bare) / steps,
            "store_bytes": size,
            "store_kib_per_1000_steps": size / steps * 1000 / 1024,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--store", default=None, help="a postgresql:// URL (default: SQLite)")
    args = parser.parse_args()
    rows = [measure(n, args.repeat, args.store) for n in (100, 490)]
    print("| steps | no store, ms/step | store, ms/step | store overhead, ms/step | store size "
          "per 1,000 steps |")
    print("|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['steps']} | {r['bare_ms_per_step']:.3f} | {r['stored_ms_per_step']:.3f} | "
              f"{r['store_overhead_ms_per_step']:.3f} | {r['store_kib_per_1000_steps']:.0f} KiB |")
    out = REPO / "bench" / "results" / ("store-postgres.json" if args.store else "store.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
