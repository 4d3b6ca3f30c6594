"""Live checks against the real OpenAI and Anthropic APIs: opt-in, run only when
OPENAI_API_KEY / ANTHROPIC_API_KEY are set in the environment (and no *_BASE_URL redirects the
SDK elsewhere); skipped otherwise, so the default test run never reaches the internet.
Models: PODIUM_LIVE_OPENAI_MODEL (default gpt-5-mini), PODIUM_LIVE_CLAUDE_MODEL (default
claude-haiku-4-5). Each test costs a fraction of a cent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers_providers import run_real_yaml
from podium.events.model import StepFinished, ToolCalled

AGENT = """
workflow:
  name: live
  entry_point: a
  runtime: {provider: PROVIDER}
agents:
  - name: a
    model: MODEL
    working_dir: w
    tools: [write_file]
    reasoning: {effort: low}
    prompt: >-
      Use the write_file tool to create hello.txt containing exactly the text: hi
      Then answer.
    output:
      done: {type: boolean}
"""


def _live(key: str, base: str) -> pytest.MarkDecorator:
    on = bool(os.environ.get(key)) and not os.environ.get(base)
    return pytest.mark.skipif(not on, reason=f"live test: set {key} to run it")


def _check(tmp_path: Path, provider: str, model: str) -> None:
    (tmp_path / "w").mkdir()
    run = run_real_yaml(tmp_path, AGENT.replace("PROVIDER", provider).replace("MODEL", model))
    assert run.exit_code == 0, run.error_text()
    assert run.outputs["a"]["done"] is True
    assert (tmp_path / "w" / "hello.txt").read_text().strip() == "hi"
    assert [e.tool for e in run.of(ToolCalled)][:1] == ["write_file"]
    finished = run.of(StepFinished)[0]
    assert finished.input_tokens > 0
    assert finished.cost_usd is not None


@_live("OPENAI_API_KEY", "OPENAI_BASE_URL")
def test_live_openai(tmp_path: Path) -> None:
    _check(tmp_path, "openai", os.environ.get("PODIUM_LIVE_OPENAI_MODEL", "gpt-5-mini"))


@_live("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")
def test_live_claude(tmp_path: Path) -> None:
    _check(tmp_path, "claude", os.environ.get("PODIUM_LIVE_CLAUDE_MODEL", "claude-haiku-4-5"))
