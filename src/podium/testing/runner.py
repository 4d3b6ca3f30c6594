"""`podium test`: find test files, load them, run each test, report results and coverage.

Exit codes: 0 every test passed; 1 a test failed; 2 a test file (or the workflow it names)
is invalid, or the command line is wrong; 3 no test file (or no test selected by -k) found,
or a PATH does not exist.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from podium.testing.coverage import WorkflowCoverage, compute_coverage
from podium.testing.execute import TestRun, run_test
from podium.testing.model import LoadedTest, LoadedWorkflow, discover, load_test_files
from podium.testing.report import (
    coverage_lines,
    failure_lines,
    result_line,
    run_json,
    summary_line,
    write_lines,
)

OK, FAILED, INVALID, NOTHING = 0, 1, 2, 3


def test_command(paths: list[Path], output_format: str, select: str | None) -> int:
    """Run the workflow tests under `paths`; print the report; return the exit code."""
    if output_format not in ("text", "json"):
        sys.stderr.write(f"podium test: --format must be 'text' or 'json' (got "
                         f"'{output_format}')\n")
        return INVALID
    as_json = output_format == "json"
    files, missing = discover(paths)
    if missing:
        return _nothing(as_json, "no such file or folder: " + ", ".join(missing))
    if not files:
        where = ", ".join(str(p) for p in paths)
        return _nothing(as_json, f"no test files (*.test.yaml, *.test.yml) under {where}")
    report = load_test_files(files)
    if report.problems:
        return _invalid(as_json, report.problems)
    chosen = [(f, [t for t in f.tests if _selected(t, select)]) for f in report.files]
    total = sum(len(f.tests) for f in report.files)
    count = sum(len(ts) for _, ts in chosen)
    if not count:
        return _nothing(as_json, f"no test name contains {select!r} ({total} tests found)")
    started = time.perf_counter()
    out = sys.stdout
    runs: list[TestRun] = []
    file_reports: list[dict[str, Any]] = []
    for f, tests in chosen:
        if not tests:
            continue
        if not as_json:
            write_lines(out, [f.shown])
        several = len({t.workflow.path for t in f.tests}) > 1
        file_runs = []
        for test in tests:
            run = run_test(test)
            file_runs.append(run)
            if not as_json:
                lines = [result_line(run, several)]
                if not run.passed:
                    lines += failure_lines(run)
                write_lines(out, lines)
        runs.extend(file_runs)
        file_reports.append({"file": f.shown, "tests": [run_json(r) for r in file_runs]})
        if not as_json:
            write_lines(out, [""])
    elapsed = time.perf_counter() - started
    coverage = _coverage(runs)
    code = OK if all(r.passed for r in runs) else FAILED
    summary = summary_line(runs, len(file_reports), elapsed, total - count, select)
    if as_json:
        payload = {
            "version": 1, "exit_code": code, "files": file_reports,
            "coverage": [c.to_json() for c in coverage],
            "summary": {"passed": sum(1 for r in runs if r.passed),
                        "failed": sum(1 for r in runs if not r.passed), "total": len(runs),
                        "deselected": total - count, "files": len(file_reports),
                        "elapsed": round(elapsed, 3), "text": summary}}
        out.write(json.dumps(payload, indent=2, ensure_ascii=False, default=str) + "\n")
        return code
    for cov in coverage:
        write_lines(out, [*coverage_lines(cov), ""])
    write_lines(out, [summary])
    return code


def _selected(test: LoadedTest, select: str | None) -> bool:
    return select is None or select.lower() in test.name.lower()


def _coverage(runs: list[TestRun]) -> list[WorkflowCoverage]:
    by_workflow: dict[Path, tuple[LoadedWorkflow, list[TestRun]]] = {}
    for r in runs:
        wf = r.test.workflow
        by_workflow.setdefault(wf.path, (wf, []))[1].append(r)
    return [compute_coverage(wf.model, wf.shown, [(r.test.name, r.routes) for r in rs])
            for wf, rs in by_workflow.values()]


def _invalid(as_json: bool, problems: list[Any]) -> int:
    ordered = list(dict.fromkeys(problems))
    if as_json:
        sys.stdout.write(json.dumps({"version": 1, "exit_code": INVALID,
                                     "errors": [d.to_json() for d in ordered]},
                                    indent=2, ensure_ascii=False) + "\n")
    else:
        for d in ordered:
            sys.stderr.write(d.format() + "\n")
        sys.stderr.write(f"podium test: {len(ordered)} problem(s) in the test files; no test "
                         "was run\n")
    return INVALID


def _nothing(as_json: bool, message: str) -> int:
    if as_json:
        sys.stdout.write(json.dumps({"version": 1, "exit_code": NOTHING, "errors": [],
                                     "message": message}, indent=2) + "\n")
    else:
        sys.stderr.write(f"podium test: {message}\n")
    return NOTHING
