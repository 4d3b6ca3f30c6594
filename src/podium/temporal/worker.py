"""`podium worker --temporal HOST:PORT`: a Temporal worker that advances podium runs until
SIGTERM or SIGINT, then finishes cleanly (activities in flight are cancelled and run again on
another worker)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from podium.app.remote import connect
from podium.temporal.workflow import members_queue


@dataclass
class WorkerRequest:
    address: str
    namespace: str = "default"
    task_queue: str = "podium"
    concurrency: int = 100  # activities (steps, members) at once on this worker


async def _serve(req: WorkerRequest) -> int:
    from temporalio.worker import Worker

    from podium.temporal.activities import Activities
    from podium.temporal.workflow import PodiumRun

    client = await connect(req.address, req.namespace)
    # what a script step may read to know which worker ran it (HOST:PID)
    os.environ["PODIUM_WORKER"] = f"{os.uname().nodename}:{os.getpid()}"
    # steps and members have their own slots (req.concurrency each)
    pool = ThreadPoolExecutor(max_workers=2 * req.concurrency,
                              thread_name_prefix="podium-act")
    acts = Activities(pool)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # A run's next step runs at once on the worker that decided it (eager activities, one
    # round trip less per step); a group's members go to a queue of their own, which is never
    # eager, so they spread over every worker.
    steps = Worker(client, task_queue=req.task_queue, workflows=[PodiumRun],
                   activities=[acts.advance, acts.park, acts.end],
                   max_concurrent_activities=req.concurrency)
    members = Worker(client, task_queue=members_queue(req.task_queue),
                     activities=[acts.member], max_concurrent_activities=req.concurrency)
    sys.stderr.write(f"podium worker: serving task queue '{req.task_queue}' of "
                     f"{req.address} (namespace {req.namespace}, {req.concurrency} at once)\n")
    sys.stderr.flush()
    async with steps, members:
        await stop.wait()
        sys.stderr.write("podium worker: stopping\n")
    acts.members.close()
    pool.shutdown(wait=False, cancel_futures=True)
    return 0


def run_worker(req: WorkerRequest) -> int:
    from podium.errors import PodiumError

    try:
        return asyncio.run(_serve(req))
    except PodiumError as exc:
        sys.stderr.write(f"podium worker: {exc}\n")
        return exc.exit_code
