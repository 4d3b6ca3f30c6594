"""`provider: hermes` on the real Hermes agent (hermes-agent's run_agent.AIAgent) against a
local OpenAI-compatible endpoint on 127.0.0.1: Conductor's three hermes examples run offline,
the answer streams as `model_delta` events, tokens reach `model_exchange` and the step, a
malformed structured answer is corrected in the same conversation, `tools:` and
`hermes_toolsets` decide which toolsets the endpoint is offered (a tool Hermes runs is a
`tool_called` event), the temperature is sent, and a recorded run replays with the
endpoint gone. Skipped only when hermes-agent is not installed."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from fakes.hermes_endpoint import FakeHermesEndpoint, last_user_text
from fakes.openai_server import answer, call
from fakes.wire import Recorded
from helpers_engine import REPO_ROOT, write
from runtime_helpers import events_of, podium, runtime_env, text_of

pytestmark = pytest.mark.skipif(importlib.util.find_spec("run_agent") is None,
                                reason="hermes-agent is not installed: uv sync --extra hermes")

EXAMPLES = REPO_ROOT / "tests" / "corpus" / "conductor-examples" / "examples"
MODEL = "anthropic/claude-sonnet-4"


def hermes_env(tmp_path: Path, srv: FakeHermesEndpoint) -> dict[str, str]:
    return runtime_env(tmp_path, {"HERMES_BASE_URL": srv.url + "/v1",
                                  "HERMES_API_KEY": "sk-hermes-test",
                                  "HERMES_HOME": str(tmp_path / "hermes-home")})


def tool_names(body: dict[str, Any]) -> list[str]:
    return sorted(t["function"]["name"] for t in body.get("tools") or [])


def test_hermes_simple_streams_counts_and_replays_offline(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    with FakeHermesEndpoint() as srv:
        srv.script(answer('{"answer": "Paris is the capital of France."}', model=MODEL,
                          usage=(1500, 40, 0)))
        env = hermes_env(tmp_path, srv)
        proc = podium(tmp_path, "run", EXAMPLES / "hermes-simple.yaml", "-v", "--json", "--events",
                      log, "--input", "question=What is the capital of France?", env=env,
                      timeout=110)
        chats = srv.chat_requests()
    assert proc.returncode == 0, proc.stderr
    recorded = json.loads(proc.stdout)
    assert recorded["output"] == {"answer": "Paris is the capital of France."}
    (body,) = [r.body for r in chats]
    assert body["model"] == MODEL
    assert body["stream"] is True
    assert chats[0].headers["authorization"] == "Bearer sk-hermes-test"
    assert "What is the capital of France?" in last_user_text(chats[0])
    assert '"answer"' in last_user_text(chats[0])  # the schema is asked for in the prompt
    assert tool_names(body)  # no `tools:`: Hermes's default toolsets
    assert '⋯ answerer: {"answer": "Paris' in proc.stderr  # streamed while the step ran
    assert proc.stderr.index("⋯ answerer:") < proc.stderr.index("✓")
    assert not events_of(log, "model_delta")  # live only: the log holds the final events
    (exchange,) = events_of(log, "model_exchange")
    assert (exchange["input_tokens"], exchange["output_tokens"]) == (1500, 40)
    assert exchange["model"] == MODEL
    assert exchange["cost_usd"] > 0
    assert exchange["context_tokens"] == 1500
    (finished,) = events_of(log, "step_finished")
    assert finished["priced"] is True
    assert finished["cost_usd"] > 0

    replay = podium(tmp_path, "replay", recorded["run_id"], env=env, timeout=110)
    assert replay.returncode == 0, replay.stderr
    assert json.loads(replay.stdout) == recorded["output"]
    assert "identical trajectory" in replay.stderr


def test_tools_correction_effort_and_no_tools(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("the launch code is K-7741\n", encoding="utf-8")
    flow = write(tmp_path, f"""
        workflow:
          name: hermes-tools
          entry_point: reader
          runtime:
            provider: {{name: hermes, hermes_skip_memory: true, hermes_skip_context_files: true}}
            default_model: {MODEL}
            temperature: 0.4
        agents:
          - name: reader
            tools: [read_file]
            reasoning: {{effort: high}}
            prompt: Read {notes} and report the code.
            output:
              code: {{type: string}}
            routes: [{{to: quiet}}]
          - name: quiet
            tools: []
            prompt: Say the code {{{{ reader.output.code }}}} back.
            output:
              said: {{type: string}}
            routes: [{{to: $end}}]
        output:
          code: "{{{{ reader.output.code }}}}"
          said: "{{{{ quiet.output.said }}}}"
    """)
    log = tmp_path / "events.jsonl"
    with FakeHermesEndpoint() as srv:
        srv.script(answer(tool_calls=[call("read_file", {"path": str(notes)})], model=MODEL,
                          usage=(900, 30, 0)),
                   answer("The code is K-7741.", model=MODEL, usage=(1000, 10, 0)),
                   answer('{"code": "K-7741"}', model=MODEL, usage=(1100, 12, 0)),
                   answer('{"said": "K-7741"}', model=MODEL, usage=(500, 8, 0)))
        proc = podium(tmp_path, "run", flow, "--events", log, env=hermes_env(tmp_path, srv),
                      timeout=110)
        chats = srv.chat_requests()
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"code": "K-7741", "said": "K-7741"}
    bodies = [r.body for r in chats]
    assert len(bodies) == 4
    first, after_tool, correction, quiet = bodies
    assert tool_names(first) == ["patch", "read_file", "search_files", "write_file"]
    assert first["temperature"] == 0.4
    assert "K-7741" in text_of(after_tool["messages"])  # Hermes ran read_file on the file
    history = text_of(correction["messages"])
    assert "Read " in history
    assert "The code is K-7741." in history
    assert "did not parse as JSON" in history
    assert "tools" not in quiet or not quiet["tools"]  # tools: [] offers nothing
    (tool,) = events_of(log, "tool_called")
    assert (tool["tool"], tool["source"], tool["is_error"]) == ("read_file", "hermes", False)
    assert "K-7741" in tool["output"]
    (recovery,) = events_of(log, "parse_recovery")
    assert recovery["step"] == "reader"
    (finished,) = [e for e in events_of(log, "step_finished") if e["step"] == "reader"]
    assert (finished["input_tokens"], finished["output_tokens"]) == (3000, 52)


def _features(request: Recorded) -> dict[str, Any]:
    prompt = last_user_text(request)
    if "Classify the following question" in prompt:
        out: dict[str, Any] = {"category": "technical", "confidence": 0.9}
    elif "broad overview" in prompt:
        out = {"summary": "DI passes dependencies in.", "key_concepts": ["inversion"]}
    elif "deep technical analysis" in prompt:
        out = {"findings": {"key_points": ["testability"], "trade_offs": "indirection"}}
    else:
        assert "Synthesize" in prompt, prompt[:300]
        assert "testability" in prompt
        assert "DI passes dependencies in." in prompt
        out = {"answer": "Dependency injection, explained.", "depth": "deep"}
    return answer(json.dumps(out), model=MODEL, usage=(700, 30, 0))


def test_hermes_features_example_runs_offline(tmp_path: Path) -> None:
    with FakeHermesEndpoint() as srv:
        srv.handler = _features
        proc = podium(tmp_path, "run", EXAMPLES / "hermes-features.yaml", "--input",
                      "question=What is dependency injection?", env=hermes_env(tmp_path, srv),
                      timeout=115)
        chats = srv.chat_requests()
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["category"], out["answer"], out["depth"]) == (
        "technical", "Dependency injection, explained.", "deep")
    assert len(chats) == 4
    classifier = next(r.body for r in chats if "Classify" in last_user_text(r))
    assert not classifier.get("tools")  # tools: []
    assert all(r.body["temperature"] == 0.7 and r.body["max_tokens"] == 2048 for r in chats)


def _subtopics(request: Recorded) -> dict[str, Any]:
    prompt = last_user_text(request)
    if "Break the following topic" in prompt:
        out: dict[str, Any] = {"subtopics": [{"name": f"part {i}", "question": f"why {i}?"}
                                             for i in (1, 2, 3)]}
    elif "Analyze this subtopic" in prompt:
        name = next(f"part {i}" for i in (1, 2, 3) if f"part {i}" in prompt)
        out = {"subtopic_name": name, "analysis": f"about {name}"}
    else:
        assert "Combine these subtopic analyses" in prompt, prompt[:300]
        out = {"summary": "three parts", "subtopics_covered": 3}
    return answer(json.dumps(out), model=MODEL, usage=(400, 20, 0))


def test_hermes_toolsets_example_runs_offline(tmp_path: Path) -> None:
    with FakeHermesEndpoint() as srv:
        srv.handler = _subtopics
        proc = podium(tmp_path, "run", EXAMPLES / "hermes-toolsets.yaml", "--input",
                      "topic=Rust ownership", env=hermes_env(tmp_path, srv), timeout=115)
        chats = srv.chat_requests()
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["summary"] == "three parts"
    assert str(out["subtopics_generated"]) == "3"
    assert len(chats) == 5
    assert not any(r.body.get("tools") for r in chats)  # hermes_toolsets: []
    assert all(r.body["max_tokens"] == 1024 for r in chats)


def test_a_server_error_is_retried_by_podiums_policy_not_hermes(tmp_path: Path) -> None:
    from fakes.openai_server import error

    flow = write(tmp_path, f"""
        workflow:
          name: hermes-retry
          entry_point: a
          runtime: {{provider: hermes, default_model: {MODEL}}}
        agents:
          - name: a
            tools: []
            retry: {{max_attempts: 2, delay_seconds: 0}}
            prompt: Say ok.
            routes: [{{to: $end}}]
        output:
          said: "{{{{ a.output.result }}}}"
    """)
    log = tmp_path / "events.jsonl"
    with FakeHermesEndpoint() as srv:
        srv.script(error(500, "upstream exploded"), answer("ok", model=MODEL))
        proc = podium(tmp_path, "run", flow, "--events", log, env=hermes_env(tmp_path, srv),
                      timeout=110)
        chats = srv.chat_requests()
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"said": "ok"}
    assert len(chats) == 2  # one attempt by Hermes, one retry by podium
    (retry,) = events_of(log, "provider_retry")
    assert "upstream exploded" in retry["error"]
