"""The PodiumRun workflow: a deterministic loop that asks activities to advance its run one
node at a time, fans a group's members out with the group's `max_concurrent` held across
every worker, waits for gate answers as signals, and ends the run on cancel or timeout.

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


def members_queue(task_queue: str) -> str:
    """The task queue of a group's members: never eager, so they spread over the workers."""
    return f"{task_queue}.members"


@workflow.defn(name="PodiumRun", sandboxed=False)
class PodiumRun:
    def __init__(self) -> None:
        self._answers = 0  # gate answers signalled so far

    @workflow.signal(name="answer")
    def answer(self, gate_id: int) -> None:
        """A person answered gate `gate_id` (the answer is in the store): go on."""
        self._answers += 1

    @workflow.run
    async def run(self, params: dict[str, Any]) -> dict[str, Any]:
        run_id = str(params["run_id"])
        timeout = params.get("timeout_seconds")
        try:
            if timeout:
                return await asyncio.wait_for(self._drive(run_id), float(timeout))
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

    async def _drive(self, run_id: str) -> dict[str, Any]:
        mode = "raise"  # a group's members not done yet are handed out
        while True:
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
        gate (as locally: the members in flight finish). True when one parked."""
        gate = asyncio.Semaphore(max(1, int(step["max_concurrent"])))
        queue = members_queue(workflow.info().task_queue)
        seen: set[str] = set()

        async def one(label: str) -> None:
            async with gate:
                if "parked" in seen or ("failed" in seen and step["fail_fast"]):
                    return
                try:
                    status = await workflow.execute_activity(
                        MEMBER, args=[run_id, step["group"], label], task_queue=queue,
                        **_OPTIONS)
                except ActivityError:
                    status = "failed"
                seen.add(status)

        await asyncio.gather(*(one(label) for label in step["members"]))
        return "parked" in seen
