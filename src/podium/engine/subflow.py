"""Sub-workflows (`type: workflow`): a workflow file run as one step of its parent.

The child is a run of its own (its own limits, counter, context and run id, linked to its
parent in the store and in events), sharing the parent's providers, answerers, sinks and
clock. Its output becomes the step's output; its cost counts in the parent's totals and
budget, also when it fails; its failure or exhausted limit fails the parent with the child's
reason. On resume, a child that already finished is not run again, and an unfinished one
continues from its own last committed step.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from podium import jsontext
from podium.engine.children import ChildSlot
from podium.errors import Interrupted, LimitExceeded, RunError, StepError, UsageError
from podium.gates.base import GateRequest
from podium.language.model import WorkflowFile, WorkflowStep
from podium.steps.base import StepCall, StepOutcome, Usage

if TYPE_CHECKING:
    from podium.engine.run import Engine

MAX_DEPTH = 10


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
    from podium.engine.run import ChildParked, Engine, Hooks, Persistence, RunConfig

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
    children = parent.children
    existing = children.find(parent.run_id, ChildSlot(step.name, it, slot),
                             child_wf.workflow.entry_point) if children is not None else None
    restart = existing.restart if existing is not None else None
    if restart is not None:  # its stored inputs hold `<secret:NAME>`: it goes on with values
        restart.state.inputs = _with_secrets(restart.state.inputs, parent, step.name, it)
    if existing is not None and restart is None:
        from podium.engine.history import usage_rows

        # (what it spent is in its parent's resumed count already: engine/history.py)
        rows = {f"{step.name}/{k}": u for k, u in usage_rows(existing.spent).items()}
        return StepOutcome(existing.output or {}, usage=_total(rows), usage_rows=rows,
                           details={"child_run_id": existing.run_id, "reused": True})
    inputs = (restart.state.inputs if restart is not None
              else _inputs(call, parent, step, child_wf))
    parked: list[GateRequest] = []  # the decision the child (or a deeper run) waits for
    park = None
    if parent.parker is not None:
        outer = parent.parker

        def park(request: GateRequest) -> None:
            parked.append(request)
            outer(request)

    hooks = parent.config.hooks.child(step.name, it, slot) \
        if parent.config.hooks.child is not None else None
    dialogs: dict[tuple[str, int], dict[str, Any]] = {}
    if restart is not None and restart.dialog is not None:  # its agent goes on in it
        first = restart.start or child_wf.workflow.entry_point
        dialogs[(first, int(restart.dialog["iteration"]))] = restart.dialog
    config = RunConfig(
        persistence=Persistence(parent.store, parent.checkpoints, park,
                                children=parent.config.persistence.children),
        hooks=hooks or Hooks(), outer_deadline=parent.services.deadline,
        depth=parent.depth + 1, owns_providers=False, cancel=parent.services.cancel,
        subworkflow_cache=parent.subworkflow_cache, carried_dialogs=dialogs,
        carried=restart.carried if restart is not None else None,
        spent=existing.spent if existing is not None else None)
    try:
        child = Engine(child_wf, path, inputs=inputs, providers=parent.services.providers,
                       answerer=parent.services.answerer, options=parent.options,
                       clock=parent.clock, run_id=existing.run_id if existing else None,
                       state=restart.state if restart is not None else None,
                       start_seq=existing.start_seq if existing else 0, config=config)
    except UsageError as exc:  # a secret it declares that podium cannot redact (too short)
        raise StepError(f"{path.name}: {exc}", step=step.name, iteration=it) from None
    child.bus.parent_run_id = parent.run_id
    # a sub-workflow inherits its parent's secrets, and its own count for its parent too
    parent.bus.redactor.add(child.bus.redactor.secrets)
    child.bus.redactor = parent.bus.redactor
    for sink in parent.bus.sinks:
        child.bus.add(sink)
    for committer in parent.bus.committers:
        child.bus.add_committer(committer)
    child.services.budget.attach(parent.services.budget)  # its calls reserve in both budgets
    if hooks is not None and hooks.attach is not None:
        hooks.attach(child)
    if existing is not None and children is not None:
        # a gate it parked at and nobody answered is asked again (and re-opened) below
        children.resume(existing.run_id)
    elif children is not None:
        from podium.engine.run import file_hash
        from podium.store.base import RunRecord

        children.start(RunRecord(
            child.run_id, child_wf.workflow.name, str(path), file_hash(path), inputs,
            parent_run_id=parent.run_id,
            options={"parent_step": step.name, "parent_iteration": it, "slot": slot}))
    mark = child.meter.mark()
    try:
        result = child.run(restart.start if restart is not None else None)
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
