"""Claude through the official `anthropic` SDK's Messages API (streamed, so long thinking
budgets do not hit the SDK's non-streaming limit; text, thinking and tool input go out as
`model_delta` events as they arrive).

Structured output uses `output_config.format` (a JSON Schema, in the form the SDK's
`transform_schema` produces); models older than structured outputs answer through a forced call
of a `final_answer` tool instead. Reasoning effort becomes extended thinking with a token budget
(spec 10.3) on models that take one, and adaptive thinking with `output_config.effort` on the
4.6 models and newer, which deprecate or reject budgets. `tools: []` sends no `tools` at all.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

import anthropic

from podium.providers.base import AgentRequest, ProviderError, Reply
from podium.providers.catalog import (
    ALL_EFFORTS,
    THINKING_BUDGETS,
    THINKING_MAX_TOKENS_CAP,
    Capabilities,
    claude_native_schema,
    claude_thinking,
)
from podium.providers.loop import DeltaStream, LoopSession, ToolCall, Turn, sdk_error
from podium.providers.pricing import preload_table
from podium.providers.settings import PLACEHOLDER_KEY, ProviderSettings
from podium.providers.stream_deltas import anthropic_delta
from podium.tools.base import ToolResult

CAPABILITIES = Capabilities(tools_filter=True, reasoning_efforts=ALL_EFFORTS,
                            structured_output="native", mcp=True, runs_tools=True,
                            max_temperature=1.0)
FINAL_TOOL = "final_answer"
DEFAULT_MAX_TOKENS = 8192
_OLD_SMALL = ("claude-3-haiku", "claude-3-opus", "claude-3-sonnet")


def _error(exc: Exception) -> ProviderError:
    return sdk_error(exc, "claude", timeout_cls=anthropic.APITimeoutError,
                     connection_cls=anthropic.APIConnectionError,
                     status_cls=anthropic.APIStatusError)


def _retiring(model: str) -> str | None:
    """When Anthropic retires `model`, per the SDK's table (None when it does not say)."""
    try:
        from anthropic._data.deprecated_models import DEPRECATED_MODELS
    except ImportError:  # the table moved: the SDK's own warning is all there is
        return None
    return DEPRECATED_MODELS.get(model)


