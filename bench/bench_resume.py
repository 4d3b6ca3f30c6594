"""What resume's read of a run's history costs: the engine's fold (engine/history.py
`restart_of`) over the typed history (`RunCatalog.history`, what resume reads since
decision 0033) against the same fold over the stored dicts (`events`, what it read before),
for a stored run of the 490-iteration set loop (about 1,500 events), in-process on SQLite.
Interleaved A/B, median of `--repeat`.

    .venv/bin/python bench/bench_resume.py [--repeat 15]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from bench_store import LOOP as _STORE_LOOP  # noqa: E402  (the store bench's set loop)

LOOP = _STORE_LOOP.replace("N", "490")  # 490 steps: 1,962 events


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["PODIUM_HOME"] = str(Path(tmp) / "home")
        os.environ.pop("PODIUM_STORE", None)
        from podium.app.home import open_store
        from podium.app.launch import LaunchOptions
        from podium.app.runs import StartRequest, start_run
        from podium.engine.history import restart_of
        from podium.language.load import load_workflow

        path = Path(tmp) / "loop.yaml"
        path.write_text(LOOP, encoding="utf-8")
        wf = load_workflow(path).model
        assert wf is not None
        store = open_store()
        done = start_run(store, StartRequest(wf, path, {}),
                         LaunchOptions(verbosity=0, interactive=False))
        run = store.get_run(done.result.run_id)
        cp = store.latest_checkpoint(run.id)
        n = len(store.events(run.id))

        def fold(read: str) -> float:
            started = time.perf_counter()
            events = store.history(run.id) if read == "typed" else store.events(run.id)
            restart_of(events, cp, inputs=run.inputs, entry_point="count", default_max=500)
            return time.perf_counter() - started

        times: dict[str, list[float]] = {"typed": [], "dicts": []}
        for _ in range(args.repeat):
            for read in ("typed", "dicts"):
                times[read].append(fold(read))
        store.close()
    print(json.dumps({"events": n, "repeat": args.repeat, **{
        f"{k}_ms_median": round(statistics.median(v) * 1000, 1) for k, v in times.items()}}))


if __name__ == "__main__":
    main()
