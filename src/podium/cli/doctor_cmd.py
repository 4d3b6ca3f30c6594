"""`podium doctor`: render the application layer's findings (text or JSON) and choose the exit
code: 0 nothing wrong (notes allowed), 1 a problem was found, 3 the run store is damaged or
unreadable."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from podium import exitcodes

if TYPE_CHECKING:
    from podium.app.doctor import Finding

PROBLEMS = 1  # something is wrong (an interrupted run, a leftover process, a busy port, ...)
STORE_DAMAGED = exitcodes.FILE_ERROR  # 3: the run store is damaged or cannot be read

_LABELS = {"ok": "ok", "info": "info", "problem": "PROBLEM"}


def exit_code(findings: list[Finding]) -> int:
    from podium.app.doctor import STORE

    problems = [f for f in findings if f.severity == "problem"]
    if any(f.area == STORE for f in problems):
        return STORE_DAMAGED
    return PROBLEMS if problems else exitcodes.OK


def doctor_command(output_format: str, port: int) -> int:
    from podium.app.doctor import DoctorRequest, diagnose

    if output_format not in ("text", "json"):
        sys.stderr.write(f"podium doctor: --format must be 'text' or 'json' "
                         f"(got '{output_format}')\n")
        return exitcodes.INVALID
    if not 0 < port <= 65535:
        sys.stderr.write(f"podium doctor: --port {port} is not a port (1-65535)\n")
        return exitcodes.INVALID
    findings = diagnose(DoctorRequest(port=port))
    code = exit_code(findings)
    if output_format == "json":
        sys.stdout.write(json.dumps({"exit_code": code,
                                     "findings": [f.to_json() for f in findings]},
                                    indent=2) + "\n")
    else:
        sys.stdout.write(render(findings, code))
    return code


def render(findings: list[Finding], code: int) -> str:
    """One line per finding (severity, area, message), its fix on the next line."""
    area_width = max((len(f.area) for f in findings), default=0)
    lines = []
    for f in findings:
        head = f"{_LABELS[f.severity]:<8} {f.area:<{area_width}}  "
        lines.append(head + f.message)
        if f.fix:
            lines.append(" " * len(head) + "fix: " + f.fix)
    problems = sum(f.severity == "problem" for f in findings)
    if problems:
        lines.append(f"{problems} problem{'s' * (problems != 1)} found (exit {code})")
    else:
        lines.append("all well")
    return "\n".join(lines) + "\n"
