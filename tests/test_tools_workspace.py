"""podium's workspace tools: what they do, and that they stay inside the working directory
(no escape by `..`, absolute paths or symlinks), cap their output and kill runaway commands.
Plus the Toolbox (errors become results for the model) and the `tools:` selection rules."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from podium.language.model import AgentStep
from podium.tools.base import Toolbox, ToolError
from podium.tools.mcp import McpHub
from podium.tools.select import build_toolbox
from podium.tools.workspace import (
    COMMAND_OUTPUT_BYTES,
    WORKSPACE_TOOL_NAMES,
    Workspace,
)


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    root = tmp_path / "work"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_text("def f():\n    return 1\n# TODO: more\n")
    (root / "README.md").write_text("hello\nworld\n")
    (tmp_path / "secret.txt").write_text("outside\n")
    return Workspace(root)


def box(ws: Workspace) -> Toolbox:
    return Toolbox(ws.tools(), max_chars=5000)


def test_read_list_search(ws: Workspace) -> None:
    tb = box(ws)
    assert tb.call("read_file", {"path": "pkg/mod.py"}).text == \
        "1| def f():\n2|     return 1\n3| # TODO: more"
    assert tb.call("read_file", {"path": "pkg/mod.py", "offset": 2, "limit": 1}).text == \
        "2|     return 1"
    assert tb.call("list_dir", {}).text == "README.md (12 bytes)\npkg/"
    assert tb.call("list_dir", {"depth": 2}).text.splitlines()[-1] == "pkg/mod.py (35 bytes)"
    assert tb.call("search", {"pattern": "todo", "ignore_case": True}).text == \
        "pkg/mod.py:3: # TODO: more"
    assert tb.call("search", {"pattern": "hello", "glob": "*.py"}).text == "no matches"


def test_write_and_edit(ws: Workspace) -> None:
    tb = box(ws)
    assert tb.call("write_file", {"path": "new/dir/a.txt", "content": "x = 1\nx = 1\n"}).text \
        == "wrote 12 bytes to new/dir/a.txt"
    ambiguous = tb.call("edit_file", {"path": "new/dir/a.txt", "old_text": "x = 1",
                                      "new_text": "x = 2"})
    assert ambiguous.is_error
    assert "occurs 2 times" in ambiguous.text
    done = tb.call("edit_file", {"path": "new/dir/a.txt", "old_text": "x = 1",
                                 "new_text": "x = 2", "replace_all": True})
    assert done.text == "replaced 2 occurrence(s) in new/dir/a.txt"
    assert (ws.root / "new/dir/a.txt").read_text() == "x = 2\nx = 2\n"
    missing = tb.call("edit_file", {"path": "README.md", "old_text": "nope", "new_text": "x"})
    assert missing.is_error
    assert "was not found" in missing.text


@pytest.mark.parametrize("path", ["../secret.txt", "pkg/../../secret.txt", "/etc/passwd"])
def test_paths_cannot_leave_the_working_directory(ws: Workspace, path: str) -> None:
    tb = box(ws)
    for tool, args in (("read_file", {"path": path}),
                       ("write_file", {"path": path, "content": "pwned"}),
                       ("list_dir", {"path": path}),
                       ("search", {"pattern": "x", "path": path})):
        result = tb.call(tool, args)
        assert result.is_error, tool
        assert "outside the working directory" in result.text
    assert (ws.root.parent / "secret.txt").read_text() == "outside\n"


def test_symlinks_pointing_outside_are_refused(ws: Workspace) -> None:
    (ws.root / "link.txt").symlink_to(ws.root.parent / "secret.txt")
    (ws.root / "linkdir").symlink_to(ws.root.parent)
    (ws.root / "inside.txt").symlink_to(ws.root / "README.md")
    tb = box(ws)
    assert "outside the working directory" in tb.call("read_file", {"path": "link.txt"}).text
    assert tb.call("write_file", {"path": "link.txt", "content": "pwned"}).is_error
    assert tb.call("write_file", {"path": "linkdir/x.txt", "content": "pwned"}).is_error
    assert (ws.root.parent / "secret.txt").read_text() == "outside\n"
    assert not (ws.root.parent / "x.txt").exists()
    assert tb.call("read_file", {"path": "inside.txt"}).text == "1| hello\n2| world"
    listing = tb.call("list_dir", {}).text
    assert "link.txt -> (outside the working directory)" in listing
    assert tb.call("search", {"pattern": "outside"}).text == "no matches"


def test_run_command_in_the_working_directory(ws: Workspace,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    tb = box(ws)
    out = tb.call("run_command", {"command": "pwd; echo oops >&2; echo key=$OPENAI_API_KEY; "
                                             "exit 3"}).text
    assert out == f"exit code: 3\nstdout:\n{ws.root}\nkey=\n\nstderr:\noops\n"


def test_run_command_timeout_kills_the_process_group(ws: Workspace) -> None:
    tb = box(ws)
    started = time.monotonic()
    out = tb.call("run_command", {"command": "sleep 30 & echo $! > child.pid; wait",
                                  "timeout": 1}).text
    assert out.startswith("timed out after 1s (process group killed)")
    assert time.monotonic() - started < 10
    child = int((ws.root / "child.pid").read_text())
    stat = Path(f"/proc/{child}/stat")
    assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")


def test_command_output_is_capped(ws: Workspace) -> None:
    out = Workspace(ws.root).run_command({"command": "head -c 500000 /dev/zero | tr '\\0' a"})
    assert f"{500000 - COMMAND_OUTPUT_BYTES} more bytes cut by podium" in out
    capped = Toolbox(ws.tools(), max_chars=1000).call("run_command",
                                                      {"command": "seq 1 10000"})
    assert len(capped.text) < 1200
    assert "[output truncated: 48924 chars -> 1000 kept. The full output" in capped.text


def test_toolbox_turns_failures_into_results(ws: Workspace) -> None:
    tb = box(ws)
    assert tb.call("nope", {}).text.startswith("unknown tool 'nope'; the tools are: read_file")
    assert "not valid JSON" in tb.call("read_file", "{bad").text
    assert tb.call("read_file", '{"path": "README.md"}').text == "1| hello\n2| world"
    assert tb.call("read_file", {"path": "pkg"}).is_error
    assert tb.call("read_file", {"path": 3}).text == "'path' must be a path"
    assert tb.call("read_file", {"path": "README.md", "limit": "x"}).text == \
        "'limit' must be an integer"
    (ws.root / "blob.bin").write_bytes(b"\x00\x01\x02")
    assert "binary" in tb.call("read_file", {"path": "blob.bin"}).text


def test_tools_selection_rules(ws: Workspace) -> None:
    def hub() -> McpHub:
        raise AssertionError("no MCP server is needed here")

    omitted, none = AgentStep(name="a"), AgentStep(name="a", tools=[])
    assert omitted.wanted_tools([]) is None
    assert omitted.wanted_tools(["read_file"]) == ["read_file"]
    assert none.wanted_tools(["read_file"]) == []
    assert build_toolbox([], str(ws.root), {}, hub) is None
    # omitted, with no root list and no MCP server: no tool at all (tools are opt-in)
    assert build_toolbox(None, str(ws.root), {}, hub) is None
    every = build_toolbox(list(WORKSPACE_TOOL_NAMES), str(ws.root), {}, hub)
    assert every is not None
    assert every.names == WORKSPACE_TOOL_NAMES
    some = build_toolbox(["search", "read_file"], str(ws.root), {}, hub)
    assert some is not None
    assert some.names == ("search", "read_file")
    with pytest.raises(ToolError, match="unknown tool 'web__search'"):
        build_toolbox(["web__search"], str(ws.root), {}, hub)


def test_a_runs_workspace_is_reused_while_its_folder_is_there(tmp_path: Path) -> None:
    """Executions of one run share a workspace (its folder resolved once), each with a
    toolbox of its own; a folder gone since is reported, and one there again is resolved
    again."""
    root = tmp_path / "work"
    root.mkdir()
    link = tmp_path / "link"
    link.symlink_to(root)

    def hub() -> McpHub:
        raise AssertionError("no MCP server is declared")

    kept: dict[object, Workspace] = {}
    first = build_toolbox(["read_file"], str(link), {}, hub, run_id="r1", workspaces=kept)
    second = build_toolbox(["read_file"], str(link), {}, hub, run_id="r1", workspaces=kept)
    assert first is not None
    assert second is not None
    assert first is not second
    (ws_first,) = kept.values()
    assert ws_first.root == root.resolve()
    assert build_toolbox(["read_file"], str(link), {}, hub, run_id="r2",
                         workspaces=kept) is not None
    assert len(kept) == 2  # another run's (or another folder's) workspace is its own
    link.unlink()
    with pytest.raises(ToolError, match="does not exist"):
        build_toolbox(["read_file"], str(link), {}, hub, run_id="r1", workspaces=kept)
    other = tmp_path / "other"
    other.mkdir()
    link.symlink_to(other)
    build_toolbox(["read_file"], str(link), {}, hub, run_id="r1", workspaces=kept)
    assert kept[next(k for k in kept if k[1] == "r1")].root == other.resolve()


def test_working_dir_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="does not exist"):
        Workspace(tmp_path / "missing")
    assert os.path.isdir(tmp_path)
