"""The PodiumRun workflow: a deterministic loop that asks activities to advance its run one
node at a time, fans a group's members out with the group's `max_concurrent` held across
every worker, waits for gate answers as signals, and ends the run on cancel or timeout.

Temporal bounds one workflow's history (50,000 events): a run goes on in a new workflow run
(continue-as-new, between two nodes) once its history passes HISTORY_EVENTS or the server
suggests it, and a group of more than CHILD_MEMBERS members runs them in child workflows
(PodiumMembers) of that many each, one after another, so that `max_concurrent` still holds
across them. Everything else a run needs is in the store, so a new workflow run carries only
the run id, the mode of its next advance and the timeout's deadline.

It holds no run logic of its own: routing, `set`, templates and iteration limits run in the
`advance` activity, which commits the step and its route together in the store (the route a
node took is then in this workflow's history as the activity's result). The workflow imports
nothing but temporalio, so it runs outside the sandbox (`sandboxed=False`): there is nothing
non-deterministic for the sandbox to catch, and a sandboxed import of podium would cost every
workflow task time for nothing.
"""

from __future__ import annotations

import asyncio
import functools
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, CancelledError
from temporalio.workflow import ActivityCancellationType

ADVANCE = "podium.advance"
MEMBER = "podium.member"
END = "podium.end"
PARK = "podium.park"

# A step may take hours (an agent, a script); the heartbeat says it is alive meanwhile.
_OPTIONS: dict[str, Any] = {
    "start_to_close_timeout": timedelta(days=1),
    "heartbeat_timeout": timedelta(seconds=6),
    # a cancelled run records its end once its steps in flight have stopped
    "cancellation_type": ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    "retry_policy": RetryPolicy(initial_interval=timedelta(milliseconds=200),
                                backoff_coefficient=2.0, maximum_interval=timedelta(seconds=5)),
}


# History bounds (docs/decisions/0016-temporal-executor.md): a node costs ~6 history events, a
# member ~3.5. Both can be lowered per run (`podium run --temporal` reads
# PODIUM_TEMPORAL_HISTORY_EVENTS and PODIUM_TEMPORAL_CHILD_MEMBERS).
HISTORY_EVENTS = 10_000
CHILD_MEMBERS = 2_000


def members_queue(task_queue: str) -> str:
    """The task queue of a group's members: never eager, so they spread over the workers."""
    return f"{task_queue}.members"


