"""Parallel and for-each groups: members and items run concurrently as tasks of one event loop
(podium/aio.py), at most `max_concurrent` at once, against the state as it was when the group
started; the group stores one dict `{type, outputs, errors[, count]}` and counts one execution
per member or item. An agent member awaits its model calls on the provider's async path; any
other member (a script, a sub-workflow, `set`) runs its executor in a worker thread, awaited,
so the loop is never blocked (decision 0031)."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import threading
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from podium import aio, jsontext
from podium.errors import LimitExceeded, RunError, StepError, internal_error
from podium.events.commits import COMMIT_WINDOW
from podium.events.model import StepFailed, StepFinished, StepStarted
from podium.language.model import ForEachGroup, ParallelGroup, StepBase
from podium.records import record
from podium.steps.base import StepCall, StepOutcome, Usage

if TYPE_CHECKING:
    import asyncio

    from podium.engine.run import Engine
    from podium.events.bus import EventBus


@record
class _Done:
    key: str
    index: int
    outcome: StepOutcome | None
    error: RunError | None
    parked: RunError | None = None  # the item waits for a person (a sub-workflow at a gate)


def _waits(exc: RunError) -> bool:
    """Is this not a failure but a run parking (a sub-workflow waiting at a gate)?"""
    from podium.engine.run import ChildParked
    from podium.gates.base import GateUnanswerable

    return isinstance(exc, (ChildParked, GateUnanswerable))


def _error_entry(name: str, key_field: str, exc: RunError) -> dict[str, Any]:
    return {key_field: name, "exception_type": exc.conductor_type, "message": str(exc),
            "suggestion": None}


class RecordedFailure(StepError):
    """A member's failure as its committed step_failed event recorded it (a resumed group
    reuses it rather than running the member again)."""

    def __init__(self, message: str, error_type: str, **where: Any) -> None:
        super().__init__(message, **where)
        self._error_type = error_type

    @property
    def error_type(self) -> str:
        return self._error_type


def _reused(event: dict[str, Any], key: str) -> _Done:
    """A member that finished (or failed) before the run was interrupted, from its committed
    event: not run again, and its events not recorded again."""
    usage = Usage(int(event.get("input_tokens", 0)), int(event.get("output_tokens", 0)),
                  int(event.get("cached_tokens", 0)), event.get("cost_usd"), event.get("model"),
                  bool(event.get("priced", True)))
    if event["type"] == "step_failed":
        details = dict(event.get("details") or {})
        if usage.input_tokens or usage.output_tokens or usage.cost_usd:
            details["usage_rows"] = {str(event["step"]): usage}
        return _Done(key, 0, None, RecordedFailure(
            str(event.get("message", "")), str(event.get("error_type", "StepError")),
            step=str(event["step"]), iteration=int(event["iteration"]), details=details))
    spent = usage if (usage.input_tokens or usage.output_tokens or usage.model) else None
    return _Done(key, 0, StepOutcome(event.get("output"), usage=spent), None)


def _run_member(engine: Engine, step: StepBase, iteration: int, key: str, *, group: str,
                extra: dict[str, Any] | None,
                carried: dict[str, dict[str, Any]] | None = None) -> _Done:
    """Run one member or item here, blocking (an outside executor's member: Temporal)."""
    return aio.drive(_member(engine, step, iteration, key, group=group, extra=extra,
                             carried=carried, on_loop=False))


async def _member(engine: Engine, step: StepBase, iteration: int, key: str, *, group: str,
                  extra: dict[str, Any] | None, carried: dict[str, dict[str, Any]] | None,
                  on_loop: bool) -> _Done:
    """Run one member or item with its own events (or reuse what it recorded before the run
    was interrupted, from `carried`); `on_loop`: as a task of the member loop."""
    label = step.name if extra is None else f"{step.name}[{key}]"
    if carried and label in carried:
        return _reused(carried[label], key)
    services = engine.services
    services.local.extra = extra  # this task's (or thread's) own: a contextvar
    services.local.group = group  # an agent's dialog runs in the main loop only (spec 3.3)
    started = engine.clock.monotonic()
    engine.bus.emit(StepStarted(step=label, step_type=step.type, iteration=iteration,
                                run_iteration=engine.state.run_iteration, group=group))
    try:
        executor = engine.executors.get(step.type)
        if executor is None:
            raise StepError(f"'{step.type}' steps cannot run in a group", step=step.name)
        try:
            outcome = await _execute(executor, StepCall(step, iteration, services), on_loop)
        except (RunError, RecursionError, MemoryError):  # the group, the engine handle these
            raise
        except Exception as exc:  # podium's own failure, as the member's
            raise internal_error(exc, step=label, iteration=iteration) from exc
    except RunError as exc:
        if _waits(exc):
            return _Done(key, 0, None, None, parked=exc)
        # like the engine's own step_failed: what the member still spent, in the token fields
        spent = error_spend(exc)
        engine.bus.emit(StepFailed(
            step=label, step_type=step.type, iteration=iteration,
            elapsed=engine.clock.monotonic() - started, error_type=exc.error_type,
            message=str(exc), group=group,
            details={k: v for k, v in exc.details.items() if k != "usage_rows"},
            input_tokens=spent.input_tokens if spent else 0,
            output_tokens=spent.output_tokens if spent else 0,
            cost_usd=spent.cost_usd if spent else None, priced=spent.priced if spent else True))
        return _Done(key, 0, None, exc)
    finally:
        services.local.extra = None
        services.local.group = None
    u = outcome.usage
    engine.bus.emit(StepFinished(
        step=label, step_type=step.type, iteration=iteration,
        elapsed=engine.clock.monotonic() - started, output=outcome.output,
        model=u.model if u else None, input_tokens=u.input_tokens if u else 0,
        output_tokens=u.output_tokens if u else 0, cached_tokens=u.cached_tokens if u else 0,
        cost_usd=u.cost_usd if u else None, priced=u.priced if u else True, group=group))
    return _Done(key, 0, outcome, None)


async def _execute(executor: Callable[[StepCall], StepOutcome], call: StepCall,
                   on_loop: bool) -> StepOutcome:
    """A member's execution: an agent's on the loop (its async path), any other step's
    executor in a worker thread (it sees the member's context); here when not on the loop."""
    if not on_loop:
        return executor(call)
    from podium.steps.agent import execute_agent, execute_agent_async

    if executor is execute_agent:
        return await execute_agent_async(call)
    return await aio.blocking(functools.partial(executor, call), True)


Job = Callable[[], Awaitable[_Done]]


def _batched_commits(bus: EventBus) -> asyncio.Task[None] | None:
    """On the member loop: the task that commits the members' held events (events/bus.py
    hold) at most COMMIT_WINDOW after the first of them, so one transaction carries the
    events of every member that moved meanwhile (a kill inside the group loses at most that
    window: those members run again on resume); None when no committer batches. A failed
    commit sets the bus's failure: every member's next emit raises it, which stops the
    group."""
    import asyncio

    loop = asyncio.get_running_loop()
    wake = asyncio.Event()

    def woken() -> None:  # from the loop, or a member's worker thread
        loop.call_soon_threadsafe(wake.set)

    if not bus.hold(woken):
        return None

    async def commit() -> None:
        while True:
            await wake.wait()
            await asyncio.sleep(COMMIT_WINDOW)  # the members that move meanwhile join in
            wake.clear()
            bus.commit_held()

    return asyncio.create_task(commit())


def _pool_run(jobs: list[Job], workers: int, fail_fast: bool, cancel: threading.Event,
              bus: EventBus) -> list[_Done]:
    """Run jobs as tasks of the member loop, at most `workers` at once; with fail_fast, stop
    starting new jobs after the first failure, and whatever the mode after the first job that
    parks (the run will wait for a person; the jobs in flight finish first). The first
    `workers` jobs are in flight from the start: whichever of them fails or parks first, the
    others still run (and park at their own gates). Returns the finished jobs in submission
    order.
    Interrupted here (Ctrl+C, SIGTERM), the tasks in flight are cancelled: their SDK calls
    are abandoned, their connections closed."""
    import asyncio

    results: list[_Done | None] = [None] * len(jobs)
    width = max(1, min(workers, len(jobs)))
    unwound = threading.Event()

    async def main() -> None:
        failed, parked = asyncio.Event(), asyncio.Event()

        async def worker(order: Iterable[int]) -> None:
            for i in order:
                results[i] = await _guarded(jobs[i], failed, fail_fast, cancel, parked,
                                            in_flight=i < width)

        order = iter(range(len(jobs)))  # shared: each worker takes the next job in order
        tasks: list[asyncio.Task[None]] = []
        flusher = _batched_commits(bus)
        try:
            # one worker started a pass of the loop, not all in one: between two starts the
            # loop polls its sockets, so the first member's request is on the wire while the
            # others render theirs, and its answer is read while they still start. Started
            # together, every member's request waited behind all the others' first steps,
            # then the loop sat idle for the whole wave's answers, and the next wave kept the
            # same step (docs/performance.md, "Eighteenth pass")
            for _ in range(width):
                tasks.append(asyncio.create_task(worker(order)))
                await asyncio.sleep(0)
            await asyncio.gather(*tasks)
        except BaseException:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        finally:
            try:
                if flusher is not None:
                    flusher.cancel()
                    await asyncio.gather(flusher, return_exceptions=True)
                    bus.release()  # every member's events, before the group's checkpoint
            finally:
                unwound.set()

    future = asyncio.run_coroutine_threadsafe(main(), aio.loop())
    try:
        while True:
            try:
                future.result(timeout=0.5)
                break
            except concurrent.futures.TimeoutError:
                continue
    except BaseException:
        cancel.set()
        future.cancel()
        unwound.wait(5.0)  # the cancelled tasks unwind (a worker thread's call is left)
        raise
    return [r for r in results if r is not None]


async def _guarded(job: Job, failed: asyncio.Event, fail_fast: bool, cancel: threading.Event,
                   parked: asyncio.Event, *, in_flight: bool) -> _Done | None:
    """Start the job unless the group stopped starting jobs: cancelled, or, for a job not in
    flight from the start, a failure under fail_fast or a job that parked (the first
    `workers` jobs all run, as a Conductor group's first batch does, however soon one of
    them fails)."""
    if cancel.is_set() or (not in_flight and (parked.is_set() or
                                              (fail_fast and failed.is_set()))):
        return None
    done = await job()
    if done.error is not None:
        failed.set()
    if done.parked is not None:
        parked.set()
    return done


def _raise_parked(done: list[_Done]) -> None:
    """A member or item waits for a person: the whole run parks (nothing is stored; on
    resume the group runs again, and its finished sub-workflows are reused)."""
    for d in done:
        if d.parked is not None:
            raise d.parked


def combined_usage(rows: Iterable[Usage]) -> Usage | None:
    """The sum of several steps' usage; its model names every model used (a group's members
    or a sub-workflow's agents may use different ones), not just the last one."""
    total: Usage | None = None
    models: list[str] = []
    for u in rows:
        total = u if total is None else total + u
        if u.model and u.model not in models:
            models.append(u.model)
    if total is not None and len(models) > 1:
        total = dataclasses.replace(total, model=", ".join(models))
    return total


def error_spend(exc: RunError) -> Usage | None:
    """What a failed execution had spent, as its error carries it: the rows of nested work
    (`usage_rows`: a sub-workflow's agents, a checked agent's parts) or an agent's own
    (`usage`, steps/agent.py)."""
    rows = exc.details.get("usage_rows")
    if isinstance(rows, dict) and rows:
        return combined_usage(rows.values())
    own = exc.details.get("usage")
    if not isinstance(own, dict):
        return None
    return Usage(int(own.get("input_tokens", 0)), int(own.get("output_tokens", 0)),
                 int(own.get("cached_tokens", 0)), own.get("cost_usd"), own.get("model"),
                 own.get("cost_usd") is not None)


def _spent(done: _Done) -> Usage | None:
    """What a member or item spent: its outcome's usage, or, when it failed, the usage its
    error carries (a failed sub-workflow's agents, a failed agent's calls still cost money)."""
    if done.outcome is not None:
        return done.outcome.usage
    return error_spend(done.error) if done.error is not None else None


def _elsewhere(engine: Engine, group: ParallelGroup | ForEachGroup, labels: list[str],
               carried: dict[str, dict[str, Any]] | None) -> set[str]:
    """With an outside executor (engine.fan_out): "raise" hands the members not done yet to
    it (Handoff); "gather" returns the labels that are not done (they were never started:
    the group stopped starting members; they do not run here either)."""
    if engine.fan_out is None:
        return set()
    missing = [label for label in labels if label not in (carried or {})]
    if engine.fan_out == "raise" and missing:
        from podium.engine.run import Handoff

        width = len(labels) if isinstance(group, ParallelGroup) else group.max_concurrent
        raise Handoff(f"{len(missing)} member(s) of group '{group.name}' run elsewhere",
                      group=group.name, members=tuple(missing), max_concurrent=width,
                      fail_fast=group.failure_mode == "fail_fast")
    return set(missing)


def run_parallel(engine: Engine, group: ParallelGroup, iteration: int) -> StepOutcome:
    members = [engine.steps[m] for m in group.agents]
    counts = engine.state.step_counts
    carried = engine.carried.pop(group.name, None)
    skipped = _elsewhere(engine, group, [s.name for s in members], carried)
    jobs: list[Job] = [
        functools.partial(_member, engine, s, counts.get(s.name, 0) + 1, s.name,
                          group=group.name, extra=None, carried=carried, on_loop=True)
        for s in members if s.name not in skipped
    ]
    done = _pool_run(jobs, len(jobs), group.failure_mode == "fail_fast",
                     engine.services.cancel, engine.bus)
    _raise_parked(done)
    for d in done:
        counts[d.key] = counts.get(d.key, 0) + 1
    outputs = {d.key: d.outcome.output for d in done if d.outcome is not None}
    errors = {d.key: _error_entry(d.key, "agent_name", d.error) for d in done if d.error}
    rows = {d.key: u for d in done if (u := _spent(d)) is not None}
    _raise_refused(group.name, "parallel", done, rows)
    _check_failures(group.name, group.failure_mode, len(members), errors, rows, what="Agent",
                    kind="parallel")
    output = {"type": "parallel", "outputs": outputs, "errors": errors}
    return StepOutcome(output, iterations=len(members), usage=combined_usage(rows.values()),
                       usage_rows=rows)


def _raise_refused(name: str, kind: str, done: list[_Done], rows: dict[str, Usage]) -> None:
    """A member or item the budget refused (steps/budget.py): the run stops at its budget
    (exit 4) whatever the failure mode, with what the group spent."""
    refused = [d for d in done if isinstance(d.error, LimitExceeded) and
               d.error.limit == "budget"]
    if not refused:
        return
    first = refused[0].error
    assert first is not None
    made = sum(1 for d in done if d.outcome is not None)
    what = "member" if kind == "parallel" else "item"
    raise LimitExceeded(f"{kind} group '{name}': the budget refused {len(refused)} "
                        f"{what}(s) of {len(done)} ({made} finished); first: {first}",
                        limit="budget", step=name,
                        details={"usage_rows": rows} if rows else {})


def _check_failures(name: str, mode: str, total: int, errors: dict[str, dict[str, Any]],
                    rows: dict[str, Usage], *, what: str, kind: str) -> None:
    """Raise the group's failure per its failure mode; the error carries what the group spent
    (`usage_rows`), which the engine still counts."""
    if not errors:
        return
    details: dict[str, Any] = {"usage_rows": rows} if rows else {}
    lines = "; ".join(f"{k}: {e['exception_type']}: {e['message']}" for k, e in errors.items())
    if mode == "fail_fast":
        key, first = next(iter(errors.items()))
        raise StepError(f"{what} '{key}' in {kind} group '{name}' failed (fail_fast mode): "
                        f"{first['exception_type']}: {first['message']}", step=name,
                        details=details)
    if mode == "all_or_nothing":
        raise StepError(f"{kind} group '{name}' failed ({total - len(errors)} succeeded, "
                        f"{len(errors)} failed): {lines}", step=name, details=details)
    if len(errors) >= total:
        raise StepError(f"all {what.lower()}s in {kind} group '{name}' failed: {lines}",
                        step=name, details=details)


def resolve_source(engine: Engine, group: ForEachGroup) -> list[Any]:
    """The list a for-each group fans out over (spec 3.12's source resolution)."""
    parts = group.source.split(".")
    state = engine.state
    if parts[0] == "workflow":
        value: Any = state.inputs
        path = parts[2:]
        if parts[1] != "input":
            raise StepError(f"source '{group.source}' must start with workflow.input",
                            step=group.name)
    else:
        if parts[0] not in state.outputs:
            ran = ", ".join(dict.fromkeys(state.history)) or "nothing yet"
            raise StepError(f"source '{group.source}': '{parts[0]}' has not run (ran: {ran})",
                            step=group.name)
        stored = state.outputs[parts[0]]
        value = stored if parts[0] in engine.group_names else {"output": stored}
        path = parts[1:]
    walked = [parts[0]]
    for part in path:
        if isinstance(value, str) and value.strip().startswith(("[", "{")):
            value = _json(value, group)
        if not isinstance(value, dict) or part not in value:
            keys = ", ".join(map(str, value)) if isinstance(value, dict) else type(value).__name__
            raise StepError(f"source '{group.source}': no field '{part}' in "
                            f"'{'.'.join(walked)}' (it has: {keys})", step=group.name)
        value = value[part]
        walked.append(part)
    if isinstance(value, str):
        value = _json(value, group)
    if not isinstance(value, (list, tuple)):
        raise StepError(f"source '{group.source}' is a {type(value).__name__}, not a list",
                        step=group.name)
    return list(value)


def _json(text: str, group: ForEachGroup) -> Any:
    try:
        return jsontext.loads(text)
    except jsontext.JsonLimitError as exc:
        raise StepError(f"source '{group.source}' is a string of JSON that {exc}",
                        step=group.name) from None
    except ValueError as exc:
        raise StepError(f"source '{group.source}' is a string that is not JSON: {exc}",
                        step=group.name) from None


def _item_key(item: Any, index: int, key_by: str | None) -> str:
    if not key_by:
        return str(index)
    value = item
    for part in key_by.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return str(index)
    return str(value)


def run_for_each(engine: Engine, group: ForEachGroup, iteration: int) -> StepOutcome:
    items = resolve_source(engine, group)
    if not items:
        output: dict[str, Any] = {"type": "for_each", "outputs": {} if group.key_by else [],
                                  "errors": {}, "count": 0}
        return StepOutcome(output, iterations=0)
    engine.check_iterations(group.name, need=len(items))
    step = group.agent
    base = engine.state.step_counts.get(step.name, 0)
    carried = engine.carried.pop(group.name, None)
    keys = [_item_key(item, i, group.key_by) for i, item in enumerate(items)]
    skipped = _elsewhere(engine, group, [f"{step.name}[{k}]" for k in keys], carried)

    def job(i: int) -> Job:
        extra = {group.as_: items[i], "_index": i}
        if group.key_by:
            extra["_key"] = keys[i]

        async def run() -> _Done:
            done = await _member(engine, step, base + i + 1, keys[i], group=group.name,
                                 extra=extra, carried=carried, on_loop=True)
            done.index = i
            return done

        return run

    done = _pool_run([job(i) for i in range(len(items))
                      if f"{step.name}[{keys[i]}]" not in skipped], group.max_concurrent,
                     group.failure_mode == "fail_fast", engine.services.cancel, engine.bus)
    _raise_parked(done)
    engine.state.step_counts[step.name] = base + len(items)
    done.sort(key=lambda d: d.index)
    errors = {d.key: _error_entry(d.key, "item_key", d.error) for d in done if d.error}
    ok = [d for d in done if d.outcome is not None]
    usage = combined_usage([u for d in done if (u := _spent(d)) is not None])
    rows = {f"{group.name}/{step.name}": usage} if usage else {}
    _raise_refused(group.name, "for-each", done, rows)
    _check_failures(group.name, group.failure_mode, len(items), errors, rows, what="Item",
                    kind="for-each")
    outputs: Any = ({d.key: d.outcome.output for d in ok if d.outcome} if group.key_by
                    else [d.outcome.output for d in ok if d.outcome])
    output = {"type": "for_each", "outputs": outputs, "errors": errors, "count": len(items)}
    return StepOutcome(output, iterations=len(items), usage=usage, usage_rows=rows)


@record(frozen=True)
class Member:
    """One member or item of a group, as an outside executor runs it on its own."""

    step: StepBase
    iteration: int
    key: str
    extra: dict[str, Any] | None


def group_members(engine: Engine, group_name: str) -> dict[str, Member]:
    """The members of group `group_name` by label, as the group would run them now (the
    engine's state stands where the group started)."""
    counts = engine.state.step_counts
    if group_name in engine.parallel:
        steps = [engine.steps[m] for m in engine.parallel[group_name].agents]
        return {s.name: Member(s, counts.get(s.name, 0) + 1, s.name, None) for s in steps}
    group = engine.for_each[group_name]
    step = group.agent
    base = counts.get(step.name, 0)
    found: dict[str, Member] = {}
    for i, item in enumerate(resolve_source(engine, group)):
        key = _item_key(item, i, group.key_by)
        extra = {group.as_: item, "_index": i}
        if group.key_by:
            extra["_key"] = key
        found[f"{step.name}[{key}]"] = Member(step, base + i + 1, key, extra)
    return found


def run_member(engine: Engine, group_name: str, member: Member) -> str:
    """Run one member with its own events (committed on their own); returns `finished`,
    `failed` or `parked`."""
    done = _run_member(engine, member.step, member.iteration, member.key, group=group_name,
                       extra=member.extra)
    return "parked" if done.parked is not None else "failed" if done.error else "finished"
