"""Sub-workflows (`type: workflow`): a workflow file run as one step of its parent.

The child is a run of its own (its own limits, counter, context and run id, linked to its
parent in the store and in events), sharing the parent's providers, answerers, sinks and
clock. Its output becomes the step's output; its cost counts in the parent's totals and
budget, also when it fails; its failure or exhausted limit fails the parent with the child's
reason. On resume, a child that already finished is not run again, and an unfinished one
continues from its own last committed step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from podium import jsontext
from podium.errors import Interrupted, LimitExceeded, RunError, StepError, UsageError
from podium.gates.base import GateRequest
from podium.language.model import WorkflowFile, WorkflowStep
from podium.steps.base import StepCall, StepOutcome, Usage

if TYPE_CHECKING:
    from podium.engine.run import Engine
    from podium.events.spend import RunSpend
    from podium.steps.state import RunState

MAX_DEPTH = 10


@dataclass
class _Existing:
    run_id: str
    status: str
    output: dict[str, Any] | None
    state: RunState | None
    start: str | None
    start_seq: int
    spent: RunSpend  # what it spent (events/spend.py), sub-workflows of its own included
    # the events after its last checkpoint (a dialog it parked in goes on from there)
    tail: list[dict[str, Any]] = field(default_factory=list)


def _load(parent: Engine, step: WorkflowStep, iteration: int) -> tuple[Path, WorkflowFile]:
    from podium.check.semantic import resolve_subworkflow
    from podium.check.validate import validate_file
    from podium.language.pinned import escapes, outside_message
    from podium.language.source import FileUnreadable

    path = resolve_subworkflow(parent.path.parent, step.workflow)
    if path is None:
        raise StepError(f"sub-workflow file not found: '{step.workflow}' (relative to "
                        f"{parent.path.parent})", step=step.name, iteration=iteration)
    tree = escapes(parent.path, path)
    if tree is not None:
        raise StepError(outside_message(f"sub-workflow '{step.workflow}'", tree),
                        step=step.name, iteration=iteration)
    cache = parent.subworkflow_cache
    if path not in cache:
        try:
            result = validate_file(path)
        except FileUnreadable as exc:
            raise StepError(f"sub-workflow: {exc}", step=step.name, iteration=iteration) from None
        if result.model is None or result.sink.errors:
            first = result.sink.sorted()[0].format() if result.sink.items else "invalid"
            raise StepError(f"sub-workflow '{step.workflow}' is invalid: {first}",
                            step=step.name, iteration=iteration)
        cache[path] = result.model
    return path, cache[path]


def _inputs(call: StepCall, parent: Engine, step: WorkflowStep,
            child: WorkflowFile) -> dict[str, Any]:
    from podium.engine.inputs import apply_input_defaults

    if step.input_mapping is None:
        given = dict(parent.state.inputs)
    else:
        ctx = call.run.step_context(step)
        given = {}
        for key, value in step.input_mapping.items():
            if isinstance(value, str):
                text = call.run.render(value, ctx, step=step.name,
                                       what=f"input_mapping.{key}", iteration=call.iteration)
                try:
                    given[key] = jsontext.loads(text)  # bounded: it may be a model's text
                except ValueError:
                    given[key] = text
            else:
                given[key] = value
    missing = apply_input_defaults(child.workflow.input, given)
    if missing:
        raise StepError(f"sub-workflow '{step.workflow}' needs input(s) "
                        f"{', '.join(missing)} (give them in input_mapping)", step=step.name,
                        iteration=call.iteration)
    return given


def _existing_child(parent: Engine, step: str, iteration: int, slot: str) -> _Existing | None:
    store = parent.store
    if store is None:
        return None
    from podium.engine.history import fold_events, stored_spend

    for run in store.list_runs(parent=parent.run_id, limit=10_000):
        opts = run.options or {}
        if (opts.get("parent_step"), opts.get("parent_iteration"), opts.get("slot")) != \
                (step, iteration, slot):
            continue
        events = store.events(run.id)
        usage = stored_spend(store, run.id, events)
        last = max((int(e["seq"]) for e in events), default=0)
        if run.status == "success":
            return _Existing(run.id, run.status, run.output, None, None, last, usage)
        cp = store.latest_checkpoint(run.id)
        state = fold_events(events, upto_seq=cp.seq if cp else None)
        if cp is None:
            state.inputs = dict(run.inputs)
        state.inputs = _with_secrets(state.inputs, parent, step, iteration)
        start = (cp.next_step or cp.step) if cp else None
        tail = [e for e in events if int(e["seq"]) > (cp.seq if cp else 0)]
        return _Existing(run.id, run.status, None, state, start, last, usage, tail)
    return None


def _with_secrets(inputs: dict[str, Any], parent: Engine, step: str,
                  iteration: int) -> dict[str, Any]:
    """A child run's stored inputs with its secret values (stored as `<secret:NAME>`) taken
    from the environment again."""
    from podium.events.redact import MissingSecret, restore_secrets

    try:
        restored: dict[str, Any] = restore_secrets(inputs, set(parent.bus.redactor.secrets))
    except MissingSecret as exc:
        raise StepError(f"the sub-workflow run needs {exc} set in the environment to go on",
                        step=step, iteration=iteration) from None
    return restored


def _total(rows: dict[str, Usage]) -> Usage | None:
    from podium.engine.groups import combined_usage

    return combined_usage(rows.values())


def run_subworkflow(parent: Engine, call: StepCall) -> StepOutcome:
    from podium.engine.run import ChildParked, Engine

    step = call.step
    assert isinstance(step, WorkflowStep)
    it = call.iteration
    limit = min(step.max_depth or MAX_DEPTH, MAX_DEPTH)
    if parent.depth + 1 > limit:
        raise StepError(f"sub-workflow depth limit exceeded ({limit})", step=step.name,
                        iteration=it)
    path, child_wf = _load(parent, step, it)
    extra = call.run.local.extra or {}
    slot = f"{step.name}[{extra['_key']}]" if "_key" in extra else (
        f"{step.name}[{extra['_index']}]" if "_index" in extra else step.name)
    existing = _existing_child(parent, step.name, it, slot)
    if existing is not None and existing.status == "success":
        from podium.engine.history import usage_rows

        # (what it spent is in its parent's resumed count already: engine/history.py)
        rows = {f"{step.name}/{k}": u for k, u in usage_rows(existing.spent).items()}
        return StepOutcome(existing.output or {}, usage=_total(rows), usage_rows=rows,
                           details={"child_run_id": existing.run_id, "reused": True})
    inputs = (existing.state.inputs if existing is not None and existing.state is not None
              else _inputs(call, parent, step, child_wf))
    try:
        child = Engine(child_wf, path, inputs=inputs, providers=parent.services.providers,
                       answerer=parent.services.answerer, options=parent.options,
                       clock=parent.clock, run_id=existing.run_id if existing else None,
                       state=existing.state if existing else None,
                       start_seq=existing.start_seq if existing else 0)
    except UsageError as exc:  # a secret it declares that podium cannot redact (too short)
        raise StepError(f"{path.name}: {exc}", step=step.name, iteration=it) from None
    child.depth = parent.depth + 1
    child.owns_providers = False
    child.bus.parent_run_id = parent.run_id
    # a sub-workflow inherits its parent's secrets, and its own count for its parent too
    parent.bus.redactor.add(child.bus.redactor.secrets)
    child.bus.redactor = parent.bus.redactor
    for sink in parent.bus.sinks:
        child.bus.add(sink)
    for committer in parent.bus.committers:
        child.bus.add_committer(committer)
    child.store = parent.store
    child.checkpoints = parent.checkpoints
    parked: list[GateRequest] = []  # the decision the child (or a deeper run) waits for
    if parent.parker is not None:
        outer = parent.parker

        def park(request: GateRequest) -> None:
            parked.append(request)
            outer(request)

        child.parker = park
    child.services.cancel = parent.services.cancel
    child.outer_deadline = parent.services.deadline
    child.services.budget.attach(parent.services.budget)  # its calls reserve in both budgets
    child.subworkflow_cache = parent.subworkflow_cache
    if parent.child_hook is not None:
        parent.child_hook(child, step.name, it, slot)
    if existing is not None:
        child.restore_spend(existing.spent)
        from podium.engine.history import parked_dialog

        first = existing.start or child_wf.workflow.entry_point
        dialog = parked_dialog(existing.tail, 0, first)
        if dialog is not None:  # its agent goes on in the dialog it parked in
            child.services.carried_dialogs[(first, int(dialog["iteration"]))] = dialog
        if parent.store is not None:
            # a gate it parked at and nobody answered is asked again (and re-opened) below
            parent.store.withdraw_gates(existing.run_id)
    elif parent.store is not None:
        from podium.engine.run import file_hash
        from podium.store.base import RunRecord

        parent.store.create_run(RunRecord(
            child.run_id, child_wf.workflow.name, str(path), file_hash(path), inputs,
            parent_run_id=parent.run_id,
            options={"parent_step": step.name, "parent_iteration": it, "slot": slot}))
    mark = child.meter.mark()
    try:
        result = child.run(existing.start if existing else None)
    finally:  # what the child spent now counts in its parent's spend and budget
        parent.meter.add_child(step.name, child.meter.calls_since(mark),
                               call.run.group)
    rows = {f"{step.name}/{k}": u for k, u in child.usage_by_step.items()}
    details: dict[str, Any] = {"child_run_id": child.run_id, "usage_rows": rows}
    where = f"sub-workflow '{step.workflow}' (run {child.run_id})"
    if result.status == "success":
        return StepOutcome(result.output or {}, usage=_total(rows), usage_rows=rows,
                           details={"child_run_id": child.run_id})
    if result.status == "waiting":
        # the parent waits for the same decision: name the gate and the run it belongs to
        raise ChildParked(parked[-1] if parked else GateRequest(
            child.run_id, step.name, it, result.reason or "", ()))
    if result.status == "failed":
        raise StepError(f"{where} ended in its failed terminate '{result.terminal}': "
                        f"{result.reason}", step=step.name, iteration=it,
                        details={**details, "child_output": result.output,
                                 "conductor_type": "SubworkflowTerminatedError"})
    err = result.error
    message = f"{where} failed: {err}" if err else f"{where} failed"
    if isinstance(err, LimitExceeded):
        raise LimitExceeded(message, limit=err.limit, step=step.name, iteration=it,
                            details=details)
    if isinstance(err, Interrupted):
        raise Interrupted(message, step=step.name, iteration=it)
    if isinstance(err, RunError):  # Conductor passes the child's exception on as it is
        details["conductor_type"] = err.conductor_type
    raise StepError(message, step=step.name, iteration=it, details=details)