@workflow.defn(name="PodiumRun", sandboxed=False)
class PodiumRun:
    def __init__(self) -> None:
        self._answers = 0  # gate answers signalled so far
        self._fans = 0  # groups handed out to child workflows by this workflow run
        self._params: dict[str, Any] = {}

    @workflow.signal(name="answer")
    def answer(self, gate_id: int) -> None:
        """A person answered gate `gate_id` (the answer is in the store): go on."""
        self._answers += 1

    @workflow.run
    async def run(self, params: dict[str, Any]) -> dict[str, Any]:
        run_id = str(params["run_id"])
        self._params = dict(params)
        timeout = params.get("timeout_seconds")
        if timeout and params.get("deadline") is None:  # the first of the run's workflow runs
            self._params["deadline"] = workflow.now().timestamp() + float(timeout)
        deadline = self._params.get("deadline")
        try:
            if deadline is not None:
                left = float(deadline) - workflow.now().timestamp()
                if left <= 0:
                    raise TimeoutError
                return await asyncio.wait_for(self._drive(run_id), left)
            return await self._drive(run_id)
        except TimeoutError:
            return await self._end(run_id, "limit")
        except (asyncio.CancelledError, CancelledError):
            await self._end(run_id, "interrupted")
            raise

    async def _end(self, run_id: str, status: str) -> dict[str, Any]:
        result: dict[str, Any] = await workflow.execute_activity(
            END, args=[run_id, status], **_OPTIONS)
        return result

    def _history_full(self) -> bool:
        info = workflow.info()
        bound = int(self._params.get("history_events") or HISTORY_EVENTS)
        return info.is_continue_as_new_suggested() or info.get_current_history_length() > bound

    async def _drive(self, run_id: str) -> dict[str, Any]:
        # "raise": a group's members not done yet are handed out; "gather": the group is
        # aggregated from what its members committed
        mode = str(self._params.get("mode") or "raise")
        while True:
            if self._history_full():  # between two nodes: nothing in flight
                workflow.continue_as_new({**self._params, "mode": mode})
            before = self._answers
            step: dict[str, Any] = await workflow.execute_activity(
                ADVANCE, args=[run_id, mode], **_OPTIONS)
            kind = step["kind"]
            mode = "raise"
            if kind == "finished":
                return step
            if kind == "waiting":  # days, if need be: no timeout but the run's own
                await workflow.wait_condition(functools.partial(self._answered_since, before))
            elif kind == "fan_out":
                if await self._fan_out(run_id, step):  # a member waits for a person
                    await workflow.execute_activity(PARK, args=[run_id], **_OPTIONS)
                    await workflow.wait_condition(functools.partial(self._answered_since,
                                                                    before))
                    continue  # its members not done yet are handed out again
                mode = "gather"  # the group is aggregated from what its members committed

    def _answered_since(self, count: int) -> bool:
        return self._answers > count

    async def _fan_out(self, run_id: str, step: dict[str, Any]) -> bool:
        """One activity per member, at most `max_concurrent` at once across all workers;
        with fail_fast, no member starts after one failed, and none after one parked at a
        gate (as locally: the members in flight finish). A group past `child_members` runs
        its members in child workflows of that many, one after another. True when one
        parked."""
        labels: list[str] = list(step["members"])
        per = max(1, int(self._params.get("child_members") or CHILD_MEMBERS))
        if len(labels) <= per:
            return "parked" in await run_members(run_id, step, labels)
        self._fans += 1
        seen: set[str] = set()
        for n, start in enumerate(range(0, len(labels), per)):
            if _stops(seen, step):
                break
            slim = {k: step[k] for k in ("group", "max_concurrent", "fail_fast")}
            got = await workflow.execute_child_workflow(
                PodiumMembers.run, {"run_id": run_id, "step": slim,
                                    "members": labels[start:start + per]},
                id=f"{workflow.info().workflow_id}.members.{workflow.info().run_id}."
                   f"{self._fans}.{n}",
                task_queue=workflow.info().task_queue)
            seen.update(got)
        return "parked" in seen


def _stops(seen: set[str], step: dict[str, Any]) -> bool:
    """No member starts after one parked at a gate, nor with fail_fast after one failed."""
    return "parked" in seen or ("failed" in seen and bool(step["fail_fast"]))


async def run_members(run_id: str, step: dict[str, Any], labels: list[str]) -> set[str]:
    """One activity per member, at most the group's `max_concurrent` at once across all
    workers; what the members ended as ('done', 'failed', 'parked')."""
    gate = asyncio.Semaphore(max(1, int(step["max_concurrent"])))
    queue = members_queue(workflow.info().task_queue)
    seen: set[str] = set()

    async def one(label: str) -> None:
        async with gate:
            if _stops(seen, step):
                return
            try:
                status = await workflow.execute_activity(
                    MEMBER, args=[run_id, step["group"], label], task_queue=queue,
                    **_OPTIONS)
            except ActivityError:
                status = "failed"
            seen.add(status)

    await asyncio.gather(*(one(label) for label in labels))
    return seen


@workflow.defn(name="PodiumMembers", sandboxed=False)
class PodiumMembers:
    """A slice of a large group's members, in a history of its own (see the module's
    docstring); what they ended as, for the parent to stop handing out more."""

    @workflow.run
    async def run(self, params: dict[str, Any]) -> list[str]:
        return sorted(await run_members(str(params["run_id"]), params["step"],
                                        list(params["members"])))
