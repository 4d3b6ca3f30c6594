"""Streaming through the agent runtimes, on the real Copilot and Claude Code CLIs against local
servers that stream as the real APIs do (each SSE event its own HTTP chunk; text, thinking and
tool input split across events): the runtimes' own stream events become coalesced
`model_delta` events (text, reasoning, a tool call naming its tool) while the agent works, the
answer is the one the whole (non-streamed) body holds, the run store and the JSONL log hold no
delta, the terminal at -v shows the text as it arrives, and `model_exchange` carries the context
gauge. Skipped only when a runtime is not installed."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from fakes.anthropic_server import FakeAnthropic, message, text, thinking, tool_use
from fakes.openai_server import FakeOpenAI, answer, call
from fakes.responses_server import FakeResponses, function_call, response
from fakes.wire import WireServer
from helpers_engine import read_jsonl, write
from podium.events.model import ModelDelta, ToolCalled
from podium.providers.base import AgentRequest, Provider
from podium.providers.loop import DELTA_CHARS
from podium.providers.settings import ProviderSettings
from runtime_helpers import needs_claude, needs_copilot, podium, runtime_env

# a multi-chunk answer: the fakes send it in three text deltas, each past the coalescer's
# size threshold, so at least two `model_delta` events carry it however fast it arrives
LONG = " ".join(f"Line {i}: the quick brown fox jumps over the lazy dog." for i in range(120))
THOUGHT = "Let me look at the notes before I answer."
assert len(LONG) > 2 * DELTA_CHARS


def _send(provider: Provider, model: str, tools: tuple[str, ...], work: Path
          ) -> tuple[str, dict[str, Any], list[Any]]:
    """One send on a fresh session: (its text, its raw facts, the events it emitted)."""
    seen: list[Any] = []
    try:
        session = provider.open_session(AgentRequest(
            "r1", "a", 1, provider.name, model, "tell a story", tools=tools,
            working_dir=str(work), timeout=90, emit=seen.append))
        reply = session.send("tell a story")
        session.close()
    finally:
        provider.close()
    return reply.text, reply.raw, seen


def _check_deltas(seen: list[Any], tool: str, args: dict[str, Any]) -> None:
    deltas = [e for e in seen if isinstance(e, ModelDelta)]
    texts = [d.text for d in deltas if d.kind == "text"]
    assert len(texts) >= 2
    assert "".join(texts) == LONG
    assert "".join(d.text for d in deltas if d.kind == "reasoning") == THOUGHT
    calls = [d for d in deltas if d.kind == "tool_call"]
    assert {d.tool for d in calls} == {tool}
    assert json.loads("".join(d.text for d in calls)) == args
    assert all((d.step, d.iteration) == ("a", 1) for d in deltas)
    # in the order the model gave them: thinking, the tool call, the tool's run, the answer
    order = [e.kind if isinstance(e, ModelDelta) else "ran" for e in seen
             if isinstance(e, (ModelDelta, ToolCalled))]
    first = {kind: order.index(kind) for kind in ("reasoning", "tool_call", "ran", "text")}
    assert first["reasoning"] < first["tool_call"] < first["ran"] < first["text"]


def _flow(tmp_path: Path, provider: str, model: str, work: Path) -> Path:
    return write(tmp_path, f"""
        workflow:
          name: s
          entry_point: a
          runtime: {{provider: {provider}, default_model: {model}, working_dir: {work}}}
        agents:
          - {{name: a, tools: [read_file], prompt: "tell a story"}}
        output:
          story: "{{{{ a.output.result }}}}"
    """, "flow.yaml")


def _check_cli_run(tmp_path: Path, proc: Any, log: Path, tool: str, context: int,
                   finish: str) -> None:
    """The terminal showed the stream at -v; the store and the log hold the final events."""
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["output"] == {"story": LONG}
    err = proc.stderr
    assert f"⋯ a: tool {tool} " in err
    assert f"⋯ a: {LONG}" in err
    assert err.index(f"⋯ a: {LONG}") < err.index("✓")  # shown while the step ran
    assert f"context: {context:,} tokens" in err
    from podium.app.home import open_store

    store = open_store(home=tmp_path / "home")
    try:
        stored = store.events(out["run_id"])
    finally:
        store.close()
    assert not [e for e in stored if e["type"] == "model_delta"]
    assert [e["seq"] for e in stored] == list(range(1, len(stored) + 1))
    logged = read_jsonl(log)
    assert not [e for e in logged if e["type"] == "model_delta"]
    assert [e["seq"] for e in logged] == [e["seq"] for e in stored]
    (ex,) = [e for e in stored if e["type"] == "model_exchange"]
    assert ex["response_text"] == LONG
    assert ex["context_tokens"] == context
    assert ex["finish_reason"] == finish  # why the last API call stopped, as the runtime says


def _copilot_wire(kind: str, notes: Path) -> tuple[WireServer, dict[str, Any], str]:
    """A wire that carries reasoning, scripted: (its server, the provider object, the model)."""
    if kind == "anthropic":  # the Messages API's thinking
        an = FakeAnthropic()
        an.script(message(thinking(THOUGHT), tool_use("view", {"path": str(notes)})),
                  message(text(LONG), usage=(1100, 60, 0, 0)))
        return an, {"type": "anthropic"}, "claude-sonnet-4-5"
    rs = FakeResponses()  # the Responses API's reasoning summary
    rs.script(response(reasoning=THOUGHT, calls=[function_call("view", {"path": str(notes)})]),
              response(LONG, usage=(1100, 60, 0)))
    return rs, {"wire_api": "responses"}, "gpt-5-mini"


@needs_copilot
@pytest.mark.parametrize("wire", ["anthropic", "responses"])
def test_copilot_streams_text_reasoning_and_tool_calls(tmp_path: Path, wire: str) -> None:
    from podium.providers.copilot import create_copilot

    notes = tmp_path / "notes.txt"
    notes.write_text("a fox\n", encoding="utf-8")
    server, options, model = _copilot_wire(wire, notes)
    server.chunked = True
    with server:
        url = server.url + ("/v1" if wire == "responses" else "")
        settings = ProviderSettings(
            "copilot", base_url=url, api_key="sk-x",
            environ=dict(os.environ, PODIUM_HOME=str(tmp_path / "home")),
            options={**options, "base_url": url})
        reply, raw, seen = _send(create_copilot(settings), model, ("read_file",), tmp_path)
        assert all(r.body.get("stream") is True for r in server.requests)
    assert reply == LONG  # what the whole body holds
    _check_deltas(seen, "view", {"path": str(notes)})
    assert raw["context_tokens"] == 1160  # the last call's input and output


@needs_copilot
def test_copilot_at_v_shows_the_stream_and_stores_none(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("a fox\n", encoding="utf-8")
    log = tmp_path / "events.jsonl"
    with FakeOpenAI() as oa:
        oa.chunked = True
        oa.script(answer(tool_calls=[call("view", {"path": str(notes)})]),
                  answer(LONG, usage=(1400, 30, 0)))
        proc = podium(tmp_path, "run", _flow(tmp_path, "copilot", "gpt-5-mini", tmp_path),
                      "-v", "--json", "--events", log, env=runtime_env(tmp_path, {
                          "COPILOT_PROVIDER_BASE_URL": oa.url + "/v1"}))
        assert all(r.body.get("stream") is True for r in oa.chat_requests())
    _check_cli_run(tmp_path, proc, log, "view", 1430, "stop")


@needs_claude
def test_claude_code_streams_text_thinking_and_tool_calls(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    from podium.providers.claude_agent import create_claude_agent

    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-config"))  # its state

    notes = tmp_path / "notes.txt"
    notes.write_text("a fox\n", encoding="utf-8")
    with FakeAnthropic() as an:
        an.chunked = True
        an.script(message(thinking(THOUGHT), tool_use("Read", {"file_path": str(notes)})),
                  message(text(LONG), usage=(1100, 60, 40, 0)))
        env = runtime_env(tmp_path, {"ANTHROPIC_BASE_URL": an.url,
                                     "ANTHROPIC_API_KEY": "sk-ant-test"})
        settings = ProviderSettings("claude-agent-sdk", environ=env)
        reply, raw, seen = _send(create_claude_agent(settings), "claude-sonnet-4-5",
                                 ("read_file",), tmp_path)
        assert all(r.body.get("stream") is True for r in an.message_requests())
    assert reply == LONG
    _check_deltas(seen, "Read", {"file_path": str(notes)})
    assert raw["context_tokens"] == 1200  # input, cache reads and output of the last call


@needs_claude
def test_claude_code_at_v_shows_the_stream_and_stores_none(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("a fox\n", encoding="utf-8")
    log = tmp_path / "events.jsonl"
    with FakeAnthropic() as an:
        an.chunked = True
        an.script(message(tool_use("Read", {"file_path": str(notes)})),
                  message(text(LONG), usage=(1500, 30, 0, 0)))
        proc = podium(tmp_path, "run",
                      _flow(tmp_path, "claude-agent-sdk", "claude-sonnet-4-5", tmp_path),
                      "-v", "--json", "--events", log, env=runtime_env(tmp_path, {
                          "ANTHROPIC_BASE_URL": an.url, "ANTHROPIC_API_KEY": "sk-ant-test"}))
        assert all(r.body.get("stream") is True for r in an.message_requests())
    _check_cli_run(tmp_path, proc, log, "Read", 1530, "end_turn")
