"""Rebuilding a run's state from its event history (for resume, resume --from, and views)."""

from __future__ import annotations

from typing import Any

from podium.engine.state import RunState, StepRecord


def fold_events(events: list[dict[str, Any]], *, upto_seq: int | None = None,
                default_max: int = 10) -> RunState:
    """The state after applying `events` (only those with seq <= upto_seq, when given)."""
    state: RunState | None = None
    for e in events:
        if upto_seq is not None and e["seq"] > upto_seq:
            break
        t = e["type"]
        if t == "run_started":
            if state is None:
                state = RunState(inputs=dict(e.get("inputs", {})),
                                 max_iterations=int(e.get("max_iterations", default_max)))
            continue
        if state is None:
            continue
        if t == "step_finished":
            state.step_counts[e["step"]] = int(e["iteration"])
            state.run_iteration += 1
            state.store(e["step"], e.get("output"))
            state.records.append(StepRecord(e["step"], e["step_type"], int(e["iteration"]),
                                            state.run_iteration, e.get("output"),
                                            elapsed=float(e.get("elapsed", 0.0))))
        elif t == "route_taken" and state.records and state.records[-1].step == e["from_step"]:
            state.records[-1].route_to = e["to_step"]
        elif t == "limit_resolved":
            state.max_iterations = int(e["new_maximum"])
    return state or RunState(inputs={}, max_iterations=default_max)


def last_start_of(events: list[dict[str, Any]], step: str) -> int | None:
    """The seq of the most recent step_started of `step`, or None when it never ran."""
    found = None
    for e in events:
        if e["type"] == "step_started" and e["step"] == step:
            found = int(e["seq"])
    return found


def usage_from_events(events: list[dict[str, Any]]) -> dict[str, Any]:
    """Tokens and cost per step, summed over a run's step_finished events."""
    from podium.steps.base import Usage

    out: dict[str, Usage] = {}
    for e in events:
        if e["type"] != "step_finished" or not (e.get("input_tokens") or e.get("output_tokens")
                                                 or e.get("model")):
            continue
        u = Usage(int(e.get("input_tokens", 0)), int(e.get("output_tokens", 0)),
                  int(e.get("cached_tokens", 0)), e.get("cost_usd"), e.get("model"),
                  bool(e.get("priced", True)))
        prev = out.get(e["step"])
        out[e["step"]] = u if prev is None else prev + u
    return out
