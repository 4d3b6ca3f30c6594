"""MCP servers as agent tools, through the official MCP SDK, against a real MCP server process
(tests/fakes/mcp_server.py) over stdio and over streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fakes.openai_server import answer, call
from helpers_engine import process_gone, wait_until
from helpers_providers import Servers, fake_servers, run_real_yaml
from podium.events.model import ToolCalled
from podium.language.model import McpServerConfig
from podium.tools.base import ToolError
from podium.tools.mcp import McpHub


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch) -> Iterator[Servers]:
    yield from fake_servers(monkeypatch)


SERVER = Path(__file__).resolve().parent / "fakes" / "mcp_server.py"


def stdio(**extra: object) -> McpServerConfig:
    return McpServerConfig(type="stdio", command=sys.executable, args=[str(SERVER)], **extra)


@pytest.fixture
def http_server() -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, str(SERVER), "http"], stdout=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    port = proc.stdout.readline().strip()
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)
        proc.stdout.close()


def test_stdio_server_tools_run_in_the_agents_directory(tmp_path: Path) -> None:
    hub = McpHub({"notes": stdio(tools=["add", "where", "write_note", "fail"])})
    try:
        tools = {t.spec.name: t for t in hub.tools("notes", str(tmp_path))}
        assert sorted(tools) == ["notes__add", "notes__fail", "notes__where", "notes__write_note"]
        assert tools["notes__add"].spec.parameters["required"] == ["a", "b"]
        assert tools["notes__add"].source == "mcp:notes"
        assert tools["notes__add"].run({"a": 2, "b": 3}).text == "5"
        assert tools["notes__where"].run({}).text == str(tmp_path)
        failed = tools["notes__fail"].run({})
        assert failed.is_error
        assert "the note store is down" in failed.text
        # one connection per (server, directory): the same server process serves again
        assert hub.tools("notes", str(tmp_path))[0] is tools["notes__add"]
    finally:
        hub.close()


def test_http_server_tools(http_server: str) -> None:
    hub = McpHub({"remote": McpServerConfig(type="http", url=http_server,
                                            headers={"X-Team": "qa"})})
    try:
        tools = {t.spec.name: t for t in hub.tools("remote")}
        assert "remote__echo" in tools
        assert tools["remote__echo"].run({"text": "over http"}).text == "over http"
    finally:
        hub.close()


def test_a_server_that_cannot_start_is_reported(tmp_path: Path) -> None:
    hub = McpHub({"broken": McpServerConfig(command=sys.executable,
                                            args=["-c", "import sys; sys.exit('no db')"])})
    try:
        with pytest.raises(ToolError, match=r"MCP server 'broken'.*failed"):
            hub.tools("broken", str(tmp_path))
    finally:
        hub.close()


def test_the_run_closes_its_servers(tmp_path: Path, servers: Servers) -> None:
    (tmp_path / "w").mkdir()
    servers.openai.script(
        answer(tool_calls=[call("notes__write_note", {"name": "n.txt", "text": "hi"}),
                           call("notes__where", {})]),
        answer("done"))
    run = run_real_yaml(tmp_path, f"""
        workflow:
          name: t
          entry_point: a
          runtime:
            provider: openai
            mcp_servers:
              notes: {{command: "{sys.executable}", args: ["{SERVER}"]}}
        agents:
          - {{name: a, model: gpt-5-mini, working_dir: w, prompt: "take a note"}}
    """)
    assert run.exit_code == 0, run.error_text()
    # omitted tools (no root list): every tool of every server, as in Conductor, and no
    # workspace tool (they are opt-in)
    offered = [t["function"]["name"] for t in servers.openai.chat_requests()[0].body["tools"]]
    assert all(name.startswith("notes__") for name in offered), offered
    assert {"notes__add", "notes__echo", "notes__write_note", "notes__fail"} <= set(offered)
    # the MCP tool really ran, in the agent's working directory
    assert (tmp_path / "w" / "n.txt").read_text() == "hi"
    events = run.of(ToolCalled)
    assert [(e.tool, e.source) for e in events] == [("notes__write_note", "mcp:notes"),
                                                     ("notes__where", "mcp:notes")]
    assert events[1].output == str(tmp_path / "w")
    # and the run stopped the server process when it ended
    pids = [int(p) for p in subprocess.run(["pgrep", "-f", str(SERVER)], capture_output=True,
                                           text=True, check=False).stdout.split()]
    assert wait_until(lambda: all(process_gone(p) for p in pids))


def test_a_tools_list_narrows_to_named_mcp_tools(tmp_path: Path, servers: Servers) -> None:
    servers.openai.script(answer(tool_calls=[call("notes__add", {"a": 40, "b": 2})]),
                          answer("42"))
    run = run_real_yaml(tmp_path, f"""
        workflow:
          name: t
          entry_point: a
          runtime:
            provider: openai
            mcp_servers:
              notes: {{command: "{sys.executable}", args: ["{SERVER}"]}}
        agents:
          - {{name: a, model: gpt-5-mini, tools: [notes__add, read_file], prompt: "add"}}
    """)
    assert run.exit_code == 0, run.error_text()
    first, second = (r.body for r in servers.openai.chat_requests())
    assert [t["function"]["name"] for t in first["tools"]] == ["notes__add", "read_file"]
    assert second["messages"][-1] == {"role": "tool", "content": "42",
                                      "tool_call_id": second["messages"][1]["tool_calls"][0]["id"]}
