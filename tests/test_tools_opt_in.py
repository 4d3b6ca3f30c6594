"""Tools are opt-in on the SDK providers (decision 0019): an agent on openai or claude is
offered the tools its workflow names (its own `tools:`, else the root `tools:` list) and no
workspace tool otherwise. Asserted on the requests the local wire servers received."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from fakes.openai_server import answer, call
from helpers_engine import run_cli, write
from helpers_providers import Servers, fake_servers, run_real_yaml
from podium.events.model import ToolCalled


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch) -> Iterator[Servers]:
    yield from fake_servers(monkeypatch)


def _offered(body: dict[str, object]) -> list[str]:
    tools = body.get("tools") or []
    assert isinstance(tools, list)
    return [t["function"]["name"] for t in tools]


def test_an_agent_that_names_no_tool_is_offered_none(tmp_path: Path, servers: Servers) -> None:
    """No `tools:` anywhere: the request carries no tool, and a tool call the model makes
    anyway runs nothing (no file appears in the working directory)."""
    work = tmp_path / "w"
    work.mkdir()
    servers.openai.script(
        answer(tool_calls=[call("write_file", {"path": "pwned.txt", "content": "x"})]),
        answer("done"))
    run = run_real_yaml(tmp_path, """
        workflow: {name: t, entry_point: a, runtime: {provider: openai}}
        agents:
          - {name: a, model: gpt-5-mini, working_dir: w, prompt: hi}
    """)
    first = servers.openai.chat_requests()[0].body
    assert "tools" not in first
    assert "tool_choice" not in first
    assert not (work / "pwned.txt").exists()
    assert run.exit_code == 0, run.error_text()
    (refused,) = run.of(ToolCalled)
    assert (refused.tool, refused.is_error) == ("write_file", True)
    assert "no tool 'write_file' is available" in refused.output


def test_claude_agent_that_names_no_tool_is_offered_none(tmp_path: Path,
                                                         servers: Servers) -> None:
    from fakes.anthropic_server import message, text

    servers.anthropic.script(message(text("fine")))
    run = run_real_yaml(tmp_path, """
        workflow: {name: t, entry_point: a, runtime: {provider: claude}}
        agents:
          - {name: a, model: claude-sonnet-5, prompt: hi}
    """)
    assert run.exit_code == 0, run.error_text()
    (body,) = (r.body for r in servers.anthropic.message_requests())
    assert "tools" not in body


def test_the_root_list_is_inherited(tmp_path: Path, servers: Servers) -> None:
    servers.openai.script(answer("ok"))
    run = run_real_yaml(tmp_path, """
        workflow: {name: t, entry_point: a, runtime: {provider: openai}}
        tools: [read_file, search]
        agents:
          - {name: a, model: gpt-5-mini, prompt: hi}
    """)
    assert run.exit_code == 0, run.error_text()
    assert _offered(servers.openai.chat_requests()[0].body) == ["read_file", "search"]


def test_an_agents_own_list_overrides_the_root_list(tmp_path: Path, servers: Servers) -> None:
    servers.openai.script(answer("ok"), answer("ok"))
    run = run_real_yaml(tmp_path, """
        workflow: {name: t, entry_point: a, runtime: {provider: openai}}
        tools: [read_file, search]
        agents:
          - {name: a, model: gpt-5-mini, tools: [run_command], prompt: hi, routes: [{to: b}]}
          - {name: b, model: gpt-5-mini, tools: [], prompt: hi}
    """)
    assert run.exit_code == 0, run.error_text()
    first, second = (r.body for r in servers.openai.chat_requests())
    assert _offered(first) == ["run_command"]
    assert "tools" not in second


# --------------------------------------------------------------------------- validate

LISTED = """
workflow: {name: t, entry_point: dev, runtime: {provider: openai, working_dir: base}}
agents:
  - {name: dev, model: gpt-5-mini, working_dir: repo, prompt: hi, routes: [{to: reader}],
     tools: [read_file, write_file, run_command]}
  - {name: reader, model: gpt-5-mini, prompt: hi, routes: [{to: helper}]}
  - {name: helper, provider: copilot, prompt: hi, routes: [{to: quiet}]}
  - {name: quiet, provider: copilot, tools: [], prompt: hi, routes: [{to: shell}]}
  - {name: shell, provider: claude-agent-sdk, tools: [run_command], prompt: hi}
"""


def test_validate_lists_who_can_write_or_run_and_warns_for_unnamed_tools(
        tmp_path: Path) -> None:
    flow = write(tmp_path, LISTED, "flow.yaml")
    proc = run_cli(tmp_path / "home", "validate", flow, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    warnings = [ln for ln in lines if ": warning: " in ln]
    assert len(warnings) == 1, proc.stdout
    assert warnings[0].startswith("flow.yaml:6:5: agents[2]: warning: agent 'helper' gets the "
                                  "default tools of provider 'copilot', which write files and "
                                  "run commands in base (bash, create, edit, write_bash)")
    head = lines.index("flow.yaml: agents that can write files or run commands:")
    assert lines[head + 1:head + 4] == [
        "  dev (openai): write_file, run_command in repo",
        "  helper (copilot): the runtime's default tools (bash, create, edit, write_bash) "
        "in base",
        "  shell (claude-agent-sdk): run_command in base"]
    assert lines[-1] == "flow.yaml: valid: 1 warning"
    strict = run_cli(tmp_path / "home", "validate", "--strict", flow, cwd=tmp_path)
    assert strict.returncode == 2


def test_validate_json_has_the_tool_access(tmp_path: Path) -> None:
    flow = write(tmp_path, LISTED, "flow.yaml")
    proc = run_cli(tmp_path / "home", "validate", "--format", "json", flow, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (report,) = json.loads(proc.stdout)["files"]
    assert [(a["agent"], a["named"]) for a in report["tool_access"]] == [
        ("dev", True), ("helper", False), ("shell", True)]
    assert report["tool_access"][0] == {"agent": "dev", "provider": "openai",
                                        "tools": ["write_file", "run_command"],
                                        "working_dir": "repo", "named": True}
    codes = [d["code"] for d in report["diagnostics"]]
    assert codes == ["unnamed-tools"]


def test_validate_says_nothing_of_agents_without_such_tools(tmp_path: Path) -> None:
    flow = write(tmp_path, """
        workflow: {name: t, entry_point: a, runtime: {provider: openai}}
        agents:
          - {name: a, model: gpt-5-mini, prompt: hi}
    """, "flow.yaml")
    proc = run_cli(tmp_path / "home", "validate", flow, cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (0, "flow.yaml: valid\n")
