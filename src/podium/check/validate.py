"""`validate`: load a workflow, run every check, and return all diagnostics sorted."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from podium.language.load import LoadResult, load_workflow


def validate_file(path: Path, *, visited: tuple[Path, ...] = (),
                  environ: Mapping[str, str] | None = None) -> LoadResult:
    """Load `path` and run the semantic checks when the schema holds.

    Raises FileUnreadable (from podium.language.source) when the file cannot be read.
    """
    from podium.check.semantic import Checker

    with _collector_paused():
        result = load_workflow(path, environ)
        if result.model is not None:
            Checker(result, visited_files=visited).run()
    return result


# Loading and checking a file allocates hundreds of thousands of objects that live until the
# checks end (the document, its source map, the models, every template's tree); the cyclic
# collector walked them again and again (a sixth of validate_file's time for 800 steps, a
# fifth of a whole `podium validate` of 3,200: its cost grew faster than the file). Hardly
# any of them is in a cycle, so the collector waits until the file is checked (nested and
# concurrent checks share one pause; the collector is left off if it was off).
_pause = threading.Lock()
_paused = [0, False]  # checks in progress, whether the collector was on before the first


@contextmanager
def _collector_paused() -> Iterator[None]:
    with _pause:
        if _paused[0] == 0:
            _paused[1] = gc.isenabled()
            gc.disable()
        _paused[0] += 1
    try:
        yield
    finally:
        with _pause:
            _paused[0] -= 1
            if _paused[0] == 0 and _paused[1]:
                gc.enable()
