"""The agent step: render the prompt, ask the model, enforce the output contract.

An answer that does not parse or does not fit the declared schema is sent back for correction
in the same conversation, a bounded number of times; then the step fails naming the field.
Each execution opens a fresh session (the provider keeps continuity only for `session_key`).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from podium.errors import OutputContractError, StepError
from podium.events.model import ModelExchange, ParseRecovery, PromptRendered
from podium.providers.base import AgentRequest, Reply
from podium.providers.pricing import cost_usd, find_price
from podium.spec.model import EFFORTS, AgentStep
from podium.steps.base import StepCall, StepOutcome, Usage
from podium.steps.schema import (
    SchemaViolation,
    check_value,
    extract_json_object,
    json_type_name,
    to_json_schema,
)
from podium.templating import is_template

DEFAULT_CORRECTIONS = 2


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


def execute_agent(call: StepCall) -> StepOutcome:
    step = call.step
    assert isinstance(step, AgentStep)
    run = call.run
    wf = run.workflow.workflow
    name, it = step.name, call.iteration
    ctx = run.step_context(step)
    provider_name = run.options.provider_override or step.provider or wf.runtime.provider_name
    provider = run.providers.get(provider_name)
    if step.session_key and not provider.capabilities.session_continuity:
        raise StepError(f"session_key needs session continuity, which provider "
                        f"'{provider_name}' does not have", step=name, iteration=it)
    model = step.model or wf.runtime.default_model
    if model and is_template(model):
        model = run.render(model, ctx, step=name, what="model", iteration=it).strip() or None
    effort = step.reasoning.effort if step.reasoning and step.reasoning.effort else \
        wf.runtime.default_reasoning_effort
    if effort and is_template(effort):
        effort = run.render(effort, ctx, step=name, what="reasoning.effort", iteration=it).strip()
        if effort not in EFFORTS:
            raise StepError(f"reasoning.effort template resolved to '{effort}', which is not one "
                            f"of {', '.join(EFFORTS)}", step=name, iteration=it)
    working_dir = _resolve_working_dir(call, step, ctx)
    prompt = run.render(step.prompt, ctx, step=name, what="prompt", iteration=it)
    if wf.instructions:
        joined = "\n\n".join(i.strip() for i in wf.instructions)
        prompt = f"<workspace_instructions>\n{joined}\n</workspace_instructions>\n\n{prompt}"
    system = None
    if step.system_prompt:
        system = run.render(step.system_prompt, ctx, step=name, what="system_prompt",
                            iteration=it)
    schema = to_json_schema(step.output) if step.has_schema and step.output else None
    tools = None if step.tools is None else tuple(step.tools)
    remaining = run.remaining()
    timeout = step.timeout_seconds
    if remaining is not None:
        timeout = min(timeout, remaining) if timeout else remaining
    request = AgentRequest(run.run_id, name, it, provider_name, model, prompt, system, schema,
                           effort, tools, working_dir, timeout, step.session_key,
                           wf.runtime.max_tokens, wf.runtime.temperature)
    run.bus.emit(PromptRendered(step=name, iteration=it, provider=provider_name, model=model,
                                prompt=prompt, system_prompt=system, reasoning_effort=effort,
                                tools=list(tools) if tools is not None else None))
    max_fix = DEFAULT_CORRECTIONS
    if step.retry and step.retry.max_parse_recovery_attempts is not None:
        max_fix = step.retry.max_parse_recovery_attempts
    message = prompt + (_instruction(schema) if schema and
                        provider.capabilities.structured_output == "prompt" else "")
    session = provider.open_session(request)
    usage = Usage(model=model)
    pricing = run.workflow.workflow.cost.pricing
    try:
        attempt = 0
        while True:
            attempt += 1
            started = time.monotonic()
            reply = session.send(message)
            price = find_price(reply.model or model, pricing)
            call_cost = cost_usd(price, reply.input_tokens, reply.output_tokens,
                                 reply.cached_tokens)
            usage = usage + Usage(reply.input_tokens, reply.output_tokens, reply.cached_tokens,
                                  call_cost, reply.model or model, call_cost is not None)
            run.bus.emit(ModelExchange(
                step=name, iteration=it, attempt=attempt, provider=provider_name,
                model=reply.model or model, request={"message": message, "system": system,
                                                     "schema": schema, "tools": tools},
                response_text=reply.text, input_tokens=reply.input_tokens,
                output_tokens=reply.output_tokens, cached_tokens=reply.cached_tokens,
                elapsed=time.monotonic() - started))
            if schema is None:
                return StepOutcome({"result": reply.text}, usage=usage)
            value, reason, error = _parse(reply, step)
            if reason is None:
                return StepOutcome(value, usage=usage)
            if attempt > max_fix:
                kind = ("its answer is not valid JSON" if reason == "syntax"
                        else "its answer breaks the output schema")
                raise OutputContractError(
                    f"{kind} after {attempt} attempt(s): {error}"
                    + (" (consider output_mode: raw for long prose)" if reason == "syntax"
                       else ""), step=name, iteration=it, details={"answer": reply.text[:2000]})
            run.bus.emit(ParseRecovery(step=name, iteration=it, attempt=attempt,
                                       max_attempts=max_fix, reason=reason,
                                       error=(error or "")[:500]))
            message = _correction_message(reason, error or "", reply.text, schema)
    finally:
        session.close()


def _parse(reply: Reply, step: AgentStep) -> tuple[Any, str | None, str | None]:
    value = reply.data
    if value is None:
        value, err = extract_json_object(reply.text)
        if err is not None:
            return None, "syntax", err
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
    from podium.spec.model import value_has_type

    out = dict(value)
    for fname, fld in (step.output or {}).items():
        got = out.get(fname)
        if fld.type in ("string", "number", "boolean") and isinstance(got, dict) and got:
            cands = [got[k] for k in (fname, "value", "result")
                     if k in got and value_has_type(got[k], fld.type)]
            if len(cands) == 1:
                out[fname] = cands[0]
    return out
