"""How podium asks Python's cyclic garbage collector to keep out of its way while it works on
objects that are hardly ever in a cycle: `paused()` while a file is loaded and checked,
`relaxed()` while a run runs. Both count their users (nested and concurrent checks and runs
share one setting, under one lock) and hand the collector back as it was when the last one
ends. Reference counting still frees every object that is not in a cycle at once; only the
collector's passes over the live heap are spared."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

# A run's young generation is collected after this many more allocations than frees of
# tracked objects, not after Python's 700. A wide fan-out keeps its members' results, events
# and frames alive while it runs: at 700 the collector walked them about every two members
# and went through the whole heap (every module, model and template) a few times a run, a
# tenth of a scripted member's CPU (docs/performance.md, "Eighth pass"). At most this many
# objects in cycles wait longer to be freed: a few megabytes.
RUN_YOUNG_THRESHOLD = 10_000

_lock = threading.Lock()
_paused = [0, False]  # checks in progress, whether the collector was on before the first
_freeze_checked = [False]  # freeze what a check leaves alive (one_check_per_process)
_runs = [0]  # runs in progress
_before: list[tuple[int, ...]] = []  # the thresholds before the first run, while runs run


@contextmanager
def paused() -> Iterator[None]:
    """The collector off (a file's document, source map, models and template trees are
    hundreds of thousands of objects that live until the checks end, and hardly any is in a
    cycle); left off if it was off."""
    with _lock:
        if _paused[0] == 0:
            _paused[1] = gc.isenabled()
            gc.disable()
        _paused[0] += 1
    try:
        yield
    finally:
        with _lock:
            _paused[0] -= 1
            if _paused[0] == 0:
                if _freeze_checked[0]:
                    gc.freeze()
                if _paused[1]:
                    gc.enable()


def one_check_per_process() -> None:
    """For a command that checks its workflows on one thread and then works or exits
    (`podium validate`, `podium run`, through the console script's cli/entry.py `ready`): when a check ends, what it leaves alive (the
    document, the models, the templates' trees and their caches) is frozen, as the start-up's
    objects are, instead of being walked by the first young collection after it (a tenth
    of `validate` of 800 steps). They are in no cycle (tested): reference counting still
    frees them. Not for a process that checks while other threads work (the console, a
    worker): a freeze takes every object of the process out of the collector's reach."""
    _freeze_checked[0] = True


@contextmanager
def relaxed() -> Iterator[None]:
    """The young generation's threshold raised to RUN_YOUNG_THRESHOLD (never lowered, and
    left at 0 if the process set 0), the older generations' left as they are."""
    with _lock:
        if _runs[0] == 0:
            before = gc.get_threshold()
            _before[:] = [before]
            if 0 < before[0] < RUN_YOUNG_THRESHOLD:
                gc.set_threshold(RUN_YOUNG_THRESHOLD, *before[1:])
        _runs[0] += 1
    try:
        yield
    finally:
        with _lock:
            _runs[0] -= 1
            if _runs[0] == 0 and _before:
                gc.set_threshold(*_before.pop())
