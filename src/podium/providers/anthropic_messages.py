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

import functools
import json
import warnings
from collections.abc import Callable
from typing import Any

import anthropic
import httpx2
from anthropic._constants import RAW_RESPONSE_HEADER

from podium.aio import close_on_loop, drive
from podium.providers.base import AgentRequest, ProviderError, Reply
from podium.providers.catalog import (
    ALL_EFFORTS,
    THINKING_BUDGETS,
    THINKING_MAX_TOKENS_CAP,
    Capabilities,
    claude_native_schema,
    claude_thinking,
)
from podium.providers.loop import (
    DeltaStream,
    LoopSession,
    StreamedPost,
    ToolCall,
    Turn,
    close_streamed,
    raw_http,
    remember_headers,
    remember_urls,
    sdk_error,
    stream_errors,
    tls_of,
    verify_with,
)
from podium.providers.pricing import preload_table
from podium.providers.settings import PLACEHOLDER_KEY, ProviderSettings
from podium.providers.sse import EventReader, body_lines, data_json
from podium.providers.stream_deltas import anthropic_delta
from podium.tools.base import ToolResult

CAPABILITIES = Capabilities(tools_filter=True, reasoning_efforts=ALL_EFFORTS,
                            structured_output="native", mcp=True, runs_tools=True,
                            max_temperature=1.0)
FINAL_TOOL = "final_answer"
DEFAULT_MAX_TOKENS = 8192
_OLD_SMALL = ("claude-3-haiku", "claude-3-opus", "claude-3-sonnet")
# the headers `client.messages.stream` adds, and the one that keeps the body unread
_MESSAGES = StreamedPost("/v1/messages", {"headers": {
    "x-stainless-helper-method": "stream", "x-stainless-stream-helper": "messages",
    RAW_RESPONSE_HEADER: "stream"}})


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


def _block_param(block: dict[str, Any]) -> dict[str, Any] | None:
    """A response content block as a request block (what the next call sends back)."""
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": block.get("text") or ""}
    if kind == "tool_use":
        return {"type": "tool_use", "id": block["id"], "name": block["name"],
                "input": block["input"]}
    if kind == "thinking":
        return {"type": "thinking", "thinking": block.get("thinking") or "",
                "signature": block.get("signature") or ""}
    if kind == "redacted_thinking":
        return {"type": "redacted_thinking", "data": block.get("data")}
    return None


