"""`podium graph`: the route graph as Mermaid or DOT on stdout."""

from __future__ import annotations

import sys
from pathlib import Path

from podium import exitcodes


def graph_command(file: Path, output_format: str, overlay: bool = False) -> int:
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

    greyed: set[tuple[str, int]] = set()
    ranges: dict[str, str] = {}
    if overlay:
        from podium.explore.overlay import overlay_of

        found = overlay_of(result)
        if not found.complete:
            sys.stderr.write("podium graph: warning: explore stopped early, so no route is "
                             "greyed\n")
        greyed, ranges = found.unreachable, found.ranges
    draw = to_mermaid if output_format == "mermaid" else to_dot
    text = draw(result.model, greyed, ranges)
    # the file was loaded with ${VAR} expanded: a secret's value is shown as its name
    sys.stdout.write(Redactor(secret_values(result.model)).text(text))
    return exitcodes.OK
