"""The fleet: every run on this machine, as the fleet TUI and `podium fleet list` show it, and
pruning finished runs from the store.

Read through the store (read-only queries) and `app/owners.py` (liveness: a `running` run
whose owner died reads `interrupted`). Nothing here advances a run: the surfaces answer, stop,
resume and start through app/runs.py and app/spawn.py.
"""

from __future__ import annotations

import re
import time
from dataclasses import field
from typing import TYPE_CHECKING, Any

from podium.app.family import family, open_gates_by_root
from podium.app.owners import Liveness, held, liveness
from podium.app.runs import Refused
from podium.records import record
from podium.store.base import GateRecord, RunRecord, RunStore

if TYPE_CHECKING:
    from podium.events.model import Event
    from podium.events.spend import RunSpend
    from podium.store.base import RunStore

# What people filter on -> the statuses (as read, with liveness) it covers.
FILTERS: dict[str, tuple[str, ...]] = {
    "all": (),
    "active": ("running", "waiting"),
    "waiting": ("waiting",),
    "running": ("running",),
    "interrupted": ("interrupted",),
    "finished": ("success", "failed", "error", "limit"),
    "failed": ("failed", "error", "limit"),
}
FINISHED = FILTERS["finished"]  # the only runs prune removes


@record(frozen=True)
class FleetRow:
    """One run in the fleet table."""

    id: str
    workflow: str
    status: str  # as read: a running run without a live owner is `interrupted`
    step: str | None
    elapsed: float  # seconds, from its start to its end (or now)
    cost_usd: float
    cost_partial: bool
    gate: str | None  # the step of the gate it waits at (its own or a sub-workflow's)
    live: bool
    created_at: float
    finished_at: float | None

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.id, "id": self.id, "workflow": self.workflow, "status": self.status,
                "step": self.step, "elapsed": round(self.elapsed, 3),
                "cost_usd": round(self.cost_usd, 6), "cost_partial": self.cost_partial,
                "gate": self.gate, "live": self.live, "created_at": self.created_at,
                "finished_at": self.finished_at}


def _row(run: RunRecord, live: Liveness, gate: str | None, now: float) -> FleetRow:
    end = _end(run, live, now)
    return FleetRow(run.id, run.workflow_name, live.status, run.current_step,
                    max(0.0, end - run.created_at), run.cost_usd, run.cost_partial, gate,
                    live.live, run.created_at, run.finished_at)


def _end(run: RunRecord, live: Liveness, now: float) -> float:
    """Where a run's elapsed time stops: its end; now while a process advances it or it waits
    for a person; its last update when it stopped without finishing (killed, crashed)."""
    if run.finished_at:
        return run.finished_at
    if live.live or live.status in ("running", "waiting"):
        return now
    return run.updated_at or now


def fleet(store: RunStore, *, status: str = "all", search: str = "", limit: int = 500,
          now: float | None = None) -> list[FleetRow]:
    """Top-level runs, those waiting for a person first, then newest first, with their
    liveness and the gate they wait at; `status` is a key of FILTERS, `search` any part of
    the id, workflow or current step."""
    if status not in FILTERS:
        raise Refused(f"no filter '{status}' (filters: {', '.join(FILTERS)})")
    now = time.time() if now is None else now
    gates = open_gates_by_root(store)
    wanted = FILTERS[status]
    needle = search.strip().lower()
    out: list[FleetRow] = []
    for run in store.list_runs(limit=100_000):
        if run.parent_run_id:
            continue
        if needle and not any(needle in (v or "").lower()
                              for v in (run.id, run.workflow_name, run.current_step)):
            continue
        open_here = gates.get(run.id, [])
        live = held(liveness(store, run), open_here)  # a run an open gate holds: waiting
        if wanted and live.status not in wanted:
            continue
        out.append(_row(run, live, open_here[-1].step if open_here else None, now))
    out.sort(key=lambda r: (r.status != "waiting", -r.created_at))
    return out[:limit]


