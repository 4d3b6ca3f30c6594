"""`provider: claude-agent-sdk` on the real Claude Code CLI (npm @anthropic-ai/claude-code,
driven by claude-agent-sdk) pointed at the local Anthropic protocol server by
ANTHROPIC_BASE_URL: the agent edits a file through Claude Code's own tools, a malformed
structured answer is corrected in the same session, `tools:` decides what the endpoint is
offered (`[]`: nothing), `session_key` continues a session, the workflow's MCP servers are
passed through, and a missing runtime is a clear error. Skipped only when the runtime is not
installed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from fakes.anthropic_server import FakeAnthropic, message, text, tool_use
from helpers_engine import REPO_ROOT, write
from runtime_helpers import events_of, git_repo, needs_claude, podium, runtime_env, text_of

ORIGINAL = "def greet(name):\n    return 'hello ' + name\n"
FIXED = "def greet(name):\n    return f'Hello, {name}!'\n"
MCP_SERVER = REPO_ROOT / "tests" / "fakes" / "mcp_server.py"


def tool_names(body: dict) -> list[str]:
    return [t["name"] for t in body.get("tools") or []]


@needs_claude
def test_agent_edits_a_file_with_claude_code_tools_and_is_corrected_in_the_same_session(
        tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {"greet.py": ORIGINAL})
    flow = write(tmp_path, f"""
        workflow:
          name: claude-dev
          entry_point: developer
          runtime: {{provider: claude-agent-sdk, default_model: claude-sonnet-5}}
        agents:
          - name: developer
            working_dir: {repo}
            reasoning: {{effort: medium}}
            prompt: Make greet() polite.
            output:
              summary: {{type: string}}
            routes: [{{to: $end}}]
        output:
          summary: "{{{{ developer.output.summary }}}}"
    """)
    log = tmp_path / "events.jsonl"
    with FakeAnthropic() as an:
        an.script(
            message(tool_use("Write", {"file_path": str(repo / "greet.py"), "content": FIXED}),
                    usage=(1000, 40, 0, 0)),
            message(text("Done: greet.py is polite now."), usage=(1100, 20, 0, 0)),
            message(text('{"summary": "greet() is polite"}'), usage=(1200, 30, 0, 0)))
        proc = podium(tmp_path, "run", flow, "--events", log, env=runtime_env(tmp_path, {
            "ANTHROPIC_BASE_URL": an.url, "ANTHROPIC_API_KEY": "sk-ant-test"}))
        requests = an.message_requests()
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"summary": "greet() is polite"}
    assert (repo / "greet.py").read_text(encoding="utf-8") == FIXED
    (tool,) = events_of(log, "tool_called")
    assert (tool["tool"], tool["source"], tool["is_error"]) == ("Write", "claude-agent-sdk",
                                                                False)

    bodies = [r.body for r in requests]
    assert len(bodies) == 3
    first, _, correction = bodies
    assert {"Read", "Write", "Edit", "Bash"} <= set(tool_names(first))  # Claude Code's defaults
    assert first["model"] == "claude-sonnet-5"
    assert first["output_config"]["effort"] == "medium"
    assert str(repo) in text_of([first["system"], first["messages"]])  # the session's cwd
    assert requests[0].headers["x-api-key"] == "sk-ant-test"
    history = text_of(correction["messages"])
    assert "Make greet() polite." in history
    assert "Done: greet.py is polite now." in history
    assert "Your previous answer did not parse as JSON" in history
    (finished,) = [e for e in events_of(log, "step_finished") if e["step"] == "developer"]
    assert (finished["input_tokens"], finished["output_tokens"]) == (3300, 90)
    assert finished["priced"] is True


@needs_claude
def test_tools_filter_session_key_and_mcp_servers(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    flow = write(tmp_path, f"""
        workflow:
          name: claude-tools
          entry_point: none
          runtime:
            provider: claude-agent-sdk
            default_model: claude-sonnet-5
            working_dir: {work}
            mcp_servers:
              notes: {{command: {sys.executable}, args: ["{MCP_SERVER}"]}}
        agents:
          - name: none
            tools: []
            prompt: Say hi without tools.
            routes: [{{to: reader}}]
          - name: reader
            tools: [read_file, notes__*]
            prompt: Write a note.
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
    log = tmp_path / "events.jsonl"
    with FakeAnthropic() as an:
        an.script(
            message(text("hi")),
            message(tool_use("mcp__notes__write_note", {"name": "n.txt", "text": "noted"})),
            message(text("wrote it")),
            message(text("Remembered.")),
            message(text("PELICAN")))
        proc = podium(tmp_path, "run", flow, "--events", log, env=runtime_env(tmp_path, {
            "ANTHROPIC_BASE_URL": an.url, "ANTHROPIC_API_KEY": "k"}))
        none, reader, _, first, second = [r.body for r in an.message_requests()]
    assert proc.returncode == 0, proc.stderr
    # tools: [] -> no tool at all, not even the MCP servers' tools
    assert tool_names(none) == []
    # a list -> its Claude Code tools and the named MCP server, nothing else
    offered = set(tool_names(reader)) - {"DeferredToolPlaceholder"}
    assert offered == {"Read", "mcp__notes__add", "mcp__notes__echo", "mcp__notes__fail",
                       "mcp__notes__where", "mcp__notes__write_note"}
    # the MCP server was started by Claude Code in the working directory and really ran
    assert (work / "n.txt").read_text(encoding="utf-8") == "noted"
    (call,) = events_of(log, "tool_called")
    assert (call["tool"], call["source"]) == ("mcp__notes__write_note", "mcp:notes")
    # the same session_key continues one Claude Code session
    assert "Write a note." not in text_of(first["messages"])  # a fresh session for the key
    assert "Remember the word PELICAN." in text_of(second["messages"])
    assert "Remembered." in text_of(second["messages"])
    assert "Say hi without tools." not in text_of(second["messages"])


