"""The Provider port: how the engine talks to a model, whatever the API behind it.

An agent execution opens one Session (a fresh conversation); the engine sends the prompt and,
when the answer breaks the output contract, correction messages in the same session. A session
may run a tool loop inside `send` (the model asks for a tool, the session runs it from the
request's toolbox and answers, until the model gives its final answer). Concrete providers
live in their own modules and are imported only when a workflow uses them.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import threading
from collections.abc import Awaitable, Callable
from dataclasses import field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from podium.errors import RunError
from podium.providers.catalog import Capabilities
from podium.records import record

if TYPE_CHECKING:
    from podium.events.model import Event, ModelCall
    from podium.providers.settings import ProviderSettings
    from podium.tools.base import Toolbox

T = TypeVar("T")


@record(frozen=True)
class AgentRequest:
    """Everything a provider needs for one agent execution."""

    run_id: str
    step: str
    iteration: int
    provider: str
    model: str | None
    prompt: str
    system_prompt: str | None = None
    output_schema: dict[str, Any] | None = None
    reasoning_effort: str | None = None
    tools: tuple[str, ...] | None = None
    working_dir: str | None = None
    timeout: float | None = None
    session_key: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    # what the session may call, emit and how it retries one API call (all optional)
    toolbox: Toolbox | None = None
    emit: Callable[[Event], object] | None = None
    retry: Retrier | None = None
    max_agent_iterations: int = 50  # tool round trips per execution
    # the tool names the agent may use after the workflow's root `tools:` list is applied
    # (None: the provider's defaults); runtimes with their own tools filter by it
    effective_tools: tuple[str, ...] | None = None
    # which call of the execution this is (events/model.py ModelCall): None for the agent's
    # own; "validator", "rerun", "dialog", "conversation" or "after_dialog" otherwise
    call: ModelCall | None = None
    # for the runtimes that take them (copilot; claude-agent-sdk for skills and plugins):
    # the context window tier, and the skill and plugin folders (None: none declared)
    context_tier: str | None = None
    skill_dirs: tuple[str, ...] | None = None
    plugin_dirs: tuple[str, ...] | None = None

    @property
    def key(self) -> str:
        """The name recordings and responses files answer this call by."""
        return call_key(self.step, self.call)


def call_key(step: str, call: str | None) -> str:
    """`step` for an agent's own call, `step.call` for its validator's, dialog's, re-run's."""
    return step if call is None else f"{step}.{call}"


@record(frozen=True)
class Reply:
    """One answer of a model within a session."""

    text: str
    data: Any = None
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0  # input tokens read from the provider's cache (part of input_tokens)
    model: str | None = None  # the model the API says answered
    raw: dict[str, Any] = field(default_factory=dict)
    cache_write_tokens: int = 0  # input tokens written to the cache (part of input_tokens)
    # the API calls behind this answer (a tool loop makes several), each priced on its own:
    # long-context price tiers apply per request, not to a loop's sum
    calls: tuple[TokenUsage, ...] = ()


@record(frozen=True)
class TokenUsage:
    """Tokens of one API call (a failed call's are paid for even so)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    model: str | None = None
    finish_reason: str | None = None  # why the call stopped, as the API says it


class ProviderError(RunError):
    """A provider call failed; `retryable` says whether trying again can help.

    `status` is the HTTP status when there was one, `category` is "timeout" or
    "provider_error" (the `retry_on` names), `retry_after` the server's Retry-After in seconds,
    and `spent` the tokens the failed `send` had already used."""

    def __init__(self, message: str, *, retryable: bool = False, status: int | None = None,
                 step: str | None = None, iteration: int | None = None,
                 category: str = "provider_error", retry_after: float | None = None,
                 spent: list[TokenUsage] | None = None) -> None:
        super().__init__(message, step=step, iteration=iteration)
        self.retryable = retryable
        self.status = status
        self.category = category
        self.retry_after = retry_after
        self.spent = spent


class Retrier(Protocol):
    """Runs one provider call, retrying transient failures (the engine supplies it)."""

    def call(self, fn: Callable[[], T], what: str) -> T: ...

    async def acall(self, fn: Callable[[], Awaitable[T]], what: str, aio: bool) -> T: ...


class Session(Protocol):
    """One conversation. `send` adds a message and returns the model's final answer to it; when
    it raises, the conversation is left as it was before the call, so it can be sent again."""

    def send(self, message: str) -> Reply: ...

    def close(self) -> None: ...


class Provider(Protocol):
    name: str
    capabilities: Capabilities

    def open_session(self, request: AgentRequest) -> Session: ...

    def close(self) -> None: ...


def _known() -> dict[str, str]:
    from podium.providers.catalog import ALIASES, PROVIDERS

    out = {n: p.factory for n, p in PROVIDERS.items() if p.factory}
    out.update({a: out[t] for a, t in ALIASES.items() if t in out})
    return out


# Providers podium can run, by name, as "module:factory" (imported lazily); a factory takes
# the provider's ProviderSettings. The names and what each accepts: providers/catalog.py.
KNOWN_PROVIDERS: dict[str, str] = _known()


# The SDK module each provider imports, and the extra of podium that installs it.
SDK_EXTRAS: dict[str, tuple[str, str]] = {
    "openai": ("openai", "openai"), "azure": ("openai", "openai"),
    "claude": ("anthropic", "anthropic"), "copilot": ("copilot", "copilot"),
    "claude-agent-sdk": ("claude_agent_sdk", "claude-agent"), "hermes": ("run_agent", "hermes"),
}
# what each provider needs next, once its SDK is there
SDK_KEYS: dict[str, str] = {
    "openai": "OPENAI_API_KEY", "azure": "AZURE_OPENAI_API_KEY",
    "claude": "ANTHROPIC_API_KEY",
    "copilot": "COPILOT_GITHUB_TOKEN, GH_TOKEN or GITHUB_TOKEN (or run `copilot login`)",
    "claude-agent-sdk": "ANTHROPIC_API_KEY (or run `claude login`)",
}


class ProviderRegistry:
    """Creates each provider once per run, lazily, and so reuses its client (and connections)
    across calls; `override` forces one provider for every agent. It also holds other
    run-scoped resources agents share (`shared`), such as MCP server connections.
    `settings(name)` configures a provider that is asked for without settings of its own (a
    fork's replay going live): app/launch.py's build_providers binds it to the run's workflow
    and environment."""

    def __init__(self, override: Provider | None = None,
                 factories: dict[str, Callable[[], Provider]] | None = None, *,
                 settings: Callable[[str], ProviderSettings] | None = None) -> None:
        self.override = override
        self.factories = factories or {}
        self.settings = settings
        self._live: dict[str, Provider] = {}
        self._shared: dict[str, Any] = {}
        self._lock = threading.Lock()

    def get(self, name: str,
            settings: Callable[[], ProviderSettings] | None = None) -> Provider:
        """The provider `name`; `settings` builds its configuration the first time."""
        if self.override is not None:
            return self.override
        with self._lock:
            live = self._live.get(name)
            if live is None:
                live = self._create(name, settings)
                self._live[name] = live
            return live

    def _create(self, name: str, settings: Callable[[], ProviderSettings] | None) -> Provider:
        factory = self.factories.get(name)
        if factory is not None:
            return factory()
        if name not in KNOWN_PROVIDERS:
            from podium.providers.catalog import describe_known

            raise ProviderError(f"provider '{name}' is not available (podium has: "
                                f"{describe_known()}); run offline with --responses FILE to "
                                "use scripted answers")
        sdk, extra = SDK_EXTRAS.get(name, (None, None))
        if sdk is not None and importlib.util.find_spec(sdk) is None:
            key = SDK_KEYS.get(name)
            then = f"; then set {key}" if key else ""
            raise ProviderError(f"provider '{name}' needs its SDK ({sdk}), which is not "
                                f"installed: uv pip install 'podium[{extra}]' (in podium's "
                                f"checkout: uv sync --inexact --no-dev --extra {extra}, which "
                                f"keeps what is installed){then}")
        module, attr = KNOWN_PROVIDERS[name].split(":")
        make = getattr(importlib.import_module(module), attr)
        if settings is None and self.settings is not None:
            settings = functools.partial(self.settings, name)
        if settings is None:
            from podium.providers.settings import ProviderSettings

            return make(ProviderSettings(name))  # type: ignore[no-any-return]
        from podium.providers.settings import SettingsError

        try:
            return make(settings())  # type: ignore[no-any-return]
        except SettingsError as exc:
            raise ProviderError(f"provider '{name}': {exc}") from None

    def shared(self, key: str, factory: Callable[[], T]) -> T:
        """A run-scoped resource, created on first use and closed with the registry."""
        with self._lock:
            if key not in self._shared:
                self._shared[key] = factory()
            return self._shared[key]  # type: ignore[no-any-return]

    def close(self) -> None:
        for p in self._live.values():
            p.close()
        self._live.clear()
        for resource in self._shared.values():
            close = getattr(resource, "close", None)
            if close is not None:
                close()
        self._shared.clear()
        if self.override is not None:
            self.override.close()
