"""Streaming through the real SDKs against local servers that stream SSE as the real APIs do
(text in several deltas, a tool call's arguments split across chunks, usage in the last chunk):
the final answer is the one a non-streamed call gives, observers see `model_delta` events in
order while the step runs, the run store and the JSONL log hold none, the terminal at -v shows
the text as it arrives, `model_exchange` carries the finish reason and the context gauge, and a
replay gives the same final events."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fakes.anthropic_server import message, stream_events, text, thinking, tool_use
from fakes.openai_server import FakeOpenAI, answer, call, stream_chunks
from helpers_engine import cli_env, podium_argv, read_jsonl, write
from helpers_providers import Servers, fake_servers, run_real_yaml
from podium.events.model import ModelDelta, ModelExchange, ToolCalled
from podium.providers.base import AgentRequest
from podium.providers.loop import DELTA_CHARS, DeltaStream

PROSE = "The quick brown fox jumps over the lazy dog, then streams its story in pieces."


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch) -> Iterator[Servers]:
    yield from fake_servers(monkeypatch)


def _flow(provider: str, model: str, tools: str = "[]") -> str:
    return f"""
workflow:
  name: s
  entry_point: a
  runtime: {{provider: {provider}, default_model: {model}}}
agents:
  - {{name: a, tools: {tools}, prompt: "tell a story"}}
