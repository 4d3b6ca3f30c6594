"""What podium changes in the SDKs' own clients (decision 0043), through the real SDKs against
the local wire servers: the URL merged once per path still follows a base URL changed through
the SDK's setter, and the streamed POST whose options model is made once sends each call's own
body with the SDK's headers, sync and async, and a call's response is freed as soon as it
is read, with no cycle left for the garbage collector. (The OpenAI client's cookie jar:
tests/test_providers_openai.py.)"""

from __future__ import annotations

import asyncio
import gc
import ssl
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from fakes import anthropic_server, openai_server
from helpers_providers import Servers, fake_servers
from podium import aio
from podium.providers.base import AgentRequest, ProviderError
from podium.providers.settings import ProviderSettings


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch) -> Iterator[Servers]:
    yield from fake_servers(monkeypatch)


class Sdk(NamedTuple):
    name: str  # the provider's
    provider: Any
    server: Any  # the fake the provider's base URL points at
    answer: Callable[[str], Any]  # a scripted answer with this text
    base_path: str  # what the base URL ends with
    path: str  # what a call requests


def _openai(servers: Servers) -> Sdk:
    from podium.providers.openai_chat import create_openai

    provider = create_openai(ProviderSettings("openai", environ={
        "OPENAI_BASE_URL": servers.openai.url + "/v1", "OPENAI_API_KEY": "sk-test"}))
    return Sdk("openai", provider, servers.openai, openai_server.answer, "/v1",
               "/v1/chat/completions")


def _claude(servers: Servers) -> Sdk:
    from podium.providers.anthropic_messages import create_claude

    provider = create_claude(ProviderSettings("claude", environ={
        "ANTHROPIC_BASE_URL": servers.anthropic.url, "ANTHROPIC_API_KEY": "sk-ant-test"}))
    return Sdk("claude", provider, servers.anthropic,
               lambda said: anthropic_server.message(anthropic_server.text(said)), "",
               "/v1/messages")


@pytest.mark.parametrize("make", [_openai, _claude], ids=["openai", "claude"])
def test_a_client_whose_base_url_changes_sends_to_the_new_one(
        servers: Servers, make: Callable[[Servers], Sdk]) -> None:
    sdk = make(servers)
    other = type(sdk.server)().start()
    try:
        request = AgentRequest("r", "a", 1, sdk.name, "m", "hi")
        sdk.server.script(sdk.answer("one"), sdk.answer("two"))
        other.script(sdk.answer("three"))
        for said in ("one", "two"):  # the merged URL is made once, then kept
            assert sdk.provider.open_session(request).send("hi").text == said
        # the SDK's own setter: a new base URL, so the path is merged with it again
        sdk.provider.client.base_url = other.url + "/proxy" + sdk.base_path
        assert sdk.provider.open_session(request).send("hi").text == "three"
        assert [r.path for r in sdk.server.requests] == [sdk.path] * 2
        assert [r.path for r in other.requests] == ["/proxy" + sdk.path]
        sdk.provider.close()
    finally:
        other.stop()


