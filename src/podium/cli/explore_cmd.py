"""`podium explore`: load and check the workflow, explore it, print (or write) what it found.

Exit codes: 0 no error finding and every property holds; 1 a property fails or an error
finding; 2 an invalid workflow or usage.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from podium import exitcodes
from podium.language.diagnostics import printable


def explore_command(file: Path, requires: list[str], output_format: str,
                    emit_tests: Path | None, max_states: int | None) -> int:
    if output_format not in ("text", "json"):
        sys.stderr.write(f"podium explore: --format must be 'text' or 'json' "
                         f"(got '{output_format}')\n")
        return exitcodes.INVALID
    from podium.check.validate import validate_file
    from podium.explore import explore
    from podium.explore.report import PropertyError
    from podium.language.source import FileUnreadable

    try:
        result = validate_file(file)
    except FileUnreadable as exc:
        sys.stderr.write(f"{exc}\n")
        return exitcodes.FILE_ERROR
    errors = result.sink.errors
    if result.model is None or errors:
        for d in sorted(errors):
            sys.stderr.write(d.format() + "\n")
        sys.stderr.write(f"{result.shown}: invalid: explore needs a valid workflow "
                         f"(see `podium validate {file}`)\n")
        return exitcodes.INVALID
    try:
        found = explore(result, requires, max_states)
    except PropertyError as exc:
        sys.stderr.write(f"podium explore: --require: {exc}\n")
        return exitcodes.INVALID
    if emit_tests is not None:
        from podium.explore.emit import emit_tests as write_tests

        written = write_tests(found, result, emit_tests)
        sys.stderr.write(f"wrote {len(written)} workflow test file"
                         f"{'s' if len(written) != 1 else ''} to {emit_tests}; run them with "
                         f"`podium test {emit_tests}`\n")
    if output_format == "json":
        json.dump(found.to_json(), sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_text(found))
    return exitcodes.OK if found.ok else exitcodes.TERMINATED_FAILED


def _steps(o: Any, cap: int) -> str:
    if not o.reachable:
        return "unreachable"
    low = f"{o.min_steps} step{'s' if o.min_steps != 1 else ''}"
    if o.unbounded:
        return f"{low} at least; unbounded but for max_iterations ({cap})"
    if o.max_steps == o.min_steps:
        return f"exactly {low}"
    return f"{o.min_steps}-{o.max_steps} steps"


def _trail(witness: list[dict[str, Any]]) -> str:
    parts = []
    for w in witness:
        label = w.get("label")
        parts.append(f"{w['step']}" + (f" [{label}]" if label and label != "any" else ""))
    return " -> ".join(parts) or "(no step)"


def format_text(found: Any) -> str:
    from podium.explore.report import SPECIAL

    lines = [f"{found.file}: {found.states:,} states, "
             + ("complete (exact up to max_iterations)" if found.complete
                else "stopped early: " + "; ".join(found.truncated))]
    lines.append("outcomes:")
    for o in found.outcomes:
        name = SPECIAL.get(o.name, o.name)
        mark = "reachable  " if o.reachable else "unreachable"
        lines.append(f"  {name:<28} {mark} {_steps(o, found.max_iterations) if o.reachable else ''}"
                     .rstrip())
        if o.reachable and o.witness:
            lines.append(f"      e.g. {_trail(o.witness)}")
    if found.findings:
        lines.append("findings:")
        lines.extend("  " + d.format() for d in found.findings)
    if found.properties:
        lines.append("properties:")
        for p in found.properties:
            lines.append(f"  {'holds' if p.holds else 'FAILS'}: {p.text}")
            if not p.holds:
                lines.append(f"      counterexample: {_trail(p.counterexample or [])}")
    return "".join(printable(line) + "\n" for line in lines)
