"""OpenAI, any OpenAI-compatible endpoint (Ollama, vLLM, LM Studio, a gateway) and Azure
OpenAI, through the official `openai` SDK's Chat Completions API, streamed: text, reasoning
and tool calls go out as `model_delta` events while the answer comes in, and the answer is
assembled into the same Turn a non-streamed call gives (usage from the last chunk).

Structured output uses `response_format` with a JSON Schema (strict when the schema allows
it), reasoning effort the `reasoning_effort` parameter, tools function calling. One client per
provider per run (its HTTP connections are reused); the SDK's own retries are off, podium's
policy retries instead (with events).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any, cast

import httpx2
import openai
from openai._constants import RAW_RESPONSE_HEADER

from podium.aio import close_on_loop, drive
from podium.providers.base import AgentRequest, ProviderError
from podium.providers.catalog import Capabilities, openai_rejects_effort
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
from podium.providers.sse import body_lines, data_json
from podium.tools.base import ToolResult

CAPABILITIES = Capabilities(tools_filter=True, reasoning_efforts=("low", "medium", "high"),
                            structured_output="native", mcp=True, runs_tools=True,
                            max_temperature=2.0)


def strict_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """`schema` in OpenAI's strict form, or None when strict mode cannot express it (optional
    properties, free-form objects or arrays, length limits)."""
    out = copy.deepcopy(schema)

    def fix(node: dict[str, Any]) -> bool:
        types = node.get("type")
        kinds = set(types) if isinstance(types, list) else {types}
        if {"minLength", "maxLength"} & set(node):
            return False
        if "object" in kinds:
            props = node.get("properties")
            if not props or set(node.get("required", [])) != set(props):
                return False
            node["additionalProperties"] = False
            if not all(fix(p) for p in props.values()):
                return False
        if "array" in kinds:
            items = node.get("items")
            if not isinstance(items, dict) or not fix(items):
                return False
        return True

    return out if fix(out) else None


# the last schema response_format was asked for and its answer, as one tuple (swapped whole):
# a fan-out's members send the same schema (steps/schema.py declared_schema), and
# strict_schema's deep copy was a part of each member's request
_last_format: list[tuple[dict[str, Any] | None, dict[str, Any]]] = [(None, {})]


def response_format(schema: dict[str, Any]) -> dict[str, Any]:
    last = _last_format[0]
    if last[0] is schema:
        return last[1]
    strict = strict_schema(schema)
    made = {"type": "json_schema",
            "json_schema": {"name": "output", "strict": strict is not None,
                            "schema": strict if strict is not None else schema}}
    _last_format[0] = (schema, made)
    return made


def _error(exc: Exception, label: str) -> ProviderError:
    return sdk_error(exc, label, timeout_cls=openai.APITimeoutError,
                     connection_cls=openai.APIConnectionError, status_cls=openai.APIStatusError)


class OpenAISession(LoopSession):
    def __init__(self, provider: OpenAIProvider, request: AgentRequest) -> None:
        super().__init__(request)
        self.provider = provider
        self.provider_label = provider.name
        if provider.timeout:
            self.request_timeout = provider.timeout
        if not request.model:
            raise ProviderError(f"agent '{request.step}' has no model: set its `model:` or "
                                "runtime.default_model")
        effort = request.reasoning_effort
        if effort and openai_rejects_effort(request.model):
            raise ProviderError(f"model '{request.model}' does not reason, so it takes no "
                                f"reasoning.effort (got '{effort}')")
        base: dict[str, Any] = {"model": request.model}
        if request.output_schema is not None:
            base["response_format"] = response_format(request.output_schema)
        if effort:
            base["reasoning_effort"] = effort
        if request.max_tokens:
            base["max_completion_tokens"] = request.max_tokens
        if request.temperature is not None:
            base["temperature"] = request.temperature
        box = request.toolbox
        if box:
            base["tools"] = [{"type": "function", "function": {
                "name": s.name, "description": s.description, "parameters": s.parameters}}
                for s in box.specs]
        self.params = base
        if request.system_prompt:
            self.messages.append({"role": "system", "content": request.system_prompt})

    def user_message(self, text: str) -> list[Any]:
        return [{"role": "user", "content": text}]

    def create(self, timeout: float) -> Turn:
        return drive(self._create(timeout, aio=False))

    async def acreate(self, timeout: float) -> Turn:
        return await self._create(timeout, aio=True)

    async def _create(self, timeout: float, *, aio: bool) -> Turn:
        deltas = DeltaStream(self.request)
        got = _Assembled()
        label = self.provider.name
        try:
            # the raw streamed response, read to its end (the SDK's Stream stops at [DONE]
            # and closes the connection before the body ends, so it would not be reused)
            response = await self.provider.stream_chat(
                {"messages": self.messages, **self.params}, timeout, aio=aio)
            try:
                if "text/event-stream" in response.headers.get("content-type", ""):
                    async for line in body_lines(response, timeout, label, aio=aio):
                        got.line(line, deltas, label)
                else:  # an endpoint that does not stream answers with the whole completion
                    body = await response.aread() if aio else response.read()
                    got.whole(data_json(body.decode("utf-8", "replace"), label), deltas)
            finally:
                await close_streamed(response, aio=aio)
        except openai.OpenAIError as exc:
            raise _error(exc, self.provider.name) from None
        except stream_errors() as exc:
            raise ProviderError(f"{self.provider.name}: the stream broke off "
                                f"({type(exc).__name__}: {exc})", retryable=True) from None
        finally:
            deltas.flush()
        if not got.seen:
            raise ProviderError(f"{self.provider.name}: the answer has no choices")
        calls = [ToolCall(c["id"], c["name"], c["arguments"])
                 for _, c in sorted(got.calls.items())]
        content = "".join(got.text)
        kept: dict[str, Any] = {"role": "assistant", "content": content or None}
        if calls:
            kept["tool_calls"] = [{"id": c.id, "type": "function",
                                   "function": {"name": c.name, "arguments": c.arguments}}
                                  for c in calls]
        usage = got.usage
        details = usage.get("prompt_tokens_details") or {}
        return Turn(content or "".join(got.refusal), calls, None,
                    int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0),
                    int(details.get("cached_tokens") or 0), 0, got.model, got.finish, kept)

    def tool_messages(self, calls: list[ToolCall], results: list[ToolResult]) -> list[Any]:
        return [{"role": "tool", "tool_call_id": c.id,
                 "content": ("error: " + r.text) if r.is_error else r.text}
                for c, r in zip(calls, results, strict=True)]


class _Assembled:
    """A streamed chat completion put back together from its SSE lines: the first choice's
    text, refusal and tool calls (their arguments arrive in pieces, by index), the model, the
    finish reason and the usage (the last chunk, with stream_options.include_usage)."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.refusal: list[str] = []
        self.calls: dict[int, dict[str, str]] = {}
        self.model: str | None = None
        self.finish: str | None = None
        self.usage: dict[str, Any] = {}
        self.seen = False

    def line(self, line: str, deltas: DeltaStream, label: str) -> None:
        if not line.startswith("data:"):
            return
        data = line[5:].strip()
        if not data or data == "[DONE]":
            return
        chunk = data_json(data, label)
        if not isinstance(chunk, dict):
            raise ProviderError(f"{label}: the stream sent {type(chunk).__name__}, not a chunk")
        if chunk.get("error"):
            error = chunk["error"]
            message = error.get("message") if isinstance(error, dict) else str(error)
            raise ProviderError(f"{label}: the stream failed: {message}", retryable=True)
        self.model = chunk.get("model") or self.model
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                self.seen = True
                self.finish = choice.get("finish_reason") or self.finish
                self._delta(choice.get("delta") or {}, deltas)

    def whole(self, body: Any, deltas: DeltaStream) -> None:
        """A chat.completion answered in one piece, as if it had streamed."""
        if not isinstance(body, dict):
            return
        self.model = body.get("model")
        usage = body.get("usage")
        self.usage = usage if isinstance(usage, dict) else {}
        for choice in body.get("choices") or []:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                self.seen = True
                self.finish = choice.get("finish_reason")
                message = dict(choice.get("message") or {})
                message["tool_calls"] = [dict(tc, index=i) for i, tc in
                                         enumerate(message.get("tool_calls") or [])]
                self._delta(message, deltas)

    def _delta(self, delta: dict[str, Any], deltas: DeltaStream) -> None:
        for key, kind, into in (("content", "text", self.text), ("refusal", "text", self.refusal),
                                ("reasoning_content", "reasoning", None),
                                ("reasoning", "reasoning", None)):
            piece = delta.get(key)
            if isinstance(piece, str) and piece:
                if into is not None:
                    into.append(piece)
                deltas.add(kind, piece)
        for tc in delta.get("tool_calls") or []:
            if tc.get("type") not in (None, "function"):
                continue
            call = self.calls.setdefault(int(tc.get("index", 0)),
                                         {"id": "", "name": "", "arguments": ""})
            call["id"] = tc.get("id") or call["id"]
            fn = tc.get("function") or {}
            call["name"] += fn.get("name") or ""
            call["arguments"] += fn.get("arguments") or ""
            deltas.add("tool_call", fn.get("arguments") or "", call["name"])