"""


def _deltas(events: list[Any], kind: str) -> str:
    return "".join(e.text for e in events if isinstance(e, ModelDelta) and e.kind == kind)


def test_the_fake_openai_stream_splits_text_tool_calls_and_ends_with_usage() -> None:
    chunks = [d for _, d in stream_chunks(answer(PROSE, tool_calls=[call("read_file",
                                                                          {"path": "a.py"})]))]
    assert chunks[-1] == "[DONE]"
    assert chunks[-2]["choices"] == []
    assert chunks[-2]["usage"]["prompt_tokens"] == 100
    texts = [c["choices"][0]["delta"].get("content") for c in chunks[1:-2]]
    assert len([t for t in texts if t]) >= 3
    args = [c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
            for c in chunks[1:-2] if "tool_calls" in c["choices"][0]["delta"]]
    assert len(args) >= 3
    assert json.loads("".join(args)) == {"path": "a.py"}


def test_openai_streams_text_and_assembles_the_same_answer(tmp_path: Path,
                                                          servers: Servers) -> None:
    servers.openai.script(answer(PROSE, usage=(1000, 24, 0), model="gpt-4o-mini"))
    run = run_real_yaml(tmp_path, _flow("openai", "gpt-4o-mini"))
    assert run.exit_code == 0, run.error_text()
    body = servers.openai.chat_requests()[0].body
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert run.outputs["a"] == {"result": PROSE}
    (ex,) = run.of(ModelExchange)
    assert (ex.response_text, ex.input_tokens, ex.output_tokens) == (PROSE, 1000, 24)
    assert ex.finish_reason == "stop"
    assert ex.context_tokens == 1024
    assert ex.context_window == 128000
    # the deltas came before the exchange, in order, and add up to the answer
    deltas = run.of(ModelDelta)
    assert deltas
    assert _deltas(run.events, "text") == PROSE
    types = [e.type for e in run.events]
    assert types.index("model_delta") < types.index("model_exchange")
    assert all(d.step == "a" and d.iteration == 1 for d in deltas)


def test_openai_tool_call_split_across_chunks(tmp_path: Path, servers: Servers) -> None:
    servers.openai.script(answer(tool_calls=[call("read_file", {"path": "notes.txt"})]),
                          answer("done", usage=(200, 5, 0)))
    run = run_real_yaml(tmp_path, _flow("openai", "gpt-4o-mini", "[read_file]"))
    assert run.exit_code == 0, run.error_text()
    (tc,) = run.of(ToolCalled)
    assert tc.tool == "read_file"
    assert tc.arguments == {"path": "notes.txt"}
    streamed = [d for d in run.of(ModelDelta) if d.kind == "tool_call"]
    assert streamed
    assert {d.tool for d in streamed} == {"read_file"}
    assert json.loads("".join(d.text for d in streamed)) == {"path": "notes.txt"}
    # the conversation sent back is the one a non-streamed answer makes
    second = servers.openai.chat_requests()[1].body["messages"]
    kept = next(m for m in second if m["role"] == "assistant")
    assert kept["content"] is None
    assert kept["tool_calls"][0]["function"] == {"name": "read_file",
                                                 "arguments": '{"path": "notes.txt"}'}
    (ex,) = run.of(ModelExchange)
    assert ex.response_text == "done"
    assert ex.api_calls == 2
    assert ex.input_tokens == 300
    assert ex.finish_reason == "stop"
    assert ex.context_tokens == 205


def test_anthropic_streams_text_thinking_and_tool_input(tmp_path: Path,
                                                        servers: Servers) -> None:
    servers.anthropic.script(
        message(thinking("Let me look at the notes first."),
                tool_use("read_file", {"path": "notes.txt"})),
        message(text(PROSE), usage=(500, 40, 0, 0)))
    run = run_real_yaml(tmp_path, _flow("claude", "claude-sonnet-4-5", "[read_file]"))
    assert run.exit_code == 0, run.error_text()
    assert run.outputs["a"] == {"result": PROSE}
    assert _deltas(run.events, "reasoning") == "Let me look at the notes first."
    assert json.loads(_deltas(run.events, "tool_call")) == {"path": "notes.txt"}
    assert _deltas(run.events, "text") == PROSE
    kinds = [d.kind for d in run.of(ModelDelta)]
    assert kinds.index("reasoning") < kinds.index("tool_call") < kinds.index("text")
    (ex,) = run.of(ModelExchange)
    assert ex.finish_reason == "end_turn"
    assert ex.context_tokens == 540
    assert ex.context_window is not None
    assert ex.context_window >= 200000
    assert len(stream_events(message(text(PROSE)))) > 5  # several SSE deltas on the wire


def test_deltas_are_coalesced() -> None:
    seen: list[Any] = []
    request = AgentRequest(run_id="r", step="a", iteration=2, provider="p", model=None,
                           prompt="", emit=seen.append)
    stream = DeltaStream(request)
    for _ in range(3 * DELTA_CHARS):
        stream.add("text", "x")
    stream.add("tool_call", '{"a"', "t")
    stream.add("tool_call", ": 1}", "t")
    stream.flush()
    texts = [e for e in seen if e.kind == "text"]
    assert len(texts) <= 4
    assert "".join(e.text for e in texts) == "x" * 3 * DELTA_CHARS
    assert [(e.kind, e.text, e.tool) for e in seen[len(texts):]] == [
        ("tool_call", '{"a": 1}', "t")]
    assert all(e.step == "a" and e.iteration == 2 for e in seen)


def _cli(home: Path, env: dict[str, str], *args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(podium_argv(*(str(a) for a in args)), env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          encoding="utf-8", timeout=120, check=False)


def _final(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    drop = {"run_id", "ts", "elapsed", "seq", "parent_run_id"}
    return [{k: v for k, v in e.items() if k not in drop} for e in events
            if e["type"] == "model_exchange"]


def test_cli_shows_the_stream_at_v_stores_none_and_replays_the_same(tmp_path: Path) -> None:
    home = tmp_path / "home"
    flow = write(tmp_path, _flow("openai", "gpt-4o-mini"), "flow.yaml")
    log = tmp_path / "events.jsonl"
    with FakeOpenAI() as oa:
        oa.script(answer(PROSE, usage=(1000, 24, 0), model="gpt-4o-mini"))
        env = cli_env(home, {"OPENAI_BASE_URL": oa.url + "/v1", "OPENAI_API_KEY": "sk-x"})
        proc = _cli(home, env, "run", flow, "-v", "--json", "--events", log)
    assert proc.returncode == 0, proc.stderr
    # the terminal shows the streamed text, then the context gauge
    assert f"⋯ a: {PROSE}" in proc.stderr
    assert "context: 1,024 tokens of 128,000 (1%)" in proc.stderr
    run_id = json.loads(proc.stdout)["run_id"]
    from podium.app.home import open_store

    store = open_store(home=home)
    try:
        stored = store.events(run_id)
    finally:
        store.close()
    assert stored
    assert not [e for e in stored if e["type"] == "model_delta"]
    assert [e["seq"] for e in stored] == list(range(1, len(stored) + 1))
    # the JSONL log is a copy of the store: no deltas either
    logged = read_jsonl(log)
    assert not [e for e in logged if e["type"] == "model_delta"]
    assert [e["seq"] for e in logged] == [e["seq"] for e in stored]
    (ex,) = _final(stored)
    assert ex["finish_reason"] == "stop"
    assert ex["context_window"] == 128000
    # the servers are gone: the replay gives the same final events
    replay = _cli(home, env, "replay", run_id, "--json")
    assert replay.returncode == 0, replay.stderr
    replay_id = json.loads(replay.stdout)["run_id"]
    store = open_store(home=home)
    try:
        again = store.events(replay_id)
    finally:
        store.close()
    assert _final(again) == _final(stored)
