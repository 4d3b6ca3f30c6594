"""`podium graph`: the route graph as Mermaid or DOT on stdout."""

from __future__ import annotations

import sys
from pathlib import Path

from podium import exitcodes


def graph_command(file: Path, output_format: str) -> int:
    from podium.check.export import to_dot, to_mermaid
    from podium.check.validate import validate_file
    from podium.language.source import FileUnreadable

    if output_format not in ("mermaid", "dot"):
        sys.stderr.write(f"podium graph: --format must be 'mermaid' or 'dot' "
                         f"(got '{output_format}')\n")
        return exitcodes.INVALID
    try:
        result = validate_file(file)
    except FileUnreadable as exc:
        sys.stderr.write(f"podium graph: {exc}\n")
        return exitcodes.FILE_ERROR
    if result.model is None or result.sink.errors:
        for d in result.sink.sorted():
            sys.stderr.write(d.format() + "\n")
        return exitcodes.INVALID
    from podium.events.redact import Redactor, secret_values

    text = to_mermaid(result.model) if output_format == "mermaid" else to_dot(result.model)
    # the file was loaded with ${VAR} expanded: a secret's value is shown as its name
    sys.stdout.write(Redactor(secret_values(result.model)).text(text))
    return exitcodes.OK