@pytest.mark.parametrize("make", [_openai, _claude], ids=["openai", "claude"])
def test_each_streamed_call_sends_its_own_body_with_the_sdks_headers(
        servers: Servers, make: Callable[[Servers], Sdk]) -> None:
    """providers/loop.py StreamedPost: the options model the SDK's `post` would build on
    every call is built once and copied; calls on the sync client and calls awaited at once
    on the async client each reach the server with their own prompt, and the model they
    were copied from is left as it was made."""
    from podium.providers.anthropic_messages import _MESSAGES
    from podium.providers.openai_chat import _CHAT

    sdk = make(servers)
    post = _CHAT if sdk.name == "openai" else _MESSAGES
    said = [f"answer {i}" for i in range(5)]
    sdk.server.script(*(sdk.answer(s) for s in said))

    def request(i: int) -> AgentRequest:
        return AgentRequest("r", f"a{i}", 1, sdk.name, "m", f"prompt {i}")

    keys: list[str | None] = []
    request_of = sdk.provider.client.request

    def spied(cast_to: Any, options: Any, **kw: Any) -> Any:
        keys.append(options.idempotency_key)  # what the SDK would otherwise make a uuid4 for
        return request_of(cast_to, options, **kw)

    sdk.provider.client.request = spied
    got = [sdk.provider.open_session(request(i)).send(f"prompt {i}").text for i in (0, 1)]
    assert len(keys) == 2
    assert None not in keys
    assert keys[0] != keys[1]

    async def members() -> list[str]:
        replies = await asyncio.gather(*(sdk.provider.open_session(request(i)).asend(
            f"prompt {i}") for i in (2, 3, 4)))
        return [r.text for r in replies]

    got += asyncio.run_coroutine_threadsafe(members(), aio.loop()).result(30)
    assert sorted(got) == said
    calls = sdk.server.requests
    assert [r.path for r in calls] == [sdk.path] * 5
    prompts = sorted(_text(r.body["messages"][-1]["content"]) for r in calls)
    assert prompts == [f"prompt {i}" for i in range(5)]
    for r in calls:
        assert r.body["stream"] is True
        assert r.headers.get("x-stainless-raw-response") == "stream"
        if sdk.name == "openai":
            assert r.headers.get("authorization") == "Bearer sk-test"
            assert r.body["stream_options"] == {"include_usage": True}
        else:
            # the key, in the header this SDK's version sends it in
            assert "sk-ant-test" in (r.headers.get("x-api-key") or "") + \
                (r.headers.get("authorization") or "")
            assert r.headers.get("x-stainless-helper-method") == "stream"
    assert {k: v for k, v in post._made.items() if v is not None}, "no options model made"
    for made in post._made.values():
        assert made is None or (made.json_data is None and made.url == post.path)
    sdk.provider.close()


@pytest.mark.parametrize("make", [_openai, _claude], ids=["openai", "claude"])
def test_a_calls_response_is_freed_when_read_without_the_collector(
        servers: Servers, make: Callable[[Servers], Sdk]) -> None:
    """providers/loop.py close_streamed: httpx 0.28's response and its bound stream refer
    to each other; untied once closed, the response (its request, headers and the
    transport's response under it) goes with its last reference, sync and async."""
    sdk = make(servers)
    sdk.server.script(*(sdk.answer(f"answer {i}") for i in range(4)))
    request = AgentRequest("r", "a", 1, sdk.name, "m", "hi")

    def responses() -> int:
        return sum(1 for o in gc.get_objects() if type(o).__name__ == "Response"
                   and type(o).__module__.partition(".")[0] in ("httpx", "httpx2"))

    async def member() -> str:
        return (await sdk.provider.open_session(request).asend("hi")).text

    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        before = responses()
        got = [sdk.provider.open_session(request).send("hi").text for _ in range(2)]
        got += [asyncio.run_coroutine_threadsafe(member(), aio.loop()).result(30)
                for _ in range(2)]
        left = responses() - before
    finally:
        if was:
            gc.enable()
    assert got == [f"answer {i}" for i in range(4)]
    assert left == 0, f"{left} responses wait for the garbage collector"
    sdk.provider.close()


