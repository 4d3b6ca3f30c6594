"""The OpenAI adapter (and Azure, and any OpenAI-compatible endpoint) through the real `openai`
SDK against a local server that speaks Chat Completions: tool loops that really edit files,
what the requests carry (tools, response_format, reasoning_effort), retries, corrections,
cached-token pricing, connection reuse and provider configuration."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fakes.openai_server import FakeOpenAI, answer, call, error
from helpers_providers import Servers, fake_servers, run_real_yaml
from podium.events.model import (
    ModelExchange,
    ParseRecovery,
    ProviderRetry,
    StepFinished,
    ToolCalled,
)


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch) -> Iterator[Servers]:
    yield from fake_servers(monkeypatch)


DEV = """
workflow:
  name: dev
  entry_point: dev
  runtime: {provider: openai, default_model: gpt-5-mini}
# workspace tools are opt-in: the developer gets the root list, which names all of them
tools: [read_file, list_dir, search, write_file, edit_file, run_command]
agents:
  - name: dev
    working_dir: repo
    reasoning: {effort: medium}
    prompt: "Fix the bug in calc.py"
    output:
      summary: {type: string}
      files_changed: {type: array, items: {type: string}}
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    d = tmp_path / "repo"
    d.mkdir()
    (d / "calc.py").write_text("def add(a, b):\n    return a - b\n", encoding="utf-8")
    return d