# What `chat.completions.with_streaming_response.create(stream=True, ...)` asks of the client,
# minus its per-call `maybe_transform` of the parameters: for Chat Completions that transform
# renames and reformats nothing (no field has an alias or a format; tests/
# test_providers_openai.py checks it against the SDK installed), yet it walks every message
# and schema node through the SDK's TypedDict annotations, about a third of the SDK's CPU per
# call (docs/performance.md, agent fan-out). The client's own post() does the rest as create
# does: base URL (Azure's deployment path), auth, headers, timeout, error mapping.
_CHAT = StreamedPost("/chat/completions", {"headers": {RAW_RESPONSE_HEADER: "stream"},
                                           "security": {"bearer_auth": True}})


class OpenAIProvider:
    """One client for the run; a fresh session per agent execution."""

    capabilities = CAPABILITIES

    def __init__(self, name: str, client: openai.OpenAI, timeout: float | None,
                 async_client: Callable[[], openai.AsyncOpenAI] | None = None) -> None:
        self.name = name
        self.client = client
        _lighter(client)
        self.timeout = timeout
        self._make_async = async_client
        self._async: openai.AsyncOpenAI | None = None

    def async_client(self) -> openai.AsyncOpenAI:
        """The async client for group members, made on first use on the member loop (it is
        bound to that loop: podium/aio.py keeps one for the process)."""
        if self._async is None:
            if self._make_async is None:
                raise ProviderError(f"{self.name}: this provider has no async client")
            self._async = self._make_async()
            _lighter(self._async)
        return self._async

    async def stream_chat(self, body: dict[str, Any], timeout: float, *,
                          aio: bool) -> Any:
        """POST a streamed chat completion (with the async client when `aio`); the raw
        response, its body not yet read (the caller closes it). It is the SDK's own HTTP
        library's response (httpx for openai 2, not the httpx2 podium imports: a broken
        stream raises that library's errors, loop.stream_errors)."""
        body = {**body, "stream": True, "stream_options": {"include_usage": True}}
        if aio:
            got = await _CHAT.send(self.async_client(), body, timeout, httpx2.Response)
            return raw_http(got)
        return _CHAT.send(self.client, body, timeout, httpx2.Response)

    def open_session(self, request: AgentRequest) -> OpenAISession:
        return OpenAISession(self, request)

    def close(self) -> None:
        self.client.close()
        if self._async is not None:
            close_on_loop(self._async.close())
            self._async = None


