"""`provider: copilot` on the real GitHub Copilot CLI (npm @github/copilot, driven by
github-copilot-sdk) in bring-your-own-key mode against the local protocol servers: the agent
edits a file through the runtime's own tools, `tools:` decides what the endpoint is offered
(`[]`: nothing), a malformed structured answer is corrected in the same runtime session,
`session_key` continues a session, and the provider object's endpoint fields (types, wire
APIs, bearer token, headers, an existing runtime) reach the wire. A runtime that is missing or
fails to start is a clear error. Skipped only when the runtime is not installed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fakes.anthropic_server import FakeAnthropic, message, text
from fakes.openai_server import FakeOpenAI, answer, call
from fakes.responses_server import FakeResponses, function_call, response
from helpers_engine import write
from podium.providers.base import AgentRequest
from podium.providers.copilot import create_copilot
from podium.providers.runtime_common import COPILOT_CLI, find_cli
from podium.providers.settings import ProviderSettings
from runtime_helpers import (
    events_of,
    git_repo,
    needs_copilot,
    needs_copilot_sdk,
    podium,
    runtime_env,
    text_of,
)

ORIGINAL = "def greet(name):\n    return 'hello ' + name\n"
FIXED = "def greet(name):\n    return f'Hello, {name}!'\n"


def tool_names(body: dict) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools") or []]


@needs_copilot
def test_agent_edits_a_file_with_the_runtime_tools_and_is_corrected_in_the_same_session(
        tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {"greet.py": ORIGINAL})
    flow = write(tmp_path, f"""
        workflow:
          name: copilot-dev
          entry_point: developer
          runtime: {{provider: copilot, default_model: gpt-5-mini}}
        agents:
          - name: developer
            working_dir: {repo}
            reasoning: {{effort: high}}
            system_prompt: Keep changes small.
            prompt: Make greet() polite.
            output:
              summary: {{type: string}}
              files_changed: {{type: array}}
            routes: [{{to: $end}}]
        output:
          summary: "{{{{ developer.output.summary }}}}"
    """)
    log = tmp_path / "events.jsonl"
    with FakeOpenAI() as oa:
        oa.script(
            answer(tool_calls=[call("edit", {"path": str(repo / "greet.py"),
                                             "old_str": ORIGINAL, "new_str": FIXED})],
                   usage=(1200, 40, 200)),
            answer("I changed greet.py.", usage=(1300, 20, 0)),  # not the JSON asked for
            answer(json.dumps({"summary": "greet() is polite", "files_changed": ["greet.py"]}),
                   usage=(1400, 30, 0)))
        proc = podium(tmp_path, "run", flow, "--events", log, env=runtime_env(tmp_path, {
            "COPILOT_PROVIDER_BASE_URL": oa.url + "/v1", "COPILOT_PROVIDER_API_KEY": "sk-x"}))
        bodies = [r.body for r in oa.chat_requests()]
        auth = [r.headers.get("authorization") for r in oa.chat_requests()]
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"summary": "greet() is polite"}

    # the runtime's own `edit` tool changed the file in the working directory
    assert (repo / "greet.py").read_text(encoding="utf-8") == FIXED
    (tool,) = events_of(log, "tool_called")
    assert (tool["tool"], tool["source"], tool["is_error"]) == ("edit", "copilot", False)
    assert tool["arguments"]["path"] == str(repo / "greet.py")

    # three model calls in ONE runtime session: the tool round, the malformed answer, and the
    # correction, whose request carries the whole first exchange
    assert len(bodies) == 3
    first, _, correction = bodies
    assert {"edit", "bash"} <= set(tool_names(first))  # the runtime's defaults
    assert first["model"] == "gpt-5-mini"
    assert first["reasoning_effort"] == "high"
    system = first["messages"][0]["content"]
    assert f"Current working directory: {repo}" in system
    assert "Keep changes small." in system
    assert "Answer with only one JSON object" in first["messages"][-1]["content"]
    history = text_of(correction["messages"])
    assert "Make greet() polite." in history
    assert "I changed greet.py." in history
    assert "Your previous answer did not parse as JSON" in correction["messages"][-1]["content"]
    assert auth == ["Bearer sk-x"] * 3
    (recovery,) = events_of(log, "parse_recovery")
    assert recovery["reason"] == "syntax"

    # usage from the runtime's usage events, priced
    (finished,) = [e for e in events_of(log, "step_finished") if e["step"] == "developer"]
    assert (finished["input_tokens"], finished["output_tokens"]) == (3900, 90)
    assert finished["priced"] is True
    assert finished["cost_usd"] > 0


@needs_copilot
def test_tools_filter_and_session_key_continuity(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {"notes.md": "# notes\n"})
    flow = write(tmp_path, f"""
        workflow:
          name: copilot-tools
          entry_point: none
          runtime: {{provider: copilot, default_model: gpt-5-mini, working_dir: {repo}}}
        agents:
          - name: none
            tools: []
            prompt: Say hi without tools.
            routes: [{{to: reader}}]
          - name: reader
            tools: [read_file]
            prompt: Read notes.md.
            routes: [{{to: first}}]
          - name: first
            session_key: review
            tools: []
            prompt: Remember the word PELICAN.
            routes: [{{to: second}}]
          - name: second
            session_key: review
            tools: []
            prompt: Which word did I ask you to remember?
            routes: [{{to: $end}}]
    """)
    with FakeOpenAI() as oa:
        oa.script(answer("hi"), answer("read it"), answer("Remembered."), answer("PELICAN"))
        proc = podium(tmp_path, "run", flow, env=runtime_env(tmp_path, {
            "COPILOT_PROVIDER_BASE_URL": oa.url + "/v1"}))
        none, reader, _, second = [r.body for r in oa.chat_requests()]
    assert proc.returncode == 0, proc.stderr

    # tools: [] -> the endpoint is offered no tool at all; a list -> only its runtime tools
    assert not none.get("tools")
    assert "tool_choice" not in none
    assert tool_names(reader) == ["view"]
    # different executions without a key are fresh sessions
    assert "Say hi without tools." not in text_of(reader["messages"])
    # the same session_key continues the runtime session: the first exchange is in the second
    assert "Remember the word PELICAN." not in text_of(second["messages"][-1:])
    assert "Remember the word PELICAN." in text_of(second["messages"])
    assert "Remembered." in text_of(second["messages"])
    table = json.loads((tmp_path / "home" / "runtime-sessions.json").read_text("utf-8"))
    (key,) = table
    assert "review" in key


def _send_once(settings: ProviderSettings, model: str) -> str:
    provider = create_copilot(settings)
    try:
        session = provider.open_session(AgentRequest("r1", "agent", 1, "copilot", model, "hi",
                                                     tools=(), timeout=60))
        reply = session.send("hi")
        session.close()
        return reply.text
    finally:
        provider.close()


def _settings(tmp_path: Path, **options: object) -> ProviderSettings:
    env = dict(os.environ, PODIUM_HOME=str(tmp_path / "home"))
    headers = options.get("headers")
    return ProviderSettings("copilot", base_url=options.get("base_url"),  # type: ignore[arg-type]
                            api_key=options.get("api_key"),  # type: ignore[arg-type]
                            headers=dict(headers) if isinstance(headers, dict) else {},
                            environ=env, options=options)


@needs_copilot
def test_provider_object_endpoint_fields_reach_the_wire(tmp_path: Path) -> None:
    with FakeOpenAI() as oa, FakeAnthropic() as an, FakeResponses() as rs:
        oa.handler = lambda r: answer("from chat completions")
        an.handler = lambda r: message(text("from anthropic"), model="claude-sonnet-5")
        rs.handler = lambda r: response("from responses")
        # type openai, bearer token (it wins over a key) and headers
        assert _send_once(_settings(tmp_path, base_url=oa.url + "/v1", api_key="sk-key",
                                    bearer_token="tok-bearer", headers={"X-Team": "podium"}),
                          "gpt-5-mini") == "from chat completions"
        plain = oa.requests[-1]
        # type azure: the deployment path and the api-version
        assert _send_once(_settings(tmp_path, type="azure", base_url=oa.url, api_key="az-key",
                                    azure={"api_version": "2024-10-21"}),
                          "my-deployment") == "from chat completions"
        azure = oa.requests[-1]
        # type anthropic: the Messages API
        assert _send_once(_settings(tmp_path, type="anthropic", base_url=an.url,
                                    api_key="sk-ant"), "claude-sonnet-5") == "from anthropic"
        # wire_api responses: the Responses API
        assert _send_once(_settings(tmp_path, wire_api="responses", base_url=rs.url + "/v1",
                                    api_key="sk-r"), "gpt-5-mini") == "from responses"
        anthropic_req = an.message_requests()[-1]
        responses_req = rs.response_requests()[-1]
    assert plain.path == "/v1/chat/completions"
    assert plain.headers["authorization"] == "Bearer tok-bearer"
    assert plain.headers["x-team"] == "podium"
    assert azure.path == "/openai/deployments/my-deployment/chat/completions"
    assert azure.query["api-version"] == ["2024-10-21"]
    assert azure.headers["api-key"] == "az-key"
    assert anthropic_req.headers["x-api-key"] == "sk-ant"
    assert anthropic_req.body["model"] == "claude-sonnet-5"
    assert not anthropic_req.body.get("tools")
    assert responses_req.body["model"] == "gpt-5-mini"
    assert not responses_req.body.get("tools")


@needs_copilot
def test_an_existing_runtime_by_runtime_url(tmp_path: Path) -> None:
    cli = find_cli(COPILOT_CLI, os.environ)
    with FakeResponses() as rs:
        rs.script(response(calls=[function_call("create", {
            "path": str(tmp_path / "made.txt"), "file_text": "made by the runtime\n"})]),
            response("created"))
        env = dict(os.environ, COPILOT_OFFLINE="true", COPILOT_AUTO_UPDATE="false",
                   COPILOT_PROVIDER_BASE_URL=rs.url + "/v1", COPILOT_MODEL="gpt-5-mini",
                   COPILOT_HOME=str(tmp_path / "runtime-home"),
                   COPILOT_CONNECTION_TOKEN="secret-token")
        server = subprocess.Popen([cli, "--headless", "--no-auto-update", "--no-auto-login",
                                   "--log-level", "error", "--port", "0"], env=env,
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True)
        try:
            assert server.stdout is not None
            port = None
            for line in server.stdout:
                found = re.search(r"listening on port (\d+)", line, re.IGNORECASE)
                if found:
                    port = found.group(1)
                    break
            assert port, "the runtime did not announce its port"
            text_ = _send_created(tmp_path, rs.url, port)
        finally:
            server.terminate()
            server.wait(timeout=20)
            if server.stdout is not None:
                server.stdout.close()
        first = rs.response_requests()[0].body
    assert text_ == "created"
    assert (tmp_path / "made.txt").read_text(encoding="utf-8") == "made by the runtime\n"
    assert "create" in {t.get("name") for t in first["tools"]}


def _send_created(tmp_path: Path, url: str, port: str) -> str:
    settings = ProviderSettings(
        "copilot", base_url=url + "/v1", api_key="k",
        environ=dict(os.environ, PODIUM_HOME=str(tmp_path / "home")),
        options={"runtime_url": f"127.0.0.1:{port}", "runtime_token": "secret-token",
                 "wire_api": "responses", "base_url": url + "/v1", "api_key": "k"})
    provider = create_copilot(settings)
    try:
        session = provider.open_session(AgentRequest(
            "r1", "agent", 1, "copilot", "gpt-5-mini", "make it", tools=("write_file",),
            working_dir=str(tmp_path), timeout=60))
        return session.send("Create made.txt").text
    finally:
        provider.close()


def test_a_missing_runtime_says_what_to_install(tmp_path: Path) -> None:
    flow = write(tmp_path, """
        workflow:
          name: needs-copilot
          entry_point: a
          runtime: {provider: copilot, default_model: gpt-5-mini}
        agents:
          - {name: a, prompt: hi, routes: [{to: $end}]}
    """)
    proc = podium(tmp_path, "run", flow, env=runtime_env(tmp_path, {
        "PODIUM_COPILOT_CLI": str(tmp_path / "no-such-copilot"),
        "COPILOT_PROVIDER_BASE_URL": "http://127.0.0.1:9/v1"}))
    assert proc.returncode == 2  # before the first step: nothing was run
    err = " ".join(proc.stderr.split())
    assert ("provider 'copilot' needs the GitHub Copilot CLI (npm @github/copilot): run `make "
            "install-runtimes` (or `npm ci --prefix runtimes`)") in err
    assert "nothing was run" in err
    assert "no-such-copilot" in err


@needs_copilot_sdk
def test_a_runtime_that_fails_to_start_is_a_clear_error(tmp_path: Path) -> None:
    broken = tmp_path / "copilot"
    broken.write_text(f"#!{sys.executable}\nimport sys\n"
                      "sys.stderr.write('copilot: cannot load its native module\\n')\n"
                      "sys.exit(3)\n", encoding="utf-8")
    broken.chmod(0o755)
    settings = ProviderSettings("copilot", base_url="http://127.0.0.1:9/v1", environ=dict(
        os.environ, PODIUM_COPILOT_CLI=str(broken), PODIUM_HOME=str(tmp_path / "home")))
    provider = create_copilot(settings)
    try:
        with pytest.raises(Exception, match="failed to start") as info:
            provider.open_session(AgentRequest("r1", "a", 1, "copilot", "gpt-5-mini", "hi"))
    finally:
        provider.close()
    message_ = str(info.value)
    assert str(broken) in message_
    assert "cannot load its native module" in message_
    assert "npm ci --prefix runtimes" in message_


@needs_copilot
def test_session_key_continues_the_runtime_session_after_a_restart(tmp_path: Path) -> None:
    """A resumed run is a new podium process: the session_key table under PODIUM_HOME names
    the Copilot session, and the new runtime resumes it with its history."""
    with FakeOpenAI() as oa:
        oa.handler = lambda r: answer("noted")
        settings = ProviderSettings("copilot", base_url=oa.url + "/v1", environ=dict(
            os.environ, PODIUM_HOME=str(tmp_path / "home")))
        for iteration, prompt in enumerate(["Remember PELICAN.", "Which word?"], 1):
            provider = create_copilot(settings)  # a fresh runtime each time
            try:
                session = provider.open_session(AgentRequest(
                    "run-1", "agent", iteration, "copilot", "gpt-5-mini", prompt,
                    tools=(), working_dir=str(tmp_path), session_key="memory", timeout=60))
                session.send(prompt)
                session.close()
            finally:
                provider.close()
        first, second = [r.body for r in oa.chat_requests()]
    assert "Remember PELICAN." not in text_of(first["messages"][:-1])
    assert "Remember PELICAN." in text_of(second["messages"])
