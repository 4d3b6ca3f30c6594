"""The terminate step: end the run with a named outcome (success or failed) and a reason."""

from __future__ import annotations

from podium.language.model import TerminateStep
from podium.steps.base import StepCall, StepOutcome, Termination


def execute_terminate(call: StepCall) -> StepOutcome:
    step = call.step
    assert isinstance(step, TerminateStep)
    ctx = call.run.step_context(step)
    reason = call.run.render(step.reason, ctx, step=step.name, what="reason",
                             iteration=call.iteration).strip()
    output = {"status": step.status, "reason": reason, "terminated_by": step.name}
    return StepOutcome(output, termination=Termination(step.status, reason, None))
