"""Which tools an agent's model is offered (podium's semantics of `tools:`):

- omitted: the workflow's root `tools:` list when it has one, else every tool of every
  declared MCP server (as Conductor) and no workspace tool: tools that read, write or run
  commands are opt-in (decision 0019);
- `[]`: no tool at all (the request to the model carries none);
- a list: exactly those names: workspace tool names (read_file, list_dir, search, write_file,
  edit_file, run_command) and MCP tools as `<server>__<tool>` (`<server>__*` for all of one
  server's tools).
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable
from typing import Any

from podium.language.model import McpServerConfig
from podium.tools.base import DEFAULT_MAX_CHARS, OutputLimit, Tool, Toolbox, ToolError
from podium.tools.mcp import SEP, McpHub
from podium.tools.workspace import WORKSPACE_TOOL_NAMES, Workspace


def build_toolbox(names: list[str] | None, working_dir: str,
                  servers: dict[str, McpServerConfig], hub: Callable[[], McpHub],
                  max_chars: int = DEFAULT_MAX_CHARS, *,
                  run_id: str | None = None,
                  hidden: frozenset[str] = frozenset(),
                  limit: OutputLimit | None = None,
                  workspaces: dict[Any, Workspace] | None = None) -> Toolbox | None:
    """The toolbox for `names` (see the module doc); None when the agent gets no tool.
    `limit` (runtime.tool_output) replaces `max_chars`; read_file may read the files it
    spills. `workspaces` keeps the run's workspaces for its next executions: a folder is
    resolved (symbolic links followed) when the run first works in it, and each execution
    checks that it is still there (a link re-pointed meanwhile is not followed again).
    Raises ToolError for an unknown name or a server that cannot be reached."""
    if names is not None and not names:
        return None
    limit = limit if limit is not None else OutputLimit(max_chars)
    chosen: list[Tool] = []
    if names is None:
        for server in servers:
            chosen += hub().tools(server, working_dir)
        return Toolbox(chosen, limit=limit) if chosen else None
    key = (working_dir, run_id, hidden, limit.spill_dir)
    workspace = workspaces.get(key) if workspaces is not None else None
    if workspace is None or not os.path.isdir(working_dir):
        if workspaces is not None:
            workspaces.pop(key, None)
        # the commands it runs carry PODIUM_RUN_ID, and never see `hidden` (the run's secrets)
        workspace = Workspace(working_dir, run_id=run_id, hidden=hidden,
                              readable=(limit.spill_dir,) if limit.spill_dir else ())
        if workspaces is not None:
            workspaces[key] = workspace
    for name in dict.fromkeys(names):
        if name in WORKSPACE_TOOL_NAMES:
            chosen += workspace.tools((name,))
            continue
        server, sep, remote = name.partition(SEP)
        if not sep or server not in servers:
            raise ToolError(f"unknown tool '{name}': tools are {', '.join(WORKSPACE_TOOL_NAMES)}"
                            " or <server>__<tool> for a server in runtime.mcp_servers")
        listed = hub().tools(server, working_dir)
        found = [t for t in listed if fnmatch.fnmatchcase(t.remote_name, remote)]
        if not found:
            raise ToolError(f"MCP server '{server}' has no tool '{remote}' (it has: "
                            f"{', '.join(t.remote_name for t in listed) or 'none'})")
        chosen += found
    return Toolbox(chosen, limit=limit)