@pytest.mark.parametrize("make", [_openai, _claude], ids=["openai", "claude"])
def test_headers_built_once_follow_what_they_are_made_of(
        servers: Servers, make: Callable[[Servers], Sdk]) -> None:
    """providers/loop.py remember_headers and _remember_merged: a request's headers are built
    and merged with the HTTP client's once, and each call still sends what the SDK would
    build for it: the same headers call after call, sync and async; a call with another
    timeout its own timeout headers; a key changed on the client, or a header added to its
    HTTP client, from the next call on. Each call gets headers of its own to change."""
    sdk = make(servers)
    sdk.server.script(*(sdk.answer(f"answer {i}") for i in range(9)))
    sync, aclient = sdk.provider.client, sdk.provider.async_client()

    def call(timeout: float | None = None, *, aio_: bool = False) -> str:
        request = AgentRequest("r", "a", 1, sdk.name, "m", "hi", timeout=timeout)
        session = sdk.provider.open_session(request)
        if not aio_:
            return str(session.send("hi").text)
        return str(asyncio.run_coroutine_threadsafe(session.asend("hi"),
                                                    aio.loop()).result(30).text)

    def sent(i: int) -> dict[str, str]:
        return {k: v for k, v in sdk.server.requests[i].headers.items()
                if k not in ("content-length", "x-stainless-async")}

    assert [call(), call(), call(aio_=True), call(aio_=True)] == \
        [f"answer {i}" for i in range(4)]
    assert sent(0) == sent(1)
    assert sent(2) == sent(3)
    for i, client in enumerate([sync, sync, aclient, aclient]):
        # what the SDK builds itself: the classes' methods, not podium's
        built = type(client)._build_headers(client, _options(sdk, 600.0))
        merged = type(client._client)._merge_headers(client._client, built)
        assert sent(i) == {k: v for k, v in merged.items() if k != "x-stainless-async"} | {
            "host": sent(i)["host"]}

    def key(i: int) -> str:  # the key, in the header this SDK's version sends it in
        return sent(i).get("x-api-key", "") + sent(i).get("authorization", "")

    assert call(45.0) == "answer 4"  # another timeout: its own headers
    assert 40.0 < float(sent(4)["x-stainless-read-timeout"]) <= 45.0  # what is left of it
    assert float(sent(0)["x-stainless-read-timeout"]) > 45.0
    sync.api_key = "sk-changed"  # the client's key changes: the next call sends it
    aclient.api_key = "sk-changed"
    assert [call(), call(aio_=True)] == ["answer 5", "answer 6"]
    assert "sk-changed" not in key(4)
    assert "sk-changed" in key(5)
    assert "sk-changed" in key(6)
    aclient._client.headers["X-Added"] = "yes"  # a header on the HTTP client, set in place
    assert [call(aio_=True), call(aio_=True)] == ["answer 7", "answer 8"]
    assert "x-added" not in sent(6)
    assert sent(7)["x-added"] == "yes"
    assert sent(8) == sent(7)

    # each call's own copy: what one changes, the next does not see
    options = _options(sdk, 600.0)
    built = [aclient._build_headers(options) for _ in range(3)]
    merged = [aclient._client._merge_headers(built[0]) for _ in range(3)]
    for made in (built, merged):
        assert made[1] is not made[2]
        assert made[1] == made[2]
        made[1]["X-Mine"] = "changed"
        assert "x-mine" not in made[2]
    sdk.provider.close()


def _options(sdk: Sdk, timeout: float) -> Any:
    """The options model podium's streamed POST sends a call with."""
    from podium.providers.anthropic_messages import _MESSAGES
    from podium.providers.openai_chat import _CHAT

    post = _CHAT if sdk.name == "openai" else _MESSAGES
    made = post._model(sdk.provider.client)
    return made.model_copy(update={"json_data": {}, "timeout": timeout,
                                   "idempotency_key": "k"})


def _text(content: Any) -> str:
    """A message's content as text: a string (Chat Completions) or text blocks (Messages)."""
    if isinstance(content, str):
        return content
    return "".join(block["text"] for block in content if block.get("type") == "text")


def _self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 (its own issuer) and its key, made by openssl."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


