"""Loading a workflow to run it: validated first; its diagnostics go to the surface's stream."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from podium import exitcodes
from podium.language.model import WorkflowFile


def load_valid(path: Path, warnings: list[str] | None = None, err: TextIO | None = None
               ) -> tuple[WorkflowFile | None, int]:
    """Validate a workflow for running: diagnostics on stderr; (model, 0) or (None, exit code).

    With `warnings`, warning lines are collected there (to print after the run's first line)
    unless the workflow is invalid."""
    from podium.check.validate import validate_file
    from podium.language.source import FileUnreadable

    err = err or sys.stderr

    try:
        result = validate_file(path)
    except FileUnreadable as exc:
        err.write(f"podium: {exc}\n")
        return None, exitcodes.FILE_ERROR
    defer = warnings is not None and not result.sink.errors and result.model is not None
    for d in result.sink.sorted():
        if defer and d.severity == "warning" and warnings is not None:
            warnings.append(d.format())
        else:
            err.write(d.format() + "\n")
    if result.sink.errors or result.model is None:
        err.write(f"podium: {result.shown} is invalid; nothing was run\n")
        return None, exitcodes.INVALID
    return result.model, exitcodes.OK