def test_a_missing_runtime_says_what_to_install(tmp_path: Path) -> None:
    flow = write(tmp_path, """
        workflow:
          name: needs-claude-code
          entry_point: a
          runtime: {provider: claude-agent-sdk, default_model: claude-sonnet-5}
        agents:
          - {name: a, prompt: hi, routes: [{to: $end}]}
    """)
    proc = podium(tmp_path, "run", flow, env=runtime_env(tmp_path, {
        "PODIUM_CLAUDE_CLI": str(tmp_path / "no-such-claude"),
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}))
    assert proc.returncode == 2  # before the first step: nothing was run
    err = " ".join(proc.stderr.split())
    assert ("provider 'claude-agent-sdk' needs the Claude Code CLI (npm "
            "@anthropic-ai/claude-code): run `make install-runtimes` (or `npm ci --prefix "
            "runtimes`)") in err
    assert "nothing was run" in err
    assert "no-such-claude" in err


@needs_claude
def test_session_key_continues_the_claude_code_session_after_a_restart(tmp_path: Path) -> None:
    """A resumed run is a new podium process: the session_key table under PODIUM_HOME names
    the Claude Code session, and Claude Code resumes its transcript."""
    import os

    from podium.providers.base import AgentRequest
    from podium.providers.claude_agent import create_claude_agent
    from podium.providers.settings import ProviderSettings

    with FakeAnthropic() as an:
        an.handler = lambda r: message(text("noted"))
        settings = ProviderSettings("claude-agent-sdk", environ=dict(
            os.environ, PODIUM_HOME=str(tmp_path / "home"), ANTHROPIC_BASE_URL=an.url,
            ANTHROPIC_API_KEY="k", CLAUDE_CONFIG_DIR=str(tmp_path / "claude-config")))
        for iteration, prompt in enumerate(["Remember PELICAN.", "Which word?"], 1):
            provider = create_claude_agent(settings)
            try:
                session = provider.open_session(AgentRequest(
                    "run-1", "agent", iteration, "claude-agent-sdk", "claude-sonnet-5", prompt,
                    tools=(), working_dir=str(tmp_path), session_key="memory", timeout=60))
                session.send(prompt)
                session.close()
            finally:
                provider.close()
        first, second = [r.body for r in an.message_requests()]
    assert text_of(first["messages"]).count("Remember PELICAN.") == 1
    assert "Remember PELICAN." in text_of(second["messages"])
    assert "noted" in text_of(second["messages"])
