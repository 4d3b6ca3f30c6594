"""`context.max_tokens` and `trim_strategy` (Conductor spec 5.4): before each step and group,
when the context's estimated size (its JSON / 4) is over `max_tokens`, the stored outputs are
trimmed for good, oldest first:

- `drop_oldest` (default): whole outputs are removed until the context fits;
- `truncate`: string fields over 100 characters are cut to max(200, a quarter) characters
  plus `... [truncated]`, output by output, until enough was cut;
- `summarize`: the newest half of the outputs is kept; the older ones are replaced by one
  `_context_summary` output (a line per step, at most 500 characters; no model call).

Each trim is a `context_trimmed` event, which a resume applies again (engine/history.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from podium.events.model import ContextTrimmed
from podium.steps.state import RunState

CHARS_PER_TOKEN = 4
LONG_TEXT = 100  # `truncate` leaves shorter fields alone
SUMMARY_CHARS = 500


def trim_context(state: RunState, step: str, max_tokens: int, strategy: str,
                 estimate: Callable[[RunState], int]) -> ContextTrimmed | None:
    """Trim `state` when its estimate is over `max_tokens`; the event saying what changed,
    or None when it fits (nothing changes)."""
    before = estimate(state)
    if before <= max_tokens:
        return None
    order = list(dict.fromkeys(state.history))  # each stored step once, oldest first
    dropped: list[str] = []
    truncated: dict[str, dict[str, str]] = {}
    summary: dict[str, Any] | None = None
    if strategy == "truncate":
        truncated = _truncate(state, order, before - max_tokens)
    elif strategy == "summarize":
        dropped, summary = _summarize(state, order)
    else:
        dropped = _drop_oldest(state, order, max_tokens, estimate)
    state.apply_trim(dropped, truncated, summary)
    return ContextTrimmed(step=step, strategy=strategy,
                          max_tokens=max_tokens, tokens_before=before,
                          tokens_after=estimate(state), dropped=dropped, truncated=truncated,
                          summary=summary)


def _drop_oldest(state: RunState, order: list[str], max_tokens: int,
                 estimate: Callable[[RunState], int]) -> list[str]:
    dropped: list[str] = []
    for name in order:
        if estimate(state) <= max_tokens:
            break
        if name in state.outputs:
            state.apply_trim([name], {}, None)
            dropped.append(name)
    return dropped


def _truncate(state: RunState, order: list[str], to_cut: int) -> dict[str, dict[str, str]]:
    """Cut long string fields of dict outputs, oldest output first, each output whole."""
    out: dict[str, dict[str, str]] = {}
    for name in order:
        if to_cut <= 0:
            break
        value = state.outputs.get(name)
        if not isinstance(value, dict):
            continue  # a scalar or list output has no fields to cut (as in Conductor)
        for key, text in value.items():
            if not isinstance(text, str) or len(text) <= LONG_TEXT:
                continue
            if len(text) // CHARS_PER_TOKEN <= 50:
                continue
            keep = max(50 * CHARS_PER_TOKEN, len(text) // 4)
            short = text[:keep] + "... [truncated]"
            out.setdefault(name, {})[key] = short
            to_cut -= len(text) // CHARS_PER_TOKEN - len(short) // CHARS_PER_TOKEN
    return out


def _summarize(state: RunState, order: list[str]) -> tuple[list[str], dict[str, Any] | None]:
    keep = max(1, len(order) // 2)
    older = order[:-keep] if keep < len(order) else []
    parts: list[str] = []
    for name in older:
        if name not in state.outputs:
            continue
        value = state.outputs[name]
        line = f"{name}: "
        if isinstance(value, dict):
            for key, v in value.items():
                line += f"{key}={v[:50]}... " if isinstance(v, str) else f"{key}={v} "
        else:
            try:
                shown = json.dumps(value, default=str, ensure_ascii=False)
            except (TypeError, ValueError):
                shown = repr(value)
            line += shown[:50] + "..." if len(shown) > 50 else shown
        parts.append(line.strip())
    dropped = [n for n in older if n in state.outputs]
    if not parts:
        return dropped, None
    return dropped, {"summary": "; ".join(parts)[:SUMMARY_CHARS], "dropped_agents": older}

