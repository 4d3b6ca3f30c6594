"""An agent execution with its checks: first the dialog, then the validator (spec 3.3).

`dialog:` (steps/dialog.py): a model call decides whether the agent opens a conversation with
the person; after one, the agent runs again with the transcript. `validator:`
(steps/validator.py): a model call judges the output against a rubric; on a fail the agent
runs once more with the issues. Each extra call is a `model_exchange` event with its `call`
(recorded, replayed, answered in a responses file under `<step>.<call>`), and is priced in the
usage rows `<step> (dialog)` and `<step> (validator)`, which also hold the attempts a re-run
replaced; the row `<step>` is the execution whose output stands.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import partial
from typing import Any

from podium.errors import LimitExceeded, StepError
from podium.events.model import ModelCall, PromptRendered
from podium.language.model import AgentStep
from podium.providers.base import AgentRequest, ProviderError, Reply
from podium.providers.retry import PolicyRetrier, RetryPolicy
from podium.records import record
from podium.steps.agent import (
    DEFAULT_AGENT_ITERATIONS,
    _execute,
    _instruction,
    _Plan,
    _plan,
    _timeout,
    _usage,
    exchange,
    failed_exchange,
    reply_facts,
    reserve,
)
from podium.steps.base import StepCall, StepOutcome, Usage

# the failures of an extra call that its check survives (a dialog keeps the output, a
# validator fails open); a person nobody can ask, an interrupt or a limit still stop the step
RECOVERABLE = (ProviderError, StepError)


def execute_checked(call: StepCall, step: AgentStep) -> StepOutcome:
    """Run the agent, its dialog (not in a group: spec 3.3), then its validator."""
    run = call.run
    carried = run.carried_dialogs.pop((step.name, call.iteration), None)
    agent = AgentRun(call, step, _plan(call, step, announce=carried is None), Spend(step.name))
    try:
        return _checked(agent, carried)
    except LimitExceeded as exc:  # refused by the budget: what was spent still counts
        if agent.spend.rows:
            exc.details.setdefault("usage_rows", dict(agent.spend.rows))
        raise


def _checked(agent: AgentRun, carried: dict[str, Any] | None) -> StepOutcome:
    call, step, run = agent.call, agent.step, agent.call.run
    if carried is not None:  # the run parked in this execution's dialog: go on from there
        from podium.steps.dialog import resume_dialog

        output = resume_dialog(agent, carried)
    else:
        first = _execute(call, step, agent.plan)
        agent.spend.add("", first.usage)
        output = first.output
        if step.dialog is not None and run.local.group is None:
            from podium.steps.dialog import run_dialog

            output = run_dialog(agent, output)
    if step.validator is not None:
        from podium.steps.validator import run_validator

        output = run_validator(agent, output)
    return StepOutcome(output, usage=agent.spend.total(), usage_rows=dict(agent.spend.rows))


class Spend:
    """What one execution spent, by usage row: `<step>` (the execution whose output stands),
    `<step> (dialog)` and `<step> (validator)`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.rows: dict[str, Usage] = {}

    def row(self, part: str) -> str:
        return self.name if not part else f"{self.name} ({part})"

    def add(self, part: str, usage: Usage | None) -> None:
        if usage is None or not (usage.input_tokens or usage.output_tokens or usage.model):
            return
        key = self.row(part)
        prev = self.rows.get(key)
        self.rows[key] = usage if prev is None else prev + usage

    def replaced(self, part: str, new: Usage | None) -> None:
        """A re-run's output stands now: the execution it replaced counts in `part`'s row."""
        self.add(part, self.rows.pop(self.name, None))
        self.add("", new)

    def total(self) -> Usage:
        total = sum(self.rows.values(), Usage())
        own = self.rows.get(self.name)
        return replace(total, model=own.model if own else total.model)

    def dump(self) -> dict[str, dict[str, Any]]:
        return {k: {"input_tokens": u.input_tokens, "output_tokens": u.output_tokens,
                    "cached_tokens": u.cached_tokens, "cost_usd": u.cost_usd, "model": u.model,
                    "priced": u.priced} for k, u in self.rows.items()}

    def load(self, rows: Any) -> None:
        for key, u in (rows or {}).items() if isinstance(rows, dict) else ():
            if isinstance(u, dict):
                self.rows[str(key)] = Usage(int(u.get("input_tokens", 0)),
                                            int(u.get("output_tokens", 0)),
                                            int(u.get("cached_tokens", 0)), u.get("cost_usd"),
                                            u.get("model"), bool(u.get("priced", True)))


def spent_of(exc: BaseException) -> Usage | None:
    """What a failed execution had spent (agent.py puts it in the error's details)."""
    own = getattr(exc, "details", {}).get("usage")
    if not isinstance(own, dict):
        return None
    return Usage(int(own.get("input_tokens", 0)), int(own.get("output_tokens", 0)),
                 int(own.get("cached_tokens", 0)), own.get("cost_usd"), own.get("model"),
                 own.get("cost_usd") is not None)


