"""A run's history as the surfaces read it: its committed events, typed (the union of
events/model.py), and their JSON form, which is the text the store committed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from podium.events.model import Event
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
