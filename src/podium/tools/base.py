"""Tools as the model sees them (name, description, JSON Schema of the arguments) and the
Toolbox one agent execution may call: it caps what a tool returns (`runtime.tool_output`: an
oversized result is cut to `max_chars` and, with `spill_to_file`, written whole to a file
whose path the model gets) and turns a tool's failure into an error result the model can
read, never into a crash of the run."""

from __future__ import annotations

import os
import re
import secrets
import stat
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from podium import jsontext
from podium.records import record

DEFAULT_MAX_CHARS = 50_000


@record(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON Schema of an object


@record(frozen=True)
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


TRUNCATED = "[output truncated:"
GENERIC_HINT = "The full output was truncated; refine the tool arguments to return less data."
FILE_HINT = ("The full output was saved to a file; read it in parts with your file tools "
             "(read_file with offset and limit) if you need more.")


@record(frozen=True)
class OutputLimit:
    """`runtime.tool_output` for one toolbox: results longer than `max_chars` are cut (unless
    not `enabled`), and written whole into `spill_dir` first when it is set."""

    max_chars: int = DEFAULT_MAX_CHARS
    enabled: bool = True
    spill_dir: Path | None = None
    # the run's secrets out of what is spilled (a file on disk, which the run's store and
    # logs never see to redact): Redactor.text
    redact: Callable[[str], str] | None = None


def spill_dir_for(setting: str | None, spill: bool = True) -> Path | None:
    """Where oversized results go: `spill_dir` (relative to the current directory), by default
    <tmp>/podium/tool-output; None when `spill_to_file` is off."""
    if not spill:
        return None
    if setting and setting.strip():
        return Path(os.path.abspath(os.path.expanduser(setting.strip())))
    return Path(tempfile.gettempdir()) / "podium" / "tool-output"


def _spill(folder: Path, tool: str, text: str) -> Path | None:
    """Write `text` to a new private file in `folder`; None when that cannot be done."""
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        if stat.S_IMODE(folder.stat().st_mode) & 0o077:
            os.chmod(folder, 0o700)  # it may hold secrets a tool printed
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", tool)[:60]
        path = folder / f"tool-{safe}-{secrets.token_hex(4)}.txt"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as f:
            f.write(text)
        return path
    except OSError:
        return None


class Toolbox:
    """The tools offered to one agent execution, by name."""

    def __init__(self, tools: Sequence[Tool], max_chars: int = DEFAULT_MAX_CHARS, *,
                 limit: OutputLimit | None = None) -> None:
        self.tools = {t.spec.name: t for t in tools}
        self.limit = limit if limit is not None else OutputLimit(max_chars)
        self.max_chars = self.limit.max_chars
        self.spilled: list[Path] = []  # files written for this execution's long results

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
        return ToolResult(self._limited(name, result.text), result.is_error)

    def _limited(self, name: str, text: str) -> str:
        """`text` as the model gets it (Conductor's marker, with the spill file's path)."""
        limit = self.limit
        if not limit.enabled or len(text) <= limit.max_chars:
            return text
        spilled = limit.redact(text) if limit.redact is not None else text
        path = _spill(limit.spill_dir, name, spilled) if limit.spill_dir is not None else None
        kept = f"{len(text)} chars -> {limit.max_chars} kept"
        if path is None:
            return f"{text[:limit.max_chars]}\n\n{TRUNCATED} {kept}. {GENERIC_HINT}]"
        self.spilled.append(path)
        readable = "read_file" in self.tools or "run_command" in self.tools
        return (f"{text[:limit.max_chars]}\n\n{TRUNCATED} {kept}; full output saved to: "
                f"{path}. {FILE_HINT if readable else GENERIC_HINT}]")
