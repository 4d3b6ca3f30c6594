"""Comparing a test run with its expectations: each mismatch becomes one Failure."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from podium.testing.model import Expectation

if TYPE_CHECKING:
    from podium.testing.execute import Failure, TestRun

_MISSING = object()


def compare(expect: Expectation, run: TestRun) -> list[Failure]:
    """Every way the run differs from `expect`, in a fixed order (path first)."""
    from podium.testing.execute import Failure

    out: list[Failure] = []
    if expect.status is None and expect.error is None and run.status not in ("success",
                                                                             "failed"):
        out.append(Failure("unexpected_error", f"the run stopped with status {run.status}: "
                           f"{run.error} (expect status: {run.status} if this is intended)"))
    if expect.steps is not None and expect.steps != run.steps:
        row = first_difference(expect.steps, run.steps)
        out.append(Failure("steps", f"the steps differ from step {row + 1}",
                           list(expect.steps), list(run.steps)))
    if expect.terminal is not None and expect.terminal != run.terminal:
        got = run.terminal or f"none (the run ended with status {run.status})"
        out.append(Failure("terminal", f"terminal: expected {expect.terminal}, got {got}",
                           expect.terminal, run.terminal))
    if expect.status is not None and expect.status != run.status:
        out.append(Failure("status", f"status: expected {expect.status}, got {run.status}",
                           expect.status, run.status))
    if expect.reason is not None and expect.reason not in (run.reason or ""):
        out.append(Failure("reason", f"reason: expected it to contain {expect.reason!r}, got "
                           f"{run.reason!r}", expect.reason, run.reason))
    if expect.output is not None:
        diffs = subset_differences(expect.output, run.output)
        if diffs:
            out.append(Failure("output", "; ".join(diffs), expect.output, run.output,
                               details=diffs))
    if expect.model_calls is not None and expect.model_calls != run.model_calls:
        out.append(Failure("model_calls", f"model calls: expected {expect.model_calls}, got "
                           f"{run.model_calls}", expect.model_calls, run.model_calls))
    if expect.error is not None and expect.error not in (run.error or ""):
        got = repr(run.error) if run.error else f"no error (status {run.status})"
        out.append(Failure("error", f"error: expected a message containing "
                           f"{expect.error!r}, got {got}", expect.error, run.error))
    return out


def first_difference(expected: list[str], actual: list[str]) -> int:
    """The 0-based row where two paths first differ (one past the shorter when one is a
    prefix of the other)."""
    for i, (a, b) in enumerate(zip(expected, actual, strict=False)):
        if a != b:
            return i
    return min(len(expected), len(actual))


def subset_differences(expected: Any, actual: Any, where: str = "output") -> list[str]:
    """How `actual` fails to contain `expected`: mappings are matched key by key (extra keys
    in `actual` are fine), everything else must be equal."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{where}: expected a mapping, got {_show(actual)}"]
        out: list[str] = []
        for key, value in expected.items():
            got = actual.get(key, _MISSING)
            if got is _MISSING:
                out.append(f"{where}.{key}: missing (expected {_show(value)})")
            else:
                out.extend(subset_differences(value, got, f"{where}.{key}"))
        return out
    if expected != actual or isinstance(expected, bool) != isinstance(actual, bool):
        return [f"{where}: expected {_show(expected)}, got {_show(actual)}"]
    return []


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 80 else text[:77] + "..."