class _Message:
    """A streamed Message put together from its raw events, as the SDK's MessageStream
    accumulates it (message_start, content blocks and their deltas, message_delta's stop
    reason and cumulative usage), on the parsed JSON itself rather than on typed objects."""

    def __init__(self) -> None:
        self.msg: dict[str, Any] | None = None
        self.json: dict[int, list[str]] = {}  # block index -> a tool input's JSON so far

    def event(self, name: str | None, data: str, response: httpx2.Response) -> Any:
        """Take in one SSE event; the event, or None when it carries nothing (a ping)."""
        if name == "error":  # as the SDK's stream raises it
            try:
                body: Any = json.loads(data)
            except ValueError:
                body = data
            raise anthropic.APIStatusError(str(body) if body else
                                           f"Error code: {response.status_code}",
                                           response=response, body=body)
        if name is None or name == "ping" or not data:
            return None
        event = data_json(data, "claude")
        kind = event.get("type") if isinstance(event, dict) else None
        if kind == "message_start":
            self.msg = dict(event["message"])
            self.msg["content"] = list(self.msg.get("content") or [])
            self.msg["usage"] = dict(self.msg.get("usage") or {})
        elif self.msg is None:
            raise ProviderError(f"claude: the stream sent {kind} before message_start")
        elif kind == "content_block_start":
            self.msg["content"].append(dict(event["content_block"]))
        elif kind == "content_block_delta":
            self._delta(self.msg["content"][event["index"]], event["index"], event["delta"])
        elif kind == "message_delta":
            self._ended(event)
        return event

    def _delta(self, block: dict[str, Any], index: int, delta: dict[str, Any]) -> None:
        kind = delta.get("type")
        if kind == "text_delta" and block.get("type") == "text":
            block["text"] = (block.get("text") or "") + delta["text"]
        elif kind == "input_json_delta" and "input" in block:
            self.json.setdefault(index, []).append(delta.get("partial_json") or "")
        elif kind == "thinking_delta" and block.get("type") == "thinking":
            block["thinking"] = (block.get("thinking") or "") + delta["thinking"]
        elif kind == "signature_delta" and block.get("type") == "thinking":
            block["signature"] = delta["signature"]
        elif kind == "citations_delta" and block.get("type") == "text":
            block["citations"] = [*(block.get("citations") or []), delta.get("citation")]

    def _ended(self, event: dict[str, Any]) -> None:
        assert self.msg is not None
        delta = event.get("delta") or {}
        self.msg["stop_reason"] = delta.get("stop_reason")
        self.msg["stop_sequence"] = delta.get("stop_sequence")
        usage = event.get("usage") or {}
        # cumulative totals: they overwrite; the optional ones keep message_start's when absent
        self.msg["usage"]["output_tokens"] = usage.get("output_tokens")
        for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
            if usage.get(key) is not None:
                self.msg["usage"][key] = usage[key]

    def final(self) -> dict[str, Any]:
        """The whole message; each tool's input parsed from the JSON it streamed."""
        if self.msg is None:
            raise ProviderError("claude: the stream ended before its message started",
                                retryable=True)
        for index, parts in self.json.items():
            text = "".join(parts)
            if not text:
                continue
            try:
                self.msg["content"][index]["input"] = json.loads(text)
            except ValueError as exc:
                raise ProviderError(f"claude: the model's tool input is not JSON ({exc}): "
                                    f"{text[:200]}", retryable=True) from None
        return self.msg


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

    async def _exchange(self, message: str, *, aio: bool) -> Reply:
        pending = self.pending
        try:
            return await super()._exchange(message, aio=aio)
        except BaseException:
            self.pending = pending
            raise

    def create(self, timeout: float) -> Turn:
        return drive(self._create(timeout, aio=False))

    async def acreate(self, timeout: float) -> Turn:
        return await self._create(timeout, aio=True)

    async def _create(self, timeout: float, *, aio: bool) -> Turn:
        deltas = DeltaStream(self.request)
        got = _Message()
        try:
            response = await self.provider.stream_messages(self.messages, self.params,
                                                           timeout, aio=aio)
            try:
                tools: dict[int, str] = {}  # block index -> tool name
                reader = EventReader()
                async for line in body_lines(response, timeout, "claude", aio=aio):
                    found = reader.feed(line)
                    if found is not None:
                        self._event(got, found, response, tools, deltas)
                if (found := reader.end()) is not None:
                    self._event(got, found, response, tools, deltas)
            finally:
                await close_streamed(response, aio=aio)
        except anthropic.AnthropicError as exc:
            raise _error(exc) from None
        except stream_errors() as exc:
            raise ProviderError(f"claude: the stream broke off ({type(exc).__name__}: {exc})",
                                retryable=True) from None
        finally:
            deltas.flush()
        msg = got.final()
        texts, calls, kept = [], [], []
        data = None
        ids: list[str] = []
        for block in msg["content"]:
            param = _block_param(block)
            if param is not None:
                kept.append(param)
            kind = block.get("type")
            if kind == "text":
                texts.append(block.get("text") or "")
            if kind == "tool_use":
                ids.append(block["id"])
            if kind == "tool_use" and self.tool_mode and block["name"] == FINAL_TOOL:
                data = block["input"]
            elif kind == "tool_use":
                calls.append(ToolCall(block["id"], block["name"], block["input"]))
        text = "".join(texts)
        self.pending = []
        if data is not None:
            text = json.dumps(data, ensure_ascii=False)
            calls = []  # the answer is given; other calls in the same turn are not run
            self.pending = ids
        u = msg.get("usage") or {}
        read = u.get("cache_read_input_tokens") or 0
        write = u.get("cache_creation_input_tokens") or 0
        return Turn(text, calls, data, (u.get("input_tokens") or 0) + read + write,
                    u.get("output_tokens") or 0, read, write, msg.get("model"),
                    msg.get("stop_reason"),
                    {"role": "assistant", "content": kept or [{"type": "text", "text": ""}]})

    @staticmethod
    def _event(got: _Message, found: tuple[str | None, str], response: httpx2.Response,
               tools: dict[int, str], deltas: DeltaStream) -> None:
        event = got.event(found[0], found[1], response)
        if event is not None:
            anthropic_delta(event, tools, deltas)

    def tool_messages(self, calls: list[ToolCall], results: list[ToolResult]) -> list[Any]:
        return [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": c.id, "content": r.text,
             "is_error": r.is_error} for c, r in zip(calls, results, strict=True)]}]


