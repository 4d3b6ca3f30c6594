"""A run's history folded back into its state and spending (for resume, resume --from, views).

The store keeps the events; what they mean for a run (counts, records, granted limits, usage)
is engine logic and lives here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import TYPE_CHECKING, Any, TypeAlias

from podium.records import record
from podium.steps.state import RunState, StepRecord

if TYPE_CHECKING:
    from podium.events.model import Event
    from podium.events.spend import RunSpend
    from podium.steps.base import Usage
    from podium.store.base import Checkpoint, RunCatalog

_GROUP_TYPES = ("parallel", "for_each")

# a committed event: typed (RunCatalog.history, what resume folds) or its stored dict (the
# views that read `events`); the folds below read either
Stored: TypeAlias = "Event | Mapping[str, Any]"


def _get(e: Stored, key: str, default: Any = None) -> Any:
    return e.get(key, default) if isinstance(e, Mapping) else getattr(e, key, default)


def as_dict(e: Stored) -> dict[str, Any]:
    """A committed event as its stored dict (what engine/groups.py and the agent's dialog
    read of a carried member or a parked dialog)."""
    return dict(e) if isinstance(e, Mapping) else e.model_dump(mode="json")


def _group_size(e: Stored) -> int:
    """How many executions a group's step_finished counts (one per member or item)."""
    out = _get(e, "output")
    if not isinstance(out, dict):
        return 1
    if _get(e, "step_type") == "for_each":
        return int(out.get("count", 0))
    return len(out.get("outputs") or {}) + len(out.get("errors") or {})


def fold_events(events: Sequence[Stored], *, upto_seq: int | None = None,
                default_max: int = 10) -> RunState:
    """The state after applying `events` (only those with seq <= upto_seq, when given).

    A group member's events (they carry `group`) only advance the member's execution count,
    and only once their group finished: a member commits on its own, and the members of a
    group that a kill interrupted count when the group finally completes (`unfinished_group`
    reuses them). The group's own step_finished holds their outputs and counts their
    executions."""
    state: RunState | None = None
    members: dict[str, dict[str, int]] = {}  # group -> member name -> highest iteration
    for e in events:
        if upto_seq is not None and _get(e, "seq") > upto_seq:
            break
        t = _get(e, "type")
        if t == "run_started":
            if state is None:
                state = RunState(inputs=dict(_get(e, "inputs", {})),
                                 max_iterations=int(_get(e, "max_iterations", default_max)))
            continue
        if state is None:
            continue
        if t in ("step_finished", "step_failed") and _get(e, "group"):
            name = str(_get(e, "step")).split("[", 1)[0]
            seen = members.setdefault(str(_get(e, "group")), {})
            seen[name] = max(seen.get(name, 0), int(_get(e, "iteration")))
        elif t == "step_finished":
            for name, it in members.pop(_get(e, "step"), {}).items():
                state.step_counts[name] = max(state.step_counts.get(name, 0), it)
            state.step_counts[_get(e, "step")] = int(_get(e, "iteration"))
            state.run_iteration += (_group_size(e) if _get(e, "step_type") in _GROUP_TYPES else 1)
            state.store(_get(e, "step"), _get(e, "output"))
            state.records.append(StepRecord(_get(e, "step"), _get(e, "step_type"), int(_get(e, "iteration")),
                                            state.run_iteration, _get(e, "output"),
                                            elapsed=float(_get(e, "elapsed", 0.0))))
        elif t == "route_taken" and state.records and state.records[-1].step == _get(e, "from_step"):
            state.records[-1].route_to = _get(e, "to_step")
        elif t == "checkpoint":
            state.run_iteration = int(_get(e, "run_iteration", state.run_iteration))
        elif t == "limit_resolved":
            state.max_iterations = int(_get(e, "new_maximum"))
        elif t == "context_trimmed":
            state.apply_trim(list(_get(e, "dropped") or []), dict(_get(e, "truncated") or {}),
                             _get(e, "summary"))
    return state or RunState(inputs={}, max_iterations=default_max)


def granted_after(events: Sequence[Stored], seq: int) -> int | None:
    """The iteration limit a person granted after `seq` (the last checkpoint), if any.

    A grant is committed when it is given, before the step it allows; a run killed or stopped
    before that step committed resumes at the same place and keeps the grant."""
    granted = None
    for e in events:
        if _get(e, "seq") > seq and _get(e, "type") == "limit_resolved":
            granted = int(_get(e, "new_maximum"))
    return granted


def last_start_of(events: Sequence[Stored], step: str) -> int | None:
    """The seq of the most recent step_started of `step`, or None when it never ran."""
    found = None
    for e in events:
        if _get(e, "type") == "step_started" and _get(e, "step") == step and not _get(e, "group"):
            found = int(_get(e, "seq"))
    return found


