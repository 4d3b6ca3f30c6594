"""The agent loop shared by the SDK adapters: one `send` is a user message followed by model
calls and tool runs until the model gives its final answer.

A subclass says how to call its API (`create`) and how its messages look; this module keeps the
conversation, bounds the loop (`max_agent_iterations`, the agent's timeout), runs the tools from
the request's toolbox, emits a `tool_called` event for each, adds up the tokens and leaves the
conversation unchanged when `send` fails.
"""

from __future__ import annotations

import contextlib
import itertools
import sys
import time
from abc import ABC, abstractmethod
from dataclasses import field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from functools import partial
from typing import Any

from podium import jsontext
from podium.aio import blocking, drive
from podium.providers.base import AgentRequest, ProviderError, Reply, TokenUsage
from podium.providers.retry import status_is_retryable
from podium.records import record
from podium.tools.base import ToolResult

DEFAULT_REQUEST_TIMEOUT = 600.0
EVENT_TEXT_CAP = 2000
DELTA_SECONDS = 0.1  # streamed text is emitted at most this often per step ...
DELTA_CHARS = 2048  # ... unless this much is waiting


@record(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: Any  # a dict, or the JSON text the API gave


@record
class Turn:
    """One model response, as the loop needs it."""

    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    data: Any = None  # the structured answer, when the API gives it apart from the text
    input_tokens: int = 0  # including cache reads and writes
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    model: str | None = None
    stop: str | None = None
    message: Any = None  # the assistant message to keep in the conversation


class DeltaStream:
    """Streamed model output as `model_delta` events, coalesced: pieces of one kind (and one
    tool) are joined and emitted at most every DELTA_SECONDS, or when DELTA_CHARS are waiting,
    and at `flush`. Does nothing when the request has no `emit`."""

    def __init__(self, request: AgentRequest) -> None:
        self.request = request
        self.kind: str | None = None
        self.tool: str | None = None
        self.parts: list[str] = []
        self.size = 0
        self.last = time.monotonic()

    def add(self, kind: str, text: str, tool: str | None = None) -> None:
        if self.request.emit is None or not text:
            return
        if (kind, tool) != (self.kind, self.tool):
            self.flush()
            self.kind, self.tool = kind, tool
        self.parts.append(text)
        self.size += len(text)
        if self.size >= DELTA_CHARS or time.monotonic() - self.last >= DELTA_SECONDS:
            self.flush()

    def flush(self) -> None:
        self.last = time.monotonic()
        if not self.parts or self.request.emit is None or self.kind is None:
            return
        from podium.events.model import ModelDelta

        text, self.parts, self.size = "".join(self.parts), [], 0
        self.request.emit(ModelDelta(step=self.request.step, iteration=self.request.iteration,
                                     kind=self.kind,
                                     text=text, tool=self.tool))


def retry_after(headers: Any) -> float | None:
    """Seconds from a response's Retry-After (or retry-after-ms) header, when present."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(tz=UTC)).total_seconds())


def _body_message(body: Any) -> str | None:
    """The API's own error message from an error body ({message} or {error: {message}})."""
    if isinstance(body, dict):
        inner = body.get("error")
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
        if isinstance(body.get("message"), str):
            return str(body["message"])
    return None


def stream_errors() -> tuple[type[Exception], ...]:
    """What a stream broken off midway raises: the error of the HTTP library the SDK reads it
    with, which is not the same for every SDK (openai 2 reads with httpx, anthropic 2 and mcp
    with httpx2). Asked when an exception is matched, so an SDK imported later counts."""
    return tuple(sys.modules[name].HTTPError for name in ("httpx", "httpx2")
                 if name in sys.modules)


def sdk_error(exc: Exception, provider: str, *, timeout_cls: type, connection_cls: type,
              status_cls: type) -> ProviderError:
    """A ProviderError for an SDK exception: what happened, whether asking again can help."""
    failed_tls = _tls_failure(exc) if isinstance(exc, (timeout_cls, connection_cls)) else None
    if failed_tls is not None:  # before the timeout: the aiohttp transport of openai's httpx
        # reports a certificate it refused as a connect timeout
        import ssl

        return ProviderError(f"{provider}: cannot connect: TLS failed "
                             f"({type(failed_tls).__name__}: {failed_tls})",
                             retryable=not isinstance(failed_tls, ssl.SSLCertVerificationError))
    if isinstance(exc, timeout_cls):
        return ProviderError(f"{provider}: the request timed out", retryable=True,
                             category="timeout")
    if isinstance(exc, connection_cls):
        cause = exc.__cause__ or exc
        return ProviderError(f"{provider}: cannot connect ({type(cause).__name__}: {cause})",
                             retryable=True)
    if isinstance(exc, status_cls):
        status = int(getattr(exc, "status_code", 0) or 0)
        response = getattr(exc, "response", None)
        message = _body_message(getattr(exc, "body", None)) or str(exc)
        return ProviderError(f"{provider}: HTTP {status}: {message}",
                             retryable=status_is_retryable(status), status=status,
                             category="timeout" if status == 408 else "provider_error",
                             retry_after=retry_after(getattr(response, "headers", None)))
    return ProviderError(f"{provider}: {type(exc).__name__}: {exc}")


def _tls_failure(exc: BaseException) -> BaseException | None:
    """The TLS error a connection failure comes from (its causes, or aiohttp's
    `certificate_error`), if any."""
    import ssl

    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return None
        if isinstance(cert := getattr(seen, "certificate_error", None), ssl.SSLError):
            return cert  # aiohttp's error (an SSLError itself) around the one ssl raised
        if isinstance(seen, ssl.SSLError):
            return seen
        # the cause, else the context even where `from None` hid it: httpcore's pool raises
        # its ConnectError again `from None`, and the SSL error it came from is then only
        # its context
        seen = seen.__cause__ or seen.__context__
    return None


def tls_of(client: Any) -> Any:
    """The TLS context an SDK's sync client verifies with (the connection pool of openai's
    httpx and of anthropic's httpx2 keeps it), for the async client to verify with too. The
    SDKs make one per client, reading the CA bundle each time (about 20 ms); the async client
    made its own on the member loop, at a group's first call, while every member waited.
    None when it is not where those libraries keep it: the async client then makes its own."""
    import ssl

    pool = getattr(getattr(getattr(client, "_client", None), "_transport", None), "_pool", None)
    context = getattr(pool, "_ssl_context", None)
    return context if isinstance(context, ssl.SSLContext) else None


def verify_with(tls: Any) -> dict[str, Any]:
    """The keyword that gives an SDK's HTTP client `tls` (from `tls_of`) to verify with; none
    without one."""
    return {} if tls is None else {"verify": tls}


def remember_urls(client: Any) -> None:
    """An SDK client (openai's, anthropic's) that merges its base URL with a request's path
    once per path: the SDKs merge them on every call, two URL parses by httpx (5 % of a
    call's CPU in a fan-out). The merged URL is kept while the base URL is the same object
    (the SDKs' setter makes a new one); a client without the SDKs' `_prepare_url` is left
    as it is."""
    prepare = getattr(client, "_prepare_url", None)
    if not callable(prepare):
        return
    made: dict[str, tuple[Any, Any]] = {}  # path -> (the base URL, the merged URL)

    def prepare_url(url: str) -> Any:
        base = client.base_url
        got = made.get(url)
        if got is not None and got[0] is base:
            return got[1]
        merged = prepare(url)
        if len(made) < 64:  # a client asks for a few paths: more is not worth keeping
            made[url] = (base, merged)
        return merged

    client._prepare_url = prepare_url


def remember_headers(client: Any) -> None:
    """An SDK client (openai's, anthropic's) that builds a request's headers once for as long
    as what they are made of stays the same: the SDKs build them on every call, twenty
    headers set one by one into an httpx `Headers` that looks each up in a list (about 25 µs,
    3 % of a fanned-out member's CPU). They are made of the request's timeout, its retry
    count, its own headers, the client's default headers (auth, version, custom headers) and
    the idempotency key, which no SDK sends today: a call with a key for a client that sends
    one, a timeout that is not a number, or request headers that are not a dict is built as
    before. The client's default headers are read again on every call and compared, so a
    changed key or header is sent from the next call on. Each call gets a copy of its own:
    the SDK may change the headers it is given. A client without the SDKs'
    `_build_headers` and `default_headers` is left as it is."""
    build = getattr(client, "_build_headers", None)
    if not callable(build) or not hasattr(type(client), "default_headers"):
        return
    kept: list[Any] = []  # [timeout, retries, request headers, default headers, built]

    def build_headers(options: Any, *, retries_taken: int = 0) -> Any:
        timeout, given = options.timeout, options.headers
        if (not isinstance(timeout, (int, float)) or not isinstance(given, dict)
                or (getattr(client, "_idempotency_header", None) and options.idempotency_key)):
            return build(options, retries_taken=retries_taken)
        defaults = client.default_headers
        if kept:
            t, r, g, d, made = kept
            if t == timeout and r == retries_taken and g == given and _same_headers(d, defaults):
                return made.copy()
        made = build(options, retries_taken=retries_taken)
        kept[:] = [timeout, retries_taken, dict(given), defaults, made.copy()]
        return made

    client._build_headers = build_headers
    _remember_merged(getattr(client, "_client", None))


def _remember_merged(http: Any) -> None:
    """An SDK's httpx client (httpx's or httpx2's) that merges its own headers with a
    request's once for as long as both stay the same: it merges them on every call, each
    of the request's twenty headers looked up in a list and set again (about 12 µs). The
    headers are compared as httpx keeps them (its `Headers._list` of byte triples); a call
    with headers of any other kind is merged as before, and each call gets a copy of its
    own. A client without httpx's `_merge_headers` and `Headers` is left as it is."""
    merge = getattr(http, "_merge_headers", None)
    kind: Any = type(getattr(http, "headers", None))
    if not callable(merge) or not isinstance(getattr(http.headers, "_list", None), list):
        return
    kept: list[Any] = []  # [the client's headers, the request's, merged]

    def merge_headers(headers: Any = None) -> Any:
        if type(headers) is not kind:
            return merge(headers)
        mine, given = http.headers._list, headers._list
        if kept and kept[0] == mine and kept[1] == given:
            return kept[2].copy()
        merged = merge(headers)
        kept[:] = [list(mine), list(given), merged.copy()]
        return merged

    http._merge_headers = merge_headers


def _same_headers(kept: dict[str, Any], now: dict[str, Any]) -> bool:
    """Whether two readings of a client's default headers are the same: openai's give a new
    `Omit` (a header left out) on every reading, and one stands for another."""
    return kept.keys() == now.keys() and all(
        v == now[k] or (type(v) is type(now[k]) and type(v).__name__ == "Omit")
        for k, v in kept.items())


class StreamedPost:
    """A streamed POST of one path through an SDK client (openai's or anthropic's, sync or
    async), as the client's `post` makes it, with the request's options model made once per
    options class: `post` builds it on every call (`FinalRequestOptions.construct`, about
    24 µs, 2 % of a fanned-out member's CPU) and hands it to the client's `request`; a copy
    of the one made here, with the call's body and timeout, costs about 2 µs. The SDK copies
    the options it is given before it changes any (retries start again from them), so one
    model serves every call. Each copy carries an idempotency key of its own, as `request`
    would give it (a uuid4 there, a counter under one process-wide uuid4 here: neither SDK
    sends the key today, and one that did would still see a key per call, kept across its
    retries). A client whose package has no such class, or one without `request`, gets
    `post` as before (decision 0043)."""

    def __init__(self, path: str, options: dict[str, Any]) -> None:
        self.path = path
        self.options = options  # the request options but the timeout (the SDK's RequestOptions)
        self._made: dict[str, Any] = {}  # the client's package -> its options model, or None
        self._keys = itertools.count(1)
        self._key_prefix = ""  # made with the first options model

    def send(self, client: Any, body: dict[str, Any], timeout: float, cast_to: Any) -> Any:
        """What the client's `post(path, cast_to=..., body=body, options=..., stream=True)`
        returns: the response, or for an async client the coroutine that gives it."""
        made = self._model(client)
        if made is None:
            return client.post(self.path, cast_to=cast_to, body=body,
                               options={**self.options, "timeout": timeout}, stream=True)
        key = f"{self._key_prefix}{next(self._keys)}"
        return client.request(cast_to, made.model_copy(update={
            "json_data": body, "timeout": timeout, "idempotency_key": key}), stream=True)

    def _model(self, client: Any) -> Any:
        package = type(client).__module__.partition(".")[0]
        if package in self._made:
            return self._made[package]
        made = None
        models = sys.modules.get(f"{package}._models")  # loaded with the SDK's client
        kind = getattr(models, "FinalRequestOptions", None)
        if kind is not None and callable(getattr(client, "request", None)):
            import uuid  # loaded with the SDK, which makes its keys with it

            made = kind.construct(method="post", url=self.path, json_data=None, **self.options)
            self._key_prefix = self._key_prefix or f"podium-{uuid.uuid4().hex}-"
        self._made[package] = made
        return made


async def close_streamed(response: Any, *, aio: bool) -> None:
    """Close a streamed httpx response, then untie it from its body stream. httpx 0.28's
    (the OpenAI SDK's) bound stream holds its response, which holds the stream: a cycle
    that only the garbage collector frees, with the request, the headers and the
    transport's response under it, about fifty objects a call. In a fan-out they filled the
    collector's young generation every 150 members, and its passes over them took 5 % of an
    OpenAI run. Once closed, the stream has used its response (the elapsed time is set),
    so reference counting frees all of it when the caller lets go. httpx2 (the Anthropic
    SDK's) keeps no such link."""
    try:
        if aio:
            await response.aclose()
        else:
            response.close()
    finally:
        http = raw_http(response)  # under the SDK's wrapper, when it gave one
        stream: Any = getattr(http, "stream", None)
        if getattr(http, "is_closed", False) and getattr(stream, "_response", None) is http:
            stream._response = None


def raw_http(response: Any) -> Any:
    """The httpx response under an async SDK client's streamed `post` (an AsyncAPIResponse
    wraps it: its reads are coroutines with other names), to read with aiter_bytes, aread
    and aclose."""
    return getattr(response, "http_response", response)


def _short(value: Any) -> Any:
    if isinstance(value, str) and len(value) > EVENT_TEXT_CAP:
        return value[:EVENT_TEXT_CAP] + f"… [{len(value) - EVENT_TEXT_CAP} more characters]"
    if isinstance(value, dict):
        return {k: _short(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_short(v) for v in value]
    return value


class LoopSession(ABC):
    """A conversation with a tool loop; subclasses speak one API."""

    provider_label = "provider"

    def __init__(self, request: AgentRequest) -> None:
        self.request = request
        self.messages: list[Any] = []
        self.rounds = 0  # tool round trips so far in this execution
        self.deadline = (time.monotonic() + request.timeout) if request.timeout else None
        self.request_timeout = DEFAULT_REQUEST_TIMEOUT

    # ------------------------------------------------------------------ what subclasses say

    @abstractmethod
    def user_message(self, text: str) -> list[Any]:
        """The messages that add `text` from the user."""

    @abstractmethod
    def create(self, timeout: float) -> Turn:
        """One API call on `self.messages`; raises ProviderError."""

    async def acreate(self, timeout: float) -> Turn:
        """`create` for a task of the member loop: the API's async client where the subclass
        has one (it overrides this), else `create` in a worker thread."""
        import asyncio

        return await asyncio.to_thread(self.create, timeout)

    @abstractmethod
    def tool_messages(self, calls: list[ToolCall], results: list[ToolResult]) -> list[Any]:
        """The messages that give the tool results back to the model."""

    def final(self, turn: Turn) -> bool:
        """Whether `turn` ends the send (no tool to run)."""
        return turn.data is not None or not turn.tool_calls

    # ------------------------------------------------------------------ the loop

    def send(self, message: str) -> Reply:
        return drive(self._exchange(message, aio=False))

    async def asend(self, message: str) -> Reply:
        """`send` for a group member on the member loop: the API calls awaited on the async
        client, the tools run in worker threads."""
        return await self._exchange(message, aio=True)

    async def _exchange(self, message: str, *, aio: bool) -> Reply:
        mark = len(self.messages)
        calls: list[TokenUsage] = []
        try:
            self.messages.extend(self.user_message(message))
            while True:
                turn = await self._call(aio)
                calls.append(TokenUsage(turn.input_tokens, turn.output_tokens,
                                        turn.cached_tokens, turn.cache_write_tokens,
                                        turn.model or self.request.model, turn.stop))
                self.messages.append(turn.message)
                if self.final(turn):
                    return Reply(turn.text, turn.data, sum(c.input_tokens for c in calls),
                                 sum(c.output_tokens for c in calls),
                                 sum(c.cached_tokens for c in calls),
                                 turn.model or self.request.model,
                                 {"api_calls": len(calls), "tool_rounds": self.rounds,
                                  "stop": turn.stop,
                                  "context_tokens": turn.input_tokens + turn.output_tokens},
                                 sum(c.cache_write_tokens for c in calls), tuple(calls))
                if self.rounds >= self.request.max_agent_iterations:
                    raise ProviderError(
                        f"the model asked for tools {self.rounds} times without a final "
                        f"answer, reaching max_agent_iterations "
                        f"({self.request.max_agent_iterations})")
                self.rounds += 1
                results = [await blocking(partial(self._run_tool, c), aio)
                           for c in turn.tool_calls]
                self.messages.extend(self.tool_messages(turn.tool_calls, results))
        except ProviderError as exc:
            del self.messages[mark:]
            if calls:
                exc.spent = calls
            raise
        except BaseException:
            del self.messages[mark:]
            raise

    def _remaining(self) -> float | None:
        if self.deadline is None:
            return None
        return self.deadline - time.monotonic()

    async def _call(self, aio: bool) -> Turn:
        async def once() -> Turn:
            left = self._remaining()
            if left is not None and left <= 0:
                raise ProviderError(f"the agent ran out of time ({self.request.timeout:g}s: "
                                    "timeout_seconds, max_session_seconds or the run's "
                                    "timeout)", category="timeout")
            timeout = self.request_timeout if left is None else min(self.request_timeout, left)
            try:
                return await self.acreate(timeout) if aio else self.create(timeout)
            except RecursionError:  # the SDK's json.loads of a hostile body
                raise ProviderError(f"{self.provider_label}: the API's answer is JSON nested "
                                    "too deeply to read") from None
            except ValueError as exc:
                if "integer string conversion" not in str(exc):
                    raise
                raise ProviderError(f"{self.provider_label}: the API's answer holds an integer "
                                    "too long to read (more than "
                                    f"{jsontext.int_digits_limit():,} digits)") from None

        retry = self.request.retry
        if retry is not None:
            return await retry.acall(once, f"{self.provider_label} call", aio)
        return await once()

    def _run_tool(self, call: ToolCall) -> ToolResult:
        box = self.request.toolbox
        started = time.monotonic()
        if box is None:
            result = ToolResult(f"no tool '{call.name}' is available", True)
        else:
            result = box.call(call.name, call.arguments)
        if self.request.emit is not None:
            from podium.events.model import ToolCalled

            args = call.arguments
            if isinstance(args, str):
                with contextlib.suppress(ValueError):
                    args = jsontext.loads(args)
            else:
                try:
                    jsontext.check_depth(args)
                except jsontext.JsonLimitError as exc:
                    args = {"_refused": f"the arguments are JSON that {exc}"}
            if not isinstance(args, dict):
                args = {"_raw": args}
            self.request.emit(ToolCalled(
                step=self.request.step, iteration=self.request.iteration, tool=call.name,
                source=box.source(call.name) if box is not None else None,
                arguments=_short(args), output=_short(result.text), is_error=result.is_error,
                elapsed=time.monotonic() - started))
        return result

    def close(self) -> None:
        self.messages.clear()