@record
class PathStep:
    step: str
    step_type: str
    iteration: int
    route_to: str | None
    output: Any
    elapsed: float | None


@record
class FleetDetail:
    """One run: its row, the path it took (each step's output), its events, its open gates."""

    row: FleetRow
    run: RunRecord
    path: list[PathStep]
    events: list[Event]  # its latest events, typed
    gates: list[GateRecord]
    children: list[str] = field(default_factory=list)
    # what its running steps streamed so far, by `step#iteration` (the store's live rows)
    live: dict[str, dict[str, Any]] = field(default_factory=dict)
    spend: RunSpend | None = None  # what it and its sub-workflow runs spent (the one fold)


def detail(store: RunStore, run_id: str, *, last_events: int = 200,
           now: float | None = None) -> FleetDetail:
    """A run's detail (RunNotFound when there is no such run): its RunView
    (app/history.py), with its latest events typed and what its running steps stream."""
    from podium.app.history import run_view

    view = run_view(store, run_id)
    run, gates = view.run, view.gates
    now = time.time() if now is None else now
    latest = (store.history(run.id, max(0, view.last_seq - last_events))
              if last_events > 0 else [])
    path = [PathStep(r.step, r.step_type, r.iteration, r.route_to, r.output, r.elapsed)
            for r in view.state.records]
    children = [r.id for r in store.list_runs(parent=run.id, limit=10_000)]
    streaming = store.live(run.id) if view.liveness.status == "running" else {}
    return FleetDetail(_row(run, view.status, gates[-1].step if gates else None, now),
                       run, path, latest, gates, children, streaming, view.spend)


# ----------------------------------------------------------------------------- prune

_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNIT = {"": 86400.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}


def parse_age(text: str) -> float:
    """`30d`, `12h`, `90m`, `2w`, `45s` (a bare number is days) -> seconds."""
    m = _AGE.match(text)
    if m is None:
        raise Refused(f"'{text}' is not an age: write a number and a unit, like 30d, 12h, "
                      "90m, 2w or 45s")
    return float(m.group(1)) * _UNIT[m.group(2)]


@record
class Pruned:
    runs: list[FleetRow]  # the top-level runs removed (or that would be, with dry_run)
    removed: int  # runs removed from the store, sub-workflow runs included
    kept_unfinished: int  # runs at least that old kept because they are not finished


def prune(store: RunStore, older_than: float, *, dry_run: bool = False,
          now: float | None = None) -> Pruned:
    """Remove the finished runs (success, failed, error, limit) that ended more than
    `older_than` seconds ago, each with its sub-workflow runs, events, checkpoints, gates and
    leases in one transaction. Running, waiting and interrupted runs are never removed, nor
    a run a live process advances: the store decides that again inside the removal's
    transaction, which a resume's lease also takes, so a run a resume took after this look
    is kept, and a resume after the removal finds no run."""
    from podium.app.owners import owner_alive

    now = time.time() if now is None else now
    cutoff = now - older_than
    chosen: list[FleetRow] = []
    removed = kept = 0

    def old_enough(run: RunRecord) -> bool:  # asked at the look, and again at the removal
        return (run.finished_at or run.updated_at or run.created_at) <= cutoff

    for run in store.list_runs(limit=1_000_000):
        if run.parent_run_id or not old_enough(run):
            continue
        live = liveness(store, run)
        if live.status not in FINISHED or live.live:
            kept += 1
            continue
        members = family(store, run.id)
        gone = len(members) if dry_run else store.delete_runs(
            members, unless_owned=owner_alive, statuses=FINISHED, still=old_enough)
        if not gone:  # a resume took it (and may have finished it) since the look above
            kept += 1
            continue
        chosen.append(_row(run, live, None, now))
        removed += gone
    return Pruned(chosen, removed, kept)


# ----------------------------------------------------------------------------- text


def elapsed_text(seconds: float) -> str:
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d{(s % 86400) // 3600}h"


def cost_text(row: FleetRow) -> str:
    return f"{'~' if row.cost_partial else ''}${row.cost_usd:.4f}"