def json_text(value: Any) -> str:
    try:
        return json.dumps(value, indent=2, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def truncate(text: str, limit: int) -> str:
    marker = "\n…[truncated]"
    return text if len(text) <= limit else text[: max(0, limit - len(marker))] + marker


@record
class AgentRun:
    """One execution of an agent and what its checks may ask of the model."""

    call: StepCall
    step: AgentStep
    plan: _Plan
    spend: Spend
    extra: str = ""  # appended to the prompt so far (a dialog's transcript)

    def _retrier(self) -> tuple[PolicyRetrier, float | None]:
        """A fresh retry policy and timeout: each call is bounded by the agent's timeout."""
        run, step = self.call.run, self.step
        timeout = _timeout(run, step)
        deadline = None if timeout is None else run.clock.monotonic() + timeout
        retrier = PolicyRetrier(RetryPolicy.of(step.retry), run.clock, run.bus.emit,
                                step=step.name, iteration=self.call.iteration, cancel=run.cancel,
                                remaining=lambda: None if deadline is None
                                else deadline - run.clock.monotonic())
        return retrier, timeout

    def rerun(self, more: str, purpose: ModelCall) -> StepOutcome:
        """Execute the agent again with `more` appended to its prompt (and what was appended
        before); the output contract holds as for the first execution."""
        run, req = self.call.run, self.plan.request
        prompt = req.prompt + self.extra + more
        retrier, timeout = self._retrier()
        request = replace(req, prompt=prompt, call=purpose, retry=retrier, timeout=timeout)
        run.bus.emit(PromptRendered(
            step=self.step.name, iteration=self.call.iteration, provider=req.provider,
            model=req.model, prompt=prompt, system_prompt=req.system_prompt,
            reasoning_effort=req.reasoning_effort,
            tools=list(req.tools) if req.tools is not None else None, call=purpose))
        message = prompt + self._instruction(req.output_schema)
        return _execute(self.call, self.step, _Plan(self.plan.provider, request, retrier, message))

    def _instruction(self, schema: dict[str, Any] | None) -> str:
        prompted = self.plan.provider.capabilities.structured_output == "prompt"
        return _instruction(schema) if schema and prompted else ""

    def side(self, purpose: ModelCall, part: str, *, prompt: str, system: str,
             schema: dict[str, Any] | None, model: str | None) -> SideSession:
        """A conversation of its own with the agent's provider (no tools, no session key),
        its calls priced in the usage row `part`."""
        run, req = self.call.run, self.plan.request
        retrier, timeout = self._retrier()
        request = AgentRequest(
            run.run_id, self.step.name, self.call.iteration, req.provider, model, prompt,
            system, schema, None, (), req.working_dir, timeout, None, req.max_tokens,
            req.temperature, None, run.bus.emit, retrier, DEFAULT_AGENT_ITERATIONS, (),
            call=purpose)
        run.bus.emit(PromptRendered(step=self.step.name, iteration=self.call.iteration,
                                    provider=req.provider, model=model, prompt=prompt,
                                    system_prompt=system, tools=[], call=purpose))
        return SideSession(self, request, retrier, part, self._instruction(schema))


class SideSession:
    """A validator's, an evaluator's or a conversation's session: each answer is a
    `model_exchange` event, and what each call spent (failed ones too) is counted."""

    def __init__(self, agent: AgentRun, request: AgentRequest, retrier: PolicyRetrier,
                 part: str, instruction: str) -> None:
        self.agent = agent
        self.request = request
        self.retrier = retrier
        self.part = part
        self.instruction = instruction  # the schema, for providers without structured output
        self.sent = 0
        self.said: list[str | None] = []  # the conversation so far, for the budget
        self.session = agent.plan.provider.open_session(request)

    def send(self, message: str) -> tuple[Reply, Usage]:
        agent, req = self.agent, self.request
        call, run = agent.call, agent.call.run
        started = run.clock.monotonic()
        text = message + (self.instruction if self.sent == 0 else "")
        held = reserve(call, req, [*self.said, text])
        cost: float | None = None
        try:
            try:
                reply = self.retrier.call(partial(self.session.send, text),
                                          f"{req.call} call")
            except ProviderError as exc:
                lost = Usage(model=req.model)
                for spent in (*self.retrier.failed_spend, *(exc.spent or ())):
                    lost = lost + _usage(call, req.provider, spent, req.model)
                self.retrier.failed_spend.clear()
                agent.spend.add(self.part, lost)
                cost = lost.cost_usd
                event = failed_exchange(run, lost, {
                    "message": text, "system": req.system_prompt,
                    "schema": req.output_schema, "tools": []}, step=req.step,
                    iteration=req.iteration, attempt=self.sent + 1, provider=req.provider,
                    model=req.model, call=req.call)
                if event is not None:
                    run.bus.emit(event)
                raise
            this = Usage(model=req.model)
            for spent in (*self.retrier.failed_spend, *(reply.calls or (reply,))):
                this = this + _usage(call, req.provider, spent, req.model)
            self.retrier.failed_spend.clear()
            cost = this.cost_usd
        finally:
            run.budget.settle(held, cost)
        this = replace(this, model=reply.model or req.model)
        agent.spend.add(self.part, this)
        self.sent += 1
        self.said += [text, reply.text]
        run.bus.emit(exchange(run, reply, this, {
            "message": text, "system": req.system_prompt, "schema": req.output_schema,
            "tools": []}, step=req.step, iteration=req.iteration, attempt=self.sent,
            provider=req.provider, model=reply.model or req.model,
            elapsed=run.clock.monotonic() - started, call=req.call,
            **reply_facts(reply, req.provider, reply.model or req.model)))
        return reply, this

    def close(self) -> None:
        self.session.close()


def reply_object(reply: Reply) -> dict[str, Any] | None:
    """The JSON object of an answer (structured, or found in its text), or None."""
    from podium.steps.schema import extract_json_object

    value = reply.data
    if value is None:
        value, err = extract_json_object(reply.text)
        if err is not None:
            return None
    return value if isinstance(value, dict) else None
