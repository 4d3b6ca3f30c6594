"""`podium validate`: print diagnostics compiler-style (or as JSON) and pick the exit code."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from podium import exitcodes
from podium.check.validate import validate_file
from podium.cli.guard import keep_until_exit
from podium.language.diagnostics import Diagnostic
from podium.language.load import LoadResult
from podium.language.source import FileUnreadable

if TYPE_CHECKING:
    from podium.check.tool_access import Access


def run_validate(files: list[Path], output_format: str, strict: bool, budget: bool) -> int:
    if output_format not in ("text", "json"):
        sys.stderr.write(f"podium validate: --format must be 'text' or 'json' "
                         f"(got '{output_format}')\n")
        return exitcodes.INVALID
    reports: list[dict[str, Any]] = []
    code = exitcodes.OK
    total_errors = total_warnings = 0
    out = sys.stdout
    given, files = files, expand_folders(files)
    for folder in (p for p in given if p.is_dir() and not expand_folders([p])):
        sys.stderr.write(f"podium validate: {folder}: no workflow files under it (*.yaml or "
                         "*.yml with a top-level workflow: key, *.test.yaml)\n")
        code = exitcodes.FILE_ERROR
    for path in files:
        if path.name.endswith((".test.yaml", ".test.yml")):
            test_report = _test_file(path, output_format, strict)
            reports.append(test_report)
            total_errors += test_report["errors"]
            total_warnings += test_report["warnings"]
            if not test_report["valid"] and code == exitcodes.OK:
                code = exitcodes.INVALID
            continue
        try:
            result = validate_file(path)
            keep_until_exit(result)
        except FileUnreadable as exc:
            code = exitcodes.FILE_ERROR
            reports.append({"file": str(path), "valid": False, "readable": False,
                            "error": str(exc), "diagnostics": []})
            if output_format == "text":
                sys.stderr.write(f"{exc}\n")
            continue
        access = _tool_access(result)
        diags: list[Diagnostic] = result.sink.sorted()
        errors = [d for d in diags if d.severity == "error"]
        warnings = [d for d in diags if d.severity == "warning"]
        total_errors += len(errors)
        total_warnings += len(warnings)
        valid = not errors and not (strict and warnings)
        if not valid and code == exitcodes.OK:
            code = exitcodes.INVALID
        report: dict[str, Any] = {
            "file": result.shown, "valid": valid, "readable": True,
            "errors": len(errors), "warnings": len(warnings),
            "diagnostics": [d.to_json() for d in diags],
            "tool_access": [a.to_json() for a in access],
        }
        if budget and result.model is not None and not errors:
            from podium.check.budget import analyse_budget

            report["budget"] = analyse_budget(result).to_json()
        reports.append(report)
        if output_format == "text":
            for d in diags:
                out.write(d.format() + "\n")
            if access:
                out.write(f"{result.shown}: agents that can write files or run commands:\n")
                out.writelines(f"  {a.describe()}\n" for a in access)
            if budget and "budget" in report:
                from podium.check.budget import format_budget

                out.write(format_budget(report["budget"]))
    if output_format == "json":
        json.dump({"valid": code == exitcodes.OK, "files": reports}, out, indent=2)
        out.write("\n")
    elif files:
        _summary(files, reports, total_errors, total_warnings, strict)
    return code


def _tool_access(result: LoadResult) -> list[Access]:
    """The agents that can write files or run commands (check/tool_access.py), each given
    them without naming them also a warning in `result`; none for an invalid workflow."""
    from podium.check.tool_access import tool_access, unnamed_warning

    if result.model is None or result.sink.errors:
        return []
    access = tool_access(result.model)
    for a in access:
        if not a.named:
            message, hint = unnamed_warning(a)
            result.warning(a.path, message, hint, code="unnamed-tools")
    return access


_SKIP = frozenset({"node_modules", "__pycache__", "site-packages"})


def expand_folders(paths: list[Path]) -> list[Path]:
    """Each folder given replaced by the workflow and test files under it, as `podium test
    DIR` finds tests: *.yaml and *.yml with a top-level `workflow:` key, and *.test.yaml
    (hidden files and folders, such as podium eval's copies, and node_modules skipped);
    other paths kept as given."""
    out: list[Path] = []
    for path in paths:
        if not path.is_dir():
            out.append(path)
            continue
        found = [f for f in sorted(path.rglob("*")) if f.suffix in (".yaml", ".yml")
                 and f.is_file() and not any(part.startswith(".") or part in _SKIP
                                             for part in f.relative_to(path).parts)
                 and _is_workflow(f)]
        out.extend(found)
    return out


def _is_workflow(path: Path) -> bool:
    if path.name.endswith((".test.yaml", ".test.yml")):
        return True
    try:
        with path.open("rb") as fh:
            head = fh.read(1 << 16)
    except OSError:
        return True  # reported as unreadable, with the reason
    return any(line.startswith(b"workflow:") for line in head.splitlines())


def _test_file(path: Path, output_format: str, strict: bool) -> dict[str, Any]:
    """A workflow test file (`*.test.yaml`): its own schema and the workflow it tests, checked
    as `podium test` reads them (running the tests is `podium test`'s job)."""
    from podium.testing.model import load_test_files

    loaded = load_test_files([path])
    diags = sorted(loaded.problems)
    errors = [d for d in diags if d.severity == "error"]
    warnings = [d for d in diags if d.severity == "warning"]
    tests = sum(len(f.tests) for f in loaded.files)
    workflows = sorted(w.shown for w in loaded.workflows.values() if w is not None)
    if output_format == "text":
        for d in diags:
            sys.stdout.write(d.format() + "\n")
        if not errors:
            sys.stdout.write(f"{path}: a workflow test file: {tests} test"
                             f"{'s' if tests != 1 else ''} of {', '.join(workflows) or '?'}; "
                             f"run them with `podium test {path}`\n")
    return {"file": str(path), "kind": "workflow tests", "tests": tests,
            "workflows": workflows, "readable": True,
            "valid": not errors and not (strict and warnings), "errors": len(errors),
            "warnings": len(warnings), "diagnostics": [d.to_json() for d in diags]}


def _summary(files: list[Path], reports: list[dict[str, Any]], errors: int, warnings: int,
             strict: bool) -> None:
    if len(reports) == 1 and reports[0].get("readable") is False:
        return
    if len(reports) == 1 and errors == 1 and not warnings:
        return  # the one error line is the whole verdict (bad input gets exactly one line)
    parts = []
    if errors:
        parts.append(f"{errors} error{'s' if errors != 1 else ''}")
    if warnings:
        parts.append(f"{warnings} warning{'s' if warnings != 1 else ''}")
    checked = sum(1 for r in reports if r.get("readable"))
    where = reports[0]["file"] if len(files) == 1 else f"{checked} file{'s' if checked != 1 else ''}"
    if not parts:
        sys.stdout.write(f"{where}: valid\n")
    else:
        verdict = "invalid" if errors or (strict and warnings) else "valid"
        suffix = " (--strict)" if strict and warnings and not errors else ""
        sys.stdout.write(f"{where}: {verdict}{suffix}: {', '.join(parts)}\n")
