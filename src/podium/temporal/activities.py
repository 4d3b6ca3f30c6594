"""The activities of a run on Temporal workers, each against the shared run store: `advance`
runs one node (or aggregates a group whose members committed), `member` runs one member of a
group, `end` records how a cancelled or timed-out run ended.

The engine is synchronous: each activity runs its work on the worker's thread pool and
heartbeats from the event loop while it runs, so a worker that dies is noticed within the
heartbeat timeout and its activities run again elsewhere. Every store handle here numbers the
events it commits (RunStore.number_at_commit): members on several workers write to one run.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import field
from typing import TYPE_CHECKING, Any, TypeVar

from temporalio import activity

from podium.records import record
from podium.temporal.workflow import ADVANCE, END, MEMBER, PARK

if TYPE_CHECKING:
    from podium.app.durable import StoredEngine as Engine
    from podium.store.base import RunStore

T = TypeVar("T")
BEAT = 2.0  # seconds between heartbeats (the workflow's heartbeat timeout is 6 s)
STOP_GRACE = 10.0  # seconds a cancelled activity waits for its step to stop


def _store() -> RunStore:
    from podium.app.home import open_store

    store = open_store(verify=False)
    store.number_at_commit()
    return store


def advance_one(run_id: str, mode: str, cancel: threading.Event,
                attempt: int = 1) -> dict[str, Any]:
    """Run the run's next node (mode "raise": a group hands its members out) or aggregate
    the group its members finished (mode "gather"), committing it and its route: one
    `Engine.advance` (app/durable.py), the operation a local run repeats."""
    from podium.app.durable import advance_stored

    store = _store()
    try:
        return advance_stored(store, run_id, mode, cancel=cancel, attempt=attempt,
                              activity=ADVANCE, unbuildable=lambda exc: end_run(
                                  run_id, "error", str(exc), exc.exit_code))
    finally:
        store.close()


@record
class _Kept:
    """A run's engine kept on this worker for its group's members (one per checkpoint)."""

    engine: Engine
    store: RunStore
    members: dict[str, dict[str, Any]] = field(default_factory=dict)  # group -> label -> Member


class Members:
    """Runs group members; the engine of a run at a checkpoint is built once per worker and
    shared by the members that run here at once (as a local group's threads share it)."""

    def __init__(self, keep: int = 8) -> None:
        self._kept: OrderedDict[tuple[str, int], _Kept] = OrderedDict()
        self._lock = threading.Lock()
        self._keep = keep
        self._probe: RunStore | None = None  # reads where runs stand (one handle, kept)

    def _kept_for(self, run_id: str) -> _Kept:
        with self._lock:
            if self._probe is None:
                self._probe = _store()
            cp = self._probe.latest_checkpoint(run_id)
            key = (run_id, cp.seq if cp is not None else 0)
            found = self._kept.get(key)
            if found is None:
                from podium.app.durable import engine_of

                store = _store()
                engine, _ = engine_of(store, run_id, withdraw=False)
                found = self._kept[key] = _Kept(engine, store)
                while len(self._kept) > self._keep:
                    _, old = self._kept.popitem(last=False)
                    old.engine.services.providers.close()
                    old.store.close()
            return found

    def run(self, run_id: str, group: str, label: str, attempt: int,
            cancel: threading.Event) -> str:
        from podium.app.durable import members_of, run_member
        from podium.errors import StepError

        kept = self._kept_for(run_id)
        if cancel.is_set():
            kept.engine.services.cancel.set()
        if attempt > 1:
            done = self._committed(kept, group, label, attempt)
            if done is not None:
                return done
        with self._lock:
            members = kept.members.get(group)
            if members is None:
                members = kept.members[group] = members_of(kept.engine, group)
        member = members.get(label)
        if member is None:
            raise StepError(f"group '{group}' has no member '{label}' now", step=group)
        return run_member(kept.engine, group, member)

    @staticmethod
    def _committed(kept: _Kept, group: str, label: str, attempt: int) -> str | None:
        """A retried member: its outcome when it had committed before its worker died
        (nothing runs twice), else None (it runs again). Either way an event says so."""
        from podium.app.durable import committed_member
        from podium.events.model import ActivityRetried

        event = committed_member(kept.store, kept.engine.run_id, group, label)
        kept.engine.bus.emit(ActivityRetried(
            step=label, activity=MEMBER, attempt=attempt, reused=event is not None,
            reason="its worker stopped heartbeating (killed, or cut off) before it reported"))
        if event is None:
            return None
        return "failed" if event["type"] == "step_failed" else "finished"

    def cancel(self, run_id: str) -> None:
        """The run is stopping: its members on this worker stop their steps."""
        with self._lock:
            for (rid, _), kept in self._kept.items():
                if rid == run_id:
                    kept.engine.services.cancel.set()
        stop_commands(run_id)

    def close(self) -> None:
        with self._lock:
            for kept in self._kept.values():
                kept.engine.services.providers.close()
                kept.store.close()
            self._kept.clear()
            if self._probe is not None:
                self._probe.close()
                self._probe = None


def stop_commands(run_id: str) -> None:
    """SIGTERM the commands (script steps) this worker runs for the run or its sub-runs
    (tools/processes.py marks each with PODIUM_RUN_ID and makes it a group leader): a
    stopped run's steps in flight end now, and their failure is recorded before its end."""
    import os
    import signal

    import psutil

    from podium.app.family import family
    from podium.tools.processes import RUN_ID_VARIABLE

    store = _store()
    try:
        runs = set(family(store, run_id))
    finally:
        store.close()
    for child in psutil.Process().children(recursive=True):
        try:
            mine = child.environ().get(RUN_ID_VARIABLE) in runs and \
                os.getpgid(child.pid) == child.pid
            if mine:
                os.killpg(child.pid, signal.SIGTERM)
        except (psutil.Error, OSError):
            continue


def park_run(run_id: str) -> dict[str, Any]:
    """A member of the run's group waits at a gate (its sub-workflow's): the run waits, as a
    local run parks then (run_finished waiting, exit 5), until the gate is answered."""
    from podium import exitcodes
    from podium.app.family import family
    from podium.clock import SystemClock
    from podium.events.bus import EventBus
    from podium.events.model import RunFinished

    store = _store()
    try:
        run = store.get_run(run_id)
        gates = [g for rid in family(store, run_id) for g in store.gates(run_id=rid,
                                                                          status="open")]
        step = gates[-1].step if gates else run.current_step
        bus = EventBus(run_id, SystemClock())
        bus.add_committer(store)
        bus.emit(RunFinished(status="waiting", step=step, message=(
            f"waiting for a person to answer gate '{step}': podium gate answer {run_id} "
            "VALUE"), elapsed=time.time() - run.created_at, iterations=run.iterations,
            exit_code=exitcodes.WAITING))
        store.commit()
        return {"kind": "waiting"}
    finally:
        store.close()


def end_run(run_id: str, status: str, message: str | None = None,
            exit_code: int | None = None) -> dict[str, Any]:
    """Record the end of a run its workflow ended (cancelled: interrupted; its timeout:
    limit), unless it already ended."""
    from podium import exitcodes
    from podium.clock import SystemClock
    from podium.events.bus import EventBus
    from podium.events.model import LimitReached, RunFinished

    store = _store()
    try:
        run = store.get_run(run_id)
        if run.status not in ("running", "waiting") and status != "error":
            return {"kind": "finished", "status": run.status, "exit_code": run.exit_code}
        bus = EventBus(run_id, SystemClock())
        bus.add_committer(store)
        elapsed = time.time() - run.created_at
        code = exit_code if exit_code is not None else {
            "limit": exitcodes.LIMIT, "interrupted": exitcodes.INTERRUPTED}.get(
                status, exitcodes.RUNTIME_ERROR)
        if status == "limit":
            opts = run.options or {}
            bus.emit(LimitReached(limit="timeout", step=run.current_step, current=elapsed,
                                  maximum=float(opts.get("timeout_seconds") or 0)))
            message = message or f"the run exceeded its timeout of {opts.get('timeout_seconds')}s"
        if status == "interrupted":
            message = message or "stopped on request (its Temporal workflow was cancelled)"
        bus.emit(RunFinished(status=status, message=message, step=run.current_step,
                             elapsed=elapsed, iterations=run.iterations, exit_code=code))
        store.commit()
        return {"kind": "finished", "status": status, "exit_code": code}
    finally:
        store.close()


class Activities:
    """The worker's activities: each runs its work on `pool` and heartbeats meanwhile."""

    def __init__(self, pool: ThreadPoolExecutor) -> None:
        self.pool = pool
        self.members = Members()
        self.running: set[asyncio.Future[Any]] = set()  # work on the pool, not done yet

    async def _beating(self, work: Callable[..., T], *args: Any,
                       cancel: threading.Event | None = None,
                       on_cancel: Callable[[], None] | None = None) -> T:
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self.pool, work, *args)
        self.running.add(future)
        future.add_done_callback(self.running.discard)
        try:
            while True:  # (a step done within BEAT costs no heartbeat at all)
                done, _ = await asyncio.wait({future}, timeout=BEAT)
                if done:
                    return future.result()
                activity.heartbeat()
        except asyncio.CancelledError:
            details = activity.cancellation_details()
            if activity.is_worker_shutdown() or details is None or \
                    not details.cancel_requested:
                # not the run stopping: the worker exits without committing it, or its
                # heartbeat timed out and it runs again elsewhere; its siblings go on
                raise
            if on_cancel is not None:
                on_cancel()
            if cancel is not None:
                cancel.set()  # the engine stops its step, and at its next step boundary
                # the workflow waits for this (WAIT_CANCELLATION_COMPLETED): nothing of the
                # run is written after the end it records
                await asyncio.wait({future}, timeout=STOP_GRACE)
            raise

    @activity.defn(name=ADVANCE)
    async def advance(self, run_id: str, mode: str) -> dict[str, Any]:
        cancel = threading.Event()
        attempt = activity.info().attempt
        return await self._beating(advance_one, run_id, mode, cancel, attempt, cancel=cancel,
                                   on_cancel=lambda: stop_commands(run_id))

    @activity.defn(name=MEMBER)
    async def member(self, run_id: str, group: str, label: str) -> str:
        attempt = activity.info().attempt
        cancel = threading.Event()
        return await self._beating(self.members.run, run_id, group, label, attempt, cancel,
                                   cancel=cancel,
                                   on_cancel=lambda: self.members.cancel(run_id))

    @activity.defn(name=PARK)
    async def park(self, run_id: str) -> dict[str, Any]:
        return await self._beating(park_run, run_id)

    @activity.defn(name=END)
    async def end(self, run_id: str, status: str) -> dict[str, Any]:
        return await self._beating(end_run, run_id, status)