def _async_client(make: Callable[..., openai.AsyncOpenAI], given: dict[str, Any],
                  tls: Any = None) -> openai.AsyncOpenAI:
    """The async client over aiohttp (openai[aiohttp]): httpx's own async connection pool
    spends CPU in proportion to its open connections on every request (at 100 members in
    flight, most of a call's CPU: docs/performance.md); without aiohttp, httpx's. `tls`: the
    sync client's TLS context (loop.py `tls_of`), verified with as it is."""
    transport = getattr(openai, "DefaultAioHttpClient", None)
    try:
        return make(**given, http_client=transport(**verify_with(tls))) \
            if transport is not None else make(**given)
    except RuntimeError:  # the aiohttp extra is missing: the SDK's placeholder refuses
        return make(**given)


def _lighter(client: Any) -> None:
    """What an OpenAI client does on every request and need not: its URL merged again
    (loop.py `remember_urls`), its headers built again (`remember_headers`), the cookie jar
    read from a response that sets no cookie."""
    remember_urls(client)
    remember_headers(client)
    _cookies_when_set(getattr(client, "_client", None))


def _cookies_when_set(http: Any) -> None:
    """Give an SDK's httpx client a jar over its own that reads a response only when it sets
    a cookie. httpx 0.28 (the OpenAI SDK's) builds a urllib request from every response to
    hand its jar, `Set-Cookie` or not: 5 % of an OpenAI call's CPU in a fan-out. Without the
    header the jar has nothing to take, so skipping it changes nothing (httpx2, the Anthropic
    SDK's, skips it the same way). Only for httpx's own `Cookies` where httpx keeps them; any
    other client is left as it is (decision 0043)."""
    cookies = getattr(http, "_cookies", None)
    kind: type = type(cookies)
    if (kind.__module__, kind.__qualname__) == ("httpx", "Cookies") \
            and getattr(http, "cookies", None) is cookies:
        http._cookies = _set_cookie_only(kind)(cast(Any, cookies).jar)