@pytest.mark.parametrize("name", ["openai", "claude"])
def test_the_async_client_verifies_with_the_sync_clients_tls_context(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """providers/loop.py tls_of: the async client is given the TLS context the SDK made for
    the sync client (one CA bundle read, not two, and not on the member loop), and it still
    verifies as the SDK would: against the CA the user names (SSL_CERT_FILE), refusing a
    server it does not trust, on both clients."""
    from podium.providers.anthropic_messages import create_claude
    from podium.providers.loop import tls_of
    from podium.providers.openai_chat import create_openai

    cert, key = _self_signed(tmp_path)
    served = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    served.load_cert_chain(cert, key)
    server = openai_server.FakeOpenAI() if name == "openai" else \
        anthropic_server.FakeAnthropic()
    server.tls = served
    server.start()
    answer = openai_server.answer if name == "openai" else \
        (lambda said: anthropic_server.message(anthropic_server.text(said)))

    def provider(trusted: bool) -> Any:
        if trusted:
            monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        else:
            monkeypatch.delenv("SSL_CERT_FILE", raising=False)
        monkeypatch.delenv("SSL_CERT_DIR", raising=False)
        if name == "openai":
            return create_openai(ProviderSettings("openai", environ={
                "OPENAI_BASE_URL": server.url + "/v1", "OPENAI_API_KEY": "sk-test"}))
        return create_claude(ProviderSettings("claude", environ={
            "ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "sk-ant-test"}))

    request = AgentRequest("r", "a", 1, name, "m", "hi")

    async def member(p: Any) -> str:
        return (await p.open_session(request).asend("hi")).text  # type: ignore[no-any-return]

    try:
        trusting = provider(True)
        context = tls_of(trusting.client)
        assert isinstance(context, ssl.SSLContext)
        server.script(answer("sync"), answer("async"))
        assert trusting.open_session(request).send("hi").text == "sync"
        assert asyncio.run_coroutine_threadsafe(member(trusting), aio.loop()).result(30) == \
            "async"
        transport = trusting.async_client()._client._transport
        assert transport.ssl_context is context  # the sync client's, not one of its own
        trusting.close()

        doubting = provider(False)  # the SDK's own CA bundle: this server is not in it
        assert tls_of(doubting.client) is not context
        for call in (lambda: doubting.open_session(request).send("hi"),
                     lambda: asyncio.run_coroutine_threadsafe(member(doubting),
                                                              aio.loop()).result(30)):
            # named as what it is on both paths (openai's aiohttp transport calls it a
            # connect timeout), and not asked again: the certificate will not change
            with pytest.raises(ProviderError, match="cannot connect: TLS failed "
                               r"\(SSLCertVerificationError: .*certificate") as refused:
                call()
            assert not refused.value.retryable
        doubting.close()
        assert len(server.requests) == 2  # the refused calls never reached it
    finally:
        server.stop()


def test_a_tls_error_is_named_where_the_failure_comes_from_it() -> None:
    """loop.py sdk_error: a TLS error among a failure's causes (or its context, where a
    library raised again `from None`, as httpcore's pool does) names it: a refused certificate
    is not asked again, a TLS connection cut short may be; a failure with no TLS error keeps
    its own words."""
    import openai

    from podium.providers.loop import sdk_error

    def wrapped(outer: type[Exception], inner: BaseException, *, hide: bool = False
                ) -> Exception:
        try:
            try:
                raise inner
            except BaseException as exc:
                if hide:
                    raise outer("wrapped") from None
                raise outer("wrapped") from exc
        except Exception as exc:
            return exc
        raise AssertionError("unreachable")

    class Timeout(Exception):
        pass

    class Connection(Exception):
        pass

    def classify(exc: Exception) -> ProviderError:
        return sdk_error(exc, "p", timeout_cls=Timeout, connection_cls=Connection,
                         status_cls=openai.APIStatusError)

    verify = ssl.SSLCertVerificationError(1, "certificate verify failed")
    for hide in (False, True):
        refused = classify(wrapped(Timeout, verify, hide=hide))
        assert str(refused).startswith("p: cannot connect: TLS failed (SSLCertVerificationError")
        assert not refused.retryable
    cut = classify(wrapped(Connection, ssl.SSLEOFError(8, "EOF occurred")))
    assert str(cut).startswith("p: cannot connect: TLS failed (SSLEOFError")
    assert cut.retryable
    assert str(classify(wrapped(Timeout, OSError("reset")))) == "p: the request timed out"
    assert str(classify(Connection("refused"))).startswith("p: cannot connect (Connection")
