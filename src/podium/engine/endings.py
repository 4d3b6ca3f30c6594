"""How a run ends: the final output rendered from the workflow's `output` (or a terminate
step's `output_template`), the `run_finished` event and the RunResult returned for it.

Every way out of the run loop goes through here: the end of the graph, a terminate step, a
failure or a limit, a gate the run parks at, and the handoff that is no ending (the run goes on
elsewhere). These run once per run, never per step, so the loop (engine/run.py) calls them as
functions that take the engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from podium.engine.routing import choose_route
from podium.engine.run import Next, RunResult, RunStatus
from podium.errors import Interrupted, LimitExceeded, PodiumError, RunError, TemplateError
from podium.events.model import RunFinished
from podium.language.model import END, ForEachGroup, ParallelGroup, Route, StepBase, TerminateStep
from podium.steps.base import StepOutcome, Termination
from podium.templating import RenderFailure, TemplateEngine, coerce_output_value

if TYPE_CHECKING:
    from podium.engine.run import Engine, HandOut
    from podium.gates.base import GateRequest
    from podium.steps.budget import BudgetReport


def already_finished(engine: Engine, node: str) -> RunResult | None:
    """A resumed run whose last step was committed as its end (a route to $end, or a
    terminate step) finishes without running anything again."""
    records = engine.state.records
    if node == END and records:
        last = records[-1]
        step = engine.steps.get(last.step)
        route = None
        if step is not None and step.routes:
            scope = engine.services.full_context()
            scope["output"] = last.output
            route = choose_route(engine.services.templates, step.name, step.routes, scope,
                                 last.iteration).route
        return finish_end(engine, route)
    step = engine.steps.get(node)
    if isinstance(step, TerminateStep) and records and records[-1].step == node and \
            isinstance(records[-1].output, dict):
        out = records[-1].output
        term = Termination(str(out.get("status", step.status)),
                           str(out.get("reason", "")), None)
        return terminate(engine, step, StepOutcome(out, termination=term))
    return None


def _final_output(engine: Engine, route: Route | None) -> dict[str, Any]:
    ctx = engine.services.full_context()
    out: dict[str, Any] = {}
    templates = engine.services.templates
    for key, value in engine.workflow.output.items():
        out[key] = _render_output(engine, templates, value, ctx, f"output.{key}")
    if route is not None and route.output:
        scope = dict(ctx)
        scope["output"] = engine.state.outputs.get(engine.state.history[-1]) \
            if engine.state.history else None
        for key, value in route.output.items():
            out[key] = _render_output(engine, templates, value, scope, f"route output.{key}")
    return out


def _render_output(engine: Engine, templates: TemplateEngine, value: Any, ctx: dict[str, Any],
                   what: str) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return coerce_output_value(templates.render(value, ctx))
    except RenderFailure as exc:
        raise TemplateError(f"{what}: {exc}", step=engine.current) from None


def finish_end(engine: Engine, route: Route | None) -> RunResult:
    """The run reached $end: success, with the workflow's output (and the route's)."""
    output = _final_output(engine, route)
    return _finish(engine, "success", 0, output, terminal=END)


def terminate(engine: Engine, step: StepBase | ParallelGroup | ForEachGroup,
              outcome: StepOutcome) -> RunResult:
    """A terminate step ended the run: committed, then finished with its status."""
    term = outcome.termination
    assert term is not None
    engine._commit(None)
    template = getattr(step, "output_template", None)
    if template:
        ctx = engine.services.full_context()
        output = {k: _render_output(engine, engine.services.templates, v, ctx,
                                    f"output_template.{k}")
                  for k, v in template.items()}
    else:
        output = _final_output(engine, None)
    if term.status == "success":
        return _finish(engine, "success", 0, output, terminal=step.name, reason=term.reason)
    return _finish(engine, "failed", 1, output, terminal=step.name, reason=term.reason)


def _budget(engine: Engine) -> BudgetReport | None:
    """The budget's figures as the run stops: what its model calls cost (the meter)."""
    engine.services.budget.sync(engine.meter.total().cost_usd)
    return engine.services.budget.report()


def _finish(engine: Engine, status: RunStatus, code: int, output: dict[str, Any] | None, *,
            terminal: str | None = None, reason: str | None = None,
            error: PodiumError | None = None) -> RunResult:
    elapsed = engine.clock.monotonic() - engine._started
    err_run = error if isinstance(error, RunError) else None
    engine.bus.emit(RunFinished(
        status=status,
        output=output, terminal=terminal, reason=reason,
        error_type=err_run.error_type if err_run else None,
        message=str(error) if error else None,
        step=err_run.step if err_run else None,
        iteration=err_run.iteration if err_run else None,
        elapsed=elapsed, iterations=engine.state.run_iteration, exit_code=code))
    return RunResult(engine.run_id, status, code, output, terminal, reason, error,
                     [r.step for r in engine.state.records], elapsed,
                     engine.state.run_iteration, dict(engine.usage_by_step),
                     _budget(engine))


def park(engine: Engine, request: GateRequest) -> RunResult:
    """Hand the open gate to the engine's parker, then end the run as waiting for it."""
    assert engine.parker is not None
    engine.parker(request)
    return parked(engine, request)


def parked(engine: Engine, request: GateRequest) -> RunResult:
    """The run waits for a person (exit code 5): the message says how to answer."""
    what = ("grant more iterations" if request.kind == "iteration_limit"
            else f"answer the dialog of agent '{request.step}'" if request.kind == "dialog"
            else f"answer gate '{request.step}'")
    value = "best|MESSAGE" if request.kind == "dialog" else "VALUE"
    message = (f"waiting for a person to {what}: podium gate answer {request.run_id} "
               f"{value}")
    elapsed = engine.clock.monotonic() - engine._started
    engine.bus.emit(RunFinished(status="waiting", step=request.step, message=message,
                                elapsed=elapsed, iterations=engine.state.run_iteration,
                                exit_code=5))
    result = RunResult(engine.run_id, "waiting", 5, None, None, message, None,
                       [r.step for r in engine.state.records], elapsed,
                       engine.state.run_iteration, dict(engine.usage_by_step),
                       _budget(engine))
    return result


def handed_off(engine: Engine, goes_on: Next | HandOut) -> RunResult:
    """The run goes on elsewhere: nothing ends here (no run_finished)."""
    reason = (f"goes on at '{goes_on.node}'" if isinstance(goes_on, Next)
              else f"{len(goes_on.members)} member(s) of group '{goes_on.group}' run elsewhere")
    return RunResult(engine.run_id, "handoff", -1, None, None, reason, None,
                     [r.step for r in engine.state.records],
                     engine.clock.monotonic() - engine._started, engine.state.run_iteration,
                     dict(engine.usage_by_step), _budget(engine), handoff=goes_on)


def fail(engine: Engine, exc: RunError) -> RunResult:
    """The run stopped on an error: interrupted, over a limit, or failed."""
    exc.run_id = engine.run_id
    if isinstance(exc, Interrupted):
        return _finish(engine, "interrupted", exc.exit_code, None, error=exc)
    if isinstance(exc, LimitExceeded):
        return _finish(engine, "limit", exc.exit_code, None, error=exc)
    return _finish(engine, "error", exc.exit_code, None, error=exc)