def stored_spend(store: RunCatalog, run_id: str,
                 events: Sequence[Stored] | None = None) -> RunSpend:
    """What a stored run spent: the fold of its model calls and of its sub-workflow runs'
    (events/spend.py); `events` when the caller has read them already."""
    from podium.events.spend import fold_spend

    children = [(str((child.options or {}).get("parent_step")), stored_spend(store, child.id))
                for child in store.list_runs(parent=run_id, limit=100_000)]
    return fold_spend(store.events(run_id) if events is None else events, children)


def usage_rows(spent: RunSpend) -> dict[str, Usage]:
    """A run's spend per agent as the rows of a RunResult (`usage_by_step`)."""
    from podium.steps.base import Usage  # lazily: fold_events alone loads no template engine

    return {name: Usage(s.input_tokens, s.output_tokens, s.cached_tokens,
                        s.cost_usd if s.unpriced < s.calls else None,
                        ", ".join(s.models) or None,
                        s.priced) for name, s in spent.by_agent.items()}


def unfinished_group(events: Sequence[Stored]) -> tuple[str, dict[str, dict[str, Any]]] | None:
    """The group a run was inside when it stopped, with the members that had already finished
    or failed then (their step_finished or step_failed event, by member label): a resume
    reuses them instead of running them, and of recording them, again. None when the run's
    last step started was not a group, or it completed."""
    group: str | None = None
    done: dict[str, dict[str, Any]] = {}
    for e in events:
        t = _get(e, "type")
        if _get(e, "group"):
            if group is not None and _get(e, "group") == group and t in ("step_finished",
                                                                    "step_failed"):
                done[str(_get(e, "step"))] = as_dict(e)
            continue
        if t == "step_started":
            group = _get(e, "step") if _get(e, "step_type") in _GROUP_TYPES else None
            done = {}
        elif t in ("step_finished", "step_failed") and _get(e, "step") == group:
            group, done = None, {}
    return (group, done) if group is not None else None


def parked_dialog(events: Sequence[Stored], seq: int, step: str) -> dict[str, Any] | None:
    """The dialog_started event of the agent `step` whose run parked in it after `seq` (the
    last checkpoint) and has not finished it: its resume goes on from there (the output
    under discussion and what the execution had spent) instead of asking the model again.
    None when the run did not stop in a dialog of that step."""
    found: dict[str, Any] | None = None
    for e in events:
        if _get(e, "seq") <= seq or _get(e, "group") or _get(e, "step") != step:
            continue
        if _get(e, "type") == "dialog_started":
            found = as_dict(e)
        elif _get(e, "type") in ("dialog_finished", "step_finished", "step_failed"):
            found = None
    return found


@record
class Restart:
    """Where a stored run goes on, folded from its committed events: the state its last
    commit left (or the state before `before_seq`), the node it goes on at (None: its entry
    point, nothing was committed), the seq that state stands at, the members of the group it
    was inside that already finished or failed (by group, then label: engine/groups.py
    reuses them), and the dialog its agent parked in (steps/agent_checks.py goes on in it)."""

    state: RunState
    start: str | None
    state_seq: int | None
    carried: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    dialog: dict[str, Any] | None = None


def restart_of(events: Sequence[Stored], checkpoint: Checkpoint | None, *,
               inputs: dict[str, Any], entry_point: str, default_max: int = 10,
               before: tuple[str, int] | None = None) -> Restart:
    """The one resume fold, for a top-level run (app/runs.py) and a sub-workflow's child
    (engine/subflow.py) alike. `inputs`: the run's recorded inputs (a run that committed
    nothing starts afresh with them); `before`: (step, seq) to go on at `step` as the run
    stood before its step_started at `seq` (resume --from), with nothing carried over."""
    if before is not None:
        step, seq = before
        return Restart(fold_events(events, upto_seq=seq - 1, default_max=default_max), step,
                       seq - 1)
    if checkpoint is not None:
        state = fold_events(events, upto_seq=checkpoint.seq, default_max=default_max)
        start: str | None = checkpoint.next_step or checkpoint.step
        state_seq: int | None = checkpoint.seq
    else:  # nothing was committed: start afresh (keeping only the run's start)
        state = fold_events([e for e in events if _get(e, "type") == "run_started"][:1],
                            default_max=default_max)
        state.inputs = dict(inputs)
        start, state_seq = None, None
    granted = granted_after(events, state_seq or 0)  # given before the step it allows
    if granted is not None:
        state.max_iterations = max(state.max_iterations, granted)
    restart = Restart(state, start, state_seq)
    at = start or entry_point
    inside = unfinished_group(events)
    if inside is not None and inside[0] == at:  # members that finished stay done
        restart.carried[inside[0]] = inside[1]
    # (with no checkpoint yet, every event after run_started belongs to this attempt)
    restart.dialog = parked_dialog(events, state_seq or 0, at)
    return restart
