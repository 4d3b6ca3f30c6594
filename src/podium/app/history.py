"""A run's history as the surfaces read it: its committed events, typed (the union of
events/model.py), and their JSON form, which is the text the store committed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from podium.events.model import Event
    from podium.steps.base import Usage
    from podium.steps.state import RunState
    from podium.store.base import RunStore


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


def usage_of(events: list[dict[str, Any]]) -> dict[str, Usage]:
    """Tokens and cost per agent: the one fold of the run's model calls (events/spend.py)
    as the rows of a RunResult (engine/history.py)."""
    from podium.engine.history import usage_rows
    from podium.events.spend import fold_spend

    return usage_rows(fold_spend(events))
