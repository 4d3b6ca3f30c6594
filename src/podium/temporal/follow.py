"""`podium run FLOW --temporal HOST:PORT`: preflight and record the run here, start its
workflow, then follow it from the shared store with the terminal progress a local run prints,
and end with the same output, summary and exit code."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from dataclasses import field
from typing import TYPE_CHECKING, Any

from podium.records import record

if TYPE_CHECKING:
    from podium.app.launch import LaunchOptions
    from podium.app.runs import StartRequest
    from podium.store.base import RunStore

POLL = 0.05  # seconds between reads of the store while following


@record
class Where:
    address: str
    task_queue: str = "podium"
    namespace: str = "default"


@record
class Outcome:
    """A run's end read back from its events, shaped as cli/summary.py reads a RunResult."""

    run_id: str
    status: str
    exit_code: int
    output: dict[str, Any] | None
    terminal: str | None
    reason: str | None
    error: Any
    path: list[str]
    elapsed: float
    iterations: int
    usage_by_step: dict[str, Any] = field(default_factory=dict)
    budget: Any = None


class _Located:
    def __init__(self, text: str) -> None:
        self.text = text

    def located(self) -> str:
        return self.text

    def __str__(self) -> str:
        return self.text


def _outcome(store: RunStore, run_id: str, events: list[dict[str, Any]],
             finished: dict[str, Any], elapsed: float) -> Outcome:
    from podium.app.history import folded, usage_of
    from podium.errors import RunError

    error = None
    if finished.get("message") and finished["status"] not in ("success", "failed", "waiting"):
        err = RunError(str(finished["message"]), step=finished.get("step"),
                       iteration=finished.get("iteration"))
        err.run_id = run_id
        error = _Located(err.located())
    state = folded(events)
    return Outcome(run_id, str(finished["status"]), int(finished["exit_code"]),
                   finished.get("output"), finished.get("terminal"),
                   finished.get("message") if finished["status"] == "waiting"
                   else finished.get("reason"), error, [r.step for r in state.records],
                   elapsed, int(finished.get("iterations") or 0),
                   usage_of(store, run_id, events))  # its sub-workflow runs' calls too


def _lost_touch(result: asyncio.Future[Any]) -> bool:
    """Did waiting for the workflow fail because its server could not be reached (not
    because the workflow ended)?"""
    from temporalio.service import RPCError

    return not result.cancelled() and isinstance(result.exception(), RPCError)


async def _follow(store: RunStore, run_id: str, handle: Any,
                  observers: list[Any]) -> dict[str, Any] | None:
    """Hand the run's events to the observers as they are committed, until the run ends or
    waits at a gate; None when its workflow ended without recording an end."""
    from podium.events.model import parse_event

    result = asyncio.ensure_future(handle.result())
    after = 0
    try:
        while True:
            for e in store.events(run_id, after_seq=after):
                after = int(e["seq"])
                event = parse_event(e)
                for sink in observers:
                    sink.handle(event)
                if e["type"] == "run_finished":
                    return e
            if result.done():
                if _lost_touch(result):  # the server restarts: ask again once it is back
                    await asyncio.sleep(0.5)
                    result = asyncio.ensure_future(handle.result())
                    continue
                if not store.events(run_id, after_seq=after):
                    return None
                continue
            await asyncio.sleep(POLL)
    finally:
        if not result.done():
            result.cancel()


BOUNDS = {"history_events": "PODIUM_TEMPORAL_HISTORY_EVENTS",
          "child_members": "PODIUM_TEMPORAL_CHILD_MEMBERS"}


def history_bounds() -> dict[str, int]:
    """The bounds of a run's Temporal history that the environment lowers or raises
    (temporal/workflow.py: HISTORY_EVENTS, CHILD_MEMBERS); UsageError for a value that is
    not a positive whole number."""
    from podium.errors import UsageError

    bounds: dict[str, int] = {}
    for key, var in BOUNDS.items():
        raw = os.environ.get(var, "").strip()
        if not raw:
            continue
        if not raw.isdigit() or int(raw) < 1:
            raise UsageError(f"{var} must be a positive whole number (got '{raw}')")
        bounds[key] = int(raw)
    return bounds


async def _start(store: RunStore, start: StartRequest, opts: LaunchOptions,
                 where: Where, started_ids: list[str]) -> tuple[int, Outcome | None]:
    from podium.app.launch import file_hash, new_run_id
    from podium.app.preflight import check_providers
    from podium.app.remote import connect
    from podium.store.base import RunRecord
    from podium.temporal.workflow import PodiumRun

    bounds = history_bounds()  # a bad value is refused before the run is recorded
    client = await connect(where.address, where.namespace)
    run_id = new_run_id()
    # the engine is built here only to preflight (providers, keys) as a local run does
    from podium.app.launch import make_engine

    engine = make_engine(start.workflow, start.path, start.inputs, opts, store, run_id=run_id)
    check_providers(engine)
    engine.services.providers.close()
    timeout = start.workflow.workflow.limits.timeout_seconds
    store.create_run(RunRecord(
        run_id, start.workflow.workflow.name, str(start.path.resolve()), file_hash(start.path),
        start.inputs, status="running", options={
            **start.options, "executor": "temporal", "timeout_seconds": timeout,
            "temporal": {"address": where.address, "namespace": where.namespace,
                         "task_queue": where.task_queue, "workflow_id": run_id}}))
    started = time.monotonic()
    started_ids.append(run_id)
    handle = await client.start_workflow(PodiumRun.run, {"run_id": run_id,
                                                         "timeout_seconds": timeout,
                                                         **bounds},
                                         id=run_id, task_queue=where.task_queue)
    finished = await _follow(store, run_id, handle, opts.observers)
    elapsed = time.monotonic() - started
    if finished is None:
        from podium.app.runs import mark_workflow_closed

        status = mark_workflow_closed(store, run_id)
        sys.stderr.write(f"podium run: the Temporal workflow of run {run_id} ended without "
                         f"recording how the run ended (terminated?); the run is marked "
                         f"{status}\n")
        return 3, None
    return int(finished["exit_code"]), _outcome(store, run_id, store.events(run_id), finished,
                                                elapsed)


def run_on_temporal(store: RunStore, start: StartRequest, opts: LaunchOptions,
                    where: Where) -> tuple[int, Outcome | None]:
    """Start the run as a Temporal workflow and follow it to its end (or its first gate):
    the exit code, and how it ended (None when its workflow ended without saying)."""
    ids: list[str] = []
    try:
        return asyncio.run(_start(store, start, opts, where, ids))
    except KeyboardInterrupt:  # Ctrl-C stops following, not the run
        from podium import exitcodes

        rid = ids[0] if ids else "RUN"
        sys.stderr.write(f"\npodium run: stopped following run {rid}; it goes on on its "
                         f"workers (podium show {rid}; podium stop {rid} cancels it)\n")
        return exitcodes.INTERRUPTED, None
