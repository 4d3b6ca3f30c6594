"""Tools as the model sees them (name, description, JSON Schema of the arguments) and the
Toolbox one agent execution may call: it caps what a tool returns and turns a tool's failure
into an error result the model can read, never into a crash of the run."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from podium import jsontext

DEFAULT_MAX_CHARS = 50_000


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON Schema of an object


@dataclass(frozen=True)
class ToolResult:
    text: str
    is_error: bool = False


class ToolError(Exception):
    """A tool refused or failed; the message goes back to the model."""


class Tool(Protocol):
    @property
    def spec(self) -> ToolSpec: ...

    @property
    def source(self) -> str: ...  # "workspace" or "mcp:<server>"

    def run(self, arguments: dict[str, Any]) -> ToolResult: ...


def cap_text(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    cut = len(text) - max_chars
    return text[:max_chars] + f"\n[... {cut} more characters cut by podium]"


class Toolbox:
    """The tools offered to one agent execution, by name."""

    def __init__(self, tools: Sequence[Tool], max_chars: int = DEFAULT_MAX_CHARS) -> None:
        self.tools = {t.spec.name: t for t in tools}
        self.max_chars = max_chars

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(t.spec for t in self.tools.values())

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.tools)

    def __bool__(self) -> bool:
        return bool(self.tools)

    def source(self, name: str) -> str | None:
        tool = self.tools.get(name)
        return tool.source if tool is not None else None

    def call(self, name: str, arguments: Any) -> ToolResult:
        """Run tool `name`; any failure becomes an error result for the model."""
        tool = self.tools.get(name)
        if tool is None:
            return ToolResult(f"unknown tool '{name}'; the tools are: "
                              f"{', '.join(self.tools) or 'none'}", True)
        if isinstance(arguments, str):
            try:
                arguments = jsontext.loads(arguments) if arguments.strip() else {}
            except jsontext.JsonLimitError as exc:
                return ToolResult(f"the arguments of '{name}' are JSON that {exc}", True)
            except ValueError as exc:
                return ToolResult(f"the arguments of '{name}' are not valid JSON: {exc}", True)
        else:  # already parsed by the provider's SDK: bound its depth all the same
            try:
                jsontext.check_depth(arguments)
            except jsontext.JsonLimitError as exc:
                return ToolResult(f"the arguments of '{name}' are JSON that {exc}", True)
        if not isinstance(arguments, dict):
            return ToolResult(f"the arguments of '{name}' must be a JSON object", True)
        try:
            result = tool.run(arguments)
        except ToolError as exc:
            result = ToolResult(str(exc), True)
        except (OSError, ValueError, TypeError, KeyError) as exc:
            result = ToolResult(f"{name} failed: {type(exc).__name__}: {exc}", True)
        return ToolResult(cap_text(result.text, self.max_chars), result.is_error)
