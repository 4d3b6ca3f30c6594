"""Where a fanned-out member's CPU goes: one for-each run in this process (bench_foreach.py's
lab and in-process engine, the SDK built before timing), to be sampled by py-spy, and a
reader of py-spy's raw output that splits a frame's samples by its callees.

    .venv/bin/py-spy record -r 500 -f raw -o /tmp/openai.raw -- \\
        .venv/bin/python bench/profile_fanout.py run openai 3000
    .venv/bin/python bench/profile_fanout.py split /tmp/openai.raw "serve (podium/aio.py"
    .venv/bin/python bench/profile_fanout.py split /tmp/openai.raw "OpenAISession._create"

`run PROVIDER ITEMS` (scripted, openai, anthropic; 100 at once, answers after 50 ms) prints
the run's wall and CPU time on stderr. `split RAW FRAME` takes the samples whose stack holds a
frame containing FRAME (the first such frame of each stack) and prints the share of each
callee beneath it, `<self>` for the frame's own. The members run on podium's event-loop
thread (podium/aio.py `serve`): split at that frame to leave out the idle threads.

Install py-spy with `uv pip install --python .venv/bin/python py-spy` (not a dependency).
"""

from __future__ import annotations

import collections
import io
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def run(provider: str, items: int) -> None:
    from bench_foreach import Stub, inprocess_engine, lab, warm_sdk

    stub = Stub(0.05, provider) if provider != "scripted" else None
    root = Path(tempfile.mkdtemp(prefix="podium-profile-fanout-"))
    paths = lab(root, items, 100, 0.05, provider)
    wf, store, engine = inprocess_engine(paths["workflow"], paths["inputs"],
                                         paths["responses"], root / "home")
    warm_sdk(wf, engine)
    shown, sys.stderr = sys.stderr, io.StringIO()  # the console sink at -q
    try:
        t0, cpu0 = time.perf_counter(), time.process_time()
        result = engine.run()
        store.commit()
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    finally:
        sys.stderr = shown
        store.close()
        if stub is not None:
            stub.close()
    print(f"{provider} x {items}: wall {wall:.3f} s, CPU {cpu:.3f} s "
          f"({1000 * cpu / items:.3f} ms per member), exit {result.exit_code}", file=sys.stderr)


def _frame(text: str) -> str:
    """'fn (path/to/site-packages/pkg/mod.py:12)' -> 'fn (pkg/mod.py)'."""
    m = re.match(r"(.*) \((.*?):\d+\)$", text)
    if not m:
        return text
    fn, file = m.groups()
    return f"{fn} ({file.split('site-packages/')[-1].split('src/')[-1]})"


def split(raw: Path, frame: str) -> None:
    callees: collections.Counter[str] = collections.Counter()
    total = 0
    with raw.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            frames = [_frame(f) for f in stack.split(";")]
            at = next((i for i, f in enumerate(frames) if frame in f), None)
            if at is None:
                continue
            total += int(count)
            callees[frames[at + 1] if at + 1 < len(frames) else "<self>"] += int(count)
    if not total:
        raise SystemExit(f"no sample has a frame containing {frame!r}")
    print(f"{total} samples under {frame!r}")
    for callee, n in callees.most_common(25):
        print(f"{100 * n / total:6.1f} %  {callee}")


def main() -> None:
    args = sys.argv[1:]
    if len(args) == 3 and args[0] == "run" and args[1] in ("scripted", "openai", "anthropic"):
        run(args[1], int(args[2]))
    elif len(args) == 3 and args[0] == "split":
        split(Path(args[1]), args[2])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