class ClaudeProvider:
    name = "claude"
    capabilities = CAPABILITIES

    def __init__(self, client: anthropic.Anthropic, timeout: float | None,
                 async_client: Callable[[], anthropic.AsyncAnthropic] | None = None) -> None:
        self.client = client
        remember_urls(client)  # the URL merged once per path (loop.py)
        remember_headers(client)  # the headers built once while they stay the same
        self.timeout = timeout
        self._make_async = async_client
        self._async: anthropic.AsyncAnthropic | None = None

    def async_client(self) -> anthropic.AsyncAnthropic:
        """The async client for group members, made on first use on the member loop."""
        if self._async is None:
            if self._make_async is None:
                raise ProviderError("claude: this provider has no async client")
            self._async = self._make_async()
            remember_urls(self._async)
            remember_headers(self._async)
        return self._async

    async def stream_messages(self, messages: list[Any], params: dict[str, Any],
                              timeout: float, *, aio: bool) -> httpx2.Response:
        """POST a streamed Messages request as `client.messages.stream` does (the same body,
        headers, auth, timeout and error mapping); the raw response, its body not yet read
        (the caller closes it). podium reads the events itself (_Message): the SDK's stream
        builds and accumulates a typed object per event, most of its CPU per call."""
        body = {k: v for k, v in params.items() if k != "extra_body"}
        body.update(messages=messages, stream=True)
        body.update(params.get("extra_body") or {})
        if aio:
            got = await _MESSAGES.send(self.async_client(), body, timeout, httpx2.Response)
            raw: httpx2.Response = raw_http(got)
            return raw
        sent: httpx2.Response = _MESSAGES.send(self.client, body, timeout, httpx2.Response)
        return sent

    def open_session(self, request: AgentRequest) -> ClaudeSession:
        return ClaudeSession(self, request)

    def close(self) -> None:
        self.client.close()
        if self._async is not None:
            close_on_loop(self._async.close())
            self._async = None


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
    given: dict[str, Any] = {"api_key": key, "auth_token": token, "base_url": base_url,
                             "max_retries": 0, "default_headers": settings.headers or None,
                             "timeout": settings.timeout or 600.0}
    client = anthropic.Anthropic(**given)
    return ClaudeProvider(client, settings.timeout,
                          functools.partial(_async_client, given, tls_of(client)))


def _async_client(given: dict[str, Any], tls: Any = None) -> anthropic.AsyncAnthropic:
    """The async client over aiohttp (anthropic[aiohttp]), as openai_chat.py's, verifying
    with the sync client's TLS context (loop.py `tls_of`)."""
    transport = getattr(anthropic, "DefaultAioHttpClient", None)
    try:
        return anthropic.AsyncAnthropic(**given, http_client=transport(**verify_with(tls))) \
            if transport is not None else anthropic.AsyncAnthropic(**given)
    except RuntimeError:  # the aiohttp extra is missing
        return anthropic.AsyncAnthropic(**given)
