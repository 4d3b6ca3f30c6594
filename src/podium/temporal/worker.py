"""`podium worker --temporal HOST:PORT`: a Temporal worker that advances podium runs until
SIGTERM or SIGINT, then stops taking work and gives its steps in flight GRACE seconds to
finish; those still running then are left uncommitted, as a killed worker's are, and run again
on another worker."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from podium.app.remote import connect
from podium.records import record
from podium.temporal.workflow import members_queue

GRACE = 30.0  # seconds a stopping worker gives its steps in flight to finish


@record
class WorkerRequest:
    address: str
    namespace: str = "default"
    task_queue: str = "podium"
    concurrency: int = 100  # activities (steps, members) at once on this worker
    grace: float = GRACE  # seconds its steps in flight get to finish when it stops


async def _serve(req: WorkerRequest) -> int:
    from temporalio.worker import Worker

    from podium.temporal.activities import Activities
    from podium.temporal.workflow import PodiumMembers, PodiumRun

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
    grace = timedelta(seconds=req.grace)
    steps = Worker(client, task_queue=req.task_queue, workflows=[PodiumRun, PodiumMembers],
                   activities=[acts.advance, acts.park, acts.end],
                   max_concurrent_activities=req.concurrency, graceful_shutdown_timeout=grace)
    members = Worker(client, task_queue=members_queue(req.task_queue),
                     activities=[acts.member], max_concurrent_activities=req.concurrency,
                     graceful_shutdown_timeout=grace)
    sys.stderr.write(f"podium worker: serving task queue '{req.task_queue}' of "
                     f"{req.address} (namespace {req.namespace}, {req.concurrency} at once)\n")
    sys.stderr.flush()
    async with steps, members:
        await stop.wait()
        sys.stderr.write(f"podium worker: stopping (steps in flight have {req.grace:g} s to "
                         "finish)\n")
        sys.stderr.flush()
    if acts.running:
        # steps still running past the grace: leave now, uncommitted, as a killed worker
        # would (their activities run again on another worker)
        sys.stderr.write("podium worker: stopped; steps still running will run again "
                         "elsewhere\n")
        sys.stderr.flush()
        os._exit(0)
    acts.members.close()
    pool.shutdown(wait=False, cancel_futures=True)
    sys.stderr.write("podium worker: stopped\n")
    return 0


def run_worker(req: WorkerRequest) -> int:
    from podium.errors import PodiumError

    try:
        return asyncio.run(_serve(req))
    except PodiumError as exc:
        sys.stderr.write(f"podium worker: {exc}\n")
        return exc.exit_code
