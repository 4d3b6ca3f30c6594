"""A stored run advanced one node at a time by an outside executor (the Temporal activities,
temporal/activities.py): its engine rebuilt from its last commit with the executor's
stepping, one `Engine.advance` (the operation the in-process loop repeats), and what came of
it; the members of a group it handed out, run one by one. Every engine the Temporal worker
uses is built and driven here: the surface imports no engine module."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from podium.app.launch import advance
from podium.errors import PodiumError

if TYPE_CHECKING:
    from typing import TypeAlias

    from podium.engine.groups import Member
    from podium.engine.run import Engine, RunResult
    from podium.store.base import RunStore

    # the engine of a stored run, as a surface names it (it imports no engine module)
    StoredEngine: TypeAlias = Engine

_LOADED: dict[str, Any] = {}  # workflows this process loaded and checked, by path and hash


def engine_of(store: RunStore, run_id: str, *, withdraw: bool, fan_out: str | None = None,
              announce: bool = True, resumed: bool | None = None,
              cancel: threading.Event | None = None) -> tuple[Engine, str | None]:
    """The run's engine as its last commit left it (what `podium resume` would run), wired
    for a worker: `fan_out` "raise" hands a group's members out, "gather" aggregates them;
    its timeout counts from the run's start, whichever worker runs it."""
    from podium.app.runs import ResumeRequest, rebuild_engine
    from podium.engine.run import RunConfig, Stepping

    run = store.get_run(run_id)
    if len(_LOADED) > 64:
        _LOADED.clear()
    deadline = None
    options = run.options or {}
    timeout = options.get("timeout_seconds")
    if timeout:  # the engine's clock is the system's: its monotonic time is time.monotonic
        deadline = time.monotonic() + float(timeout) - (time.time() - run.created_at)
    mode: Literal["raise", "gather"] | None = (
        "raise" if fan_out == "raise" else "gather" if fan_out == "gather" else None)
    config = RunConfig(stepping=Stepping(fan_out=mode, announce=announce),
                       outer_deadline=deadline, resumed=resumed, cancel=cancel)
    engine, start = rebuild_engine(store, run, ResumeRequest(run_id, interactive=False), [],
                                   withdraw=withdraw, loaded=_LOADED, config=config,
                                   jsonl=False)
    return engine, start


def described(result: RunResult) -> dict[str, Any]:
    """What the Temporal workflow needs to know of how an advance ended."""
    from podium.engine.run import HandOut, Next

    hand = result.handoff
    if isinstance(hand, HandOut):
        return {"kind": "fan_out", "group": hand.group, "members": list(hand.members),
                "max_concurrent": hand.max_concurrent, "fail_fast": hand.fail_fast}
    if isinstance(hand, Next):
        return {"kind": "next", "node": hand.node}
    if result.status == "waiting":
        return {"kind": "waiting"}
    return {"kind": "finished", "status": result.status, "exit_code": result.exit_code}


def advance_stored(store: RunStore, run_id: str, mode: str, *, cancel: threading.Event,
                   attempt: int, activity: str,
                   unbuildable: Callable[[PodiumError], dict[str, Any]]) -> dict[str, Any]:
    """Advance the stored run one node (mode "raise": a group hands its members out) or
    aggregate the group its members finished ("gather"), committing it and its route; the
    description of what came of it (`described`). When its engine cannot be built (its
    workflow file changed, a secret is missing), what `unbuildable(error)` gives."""
    status = store.get_run(run_id).status
    if status not in ("running", "waiting"):  # ended meanwhile (stopped, timed out)
        return {"kind": "finished", "status": status, "exit_code": None}
    first = store.get_run(run_id).last_seq == 0
    try:
        engine, start = engine_of(store, run_id, withdraw=True, fan_out=mode,
                                  announce=first or status == "waiting",  # or after a gate
                                  resumed=not first, cancel=cancel)
    except PodiumError as exc:
        return unbuildable(exc)
    if attempt > 1 and not first:  # it goes on from what the last attempt committed
        from podium.events.model import ActivityRetried

        engine.bus.emit(ActivityRetried(
            step=start or "", activity=activity, attempt=attempt,
            reason="its worker stopped heartbeating (killed, or cut off) before it "
            "reported; the run goes on from its last commit"))
    return described(advance(engine, store, start, once=True))


def members_of(engine: Engine, group: str) -> dict[str, Member]:
    """The members of `group` by label, as the group would run them now."""
    from podium.engine.groups import group_members

    return group_members(engine, group)


def run_member(engine: Engine, group: str, member: Member) -> str:
    """Run one member with its own events: `finished`, `failed` or `parked`."""
    from podium.engine.groups import run_member as run

    return run(engine, group, member)


def committed_member(store: RunStore, run_id: str, group: str, label: str
                     ) -> dict[str, Any] | None:
    """A member of the run's unfinished group that committed its step_finished or
    step_failed (a retried member whose worker died after that: it does not run twice)."""
    from podium.engine.history import unfinished_group

    inside = unfinished_group(store.history(run_id))
    done = inside[1] if inside is not None and inside[0] == group else {}
    return done.get(label)