@functools.cache
def _set_cookie_only(cookies: type) -> type:
    """httpx's `Cookies` (the class the SDK's client holds: podium does not import httpx)
    with `extract_cookies` skipping a response that sets no cookie."""

    class SetCookieOnly(cookies):  # type: ignore[misc]
        def extract_cookies(self, response: Any) -> None:
            headers = response.headers
            if "set-cookie" in headers or "set-cookie2" in headers:
                super().extract_cookies(response)

    return SetCookieOnly


def create_openai(settings: ProviderSettings) -> OpenAIProvider:
    preload_table()
    base_url = settings.base_url or settings.env("OPENAI_BASE_URL")
    key = settings.api_key or settings.env("OPENAI_API_KEY")
    if key is None and base_url:
        key = PLACEHOLDER_KEY  # a local endpoint needs no key; the SDK insists on one
    if key is None:
        raise ProviderError("provider 'openai' needs an API key: set OPENAI_API_KEY, or "
                            "runtime.provider.api_key_env / api_key (an OpenAI-compatible "
                            "endpoint is chosen with base_url or OPENAI_BASE_URL)")
    given: dict[str, Any] = {"api_key": key, "base_url": base_url, "max_retries": 0,
                             "default_headers": settings.headers or None,
                             "timeout": settings.timeout or 600.0}
    client = openai.OpenAI(**given)
    return OpenAIProvider("openai", client, settings.timeout,
                          functools.partial(_async_client, openai.AsyncOpenAI, given,
                                            tls_of(client)))


def create_azure(settings: ProviderSettings) -> OpenAIProvider:
    preload_table()
    endpoint = settings.base_url or settings.env("AZURE_OPENAI_ENDPOINT")
    key = settings.api_key or settings.env("AZURE_OPENAI_API_KEY")
    version = settings.api_version or settings.env("OPENAI_API_VERSION")
    missing = [what for what, v in (("an endpoint (base_url or AZURE_OPENAI_ENDPOINT)", endpoint),
                                    ("a key (api_key_env or AZURE_OPENAI_API_KEY)", key),
                                    ("an api_version (or OPENAI_API_VERSION)", version)) if not v]
    if missing:
        raise ProviderError("provider 'azure' needs " + ", ".join(missing))
    assert endpoint is not None
    given: dict[str, Any] = {"azure_endpoint": endpoint, "api_key": key,
                             "api_version": version, "max_retries": 0,
                             "default_headers": settings.headers or None,
                             "timeout": settings.timeout or 600.0}
    client = openai.AzureOpenAI(**given)
    return OpenAIProvider("azure", client, settings.timeout,
                          functools.partial(_async_client, openai.AsyncAzureOpenAI, given,
                                            tls_of(client)))
