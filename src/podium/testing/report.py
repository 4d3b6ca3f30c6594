"""Rendering test results and route coverage for a person (text) or a program (JSON)."""

from __future__ import annotations

import difflib
import itertools
from typing import IO, Any

from podium.language.source import display_path
from podium.testing.coverage import WorkflowCoverage
from podium.testing.execute import Failure, TestRun
from podium.testing.expect import first_difference

INDENT = "      "


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def result_line(run: TestRun, show_workflow: bool = False) -> str:
    """`PASS name (9 steps, 0.01s)` or `FAIL name (...)`."""
    verdict = "PASS" if run.passed else "FAIL"
    extra = f", {run.test.workflow.path.name}" if show_workflow else ""
    at = f" at {run.test.where}" if not run.passed and run.test.where else ""
    return f"  {verdict} {run.test.name} ({_plural(len(run.steps), 'step')}, " \
           f"{run.elapsed:.2f}s{extra}){at}"


def failure_lines(run: TestRun) -> list[str]:
    """Why a test failed, one reason after another; a path mismatch as two columns."""
    out: list[str] = []
    for f in run.failures:
        if f.kind == "steps":
            out.extend(side_by_side(f.expected, f.actual))
        elif f.kind == "output" and isinstance(f.details, list):
            out.extend(f"{INDENT}{line}" for line in f.details)
        else:
            out.append(f"{INDENT}{f.message}")
    if not any(f.kind == "steps" for f in run.failures):
        end = run.terminal or run.status
        path = " -> ".join(run.steps) or "(no step ran)"
        out.append(f"{INDENT}steps run: {path}  [{end}]")
    return out


def side_by_side(expected: list[str], actual: list[str]) -> list[str]:
    """The two paths in two numbered columns: the common start row by row, the rest aligned
    like a diff (a step only one side has faces a blank); `|` marks every row that differs
    and `>` the first."""
    first = first_difference(expected, actual)
    rows: list[tuple[int | None, int | None]] = [(k, k) for k in range(first)]
    matcher = difflib.SequenceMatcher(None, expected[first:], actual[first:], autojunk=False)
    for op, a1, a2, b1, b2 in matcher.get_opcodes():
        lefts, rights = range(first + a1, first + a2), range(first + b1, first + b2)
        if op == "equal":
            rows += list(zip(lefts, rights, strict=True))
        else:
            rows += list(itertools.zip_longest(lefts, rights))
    width = max([len("expected"), *(len(x) for x in expected)])
    num = len(str(max(len(expected), len(actual), 1)))
    out = [f"{INDENT}the steps differ from step {first + 1}:",
           f"{INDENT}  {' ' * num}  {'expected'.ljust(width)}   {' ' * num}  actual"]
    marked = False
    for i, j in rows:
        left = expected[i] if i is not None else ""
        right = actual[j] if j is not None else ""
        same = i is not None and j is not None and left == right
        mark = " "
        if not same and not marked:
            mark, marked = ">", True
        ln = str(i + 1) if i is not None else ""
        rn = str(j + 1) if j is not None else ""
        out.append(f"{INDENT}{mark} {ln.rjust(num)}  {left.ljust(width)} {' ' if same else '|'} "
                   f"{rn.rjust(num)}  {right}".rstrip())
    return out


def coverage_lines(cov: WorkflowCoverage) -> list[str]:
    """The coverage of one workflow: every route and option, checked or not, and a total."""
    out = [f"Route coverage of {cov.workflow} ({_plural(cov.tests, 'test')})"]
    if not cov.total:
        out.append("  (no routes or gate options to cover)")
        return out
    to_width = {s.step: max(len(i.to) for i in s.items) for s in cov.steps}
    width = max(len(i.describe(to_width[i.step])) for i in cov.items)
    for step in cov.steps:
        out.append(f"  {step.step} ({step.type})")
        for item in step.items:
            box = "[x]" if item.taken else "[ ]"
            count = _plural(len(item.tests), "test") if item.taken else "not taken"
            out.append(f"    {box} {item.describe(to_width[step.step]).ljust(width)}   {count}")
    out.append(f"  route coverage: {cov.taken}/{cov.total} routes and options taken "
               f"({cov.percent}%)")
    untaken = cov.untaken()
    if untaken:
        out.append("  not taken:")
        out.extend(f"    {i.step} {i.describe()}" for i in untaken)
    return out


def summary_line(runs: list[TestRun], files: int, elapsed: float, deselected: int,
                 select: str | None) -> str:
    passed = sum(1 for r in runs if r.passed)
    failed = len(runs) - passed
    text = f"{passed} passed, {failed} failed ({_plural(len(runs), 'test')} in " \
           f"{_plural(files, 'file')}, {elapsed:.2f}s)"
    if deselected:
        text += f"; {deselected} deselected by -k {select!r}"
    return text


def write_lines(stream: IO[str], lines: list[str]) -> None:
    for line in lines:
        stream.write(line + "\n")
    stream.flush()


# --------------------------------------------------------------------------- JSON


def run_json(run: TestRun) -> dict[str, Any]:
    return {"name": run.test.name, "file": display_path(run.test.file), "at": run.test.where,
            "workflow": run.test.workflow.shown, "passed": run.passed, "status": run.status,
            "terminal": run.terminal, "reason": run.reason, "error": run.error,
            "steps": run.steps, "model_calls": run.model_calls, "output": run.output,
            "elapsed": round(run.elapsed, 4),
            "failures": [f.to_json() for f in run.failures]}


def failure_json(failures: list[Failure]) -> list[dict[str, Any]]:
    return [f.to_json() for f in failures]
