"""Which agents can write files or run commands, with which tools and where: what `validate`
lists, and the warning for an agent that gets such tools without naming them.

On the SDK providers (openai, azure, claude) an agent has only the tools its workflow names
(its own `tools:`, else the root list; tools/select.py): write_file, edit_file and
run_command are the ones that write or run. An agent runtime (copilot, claude-agent-sdk) with
no list keeps its CLI's default tools, which include a shell and file edits; with a list it
gets the runtime tools that stand for the named ones, or the runtime's own tools named.
No SDK is imported.
"""

from __future__ import annotations

from typing import Any

from podium.language.diagnostics import KeyPath
from podium.language.model import AgentStep, WorkflowFile
from podium.providers.catalog import RUNTIME_CAPABILITIES, RUNTIME_TOOLS, canonical, info
from podium.records import record

WORKSPACE_WRITE_OR_RUN = ("write_file", "edit_file", "run_command")
# each runtime's own tools that write files or run commands (providers/catalog.py's names)
RUNTIME_WRITE_OR_RUN: dict[str, tuple[str, ...]] = {
    "copilot": ("bash", "create", "edit", "write_bash"),
    "claude-agent-sdk": ("Bash", "Edit", "MultiEdit", "NotebookEdit", "Write"),
}
HERE = "the current directory"


@record(frozen=True)
class Access:
    """One agent that can write files or run commands."""

    agent: str
    provider: str
    tools: tuple[str, ...]  # the workflow's names, or the runtime's own for its defaults
    working_dir: str  # as written (a template stays one), or HERE
    named: bool  # False: the runtime's defaults, which the workflow does not name
    path: KeyPath

    def describe(self) -> str:
        what = (", ".join(self.tools) if self.named
                else f"the runtime's default tools ({', '.join(self.tools)})")
        return f"{self.agent} ({self.provider}): {what} in {self.working_dir}"

    def to_json(self) -> dict[str, Any]:
        return {"agent": self.agent, "provider": self.provider, "tools": list(self.tools),
                "working_dir": self.working_dir, "named": self.named}


def _agents(wf: WorkflowFile) -> list[tuple[KeyPath, AgentStep]]:
    out: list[tuple[KeyPath, AgentStep]] = [
        (("agents", i), s) for i, s in enumerate(wf.agents) if isinstance(s, AgentStep)]
    out += [(("for_each", i, "agent"), g.agent) for i, g in enumerate(wf.for_each)
            if isinstance(g.agent, AgentStep)]
    return out


def tool_access(wf: WorkflowFile) -> list[Access]:
    """Every agent that can write files or run commands, in the file's order."""
    runtime = wf.workflow.runtime
    out: list[Access] = []
    for path, step in _agents(wf):
        provider = canonical(step.provider or runtime.provider_name)
        if info(provider) is None:
            continue  # an unknown provider is validate's error already
        names = step.wanted_tools(wf.tools)
        if provider in RUNTIME_CAPABILITIES:
            own = RUNTIME_WRITE_OR_RUN.get(provider, ())
            if names is None:
                tools, named = own, False
            else:
                mapped = RUNTIME_TOOLS.get(provider, {})
                tools = tuple(n for n in names if n in own or (
                    n in mapped and set(mapped[n]) & set(own)))
                named = True
        else:
            tools = tuple(n for n in names or () if n in WORKSPACE_WRITE_OR_RUN)
            named = True
        if tools:
            where = step.working_dir or runtime.working_dir or HERE
            out.append(Access(step.name, provider, tools, where, named, path))
    return out


def unnamed_warning(access: Access) -> tuple[str, str]:
    """The warning for an agent given such tools without naming them, and its hint."""
    return (f"agent '{access.agent}' gets the default tools of provider '{access.provider}', "
            f"which write files and run commands in {access.working_dir} "
            f"({', '.join(access.tools)}), without naming them",
            "name the tools it needs in its tools: list, or tools: [] for none")
