"""The agent step: render the prompt, ask the model, enforce the output contract.

An answer that does not parse or does not fit the declared schema is sent back for correction
in the same conversation, a bounded number of times; then the step fails naming the field.
Each execution opens a fresh session (the provider keeps continuity only for `session_key`).
A provider that runs tools gets the agent's toolbox; transient provider failures are retried
under the agent's `retry:` policy, waiting on the run's clock; every call's tokens are priced.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from podium import jsontext
from podium.aio import blocking, drive
from podium.errors import LimitExceeded, OutputContractError, RunError, StepError
from podium.events.model import ModelExchange, ParseRecovery, PromptRendered, Warning_
from podium.language.model import EFFORTS, AgentStep
from podium.providers.base import (
    AgentRequest,
    Provider,
    ProviderError,
    Reply,
    Session,
    TokenUsage,
)
from podium.providers.pricing import cost_usd, find_price
from podium.providers.retry import PolicyRetrier, RetryPolicy
from podium.records import record
from podium.steps.base import RunServices, StepCall, StepOutcome, Usage
from podium.steps.budget import Reservation, worst_case
from podium.steps.schema import (
    REFUSED_JSON,
    SchemaViolation,
    check_value,
    declared_schema,
    extract_json_object,
    json_type_name,
    received,
)
from podium.templating import is_template

if TYPE_CHECKING:
    from podium.language.model import ToolOutputConfig
    from podium.providers.settings import ProviderSettings
    from podium.tools.base import OutputLimit, Toolbox

DEFAULT_CORRECTIONS = 2
DEFAULT_AGENT_ITERATIONS = 50


def _correction_message(reason: str, error: str, reply: str, schema: dict[str, Any]) -> str:
    what = ("did not parse as JSON" if reason == "syntax"
            else "did not match the required schema")
    return (f"Your previous answer {what}: {error}\n\n"
            f"Previous answer (first 500 characters):\n{reply[:500]}\n\n"
            f"Answer again with only one JSON object that matches this JSON Schema, with no "
            f"text around it; give scalar values directly:\n{json.dumps(schema)}")


def _instruction(schema: dict[str, Any]) -> str:
    return ("\n\nAnswer with only one JSON object that matches this JSON Schema, no other "
            f"text:\n{json.dumps(schema)}")


def _resolve_working_dir(call: StepCall, step: AgentStep, ctx: dict[str, Any]) -> str | None:
    run = call.run
    raw = step.working_dir or run.workflow.workflow.runtime.working_dir
    if not raw:
        return None
    text = run.render(raw, ctx, step=step.name, what="working_dir", iteration=call.iteration)
    path = Path(os.path.expanduser(text.strip()))
    if not path.is_absolute():
        path = run.path.parent / path
    path = Path(os.path.normpath(path))
    if not path.is_dir():
        raise StepError(f"working_dir '{path}' does not exist", step=step.name,
                        iteration=call.iteration)
    return str(path)


def provider_name_for(run: RunServices, step: AgentStep) -> str:
    """An agent's own `provider:` wins; `--provider` replaces only the workflow's default."""
    return step.provider or run.options.provider_override or \
        run.workflow.workflow.runtime.provider_name


def _provider(run: RunServices, name: str) -> Provider:
    runtime = run.workflow.workflow.runtime

    def settings() -> ProviderSettings:
        from podium.providers.settings import resolve_settings

        return resolve_settings(name, runtime)

    return run.providers.get(name, settings)


def _toolbox(call: StepCall, step: AgentStep, working_dir: str | None) -> Toolbox | None:
    """The tools the model is offered (tools/select.py), or None for none."""
    run = call.run
    runtime = run.workflow.workflow.runtime
    servers = runtime.mcp_servers
    names = step.wanted_tools(run.workflow.tools)
    if names == [] or (names is None and not servers):
        return None  # no tool (build_toolbox's answer), without its set-up per execution
    from podium.events.redact import secret_names
    from podium.tools.base import ToolError
    from podium.tools.mcp import McpHub
    from podium.tools.select import build_toolbox

    try:
        return build_toolbox(names, working_dir or os.getcwd(), servers,
                             lambda: run.providers.shared(f"mcp:{run.path}",
                                                          lambda: McpHub(servers)),
                             run_id=run.run_id,
                             hidden=frozenset(secret_names(run.workflow)),
                             limit=output_limit(runtime.tool_output, run.bus.redactor.text),
                             workspaces=run.workspaces)
    except ToolError as exc:
        raise StepError(str(exc), step=step.name, iteration=call.iteration) from None


def output_limit(cfg: ToolOutputConfig | None,
                 redact: Callable[[str], str] | None = None) -> OutputLimit:
    """`runtime.tool_output` (Conductor's defaults when it is not written): results over
    max_chars are cut, and spilled whole to a file first unless spill_to_file is false;
    `redact` (the run's Redactor) takes the secrets out of what is spilled."""
    from podium.tools.base import OutputLimit, spill_dir_for

    if cfg is None:
        return OutputLimit(spill_dir=spill_dir_for(None), redact=redact)
    return OutputLimit(cfg.max_chars, cfg.enabled, spill_dir_for(cfg.spill_dir,
                                                                 cfg.spill_to_file), redact)


def _runtime_options(call: StepCall, step: AgentStep, ctx: dict[str, Any],
                     provider: Provider) -> dict[str, Any]:
    """What only some runtimes take (their capabilities say which; `validate` rejects the
    rest): the context tier (a template is rendered) and the skill and plugin folders."""
    from podium.providers.skills import SkillProblem, effective, resolve_all

    run, caps = call.run, provider.capabilities
    out: dict[str, Any] = {}
    runtime = run.workflow.workflow.runtime
    tier = step.context_tier or runtime.default_context_tier
    if tier and getattr(caps, "context_tier", False):
        if is_template(tier):
            tier = run.render(tier, ctx, step=step.name, what="context_tier",
                              iteration=call.iteration).strip()
        if tier not in ("default", "long_context"):
            raise StepError(f"context_tier resolved to '{tier}', which is not default or "
                            "long_context", step=step.name, iteration=call.iteration)
        out["context_tier"] = tier
    if getattr(caps, "skills", False):
        try:
            out["skill_dirs"], out["plugin_dirs"] = resolve_all(
                effective(step.skills, runtime.skills), effective(step.plugins, runtime.plugins),
                run.path.parent, runtime.plugin_sources, _locator(call))
        except SkillProblem as exc:
            raise StepError(str(exc), step=step.name, iteration=call.iteration) from None
        if step.skills is None and runtime.skill_discovery is not None:
            found = _discovered(call)
            if found:
                out["skill_dirs"] = (*(out["skill_dirs"] or ()), *found)
    return out


def _locator(call: StepCall) -> Any:
    """Where the workflow's fetched git plugin sources are (None: it declares none)."""
    if not call.run.workflow.workflow.runtime.plugin_sources:
        return None
    from podium.providers.plugin_sources import fetched_locator

    return fetched_locator()


def _discovered(call: StepCall) -> tuple[str, ...]:
    """The skill folders `runtime.skill_discovery` finds: scanned once per run, so every agent
    gets the same set; what it skipped is a warning, once."""
    from podium.providers.skill_discovery import declared_names, discover

    run = call.run
    cfg = run.workflow.workflow.runtime.skill_discovery
    assert cfg is not None

    def scan() -> tuple[str, ...]:
        base = run.path.parent
        found = discover(cfg.sources, cfg.exclude, base, Path.home(),
                         declared_names(run.workflow.workflow.runtime.skills, base))
        for note in found.notes:
            run.bus.emit(Warning_(message=note))
        return found.folders

    return run.providers.shared(f"skill-discovery:{run.path}", scan)


def _timeout(run: RunServices, step: AgentStep) -> float | None:
    runtime = run.workflow.workflow.runtime
    limits = [t for t in (step.timeout_seconds, step.max_session_seconds
                          or runtime.max_session_seconds, run.remaining()) if t is not None]
    return min(limits) if limits else None


def _usage(call: StepCall, provider: str, spent: TokenUsage | Reply, model: str | None) -> Usage:
    """Tokens of one call with their cost; warns (once per model) when a budget cannot count
    them because the model has no price."""
    run = call.run
    cost_cfg = run.workflow.workflow.cost
    used = spent.model or model
    cost = cost_usd(find_price(used, cost_cfg.pricing, provider), spent.input_tokens,
                    spent.output_tokens, spent.cached_tokens, spent.cache_write_tokens)
    limits = run.workflow.workflow.limits
    if cost is None and limits.budget_usd is not None:
        warned: set[str] = run.providers.shared("unpriced-warned", set)
        if (used or "?") not in warned:
            warned.add(used or "?")
            run.bus.emit(Warning_(step=call.step.name, message=(
                f"model '{used}' has no known price, so the budget (${limits.budget_usd:g}, "
                f"{limits.budget_mode}) cannot count its calls; price it in cost.pricing")))
    return Usage(spent.input_tokens, spent.output_tokens, spent.cached_tokens, cost, used,
                 cost is not None)


def reserve(call: StepCall, req: AgentRequest, sent: list[str | None]) -> Reservation | None:
    """Hold the worst case of a call that sends `sent` (the conversation so far and the new
    message) against the run's budget, or refuse it (steps/budget.py); None when no budget
    of the run is enforced."""
    run = call.run
    if not run.budget.enforcing:
        return None
    extra = run.local.extra or {}
    key = extra.get("_key", extra.get("_index"))
    name = req.step if key is None else f"{req.step}[{key}]"
    label = f"the {req.call} call of agent '{name}'" if req.call else \
        f"the call of agent '{name}'"
    worst = worst_case(label, req.model, provider=req.provider,
                       pricing=run.workflow.workflow.cost.pricing,
                       sent=[req.system_prompt, *sent], max_tokens=req.max_tokens,
                       schema=req.output_schema)
    return run.budget.reserve(worst, step=req.step, iteration=req.iteration)


@record
class _Plan:
    """One execution, ready to talk to the model."""

    provider: Provider
    request: AgentRequest
    retrier: PolicyRetrier
    message: str  # the first message (the prompt, plus the schema for prompt-only providers)


def _model_and_effort(call: StepCall, step: AgentStep, ctx: dict[str, Any],
                      provider: Provider) -> tuple[str | None, str | None]:
    """The model and effort of this execution, their templates rendered and checked."""
    run, name, it = call.run, step.name, call.iteration
    runtime = run.workflow.workflow.runtime
    model = step.model or runtime.default_model
    if model and is_template(model):
        model = run.render(model, ctx, step=name, what="model", iteration=it).strip() or None
    effort = step.reasoning.effort if step.reasoning and step.reasoning.effort else \
        runtime.default_reasoning_effort
    if effort and is_template(effort):
        effort = run.render(effort, ctx, step=name, what="reasoning.effort", iteration=it).strip()
        if effort not in EFFORTS:
            raise StepError(f"reasoning.effort template resolved to '{effort}', which is not one "
                            f"of {', '.join(EFFORTS)}", step=name, iteration=it)
    efforts = provider.capabilities.reasoning_efforts
    if effort and effort not in efforts:
        raise StepError(f"provider '{provider_name_for(run, step)}' supports reasoning.effort "
                        f"{', '.join(efforts) or 'none'}, not '{effort}'", step=name,
                        iteration=it)
    return model, effort


GUIDANCE_HEADER = ("\n\n[User Guidance]\nThe following guidance was provided by the user "
                   "during workflow execution. Incorporate this guidance into your response:\n")


def guidance_section(run: RunServices, step: str, iteration: int) -> str:
    """Take in the guidance given since the last agent prompt (a `guidance_added` event
    each) and return the `[User Guidance]` section every later prompt ends with, as
    Conductor writes it (spec 5.4); empty when no guidance was given."""
    from podium.events.model import GuidanceAdded

    # the queue only grows: it is read outside the lock (a store read, which a group's members
    # would otherwise wait for one after another), and what this run has not taken in yet is
    # taken in under it
    queue = run.guidance_source(step, iteration) if run.guidance_source is not None else []
    with run.guidance_lock:
        for text in queue[len(run.guidance):]:
            run.guidance.append(text)
            run.bus.emit(GuidanceAdded(text=text, step=step, iteration=iteration))
        given = list(run.guidance)
    if not given:
        return ""
    return GUIDANCE_HEADER + "\n".join(f"- {g}" for g in given)


def _plan(call: StepCall, step: AgentStep, *, announce: bool = True) -> _Plan:
    """Render everything the execution needs, emit `prompt_rendered` (unless `announce` is
    false: a resumed execution whose prompt is already in the log), build the request."""
    run, name, it = call.run, step.name, call.iteration
    wf = run.workflow.workflow
    ctx = run.step_context(step)
    provider_name = provider_name_for(run, step)
    provider = _provider(run, provider_name)
    if step.session_key and not provider.capabilities.session_continuity:
        raise StepError(f"session_key needs session continuity, which provider "
                        f"'{provider_name}' does not have", step=name, iteration=it)
    model, effort = _model_and_effort(call, step, ctx, provider)
    working_dir = _resolve_working_dir(call, step, ctx)
    prompt = run.render(step.prompt, ctx, step=name, what="prompt", iteration=it)
    given = run.options
    parts = [given.workspace_instructions or "", *wf.instructions, given.cli_instructions or ""]
    if any(p.strip() for p in parts):
        joined = "\n\n".join(p.strip() for p in parts if p.strip())
        prompt = f"<workspace_instructions>\n{joined}\n</workspace_instructions>\n\n{prompt}"
    prompt += guidance_section(run, name, it)
    system = None
    if step.system_prompt:
        system = run.render(step.system_prompt, ctx, step=name, what="system_prompt",
                            iteration=it)
    schema = declared_schema(step.output) if step.has_schema and step.output else None
    tools = None if step.tools is None else tuple(step.tools)
    toolbox = _toolbox(call, step, working_dir) if provider.capabilities.runs_tools else None
    timeout = _timeout(run, step)
    deadline = None if timeout is None else run.clock.monotonic() + timeout
    retrier = PolicyRetrier(RetryPolicy.of(step.retry), run.clock, run.bus.emit, step=name,
                            iteration=it, cancel=run.cancel,
                            remaining=lambda: None if deadline is None
                            else deadline - run.clock.monotonic())
    request = AgentRequest(
        run.run_id, name, it, provider_name, model, prompt, system, schema, effort, tools,
        working_dir, timeout, step.session_key, wf.runtime.max_tokens,
        wf.runtime.temperature, toolbox, run.bus.emit, retrier,
        step.max_agent_iterations or wf.runtime.max_agent_iterations or DEFAULT_AGENT_ITERATIONS,
        _effective_tools(step, run.workflow.tools))
    options = _runtime_options(call, step, ctx, provider)
    if options:
        request = replace(request, **options)
    if announce:
        run.bus.emit(PromptRendered(step=name, iteration=it, provider=provider_name,
                                    model=model, prompt=prompt, system_prompt=system,
                                    reasoning_effort=effort,
                                    tools=list(tools) if tools is not None else None))
    message = prompt + (_instruction(schema) if schema and
                        provider.capabilities.structured_output == "prompt" else "")
    return _Plan(provider, request, retrier, message)


def reply_facts(reply: Reply, provider: str, model: str | None) -> dict[str, Any]:
    """What a `model_exchange` says of an answer besides its text: the finish reason and the
    context gauge (tokens the last API call used, of the model's window when known)."""
    from podium.providers.pricing import context_window

    used = reply.raw.get("context_tokens")
    used = used if isinstance(used, int) else None
    stop = reply.raw.get("stop")
    return {"finish_reason": stop if isinstance(stop, str) else None, "context_tokens": used,
            "context_window": context_window(model, provider) if used is not None else None}


def exchange(run: RunServices, reply: Reply, this: Usage, request: dict[str, Any],
             **where: Any) -> ModelExchange:
    """The `model_exchange` of one answer. Its figures are what the answer cost (`this`: the
    requests behind it, with the failed attempts a retry paid for), each request's tokens and
    finish reason when there were several; with recording off (--no-record) the figures are
    kept and the content is not (what a run spent is the sum of these: events/spend.py)."""
    requests = [{"input_tokens": c.input_tokens, "output_tokens": c.output_tokens,
                 "cached_tokens": c.cached_tokens, "finish_reason": c.finish_reason}
                for c in reply.calls] if len(reply.calls) > 1 else None
    text = reply.text
    if not run.options.record:
        request, text = {}, ""
    return ModelExchange(request=request, response_text=text, input_tokens=this.input_tokens,
                         output_tokens=this.output_tokens, cached_tokens=this.cached_tokens,
                         api_calls=len(reply.calls) or 1, requests=requests,
                         cost_usd=this.cost_usd if this.priced else None, group=run.group,
                         **where)


def failed_exchange(run: RunServices, lost: Usage, request: dict[str, Any],
                    **where: Any) -> ModelExchange | None:
    """The `model_exchange` of a call that failed having spent tokens (`lost`): what it paid
    for has no other event, and what a run spent is the sum of these (events/spend.py)."""
    if not (lost.input_tokens or lost.output_tokens):
        return None
    return ModelExchange(request=request if run.options.record else {}, response_text="",
                         input_tokens=lost.input_tokens, output_tokens=lost.output_tokens,
                         cached_tokens=lost.cached_tokens,
                         cost_usd=lost.cost_usd if lost.priced else None, group=run.group,
                         failed=True, finish_reason="error", **where)


def execute_agent(call: StepCall) -> StepOutcome:
    step = call.step
    assert isinstance(step, AgentStep)
    if step.dialog is not None or step.validator is not None:
        from podium.steps.agent_checks import execute_checked  # dialog, then validator

        return execute_checked(call, step)
    return _execute(call, step, _plan(call, step))


async def execute_agent_async(call: StepCall) -> StepOutcome:
    """`execute_agent` for a group member, as a task of the member loop (podium/aio.py): the
    same code, its model calls awaited on the provider's async path. An agent with a dialog
    or a validator runs whole in a worker thread (its checks make calls of their own)."""
    step = call.step
    assert isinstance(step, AgentStep)
    if step.dialog is not None or step.validator is not None:
        return await blocking(partial(execute_agent, call), True)
    plan = _plan(call, step)
    return await _conversation(call, step, plan, aio=True)


def _execute(call: StepCall, step: AgentStep, plan: _Plan) -> StepOutcome:
    """One conversation with the model: the prompt, then corrections."""
    return drive(_conversation(call, step, plan, aio=False))


async def _conversation(call: StepCall, step: AgentStep, plan: _Plan, *,
                        aio: bool) -> StepOutcome:
    session = plan.provider.open_session(plan.request)
    try:
        return await _converse(call, step, plan, session, aio)
    finally:
        session.close()


async def _converse(call: StepCall, step: AgentStep, plan: _Plan, session: Session,
                    aio: bool) -> StepOutcome:
    """Send the prompt, then corrections in the same session, until the answer keeps the
    output contract (or the correction budget is spent)."""
    run, name, it = call.run, step.name, call.iteration
    req, message = plan.request, plan.message
    max_fix = DEFAULT_CORRECTIONS
    if step.retry and step.retry.max_parse_recovery_attempts is not None:
        max_fix = step.retry.max_parse_recovery_attempts
    usage = Usage(model=req.model)
    offered = {"offered_tools": list(req.toolbox.names)} if req.toolbox is not None else {}
    attempt = 0
    sent: list[str | None] = []  # the conversation so far, for the budget's worst case
    while True:
        attempt += 1
        started = run.clock.monotonic()
        reply, this = await _send(call, plan, session, message, (sent, usage), aio=aio)
        sent += [message, reply.text]
        usage = usage.plus(this, model=reply.model or req.model)
        run.bus.emit(exchange(run, reply, this, {
            "message": message, "system": req.system_prompt, "schema": req.output_schema,
            "tools": req.tools, **offered}, step=name, iteration=it, attempt=attempt,
            provider=req.provider, model=reply.model or req.model,
            elapsed=run.clock.monotonic() - started, call=req.call,
            **reply_facts(reply, req.provider, reply.model or req.model)))
        if req.output_schema is None:
            return StepOutcome({"result": reply.text}, usage=usage)
        value, reason, error = _parse(reply, step)
        if reason is None:
            return StepOutcome(value, usage=usage)
        if attempt > max_fix:
            refused = reason == "syntax" and (error or "").startswith(REFUSED_JSON)
            kind = ("its answer is JSON podium does not take" if refused
                    else "its answer is not valid JSON" if reason == "syntax"
                    else "its answer breaks the output schema")
            broke = OutputContractError(
                f"{kind} after {attempt} attempt(s): {error}; {received(reply.text)}"
                + (" (consider output_mode: raw for long prose)"
                   if reason == "syntax" and not refused else ""),
                step=name, iteration=it, details={"answer": reply.text[:2000]})
            _spend_details(broke, usage)  # its calls were paid for all the same
            raise broke
        run.bus.emit(ParseRecovery(step=name, iteration=it, attempt=attempt,
                                   max_attempts=max_fix, reason=reason,
                                   error=(error or "")[:500]))
        message = _correction_message(reason, error or "", reply.text, req.output_schema)


async def _send(call: StepCall, plan: _Plan, session: Session, message: str,
                before: tuple[list[str | None], Usage], *, aio: bool) -> tuple[Reply, Usage]:
    """One model call of the agent's conversation (`before`: what it sent and spent so far):
    its worst case reserved against the budget first, settled to what it cost after."""
    req, retrier = plan.request, plan.retrier
    try:
        held = reserve(call, req, [*before[0], message])
    except LimitExceeded as exc:  # refused: what the execution spent so far still counts
        _spend_details(exc, before[1])
        raise
    cost: float | None = None
    try:
        try:
            reply = await retrier.acall(partial(_ask, session, message, aio), "model call",
                                        aio)
        except ProviderError as exc:
            lost = _attach_spend(call, req, exc, before[1], retrier.failed_spend)
            cost = lost.cost_usd
            _emit_failed(call, req, lost, message, len(before[0]) // 2 + 1)
            raise
        paid = (*retrier.failed_spend, *(reply.calls or (reply,)))
        if len(paid) == 1:  # one request, the common case: its usage is the call's
            this = _usage(call, req.provider, paid[0], req.model)
        else:
            this = Usage(model=req.model)
            for spent in paid:
                this = this + _usage(call, req.provider, spent, req.model)
        retrier.failed_spend.clear()
        cost = this.cost_usd
    finally:
        call.run.budget.settle(held, cost)
    return reply, this


def _emit_failed(call: StepCall, req: AgentRequest, lost: Usage, message: str,
                 attempt: int) -> None:
    """The failed call's own `model_exchange`, when it spent tokens (failed_exchange)."""
    run = call.run
    event = failed_exchange(run, lost, {"message": message, "system": req.system_prompt,
                                        "schema": req.output_schema, "tools": req.tools},
                            step=req.step, iteration=req.iteration, attempt=attempt,
                            provider=req.provider, model=req.model, call=req.call)
    if event is not None:
        run.bus.emit(event)


async def _ask(session: Session, message: str, aio: bool) -> Reply:
    """One `send` of the session: on the loop, its async path (`asend`) when it has one, else
    its blocking `send` in a worker thread."""
    if not aio:
        return session.send(message)
    asend = getattr(session, "asend", None)
    if asend is not None:
        return await asend(message)  # type: ignore[no-any-return]
    return await blocking(partial(session.send, message), True)


def _attach_spend(call: StepCall, req: AgentRequest, exc: ProviderError, usage: Usage,
                  failed: list[TokenUsage]) -> Usage:
    """What the failed execution had spent, in the error's details (`usage`): the engine
    records usage only for steps that finish, and these tokens were paid for all the same.
    Returns what the failed call itself spent."""
    lost = Usage(model=req.model)
    for spent in (*failed, *(exc.spent or ())):
        lost = lost + _usage(call, req.provider, spent, req.model)
    failed.clear()
    _spend_details(exc, usage + lost)
    return lost


def _spend_details(exc: RunError, usage: Usage) -> None:
    if usage.input_tokens or usage.output_tokens:
        exc.details["usage"] = {
            "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
            "cached_tokens": usage.cached_tokens, "model": usage.model,
            "cost_usd": usage.cost_usd if usage.priced else None}


def _parse(reply: Reply, step: AgentStep) -> tuple[Any, str | None, str | None]:
    value = reply.data
    if value is None:
        value, err = extract_json_object(reply.text)
        if err is not None:
            return None, "syntax", err
    else:
        try:
            jsontext.check_depth(value)
        except jsontext.JsonLimitError as exc:
            return None, "syntax", f"{REFUSED_JSON}{exc}"
    if not isinstance(value, dict):
        kind = "list" if isinstance(value, list) else json_type_name(value)
        return None, "syntax", f"the answer is a JSON {kind}, not an object"
    value = _unwrap_scalars(value, step)
    try:
        check_value(step.output or {}, value)
    except SchemaViolation as exc:
        return None, "schema", str(exc)
    return value, None, None


def _unwrap_scalars(value: dict[str, Any], step: AgentStep) -> dict[str, Any]:
    """A scalar field that came back as {field|value|result: scalar} is unwrapped (spec 9.3)."""
    out = value
    for fname, fld in (step.output or {}).items():
        got = value.get(fname)
        if fld.type in ("string", "number", "boolean") and isinstance(got, dict) and got:
            from podium.language.model import value_has_type

            cands = [got[k] for k in (fname, "value", "result")
                     if k in got and value_has_type(got[k], fld.type)]
            if len(cands) == 1:
                if out is value:  # the answer's own object is left as it came
                    out = dict(value)
                out[fname] = cands[0]
    return out


def _effective_tools(step: AgentStep, root: list[str]) -> tuple[str, ...] | None:
    names = step.wanted_tools(root)
    return None if names is None else tuple(names)
