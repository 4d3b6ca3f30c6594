"""Running workflows on the real provider adapters (real SDKs) against the local fake servers.

`run_real` builds the engine the way `podium run` does, but with no scripted override: agents
go through ProviderRegistry to the openai/claude adapters, which read OPENAI_BASE_URL /
ANTHROPIC_BASE_URL (set by the `servers` fixture to the fakes on 127.0.0.1).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fakes.anthropic_server import FakeAnthropic
from fakes.openai_server import FakeOpenAI
from helpers_engine import load, write
from podium.clock import Clock, FakeClock
from podium.engine.run import Engine, RunResult
from podium.events.model import Event
from podium.events.sinks.jsonl import MemorySink
from podium.gates.base import ChainAnswerer, GateAnswer, ScriptedAnswerer, SkipGatesAnswerer
from podium.providers.base import ProviderRegistry
from podium.steps.base import RunOptions


@dataclass
class Servers:
    openai: FakeOpenAI
    anthropic: FakeAnthropic


def fake_servers(monkeypatch: pytest.MonkeyPatch) -> Iterator[Servers]:
    """Both fake APIs, with the SDK environment variables pointing at them (for a fixture:
    `yield from fake_servers(monkeypatch)`)."""
    with FakeOpenAI() as oa, FakeAnthropic() as an:
        monkeypatch.setenv("OPENAI_BASE_URL", oa.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", an.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-anthropic")
        yield Servers(oa, an)


@dataclass
class RealRun:
    engine: Engine
    result: RunResult
    sink: MemorySink
    clock: Clock

    @property
    def events(self) -> list[Event]:
        return self.sink.events

    def of(self, cls: type[Any]) -> list[Any]:
        return [e for e in self.events if isinstance(e, cls)]

    @property
    def exit_code(self) -> int:
        return self.result.exit_code

    @property
    def outputs(self) -> dict[str, Any]:
        return self.engine.state.outputs

    def error_text(self) -> str:
        err = self.result.error
        return "" if err is None else err.located()


def run_real(path: Path, *, inputs: dict[str, Any] | None = None, clock: Clock | None = None,
             provider: str | None = None,
             answers: dict[str, list[GateAnswer]] | None = None) -> RealRun:
    from podium.app.inputs import resolve_inputs

    wf = load(path)
    clock = clock or FakeClock()
    engine = Engine(wf, path, inputs=resolve_inputs(wf, inputs or {}),
                    providers=ProviderRegistry(),
                    answerer=ChainAnswerer([ScriptedAnswerer(answers or {}),
                                            SkipGatesAnswerer()]),
                    options=RunOptions(skip_gates=True, provider_override=provider),
                    clock=clock)
    sink = MemorySink()
    engine.bus.add(sink)
    result = engine.run()
    return RealRun(engine, result, sink, clock)


def run_real_yaml(tmp_path: Path, text: str, **kwargs: Any) -> RealRun:
    return run_real(write(tmp_path, text), **kwargs)
