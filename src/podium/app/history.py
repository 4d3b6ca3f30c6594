"""A run's history as the surfaces read it: its committed events, typed (the union of
events/model.py), and their JSON form, which is the text the store committed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from podium.records import record

if TYPE_CHECKING:
    from podium.app.owners import Liveness
    from podium.events.model import Event, StepFailed
    from podium.events.spend import RunSpend
    from podium.steps.base import Usage
    from podium.steps.state import RunState
    from podium.store.base import GateRecord, RunRecord, RunStore


def history(store: RunStore, run_id: str, after: int = 0) -> list[Event]:
    """The run's events after seq `after`, typed (RunNotFound when there is no such run)."""
    run = store.find_run(run_id)
    return store.history(run.id, after)


def event_json(event: Event) -> dict[str, Any]:
    """An event as `podium events`, the console and the MCP server send it: every field, as
    committed (the store keeps `model_dump_json()`)."""
    data: dict[str, Any] = event.model_dump(mode="json")
    return data


def folded(events: list[dict[str, Any]]) -> RunState:
    """The state a run's committed events fold to (its path, outputs, counts): the fold
    resume starts from (engine/history.py), for surfaces that show the path."""
    from podium.engine.history import fold_events

    return fold_events(events)


def usage_of(store: RunStore, run_id: str,
             events: list[dict[str, Any]] | None = None) -> dict[str, Usage]:
    """Tokens and cost per agent of a stored run and its sub-workflow runs: the one fold of
    their model calls (app/spend.py) as the rows of a RunResult (engine/history.py)."""
    from podium.app.spend import run_spend
    from podium.engine.history import usage_rows

    return usage_rows(run_spend(store, run_id, events))


@record(frozen=True)
class RunView:
    """One stored run as every surface reads it, built in one place (`run_view`) from its
    row, its committed events and its family: its status as people read it (app/owners.py
    `held`), the path it took, what it and its sub-workflow runs spent (the one fold), the
    step its error came from, and the open gates that hold it up."""

    run: RunRecord
    status: Liveness  # liveness, held by the open gates (`waiting`)
    liveness: Liveness  # liveness alone: whether its process (or workflow) advances it
    gates: list[GateRecord]
    state: RunState  # the fold resume starts from: its path (`records`) and outputs
    spend: RunSpend
    failed_step: StepFailed | None  # its last top-level step_failed, when it has an error
    last_seq: int


def run_view(store: RunStore, run_id: str) -> RunView:
    """The RunView of a stored run (RunNotFound when there is no such run)."""
    from podium.app.family import open_gates
    from podium.app.owners import held, liveness
    from podium.app.spend import run_spend

    run = store.find_run(run_id)
    events = store.events(run.id)  # the committed JSON, which the folds read
    gates = open_gates(store, run.id)  # its own and its sub-workflow runs'
    live = liveness(store, run)
    failed = failed_step(events) if run.error else None
    return RunView(run, held(live, gates), live, gates, folded(events),
                   run_spend(store, run.id, events), failed,
                   int(events[-1]["seq"]) if events else 0)


def failed_step(events: list[dict[str, Any]]) -> StepFailed | None:
    """The run's last top-level step_failed event, typed: the step its error came from
    (None when a step finished, or the run started again, after it)."""
    from podium.events.model import StepFailed, parse_event

    for e in reversed(events):
        if e["type"] == "step_failed" and not e.get("group"):
            found = parse_event(e)
            return found if isinstance(found, StepFailed) else None
        if e["type"] in ("step_finished", "run_started"):
            return None
    return None
