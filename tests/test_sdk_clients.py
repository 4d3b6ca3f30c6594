"""What podium changes in the SDKs' own clients (decision 0043), through the real SDKs against
the local wire servers: the URL merged once per path still follows a base URL changed through
the SDK's setter. (The OpenAI client's cookie jar: tests/test_providers_openai.py.)"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import pytest

from fakes import anthropic_server, openai_server
from helpers_providers import Servers, fake_servers
from podium.providers.base import AgentRequest
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
