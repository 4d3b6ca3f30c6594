"""Runs whose executor is a Temporal cluster: where their server is, and telling their
workflow that a gate was answered or that the run must stop, asking what became of its
workflow. temporalio is imported only
here, and only for such runs."""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING, Any

from podium.blocking import run_to_end
from podium.errors import PodiumError

if TYPE_CHECKING:
    from temporalio.client import Client, WorkflowHandle

    from podium.store.base import RunRecord

ENV = "PODIUM_TEMPORAL_ADDRESS"


class TemporalUnreachable(PodiumError):
    exit_code = 3


def address(given: str | None) -> str | None:
    """--temporal HOST:PORT, else PODIUM_TEMPORAL_ADDRESS, else None (run locally)."""
    return given or os.environ.get(ENV) or None


def on_temporal(run: RunRecord) -> dict[str, Any] | None:
    """Where a run's workflow lives ({address, namespace, task_queue, workflow_id}), or None
    for a run that a local process advances."""
    kept = (run.options or {}).get("temporal")
    return dict(kept) if isinstance(kept, dict) else None


def _probe(where: str) -> None:
    """A plain TCP connect first: a server that is not there is reported in one line (the
    SDK's own failure leaves its runtime threads to abort the interpreter at exit)."""
    import socket

    host, _, port = where.rpartition(":")
    if not host or not port.isdigit():
        raise TemporalUnreachable(f"the Temporal address '{where}' is not HOST:PORT")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except OSError as exc:
        raise TemporalUnreachable(f"cannot reach the Temporal server at {where}: "
                                  f"{exc.strerror or exc}") from None


@functools.cache  # once per process, before its first client
def _route_core_logs() -> None:
    """The SDK's core writes its log lines (a gRPC call `retried` while the server
    restarts, say) to stdout, where they would land inside a `--json` document. Before
    the first client, every process's runtime forwards them to the Python logger
    `temporalio.core` instead, at the same levels (core WARN, others ERROR), which writes
    to stderr (the logging module's last-resort handler; podium installs none)."""
    import logging

    from temporalio.runtime import (
        LogForwardingConfig,
        LoggingConfig,
        Runtime,
        TelemetryConfig,
        TelemetryFilter,
    )

    forwarded = LoggingConfig(filter=TelemetryFilter(core_level="WARN", other_level="ERROR"),
                              forwarding=LogForwardingConfig(
                                  logger=logging.getLogger("temporalio.core")))
    Runtime.set_default(Runtime(telemetry=TelemetryConfig(logging=forwarded)),
                        error_if_already_set=False)


async def connect(where: str, namespace: str = "default") -> Client:
    from temporalio.client import Client

    _probe(where)
    _route_core_logs()
    try:
        return await Client.connect(where, namespace=namespace)
    except Exception as exc:  # the SDK raises RuntimeError with the transport's reason
        reason = " ".join(str(exc).split())[:200]
        raise TemporalUnreachable(f"cannot reach the Temporal server at {where} (namespace "
                                  f"{namespace}): {reason}") from None


async def _handle(run: RunRecord) -> tuple[str, WorkflowHandle[Any, Any]]:
    """The run's server address and a handle on its workflow."""
    where = on_temporal(run) or {}
    target = str(where.get("address") or "") or address(None) or ""
    if not target:
        raise TemporalUnreachable(f"run {run.id} runs on Temporal but its server is not known: "
                                  f"set {ENV}")
    client = await connect(target, str(where.get("namespace") or "default"))
    handle = client.get_workflow_handle(str(where.get("workflow_id") or run.id))
    return target, handle


async def _handle_call(run: RunRecord, what: str, gate_id: int | None) -> str | None:
    """Signal the answer, or cancel the workflow when it still runs (the server accepts
    cancelling a closed one, silently); over one connection. Returns the workflow's status
    as `_status` reads it ('running' when it was signalled or cancelled)."""
    target, handle = await _handle(run)
    status = "running"
    try:
        if what == "answer":
            await handle.signal("answer", gate_id)
        else:
            status = await _status(run, target, handle) or "unknown"
            if status == "running":
                await handle.cancel()
    except TemporalUnreachable:
        raise
    except Exception as exc:
        reason = " ".join(str(exc).split())[:200]
        raise TemporalUnreachable(f"run {run.id}: the Temporal server at {target} refused to "
                                  f"{'signal' if what == 'answer' else 'cancel'} workflow "
                                  f"{handle.id}: {reason}") from None
    return None if status == "unknown" else status


def signal_answer(run: RunRecord, gate_id: int) -> None:
    """Tell the run's workflow that gate `gate_id` was answered (the answer is in the store)."""
    run_to_end(_handle_call(run, "answer", gate_id), "podium-temporal")


def cancel(run: RunRecord) -> str | None:
    """Cancel the run's workflow when it still runs: its activities stop, and it ends
    `interrupted`. Returns what `workflow_status` would have said before: 'running' (now
    cancelled), how it had closed, or None when the server does not know it."""
    return run_to_end(_handle_call(run, "cancel", None), "podium-temporal")


async def _status(run: RunRecord, target: str, handle: WorkflowHandle[Any, Any]) -> str | None:
    from temporalio.service import RPCError, RPCStatusCode

    try:
        desc = await handle.describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        reason = " ".join(str(exc).split())[:200]
        raise TemporalUnreachable(f"run {run.id}: the Temporal server at {target} refused to "
                                  f"describe workflow {handle.id}: {reason}") from None
    return desc.status.name.lower() if desc.status is not None else None


async def _describe(run: RunRecord) -> str | None:
    target, handle = await _handle(run)
    return await _status(run, target, handle)


def workflow_status(run: RunRecord) -> str | None:
    """What the server says of the run's workflow: 'running', or how it closed
    ('terminated', 'failed', 'completed', 'canceled', 'timed_out', ...); None when the server does not know it (never
    started, or deleted after its retention). TemporalUnreachable when the server is not
    there."""
    return run_to_end(_describe(run), "podium-temporal")