def _block_param(block: Any) -> dict[str, Any] | None:
    """A response content block as a request block (what the next call sends back)."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return {"type": "text", "text": block.text}
    if kind == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    if kind == "thinking":
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    if kind == "redacted_thinking":
        return {"type": "redacted_thinking", "data": block.data}
    return None


class ClaudeSession(LoopSession):
    provider_label = "claude"

    def __init__(self, provider: ClaudeProvider, request: AgentRequest) -> None:
        super().__init__(request)
        self.provider = provider
        if provider.timeout:
            self.request_timeout = provider.timeout
        model = request.model
        if not model:
            raise ProviderError(f"agent '{request.step}' has no model: set its `model:` or "
                                "runtime.default_model")
        self.params = self._params(request, model)
        retiring = _retiring(model)
        if retiring and request.emit is not None:
            from podium.events.model import Warning_

            request.emit(Warning_(step=request.step, message=(
                f"model '{model}' is deprecated by Anthropic and retires on {retiring}")))
        # tool calls of a turn that ended with final_answer: the next message must answer them
        self.pending: list[str] = []

    def _params(self, request: AgentRequest, model: str) -> dict[str, Any]:
        default = 4096 if model.startswith(_OLD_SMALL) else DEFAULT_MAX_TOKENS
        max_tokens = request.max_tokens or default
        params: dict[str, Any] = {"model": model}
        output_config: dict[str, Any] = {}
        thinking = None
        if request.reasoning_effort:
            mode = claude_thinking(model)
            if mode is None:
                raise ProviderError(f"model '{model}' has no extended thinking, so it takes no "
                                    f"reasoning.effort (got '{request.reasoning_effort}')")
            if mode == "budget":
                budget = THINKING_BUDGETS[request.reasoning_effort]
                thinking = {"type": "enabled", "budget_tokens": budget}
                max_tokens = min(THINKING_MAX_TOKENS_CAP, max(max_tokens, budget + 4096))
            else:
                thinking = {"type": "adaptive"}
                output_config["effort"] = request.reasoning_effort
            params["thinking"] = thinking
        elif request.temperature is not None:
            params["extra_body"] = {"temperature": request.temperature}
        params["max_tokens"] = max_tokens
        tools = [{"name": s.name, "description": s.description, "input_schema": s.parameters}
                 for s in request.toolbox.specs] if request.toolbox else []
        system = request.system_prompt or ""
        self.tool_mode = False
        schema = request.output_schema
        if schema is not None and claude_native_schema(model):
            output_config["format"] = {"type": "json_schema",
                                       "schema": anthropic.transform_schema(schema)}
        elif schema is not None:
            self.tool_mode = True
            tools.append({"name": FINAL_TOOL, "input_schema": schema,
                          "description": "Give your final answer: call this tool once, with "
                                         "the answer as its input."})
            if thinking is not None:  # the API refuses forced tool use while thinking
                params["tool_choice"] = {"type": "auto"}
                system = (system + "\n\n" if system else "") + \
                    f"When you are done, give your final answer by calling `{FINAL_TOOL}`."
            else:
                params["tool_choice"] = {"type": "any"} if len(tools) > 1 else \
                    {"type": "tool", "name": FINAL_TOOL}
        if tools:
            params["tools"] = tools
        if output_config:
            params["output_config"] = output_config
        if system:
            params["system"] = system
        return params

    def user_message(self, text: str) -> list[Any]:
        content: list[dict[str, Any]] = [
            {"type": "tool_result", "tool_use_id": i, "content": "Received; see below."}
            for i in self.pending]
        content.append({"type": "text", "text": text})
        return [{"role": "user", "content": content}]

    def send(self, message: str) -> Reply:
        pending = self.pending
        try:
            return super().send(message)
        except BaseException:
            self.pending = pending
            raise

    def create(self, timeout: float) -> Turn:
        deltas = DeltaStream(self.request)
        try:
            with self.provider.client.messages.stream(
                    messages=self.messages, timeout=timeout, **self.params) as stream:
                tools: dict[int, str] = {}  # block index -> tool name
                for event in stream:
                    anthropic_delta(event, tools, deltas)
                msg = stream.get_final_message()
        except anthropic.AnthropicError as exc:
            raise _error(exc) from None
        finally:
            deltas.flush()
        texts, calls, kept = [], [], []
        data = None
        ids: list[str] = []
        for block in msg.content:
            param = _block_param(block)
            if param is not None:
                kept.append(param)
            if block.type == "text":
                texts.append(block.text)
            if block.type == "tool_use":
                ids.append(block.id)
            if block.type == "tool_use" and self.tool_mode and block.name == FINAL_TOOL:
                data = block.input
            elif block.type == "tool_use":
                calls.append(ToolCall(block.id, block.name, block.input))
        text = "".join(texts)
        self.pending = []
        if data is not None:
            text = json.dumps(data, ensure_ascii=False)
            calls = []  # the answer is given; other calls in the same turn are not run
            self.pending = ids
        u = msg.usage
        read = u.cache_read_input_tokens or 0
        write = u.cache_creation_input_tokens or 0
        return Turn(text, calls, data, u.input_tokens + read + write, u.output_tokens, read,
                    write, msg.model, msg.stop_reason,
                    {"role": "assistant", "content": kept or [{"type": "text", "text": ""}]})

    def tool_messages(self, calls: list[ToolCall], results: list[ToolResult]) -> list[Any]:
        return [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": c.id, "content": r.text,
             "is_error": r.is_error} for c, r in zip(calls, results, strict=True)]}]


class ClaudeProvider:
    name = "claude"
    capabilities = CAPABILITIES

    def __init__(self, client: anthropic.Anthropic, timeout: float | None) -> None:
        self.client = client
        self.timeout = timeout

    def open_session(self, request: AgentRequest) -> ClaudeSession:
        return ClaudeSession(self, request)

    def close(self) -> None:
        self.client.close()


def create_claude(settings: ProviderSettings) -> ClaudeProvider:
    preload_table()
    base_url = settings.base_url or settings.env("ANTHROPIC_BASE_URL")
    key = settings.api_key or settings.env("ANTHROPIC_API_KEY")
    token = settings.auth_token or settings.env("ANTHROPIC_AUTH_TOKEN")
    if key is None and token is None:
        if not base_url:
            raise ProviderError("provider 'claude' needs an API key: set ANTHROPIC_API_KEY "
                                "(or ANTHROPIC_AUTH_TOKEN), or runtime.provider.api_key_env")
        key = PLACEHOLDER_KEY
    # podium reports deprecated models as a `warning` event (see ClaudeSession); the SDK's
    # Python warning would go to stderr outside the event stream
    warnings.filterwarnings("ignore", message=r"The model .* is deprecated",
                            category=DeprecationWarning, module=r"podium\.")
    client = anthropic.Anthropic(api_key=key, auth_token=token, base_url=base_url,
                                 max_retries=0, default_headers=settings.headers or None,
                                 timeout=settings.timeout or 600.0)
    return ClaudeProvider(client, settings.timeout)
