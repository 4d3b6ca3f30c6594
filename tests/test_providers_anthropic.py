"""The Claude adapter through the real `anthropic` SDK (streaming) against a local server that
speaks the Messages API's SSE stream: structured output, thinking for reasoning.effort, tool
loops, `tools: []`, retries, corrections and cache-token pricing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from fakes.anthropic_server import error, message, text, thinking, tool_use
from helpers_providers import Servers, fake_servers, run_real_yaml
from podium.events.model import ParseRecovery, ProviderRetry, StepFinished, ToolCalled, Warning_


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch) -> Iterator[Servers]:
    yield from fake_servers(monkeypatch)


REVIEW = """
workflow:
  name: review
  entry_point: reviewer
  runtime: {provider: claude}
agents:
  - name: reviewer
    model: MODEL
    reasoning: {effort: high}
    tools: []
    prompt: "Review this diff"
    output:
      verdict: {type: string, enum: [approve, changes, blocked]}
      findings: {type: array}
"""


def test_structured_review_with_adaptive_thinking_and_no_tools(tmp_path: Path,
                                                                servers: Servers) -> None:
    an = servers.anthropic
    an.script(message(thinking("Looks fine."), text('{"verdict": "approve", "findings": []}')))
    run = run_real_yaml(tmp_path, REVIEW.replace("MODEL", "claude-sonnet-5"))
    assert run.exit_code == 0, run.error_text()
    assert run.outputs["reviewer"] == {"verdict": "approve", "findings": []}
    (req,) = an.message_requests()
    body = req.body
    assert req.path == "/v1/messages"
    assert body["stream"] is True
    assert "tools" not in body
    assert "tool_choice" not in body
    assert body["thinking"] == {"type": "adaptive"}
    assert body["output_config"]["effort"] == "high"
    fmt = body["output_config"]["format"]
    assert fmt["type"] == "json_schema"
    assert fmt["schema"]["properties"]["verdict"]["enum"] == ["approve", "changes", "blocked"]
    assert fmt["schema"]["additionalProperties"] is False
    assert req.headers["authorization"] == "Bearer sk-test-anthropic"


def test_effort_becomes_a_thinking_budget_on_older_models(tmp_path: Path,
                                                          servers: Servers) -> None:
    servers.anthropic.script(message(text('{"verdict": "changes", "findings": ["x"]}'),
                                     model="claude-sonnet-4-5-20250929"))
    run = run_real_yaml(tmp_path, REVIEW.replace("MODEL", "claude-sonnet-4-5"))
    assert run.exit_code == 0, run.error_text()
    # the SDK's deprecation notice becomes a warning event, not a Python warning on stderr
    assert any("deprecated" in w.message for w in run.of(Warning_))
    body = servers.anthropic.message_requests()[0].body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 16384}
    assert body["max_tokens"] == 16384 + 4096
    assert "effort" not in body.get("output_config", {})
    assert "temperature" not in body


def test_tool_loop_with_thinking_blocks_sent_back(tmp_path: Path, servers: Servers) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    an = servers.anthropic
    an.script(
        message(thinking("I should write it."),
                tool_use("write_file", {"path": "notes/todo.md", "content": "- ship\n"})),
        message(tool_use("read_file", {"path": "../outside.txt"})),
        message(text("All written.")))
    run = run_real_yaml(tmp_path, """
        workflow: {name: t, entry_point: a, runtime: {provider: anthropic}}
        agents:
          - {name: a, model: claude-sonnet-5, working_dir: repo, reasoning: {effort: low},
             tools: [read_file, write_file, run_command], prompt: "write the todo"}
    """)
    assert run.exit_code == 0, run.error_text()
    assert (repo / "notes" / "todo.md").read_text() == "- ship\n"
    assert run.outputs["a"] == {"result": "All written."}
    first, second, third = (r.body for r in an.message_requests())
    assert [t["name"] for t in first["tools"]] == ["read_file", "write_file", "run_command"]
    assistant = second["messages"][1]
    assert assistant["role"] == "assistant"
    assert assistant["content"][0]["type"] == "thinking"
    assert assistant["content"][0]["signature"].startswith("sig-")
    result = second["messages"][2]["content"][0]
    assert result["type"] == "tool_result"
    assert result["is_error"] is False
    assert result["tool_use_id"] == assistant["content"][1]["id"]
    refused = third["messages"][4]["content"][0]
    assert refused["is_error"] is True
    assert "outside the working directory" in refused["content"]
    assert [(e.tool, e.is_error) for e in run.of(ToolCalled)] == [
        ("write_file", False), ("read_file", True)]


def test_429_then_success(tmp_path: Path, servers: Servers) -> None:
    servers.anthropic.script(error(429, "rate_limit", kind="rate_limit_error", retry_after="2"),
                             error(529, "overloaded", kind="overloaded_error"),
                             message(text('{"verdict": "approve", "findings": []}')))
    run = run_real_yaml(tmp_path, REVIEW.replace("MODEL", "claude-sonnet-5"))
    assert run.exit_code == 0, run.error_text()
    retries = run.of(ProviderRetry)
    assert [r.status for r in retries] == [429, 529]
    assert retries[0].delay >= 2.0
    assert len(servers.anthropic.message_requests()) == 3


def test_an_authentication_error_is_not_retried(tmp_path: Path, servers: Servers) -> None:
    servers.anthropic.script(error(401, "invalid x-api-key", kind="authentication_error"))
    run = run_real_yaml(tmp_path, REVIEW.replace("MODEL", "claude-sonnet-5"))
    assert run.exit_code == 3
    assert "HTTP 401: invalid x-api-key" in run.error_text()
    assert run.of(ProviderRetry) == []


def test_an_error_event_in_the_stream_fails_the_call_as_the_sdk_reports_it(
        tmp_path: Path, servers: Servers) -> None:
    """podium reads the stream's events itself (providers/sse.py): an `error` event is raised
    as the SDK's stream raises it, an API status error naming the API's message; a ping
    between events is skipped."""
    from fakes.anthropic_server import stream_events
    from fakes.wire import Canned

    started = stream_events(message(text('{"verdict": "approve", "findings": []}')))[:2]
    overloaded = {"type": "error", "error": {"type": "overloaded_error",
                                             "message": "Overloaded"}}
    servers.anthropic.script(Canned(events=[*started, ("ping", {"type": "ping"}),
                                            ("error", overloaded)]))
    run = run_real_yaml(tmp_path, REVIEW.replace("MODEL", "claude-sonnet-5"))
    assert run.exit_code == 3
    assert "claude: HTTP 200: Overloaded" in run.error_text()


def test_malformed_json_then_corrected(tmp_path: Path, servers: Servers) -> None:
    servers.anthropic.script(message(text('{"verdict": "approve", "findings": ')),
                             message(text('{"verdict": "maybe", "findings": []}')),
                             message(text('{"verdict": "approve", "findings": []}')))
    run = run_real_yaml(tmp_path, REVIEW.replace("MODEL", "claude-sonnet-5"))
    assert run.exit_code == 0, run.error_text()
    assert [e.reason for e in run.of(ParseRecovery)] == ["syntax", "schema"]
    last = servers.anthropic.message_requests()[2].body["messages"]
    assert [m["role"] for m in last] == ["user", "assistant", "user", "assistant", "user"]
    assert "did not match the required schema" in last[4]["content"][0]["text"]


def test_older_models_answer_through_a_forced_tool_call(tmp_path: Path,
                                                        servers: Servers) -> None:
    an = servers.anthropic
    an.script(message(tool_use("final_answer", {"verdict": "nope", "findings": []}),
                      model="claude-3-5-haiku-20241022"),
              message(tool_use("final_answer", {"verdict": "approve", "findings": []}),
                      model="claude-3-5-haiku-20241022"))
    run = run_real_yaml(tmp_path, REVIEW.replace("MODEL", "claude-3-5-haiku-latest")
                        .replace("    reasoning: {effort: high}\n", ""))
    assert run.exit_code == 0, run.error_text()
    assert run.outputs["reviewer"] == {"verdict": "approve", "findings": []}
    first, second = (r.body for r in an.message_requests())
    assert first["tool_choice"] == {"type": "tool", "name": "final_answer"}
    assert [t["name"] for t in first["tools"]] == ["final_answer"]
    assert first["max_tokens"] == 8192
    # the correction answers the forced call first, as the API requires
    content = second["messages"][2]["content"]
    assert content[0]["type"] == "tool_result"
    assert content[0]["tool_use_id"] == second["messages"][1]["content"][0]["id"]
    assert content[1]["type"] == "text"


def test_effort_on_a_model_without_thinking_fails(tmp_path: Path, servers: Servers) -> None:
    # a template, so that only the run can know the model (validate catches a literal one)
    run = run_real_yaml(tmp_path, REVIEW.replace("MODEL", "'{{ workflow.input.m }}'")
                        .replace("  runtime: {provider: claude}",
                                 "  runtime: {provider: claude}\n  input: {m: {type: string, "
                                 "default: claude-3-5-haiku-latest}}"))
    assert run.exit_code == 3
    assert "model 'claude-3-5-haiku-latest' has no extended thinking" in run.error_text()
    assert servers.anthropic.requests == []


def test_cache_reads_and_writes_are_priced_at_their_rates(tmp_path: Path,
                                                          servers: Servers) -> None:
    servers.anthropic.script(message(text("ok"), model="claude-sonnet-4-5",
                                     usage=(100, 50, 1000, 200)))
    run = run_real_yaml(tmp_path, """
        workflow: {name: t, entry_point: a, runtime: {provider: claude}}
        agents:
          - {name: a, model: claude-sonnet-4-5, tools: [], prompt: hi}
    """)
    finished = run.of(StepFinished)[0]
    assert (finished.input_tokens, finished.cached_tokens) == (1300, 1000)
    # $3 in, $15 out, $0.30 cache read, $3.75 cache write per million
    assert finished.cost_usd == pytest.approx(
        (100 * 3 + 50 * 15 + 1000 * 0.3 + 200 * 3.75) / 1e6)


def test_workflow_pricing_overrides_the_table(tmp_path: Path, servers: Servers) -> None:
    servers.anthropic.script(message(text("ok"), model="claude-sonnet-5",
                                     usage=(1000, 1000, 0, 0)))
    run = run_real_yaml(tmp_path, """
        workflow:
          name: t
          entry_point: a
          runtime: {provider: claude}
          cost: {pricing: {claude-sonnet-5: {input_per_mtok: 1, output_per_mtok: 2}}}
        agents:
          - {name: a, model: claude-sonnet-5, tools: [], prompt: hi}
    """)
    assert run.of(StepFinished)[0].cost_usd == pytest.approx(3000 / 1e6)
    assert json.loads(json.dumps(run.outputs["a"])) == {"result": "ok"}


def test_runtime_temperature_and_max_tokens(tmp_path: Path, servers: Servers) -> None:
    servers.anthropic.script(message(text("a")), message(text("b")))
    run = run_real_yaml(tmp_path, """
        workflow:
          name: t
          entry_point: a
          runtime: {provider: claude, temperature: 0.2, max_tokens: 1000}
        agents:
          - {name: a, model: claude-sonnet-5, tools: [], prompt: hi, routes: [{to: b}]}
          - {name: b, model: claude-sonnet-4-5, tools: [], prompt: hi,
             reasoning: {effort: low}}
    """)
    assert run.exit_code == 0, run.error_text()
    plain, thinking_ = (r.body for r in servers.anthropic.message_requests())
    assert (plain["temperature"], plain["max_tokens"]) == (0.2, 1000)
    # thinking takes no temperature, and max_tokens must hold the budget
    assert "temperature" not in thinking_
    assert thinking_["max_tokens"] == 2048 + 4096
