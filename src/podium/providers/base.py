"""The Provider port: how the engine talks to a model, whatever the API behind it.

An agent execution opens one Session (a fresh conversation); the engine sends the prompt and,
when the answer breaks the output contract, correction messages in the same session. Concrete
providers live in their own modules and are imported only when a workflow uses them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from podium.errors import RunError


@dataclass(frozen=True)
class Capabilities:
    """What a provider can do; `validate` compares workflows against it."""

    tools_filter: bool = True
    session_continuity: bool = False
    reasoning_efforts: tuple[str, ...] = ("low", "medium", "high")
    structured_output: str = "native"  # native | prompt
    mcp: bool = False
    working_dir: bool = True
    max_temperature: float = 2.0


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class Reply:
    """One answer of a model within a session."""

    text: str
    data: Any = None
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    model: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)


class ProviderError(RunError):
    """A provider call failed; `retryable` says whether trying again can help."""

    def __init__(self, message: str, *, retryable: bool = False, status: int | None = None,
                 step: str | None = None, iteration: int | None = None) -> None:
        super().__init__(message, step=step, iteration=iteration)
        self.retryable = retryable
        self.status = status


class Session(Protocol):
    def send(self, message: str) -> Reply: ...

    def close(self) -> None: ...


class Provider(Protocol):
    name: str
    capabilities: Capabilities

    def open_session(self, request: AgentRequest) -> Session: ...

    def close(self) -> None: ...


# Providers podium has, by name, as "module:factory" (imported lazily).
KNOWN_PROVIDERS: dict[str, str] = {}


class ProviderRegistry:
    """Creates each provider once per run, lazily; `override` forces one for every agent."""

    def __init__(self, override: Provider | None = None,
                 factories: dict[str, Callable[[], Provider]] | None = None) -> None:
        self.override = override
        self.factories = factories or {}
        self._live: dict[str, Provider] = {}

    def get(self, name: str) -> Provider:
        if self.override is not None:
            return self.override
        if name not in self._live:
            factory = self.factories.get(name)
            if factory is None and name in KNOWN_PROVIDERS:
                module, attr = KNOWN_PROVIDERS[name].split(":")
                factory = getattr(importlib.import_module(module), attr)
            if factory is None:
                known = ", ".join(sorted(set(KNOWN_PROVIDERS) | set(self.factories))) or "none"
                raise ProviderError(
                    f"provider '{name}' is not available (podium has: {known}); run offline "
                    "with --responses FILE to use scripted answers")
            self._live[name] = factory()
        return self._live[name]

    def close(self) -> None:
        for p in self._live.values():
            p.close()
        if self.override is not None:
            self.override.close()
