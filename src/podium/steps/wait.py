"""The wait step: sleep for a duration on the run's clock, bounded by the run's timeout."""

from __future__ import annotations

from podium.errors import LimitExceeded, StepError
from podium.language.model import WaitStep, parse_duration
from podium.steps.base import StepCall, StepOutcome


def execute_wait(call: StepCall) -> StepOutcome:
    step = call.step
    assert isinstance(step, WaitStep)
    run = call.run
    ctx = run.step_context(step)
    duration = step.duration
    if isinstance(duration, str) and "{{" in duration:
        duration = run.render(duration, ctx, step=step.name, what="duration",
                              iteration=call.iteration)
    try:
        seconds = parse_duration(duration)
    except ValueError as exc:
        raise StepError(f"duration: {exc}", step=step.name, iteration=call.iteration) from None
    if step.reason:
        run.render(step.reason, ctx, step=step.name, what="reason", iteration=call.iteration)
    remaining = run.remaining()
    if remaining is not None and remaining < seconds:
        run.clock.sleep(max(remaining, 0.0), run.cancel)
        raise LimitExceeded(f"the run's timeout expires during this {seconds:g}s wait",
                            limit="timeout", step=step.name, iteration=call.iteration)
    waited = run.clock.sleep(seconds, run.cancel)
    return StepOutcome({"waited_seconds": round(waited, 6)})