def test_tool_loop_edits_the_repository(tmp_path: Path, repo: Path, servers: Servers) -> None:
    oa = servers.openai
    oa.script(
        answer(tool_calls=[call("read_file", {"path": "calc.py"})]),
        answer(tool_calls=[call("edit_file", {"path": "calc.py", "old_text": "a - b",
                                              "new_text": "a + b"}),
                           call("run_command", {"command": "python -c 'import calc; "
                                                "print(calc.add(2, 3))'"})]),
        answer(json.dumps({"summary": "fixed add", "files_changed": ["calc.py"]})))
    run = run_real_yaml(tmp_path, DEV)
    assert run.exit_code == 0, run.error_text()
    assert (repo / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert run.outputs["dev"] == {"summary": "fixed add", "files_changed": ["calc.py"]}
    first, second, third = (r.body for r in oa.chat_requests())
    # the request: the model, the effort mapped to reasoning_effort, the workspace tools and
    # the output schema as a strict json_schema response format
    assert first["model"] == "gpt-5-mini"
    assert first["reasoning_effort"] == "medium"
    assert [t["function"]["name"] for t in first["tools"]] == [
        "read_file", "list_dir", "search", "write_file", "edit_file", "run_command"]
    fmt = first["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"]["required"] == ["summary", "files_changed"]
    # tool results go back in the same conversation, each under its call id
    tool_msgs = [m for m in second["messages"] if m["role"] == "tool"]
    assert tool_msgs[0]["content"].startswith("1| def add(a, b):")
    outputs = [m["content"] for m in third["messages"] if m["role"] == "tool"]
    assert outputs[1] == "replaced 1 occurrence(s) in calc.py"
    assert outputs[2].startswith("exit code: 0\nstdout:\n5\n")
    ids = [c["id"] for m in third["messages"] if m["role"] == "assistant"
           for c in m.get("tool_calls", [])]
    assert [m["tool_call_id"] for m in third["messages"] if m["role"] == "tool"] == ids
    events = run.of(ToolCalled)
    assert [(e.tool, e.source, e.is_error) for e in events] == [
        ("read_file", "workspace", False), ("edit_file", "workspace", False),
        ("run_command", "workspace", False)]
    assert events[1].arguments["old_text"] == "a - b"
    finished = run.of(StepFinished)[0]
    assert (finished.input_tokens, finished.output_tokens) == (300, 60)


def test_the_body_is_what_the_sdks_create_would_send(tmp_path: Path, repo: Path,
                                                     servers: Servers) -> None:
    """podium posts its parameters through the client without the SDK's per-call transform
    (docs/performance.md): that holds only while the transform changes nothing in them, which
    this checks on a tool conversation with every parameter podium sends."""
    from openai._utils import maybe_transform
    from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming

    oa = servers.openai
    oa.script(answer(tool_calls=[call("read_file", {"path": "calc.py"})]),
              answer(json.dumps({"summary": "read", "files_changed": []})))
    run = run_real_yaml(tmp_path, DEV.replace(
        "  - name: dev\n", "  - name: dev\n    system_prompt: be brief\n").replace(
        "runtime: {provider: openai, default_model: gpt-5-mini}",
        "runtime: {provider: openai, default_model: gpt-5-mini, temperature: 0.5, "
        "max_tokens: 900}"))
    assert run.exit_code == 0, run.error_text()
    bodies = [r.body for r in oa.chat_requests()]
    assert len(bodies) == 2
    assert {"temperature", "max_completion_tokens", "tools", "response_format",
            "reasoning_effort", "stream", "stream_options"} <= set(bodies[1])
    assert [m["role"] for m in bodies[1]["messages"]] == ["system", "user", "assistant", "tool"]
    for body in bodies:
        assert maybe_transform(body, CompletionCreateParamsStreaming) == body


def test_tools_empty_list_sends_no_tools(tmp_path: Path, servers: Servers) -> None:
    servers.openai.script(answer("hello"))
    run = run_real_yaml(tmp_path, """
        workflow: {name: t, entry_point: a, runtime: {provider: openai}}
        agents:
          - {name: a, model: gpt-5-mini, tools: [], prompt: hi}
    """)
    assert run.exit_code == 0, run.error_text()
    body = servers.openai.chat_requests()[0].body
    assert "tools" not in body
    assert "tool_choice" not in body
    assert "response_format" not in body
    assert run.outputs["a"] == {"result": "hello"}


def test_a_tools_list_offers_exactly_those(tmp_path: Path, servers: Servers) -> None:
    (tmp_path / "w").mkdir()
    servers.openai.script(answer("ok"))
    run = run_real_yaml(tmp_path, """
        workflow: {name: t, entry_point: a, runtime: {provider: openai}}
        agents:
          - {name: a, model: gpt-5-mini, working_dir: w, tools: [read_file, search], prompt: hi}
    """)
    assert run.exit_code == 0, run.error_text()
    tools = servers.openai.chat_requests()[0].body["tools"]
    assert [t["function"]["name"] for t in tools] == ["read_file", "search"]
    assert run.of(ModelExchange)[0].request["offered_tools"] == ["read_file", "search"]


def test_429_with_retry_after_then_success(tmp_path: Path, servers: Servers) -> None:
    servers.openai.script(error(429, "rate limited", retry_after="7", kind="rate_limit"),
                          answer("fine"))
    run = run_real_yaml(tmp_path, """
        workflow: {name: t, entry_point: a, runtime: {provider: openai}}
        agents:
          - {name: a, model: gpt-5-mini, tools: [], prompt: hi}
    """)
    assert run.exit_code == 0, run.error_text()
    (retry,) = run.of(ProviderRetry)
    assert (retry.step, retry.attempt, retry.max_attempts, retry.status) == ("a", 1, 3, 429)
    assert 7.0 <= retry.delay <= 30 * 1.25  # Retry-After honoured, within the cap
    assert "rate limited" in retry.error
    assert run.clock.sleeps == [retry.delay]  # waited on the run's clock, not for real
    assert len(servers.openai.chat_requests()) == 2


def test_server_errors_exhaust_the_default_policy(tmp_path: Path, servers: Servers) -> None:
    servers.openai.script(error(500, "boom"), error(502, "bad gateway"), error(503, "down"))
    run = run_real_yaml(tmp_path, """
        workflow: {name: t, entry_point: a, runtime: {provider: openai}}
        agents:
          - {name: a, model: gpt-5-mini, tools: [], prompt: hi}
    """)
    assert run.exit_code == 3
    assert "failed after 3 attempt(s) (last status 503)" in run.error_text()
    delays = [e.delay for e in run.of(ProviderRetry)]
    assert len(delays) == 2
    assert 1.0 <= delays[0] <= 1.25
    assert 2.0 <= delays[1] <= 2.5
    assert len(servers.openai.chat_requests()) == 3


def test_a_4xx_is_not_retried(tmp_path: Path, servers: Servers) -> None:
    servers.openai.script(error(400, "bad schema", kind="invalid_request_error"))
    run = run_real_yaml(tmp_path, """
        workflow: {name: t, entry_point: a, runtime: {provider: openai}}
        agents:
          - {name: a, model: gpt-5-mini, tools: [], prompt: hi}
    """)
    assert run.exit_code == 3
    assert "HTTP 400: bad schema" in run.error_text()
    assert run.of(ProviderRetry) == []
    assert len(servers.openai.chat_requests()) == 1


def test_a_retry_block_replaces_the_default_policy(tmp_path: Path, servers: Servers) -> None:
    servers.openai.script(error(429, "slow down"), error(429, "slow down"), answer("ok"))
    run = run_real_yaml(tmp_path, """
        workflow: {name: t, entry_point: a, runtime: {provider: openai}}
        agents:
          - name: a
            model: gpt-5-mini
            tools: []
            prompt: hi
            retry: {max_attempts: 3, backoff: fixed, delay_seconds: 4}
    """)
    assert run.exit_code == 0, run.error_text()
    assert [4.0 <= e.delay <= 5.0 for e in run.of(ProviderRetry)] == [True, True]
    servers.openai.script(error(429, "slow down"))
    run = run_real_yaml(tmp_path, """
        workflow: {name: t, entry_point: a, runtime: {provider: openai}}
        agents:
          - {name: a, model: gpt-5-mini, tools: [], prompt: hi, retry: {max_attempts: 1}}
    """)
    assert run.exit_code == 3
    assert run.of(ProviderRetry) == []


def test_connection_errors_are_retried_then_reported(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    dead = FakeOpenAI().start()
    url = dead.url
    dead.stop()  # nothing listens there any more
    monkeypatch.setenv("OPENAI_BASE_URL", url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    run = run_real_yaml(tmp_path, """
        workflow: {name: t, entry_point: a, runtime: {provider: openai}}
        agents:
          - {name: a, model: gpt-5-mini, tools: [], prompt: hi}
    """)
    assert run.exit_code == 3
    assert "cannot connect" in run.error_text()
    assert len(run.of(ProviderRetry)) == 2


def test_malformed_json_is_corrected_in_the_same_conversation(tmp_path: Path,
                                                              servers: Servers) -> None:
    servers.openai.script(answer('Sure! {"verdict": "approve"'),
                          answer('{"verdict": "approve"}'))
    run = run_real_yaml(tmp_path, """
        workflow: {name: t, entry_point: a, runtime: {provider: openai}}
        agents:
          - name: a
            model: gpt-5-mini
            tools: []
            prompt: review
            output: {verdict: {type: string, enum: [approve, changes]}}
    """)
    assert run.exit_code == 0, run.error_text()
    assert run.outputs["a"] == {"verdict": "approve"}
    (recovery,) = run.of(ParseRecovery)
    assert recovery.reason == "syntax"
    second = servers.openai.chat_requests()[1].body
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]
    assert second["messages"][1]["content"] == 'Sure! {"verdict": "approve"'
    assert "did not parse as JSON" in second["messages"][2]["content"]
    finished = run.of(StepFinished)[0]
    assert finished.input_tokens == 200  # the correction turn's tokens count too


def test_non_strict_schema_when_strict_mode_cannot_express_it(tmp_path: Path,
                                                              servers: Servers) -> None:
    servers.openai.script(answer('{"summary": "s", "files_changed": []}'))
    run = run_real_yaml(tmp_path, """
        workflow: {name: t, entry_point: a, runtime: {provider: openai}}
        agents:
          - name: a
            model: gpt-5-mini
            tools: []
            prompt: hi
            output:
              summary: {type: string}
              files_changed: {type: array}
    """)
    assert run.exit_code == 0, run.error_text()
    fmt = servers.openai.chat_requests()[0].body["response_format"]["json_schema"]
    assert fmt["strict"] is False
    assert fmt["schema"]["properties"]["files_changed"] == {"type": "array"}


def test_cached_tokens_are_priced_as_cached(tmp_path: Path, servers: Servers) -> None:
    servers.openai.script(answer("hi", model="gpt-4o-2024-08-06", usage=(1000, 100, 800)))
    run = run_real_yaml(tmp_path, """
        workflow: {name: t, entry_point: a, runtime: {provider: openai}}
        agents:
          - {name: a, model: gpt-4o, tools: [], prompt: hi}
    """)
    finished = run.of(StepFinished)[0]
    assert (finished.input_tokens, finished.cached_tokens) == (1000, 800)
    # genai-prices: gpt-4o $2.50 in, $1.25 cached in, $10 out per million
    assert finished.cost_usd == pytest.approx((200 * 2.5 + 800 * 1.25 + 100 * 10) / 1e6)
    assert finished.model == "gpt-4o-2024-08-06"


def test_a_model_the_api_reports_without_a_price_is_unpriced(tmp_path: Path,
                                                            servers: Servers) -> None:
    servers.openai.script(answer("hi", model="qwen2.5-coder:7b"))
    run = run_real_yaml(tmp_path, """
        workflow: {name: t, entry_point: a, runtime: {provider: openai}}
        agents:
          - {name: a, model: local, tools: [], prompt: hi}
    """)
    usage = run.result.usage_by_step["a"]
    assert (usage.cost_usd, usage.priced, usage.model) == (None, False, "qwen2.5-coder:7b")


def test_one_client_and_one_connection_for_all_calls(tmp_path: Path, servers: Servers) -> None:
    servers.openai.handler = lambda req: answer("again")
    run = run_real_yaml(tmp_path, """
        workflow:
          name: t
          entry_point: a
          runtime: {provider: openai}
          limits: {max_iterations: 5}
        agents:
          - {name: a, model: gpt-5-mini, tools: [], prompt: hi, routes: [{to: b}]}
          - {name: b, model: gpt-5-mini, tools: [], prompt: hi, routes: [{to: c}]}
          - {name: c, model: gpt-5-mini, tools: [], prompt: hi}
    """)
    assert run.exit_code == 0, run.error_text()
    assert len(servers.openai.chat_requests()) == 3
    assert servers.openai.connections == 1


def test_templated_model_and_effort_are_rendered_at_run_time(tmp_path: Path,
                                                             servers: Servers) -> None:
    servers.openai.script(answer("ok"))
    run = run_real_yaml(tmp_path, """
        workflow:
          name: t
          entry_point: a
          runtime: {provider: openai}
          input: {size: {type: string, default: big}}
        agents:
          - name: a
            model: "{{ 'gpt-5-mini' if workflow.input.size == 'small' else 'gpt-5.5' }}"
            reasoning: {effort: "{{ 'low' if workflow.input.size == 'small' else 'high' }}"}
            tools: []
            prompt: hi
    """, inputs={"size": "big"})
    assert run.exit_code == 0, run.error_text()
    body = servers.openai.chat_requests()[0].body
    assert (body["model"], body["reasoning_effort"]) == ("gpt-5.5", "high")


def test_effort_on_a_model_that_does_not_reason_fails_clearly(tmp_path: Path,
                                                              servers: Servers) -> None:
    run = run_real_yaml(tmp_path, """
        workflow: {name: t, entry_point: a, runtime: {provider: openai},
                   input: {m: {type: string, default: gpt-4o}}}
        agents:
          - {name: a, model: "{{ workflow.input.m }}", reasoning: {effort: low}, tools: [],
             prompt: hi}
    """)
    assert run.exit_code == 3
    assert "model 'gpt-4o' does not reason" in run.error_text()
    assert servers.openai.requests == []


def test_max_agent_iterations_bounds_the_tool_loop(tmp_path: Path, servers: Servers) -> None:
    (tmp_path / "w").mkdir()
    servers.openai.handler = lambda req: answer(tool_calls=[call("list_dir", {})])
    run = run_real_yaml(tmp_path, """
        workflow: {name: t, entry_point: a, runtime: {provider: openai}}
        agents:
          - {name: a, model: gpt-5-mini, working_dir: w, max_agent_iterations: 3, prompt: hi}
    """)
    assert run.exit_code == 3
    assert "max_agent_iterations (3)" in run.error_text()
    assert len(run.of(ToolCalled)) == 3
    assert len(servers.openai.chat_requests()) == 4


def test_provider_object_configures_the_endpoint(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("TEAM_LLM_KEY", "sk-team")
    with FakeOpenAI() as oa:
        oa.script(answer("ok"))
        run = run_real_yaml(tmp_path, f"""
            workflow:
              name: t
              entry_point: a
              runtime:
                provider:
                  name: openai
                  base_url: {oa.url}/v1
                  api_key_env: TEAM_LLM_KEY
                  headers: {{X-Team: platform}}
            agents:
              - {{name: a, model: llama3.1, tools: [], prompt: hi}}
        """)
        assert run.exit_code == 0, run.error_text()
        (req,) = oa.chat_requests()
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer sk-team"
    assert req.headers["x-team"] == "platform"


def test_a_local_endpoint_needs_no_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeOpenAI() as oa:
        monkeypatch.setenv("OPENAI_BASE_URL", oa.url + "/v1")
        oa.script(answer("ok", model="qwen2.5-coder:7b"))
        run = run_real_yaml(tmp_path, """
            workflow: {name: t, entry_point: a, runtime: {provider: openai}}
            agents:
              - {name: a, model: qwen2.5-coder:7b, tools: [], prompt: hi}
        """)
    assert run.exit_code == 0, run.error_text()


def test_azure_deployment_path_version_and_key(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeOpenAI() as oa:
        monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", oa.url)
        monkeypatch.setenv("AZURE_OPENAI_API_KEY", "az-key")
        oa.script(answer("ok", model="gpt-5-mini"))
        run = run_real_yaml(tmp_path, """
            workflow:
              name: t
              entry_point: a
              runtime: {provider: {name: azure, api_version: "2025-04-01-preview"}}
            agents:
              - {name: a, model: team-gpt5mini, reasoning: {effort: low}, tools: [], prompt: hi}
        """)
        assert run.exit_code == 0, run.error_text()
        (req,) = oa.chat_requests()
    assert req.path == "/openai/deployments/team-gpt5mini/chat/completions"
    assert req.query["api-version"] == ["2025-04-01-preview"]
    assert req.headers["api-key"] == "az-key"
    assert req.body["reasoning_effort"] == "low"


def test_a_retry_that_would_outlast_the_agent_is_not_started(tmp_path: Path,
                                                             servers: Servers) -> None:
    servers.openai.script(error(429, "slow down", retry_after="20"))
    run = run_real_yaml(tmp_path, """
        workflow: {name: t, entry_point: a, runtime: {provider: openai}}
        agents:
          - {name: a, model: gpt-5-mini, tools: [], prompt: hi, timeout_seconds: 10}
    """)
    assert run.exit_code == 3
    assert "failed after 1 attempt(s), and the agent has no time left" in run.error_text()
    assert run.of(ProviderRetry) == []
    assert run.clock.sleeps == []


def test_an_agents_own_provider_wins_over_the_command_line(tmp_path: Path,
                                                           servers: Servers) -> None:
    from fakes.anthropic_server import message, text

    servers.openai.script(answer("from openai"))
    servers.anthropic.script(message(text("from claude")))
    run = run_real_yaml(tmp_path, """
        workflow: {name: t, entry_point: a, runtime: {provider: copilot}}
        agents:
          - {name: a, model: gpt-5-mini, tools: [], prompt: hi, routes: [{to: b}]}
          - {name: b, provider: claude, model: claude-sonnet-5, tools: [], prompt: hi}
    """, provider="openai")  # podium run --provider openai
    assert run.exit_code == 0, run.error_text()
    assert run.outputs["a"] == {"result": "from openai"}
    assert run.outputs["b"] == {"result": "from claude"}


def test_an_unknown_provider_on_the_command_line_lists_the_known_ones(tmp_path: Path) -> None:
    import subprocess

    from helpers_engine import cli_env, podium_argv, write

    path = write(tmp_path, """
        workflow: {name: t, entry_point: a}
        agents:
          - {name: a, model: gpt-5-mini, prompt: hi}
    """)
    proc = subprocess.run(podium_argv("run", path, "--provider", "opneai"),
                          env=cli_env(tmp_path / "home"), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2
    assert "--provider opneai: unknown provider; podium has: azure, claude (alias anthropic)" \
        in proc.stderr


class _FlakyProvider:
    """A Provider whose first `send` fails transiently after spending tokens (a provider that
    does not retry per API call): the agent step retries the whole send."""

    name = "flaky"

    def __init__(self) -> None:
        from podium.providers.base import Capabilities

        self.capabilities = Capabilities()
        self.sends = 0

    def open_session(self, request: object) -> _FlakyProvider:
        return self

    def send(self, message: str) -> object:
        from podium.providers.base import ProviderError, Reply, TokenUsage

        self.sends += 1
        if self.sends == 1:
            raise ProviderError("flaky: HTTP 503", retryable=True, status=503,
                                spent=[TokenUsage(1000, 10, 0, 0, "gpt-4o")])
        return Reply("ok", None, 1000, 10, 0, "gpt-4o")

    def close(self) -> None:
        pass


def test_the_agent_step_retries_a_send_and_counts_the_failed_attempts_tokens(
        tmp_path: Path) -> None:
    from helpers_engine import load, write
    from podium.clock import FakeClock
    from podium.engine.run import Engine
    from podium.events.sinks.jsonl import MemorySink
    from podium.gates.base import ChainAnswerer
    from podium.providers.base import ProviderRegistry

    path = write(tmp_path, """
        workflow: {name: t, entry_point: a}
        agents:
          - {name: a, model: gpt-4o, prompt: hi}
    """)
    flaky = _FlakyProvider()
    clock = FakeClock()
    engine = Engine(load(path), path, inputs={}, providers=ProviderRegistry(flaky),  # type: ignore[arg-type]
                    answerer=ChainAnswerer([]), clock=clock)
    sink = MemorySink()
    engine.bus.add(sink)
    result = engine.run()
    assert result.exit_code == 0
    assert flaky.sends == 2
    (retry,) = [e for e in sink.events if isinstance(e, ProviderRetry)]
    assert (retry.status, retry.attempt) == (503, 1)
    assert clock.sleeps == [retry.delay]
    finished = next(e for e in sink.events if isinstance(e, StepFinished))
    assert finished.input_tokens == 2000  # the failed attempt's tokens are paid for too
    assert finished.cost_usd == pytest.approx(2 * (1000 * 2.5 + 10 * 10) / 1e6)


def test_a_failed_send_leaves_the_conversation_as_it_was(tmp_path: Path,
                                                         servers: Servers) -> None:
    from podium.providers.base import AgentRequest, ProviderError
    from podium.providers.openai_chat import create_openai
    from podium.providers.settings import ProviderSettings
    from podium.tools.base import Toolbox
    from podium.tools.workspace import Workspace

    provider = create_openai(ProviderSettings("openai", environ={
        "OPENAI_BASE_URL": servers.openai.url + "/v1", "OPENAI_API_KEY": "sk-test"}))
    box = Toolbox(Workspace(tmp_path).tools(("list_dir",)))
    session = provider.open_session(AgentRequest("r", "a", 1, "openai", "gpt-5-mini", "hi",
                                                 toolbox=box))
    servers.openai.script(answer(tool_calls=[call("list_dir", {})]),
                          error(400, "context too long"))
    with pytest.raises(ProviderError, match="HTTP 400: context too long") as failed:
        session.send("first")
    assert [(c.input_tokens, c.output_tokens) for c in failed.value.spent or []] == [(100, 20)]
    servers.openai.script(answer("fine"))
    reply = session.send("second")
    assert reply.text == "fine"
    last = servers.openai.chat_requests()[-1].body["messages"]
    assert last == [{"role": "user", "content": "second"}]  # nothing left of the failed turn
    session.close()
    provider.close()


def test_each_exchange_records_its_calls_and_cost(tmp_path: Path, servers: Servers) -> None:
    (tmp_path / "w").mkdir()
    servers.openai.script(answer(tool_calls=[call("list_dir", {})], model="gpt-4o",
                                 usage=(1000, 0, 0)),
                          answer("done", model="gpt-4o", usage=(2000, 100, 0)))
    run = run_real_yaml(tmp_path, """
        workflow: {name: t, entry_point: a, runtime: {provider: openai}}
        agents:
          - {name: a, model: gpt-4o, working_dir: w, tools: [list_dir], prompt: hi}
    """)
    (exchange,) = run.of(ModelExchange)
    assert (exchange.api_calls, exchange.input_tokens) == (2, 3000)
    assert exchange.cost_usd == pytest.approx((3000 * 2.5 + 100 * 10) / 1e6)


def test_runtime_temperature_and_max_tokens(tmp_path: Path, servers: Servers) -> None:
    servers.openai.script(answer("ok"))
    run = run_real_yaml(tmp_path, """
        workflow:
          name: t
          entry_point: a
          runtime: {provider: openai, temperature: 1.5, max_tokens: 777, timeout: 30}
        agents:
          - {name: a, model: gpt-4.1, tools: [], prompt: hi, system_prompt: "be brief"}
    """)
    assert run.exit_code == 0, run.error_text()
    (req,) = servers.openai.chat_requests()
    body = req.body
    assert (body["temperature"], body["max_completion_tokens"]) == (1.5, 777)
    assert body["messages"][0] == {"role": "system", "content": "be brief"}
    assert req.headers["x-stainless-read-timeout"] == "30.0"  # runtime.timeout per request


def test_a_failed_execution_reports_what_it_spent(tmp_path: Path, servers: Servers) -> None:
    from podium.events.model import StepFailed

    (tmp_path / "w").mkdir()
    servers.openai.script(answer(tool_calls=[call("list_dir", {})], model="gpt-4o",
                                 usage=(1000, 10, 0)),
                          error(400, "context too long"))
    run = run_real_yaml(tmp_path, """
        workflow: {name: t, entry_point: a, runtime: {provider: openai}}
        agents:
          - {name: a, model: gpt-4o, working_dir: w, tools: [list_dir], prompt: hi}
    """)
    assert run.exit_code == 3
    (failed,) = run.of(StepFailed)
    spent = failed.details["usage"]
    assert (spent["input_tokens"], spent["output_tokens"], spent["model"]) == (1000, 10, "gpt-4o")
    assert spent["cost_usd"] == pytest.approx((1000 * 2.5 + 10 * 10) / 1e6)


def _counting_cookie_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The URLs of the responses an HTTP client hands its cookie jar."""
    import http.cookiejar

    read: list[str] = []
    extract = http.cookiejar.CookieJar.extract_cookies

    def counting(jar: http.cookiejar.CookieJar, response: Any, request: Any) -> None:
        read.append(request.get_full_url())
        extract(jar, response, request)

    monkeypatch.setattr(http.cookiejar.CookieJar, "extract_cookies", counting)
    return read


def test_a_cookie_an_api_sets_is_sent_back_and_a_response_without_one_is_not_parsed(
        tmp_path: Path, servers: Servers, monkeypatch: pytest.MonkeyPatch) -> None:
    from fakes.openai_server import stream_chunks
    from fakes.wire import Canned

    read = _counting_cookie_reads(monkeypatch)
    servers.openai.script(
        Canned(events=stream_chunks(answer("one")),
               headers={"set-cookie": "__cf_bm=abc123; Path=/; HttpOnly"}),
        answer("two"), answer("three"))
    run = run_real_yaml(tmp_path, """
        workflow: {name: t, entry_point: a, runtime: {provider: openai, default_model: m}}
        agents:
          - {name: a, prompt: hi, routes: [{to: b}]}
          - {name: b, prompt: again, routes: [{to: c}]}
          - {name: c, prompt: last}
    """)
    assert run.exit_code == 0, run.error_text()
    first, second, third = servers.openai.chat_requests()
    assert "cookie" not in first.headers
    assert second.headers.get("cookie") == "__cf_bm=abc123"  # the jar kept what was set
    assert third.headers.get("cookie") == "__cf_bm=abc123"
    assert len(read) == 1  # only the response that set a cookie went through the jar


def test_a_for_each_members_responses_without_cookies_skip_the_jar(
        tmp_path: Path, servers: Servers, monkeypatch: pytest.MonkeyPatch) -> None:
    read = _counting_cookie_reads(monkeypatch)
    servers.openai.script(*(answer(f"story {i}") for i in range(3)))
    run = run_real_yaml(tmp_path, """
        workflow:
          name: t
          entry_point: fan
          input: {items: {type: array}}
          runtime: {provider: openai, default_model: m}
        for_each:
          - name: fan
            type: for_each
            source: workflow.input.items
            as: item
            agent: {name: worker, prompt: "tell story {{ item }}"}
        agents: []
    """, inputs={"items": [1, 2, 3]})
    assert run.exit_code == 0, run.error_text()
    assert len(servers.openai.chat_requests()) == 3  # the members' calls, on the async client
    assert read == []
