"""`podium fleet` (the fleet TUI), `podium fleet list` and `podium fleet prune`."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from podium import exitcodes
from podium.errors import PodiumError

if TYPE_CHECKING:
    from podium.app.fleet import Pruned


def tui_command() -> int:
    """The fleet TUI; Textual is the `tui` extra, imported only here."""
    try:
        import textual  # noqa: F401
    except ImportError:
        sys.stderr.write("podium fleet: the fleet TUI needs Textual, the `tui` extra: "
                         "pip install 'podium[tui]' (podium fleet list and podium fleet prune "
                         "work without it)\n")
        return exitcodes.INVALID
    from podium.app.home import open_store, podium_home
    from podium.tui.app import FleetApp

    try:
        store = open_store(verify=False)
    except PodiumError as exc:
        sys.stderr.write(f"podium fleet: {exc}\n")
        return exc.exit_code
    try:
        FleetApp(store, podium_home()).run()
    finally:
        store.close()
    return exitcodes.OK


def list_command(status: str, search: str, limit: int, fmt: str) -> int:
    from podium.app.fleet import FILTERS, cost_text, elapsed_text, fleet
    from podium.app.home import open_store

    if fmt not in ("text", "json"):
        sys.stderr.write(f"podium fleet list: --format must be 'text' or 'json' (got '{fmt}')\n")
        return exitcodes.INVALID
    if status not in FILTERS:
        sys.stderr.write(f"podium fleet list: --status {status}: one of {', '.join(FILTERS)}\n")
        return exitcodes.INVALID
    try:
        store = open_store(verify=False)
        try:
            rows = fleet(store, status=status, search=search, limit=limit)
        finally:
            store.close()
    except PodiumError as exc:
        sys.stderr.write(f"podium fleet list: {exc}\n")
        return exc.exit_code
    if fmt == "json":
        sys.stdout.write(json.dumps({"runs": [r.to_json() for r in rows]}, indent=2) + "\n")
        return exitcodes.OK
    if not rows:
        sys.stdout.write("no runs\n")
        return exitcodes.OK
    head = ("RUN", "WORKFLOW", "STATUS", "STEP", "ELAPSED", "COST", "GATE")
    table = [head] + [(r.id, r.workflow, r.status, r.step or "-", elapsed_text(r.elapsed),
                       cost_text(r), r.gate or "-") for r in rows]
    widths = [max(len(str(line[i])) for line in table) for i in range(len(head))]
    for line in table:
        sys.stdout.write("  ".join(str(v).ljust(w) for v, w in zip(line, widths, strict=True))
                         .rstrip() + "\n")
    return exitcodes.OK


def prune_command(older_than: str, yes: bool, fmt: str) -> int:
    from podium.app.fleet import parse_age, prune
    from podium.app.home import open_store

    if fmt not in ("text", "json"):
        sys.stderr.write(f"podium fleet prune: --format must be 'text' or 'json' (got '{fmt}')\n")
        return exitcodes.INVALID
    try:
        age = parse_age(older_than)
        store = open_store(verify=False)
        try:
            plan = prune(store, age, dry_run=True)
            if plan.runs and not yes:
                if not sys.stdin.isatty():
                    _report(plan, fmt, done=False, age=older_than)
                    if fmt == "text":
                        sys.stderr.write("podium fleet prune: nothing removed; pass --yes to "
                                         "remove them\n")
                    return exitcodes.OK
                _report(plan, "text", done=False, age=older_than)
                sys.stderr.write(f"remove these {len(plan.runs)} runs? [y/N] ")
                if sys.stdin.readline().strip().lower() not in ("y", "yes"):
                    sys.stderr.write("nothing removed\n")
                    return exitcodes.OK
            done = prune(store, age) if plan.runs else plan
        finally:
            store.close()
    except PodiumError as exc:
        sys.stderr.write(f"podium fleet prune: {exc}\n")
        return exc.exit_code
    _report(done, fmt, done=True, age=older_than)
    return exitcodes.OK


def _report(p: Pruned, fmt: str, *, done: bool, age: str) -> None:
    if fmt == "json":
        sys.stdout.write(json.dumps({"removed" if done else "would_remove":
                                     [r.to_json() for r in p.runs],
                                     "runs_removed": p.removed if done else 0,
                                     "kept_unfinished": p.kept_unfinished}, indent=2) + "\n")
        return
    verb = "removed" if done else "would remove"
    if not p.runs:
        sys.stdout.write(f"no finished run older than {age}; nothing removed\n")
    for r in p.runs:
        sys.stdout.write(f"{verb} {r.id}  {r.workflow}  {r.status}\n")
    if p.runs and done:
        extra = p.removed - len(p.runs)
        sys.stdout.write(f"removed {len(p.runs)} finished run(s) older than {age}"
                         + (f" and {extra} sub-workflow run(s)" if extra else "")
                         + " with their events, checkpoints and gates\n")
    if p.kept_unfinished:
        sys.stdout.write(f"kept {p.kept_unfinished} run(s) that old that are running, waiting "
                         "or interrupted (never pruned)\n")
