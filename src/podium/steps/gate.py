"""The human_gate step: show a prompt and options, take a person's choice, follow its route."""

from __future__ import annotations

from podium.errors import RunError
from podium.events.model import GateAnswered, GateOpened
from podium.gates.base import GateRequest, GateUnanswerable
from podium.language.model import HumanGateStep
from podium.steps.base import StepCall, StepOutcome


def execute_gate(call: StepCall) -> StepOutcome:
    step = call.step
    assert isinstance(step, HumanGateStep)
    run = call.run
    prompt = run.render(step.prompt, run.full_context(), step=step.name, what="prompt",
                        iteration=call.iteration)
    options = [o.model_dump(exclude_none=True) for o in step.options]
    run.bus.emit(GateOpened(step=step.name, iteration=call.iteration, prompt=prompt,
                            options=options))
    request = GateRequest(run.run_id, step.name, call.iteration, prompt, tuple(step.options))
    answer = run.answerer.answer(request)
    if answer is None:
        raise GateUnanswerable(
            "this human gate needs a person, but nobody can answer here (no terminal, no "
            "scripted answer); use --skip-gates to take the first option", request)
    index, option = next(((i, o) for i, o in enumerate(step.options) if o.value == answer.value),
                         (-1, None))
    if option is None:
        allowed = ", ".join(o.value for o in step.options)
        raise RunError(f"answer '{answer.value}' is not one of the options ({allowed})",
                       step=step.name, iteration=call.iteration)
    run.bus.emit(GateAnswered(step=step.name, iteration=call.iteration, selected=option.value,
                              additional_input=answer.additional_input, route=option.route,
                              answered_by=answer.answered_by))
    output = {"selected": option.value, "additional_input": dict(answer.additional_input)}
    return StepOutcome(output, next_step=option.route, route_kind="option", route_index=index)
