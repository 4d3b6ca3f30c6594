"""What a stored run spent, for the surfaces: the one fold of its model calls (events/spend.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from podium.events.spend import RunSpend
    from podium.store.base import RunStore


def run_spend(store: RunStore, run_id: str,
              events: list[dict[str, Any]] | None = None) -> RunSpend:
    """Tokens and cost per step, agent and model, and in total, of a stored run and its
    sub-workflow runs (`events`: the run's own, when the caller has read them)."""
    from podium.engine.history import stored_spend

    return stored_spend(store, run_id, events)


def spend_json(spent: RunSpend) -> dict[str, Any]:
    """The `spend` object `podium show --format json` writes."""
    t = spent.total
    return {"input_tokens": t.input_tokens, "output_tokens": t.output_tokens,
            "cached_tokens": t.cached_tokens, "cost_usd": round(t.cost_usd, 6),
            "priced": t.priced, "calls": t.calls,
            "by_step": {k: s.as_json() for k, s in spent.by_step.items()},
            "by_model": {k: s.as_json() for k, s in spent.by_model.items()}}
