"""podium's workspace tools: read, list, search, write and edit files, and run a command, all
inside an agent's working directory.

Every path is resolved (symlinks followed, `..` collapsed) and must stay inside the working
directory, so neither `../x` nor a symlink pointing outside reaches another file. Outputs are
capped. A command runs as the leader of its own process group: when its shell exits, or at its
timeout, the whole group is killed, so what it started in the background ends with the call
(and with podium: tools/processes.py). This confines the tools' own file access; it is NOT a
sandbox: a command runs with podium's user rights and can do anything that user can
(docs/decisions/0007-providers.md).
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from podium.events.redact import KEY_VARIABLES
from podium.records import record
from podium.tools import processes
from podium.tools.base import ToolError, ToolResult, ToolSpec
from podium.tools.processes import Captured, Command

READ_MAX_BYTES = 2_000_000
SEARCH_MAX_FILE = 2_000_000
SEARCH_MAX_MATCHES = 200
SEARCH_SECONDS = 10.0
LIST_MAX_ENTRIES = 1000
COMMAND_TIMEOUT = 120.0
COMMAND_MAX_TIMEOUT = 600.0
COMMAND_OUTPUT_BYTES = 200_000
SKIP_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv",
                       ".mypy_cache", ".pytest_cache", ".ruff_cache"})
# podium's own credentials are not handed to commands the model runs (nor the workflow's
# declared secrets: Workspace(hidden=...))
HIDDEN_ENV = frozenset(KEY_VARIABLES)


def _obj(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required,
            "additionalProperties": False}


_STR = {"type": "string"}
_INT = {"type": "integer"}

SPECS: dict[str, ToolSpec] = {s.name: s for s in (
    ToolSpec("read_file", "Read a text file of the working directory. Lines are numbered; use "
             "offset (first line, 1-based) and limit (number of lines) for long files.",
             _obj({"path": _STR, "offset": _INT, "limit": _INT}, ["path"])),
    ToolSpec("list_dir", "List a directory of the working directory (directories end with /). "
             "depth 1 lists only its entries; up to 5 levels.",
             _obj({"path": _STR, "depth": _INT}, [])),
    ToolSpec("search", "Search files for a regular expression (Python syntax); returns "
             "path:line: text for each match. glob filters file names (e.g. *.py).",
             _obj({"pattern": _STR, "path": _STR, "glob": _STR,
                   "ignore_case": {"type": "boolean"}}, ["pattern"])),
    ToolSpec("write_file", "Create or overwrite a file with the given content (parent "
             "directories are created).", _obj({"path": _STR, "content": _STR},
                                               ["path", "content"])),
    ToolSpec("edit_file", "Replace old_text with new_text in a file. old_text must occur "
             "exactly once unless replace_all is true.",
             _obj({"path": _STR, "old_text": _STR, "new_text": _STR,
                   "replace_all": {"type": "boolean"}}, ["path", "old_text", "new_text"])),
    ToolSpec("run_command", "Run a shell command (bash -c) in the working directory; returns "
             "its exit code, stdout and stderr. timeout in seconds (default 120, max 600).",
             _obj({"command": _STR, "timeout": {"type": "number"}}, ["command"])),
)}

WORKSPACE_TOOL_NAMES: tuple[str, ...] = tuple(SPECS)


def _arg(args: dict[str, Any], name: str, kind: type | tuple[type, ...],
         default: Any = None) -> Any:
    """Argument `name` of type `kind` (bools are not numbers), or `default` when absent."""
    value = args.get(name)
    if value is None:
        return default
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        label = "a string" if kind is str else "an integer" if kind is int else "a number"
        raise ToolError(f"'{name}' must be {label}")
    return value


@record
class WorkspaceTool:
    """One workspace tool bound to a working directory."""

    spec: ToolSpec
    fn: Callable[[dict[str, Any]], str]
    source: str = "workspace"

    def run(self, arguments: dict[str, Any]) -> ToolResult:
        return ToolResult(self.fn(arguments))


class Workspace:
    """The working directory of one agent execution and the tools that act inside it."""

    def __init__(self, root: str | Path, *, command_timeout: float = COMMAND_TIMEOUT,
                 run_id: str | None = None, hidden: frozenset[str] = frozenset(),
                 readable: tuple[Path, ...] = ()) -> None:
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise ToolError(f"working directory {self.root} does not exist")
        # folders read_file may read besides the working directory (where the toolbox
        # spills long tool results: tools/base.py)
        self.readable = tuple(Path(r).resolve(strict=False) for r in readable)
        self.command_timeout = command_timeout
        self.run_id = run_id  # commands get it as PODIUM_RUN_ID
        self.hidden = HIDDEN_ENV | hidden  # variables commands never see

    def tools(self, names: tuple[str, ...] = WORKSPACE_TOOL_NAMES) -> list[WorkspaceTool]:
        fns: dict[str, Callable[[dict[str, Any]], str]] = {
            "read_file": self.read_file, "list_dir": self.list_dir, "search": self.search,
            "write_file": self.write_file, "edit_file": self.edit_file,
            "run_command": self.run_command}
        return [WorkspaceTool(SPECS[n], fns[n]) for n in names]

    # ------------------------------------------------------------------ paths

    def resolve(self, raw: Any, *, what: str = "path", read: bool = False) -> Path:
        """`raw` as an absolute path inside the working directory (or, to `read`, inside a
        `readable` folder), or a ToolError."""
        if raw is None:
            raw = "."
        if not isinstance(raw, str) or "\x00" in raw:
            raise ToolError(f"'{what}' must be a path")
        candidate = Path(raw)
        if not candidate.is_absolute():
            candidate = self.root / candidate
        resolved = candidate.resolve(strict=False)
        if read and any(resolved.is_relative_to(r) for r in self.readable):
            return resolved
        if resolved != self.root and not resolved.is_relative_to(self.root):
            raise ToolError(f"'{raw}' is outside the working directory {self.root} "
                            "(paths, '..' and symlinks must stay inside it)")
        return resolved

    def shown(self, path: Path) -> str:
        if not path.is_relative_to(self.root):
            return str(path)  # a file of a `readable` folder
        rel = path.relative_to(self.root)
        return str(rel) if str(rel) != "." else "."

    # ------------------------------------------------------------------ files

    def read_file(self, args: dict[str, Any]) -> str:
        path = self.resolve(args.get("path"), read=True)
        if not path.is_file():
            raise ToolError(f"'{args.get('path')}' is not a file")
        if path.stat().st_size > READ_MAX_BYTES:
            raise ToolError(f"'{self.shown(path)}' is larger than {READ_MAX_BYTES} bytes; use "
                            "search or run_command (head, sed -n) to read part of it")
        data = path.read_bytes()
        if b"\x00" in data[:8192]:
            raise ToolError(f"'{self.shown(path)}' is a binary file")
        lines = data.decode("utf-8", errors="replace").splitlines()
        offset = max(1, _arg(args, "offset", int, 1) or 1)
        limit = _arg(args, "limit", int, None)
        chosen = lines[offset - 1: offset - 1 + limit if limit else None]
        width = len(str(offset + len(chosen)))
        body = "\n".join(f"{i:>{width}}| {line}" for i, line in enumerate(chosen, offset))
        return body if chosen else f"(no lines from line {offset}; the file has {len(lines)})"

    def list_dir(self, args: dict[str, Any]) -> str:
        path = self.resolve(args.get("path"))
        if not path.is_dir():
            raise ToolError(f"'{args.get('path')}' is not a directory")
        depth = min(5, max(1, _arg(args, "depth", int, 1) or 1))
        out: list[str] = []

        def walk(d: Path, level: int) -> None:
            for entry in sorted(d.iterdir(), key=lambda p: p.name):
                if len(out) >= LIST_MAX_ENTRIES:
                    return
                rel = self.shown(entry)
                if entry.is_symlink() and not self._inside(entry):
                    out.append(f"{rel} -> (outside the working directory)")
                elif entry.is_dir():
                    out.append(rel + "/")
                    if level < depth and entry.name not in SKIP_DIRS:
                        walk(entry, level + 1)
                else:
                    out.append(f"{rel} ({entry.stat().st_size} bytes)" if entry.exists()
                               else f"{rel} (broken link)")

        walk(path, 1)
        if len(out) >= LIST_MAX_ENTRIES:
            out.append(f"[... listing stopped at {LIST_MAX_ENTRIES} entries]")
        return "\n".join(out) or "(empty directory)"

    def _inside(self, path: Path) -> bool:
        target = path.resolve(strict=False)
        return target == self.root or target.is_relative_to(self.root)

    def search(self, args: dict[str, Any]) -> str:
        pattern = _arg(args, "pattern", str)
        if not pattern:
            raise ToolError("'pattern' is required")
        flags = re.IGNORECASE if args.get("ignore_case") else 0
        try:
            rx = re.compile(pattern, flags)
        except re.error as exc:
            raise ToolError(f"bad regular expression: {exc}") from None
        glob = _arg(args, "glob", str, None)
        base = self.resolve(args.get("path"))
        files = [base] if base.is_file() else self._files(base)
        matches: list[str] = []
        started = time.monotonic()
        for f in files:
            if len(matches) >= SEARCH_MAX_MATCHES or time.monotonic() - started > SEARCH_SECONDS:
                matches.append("[... search stopped: too many matches or too long]")
                break
            if glob and not fnmatch.fnmatch(f.name, glob):
                continue
            try:
                if f.stat().st_size > SEARCH_MAX_FILE:
                    continue
                data = f.read_bytes()
            except OSError:
                continue
            if b"\x00" in data[:8192]:
                continue
            for n, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
                if rx.search(line):
                    matches.append(f"{self.shown(f)}:{n}: {line[:500]}")
                    if len(matches) >= SEARCH_MAX_MATCHES:
                        break
        return "\n".join(matches) or "no matches"

    def _files(self, base: Path) -> list[Path]:
        out = []
        for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            for name in sorted(filenames):
                p = Path(dirpath) / name
                if p.is_symlink() and not self._inside(p):
                    continue
                out.append(p)
        return out

    def write_file(self, args: dict[str, Any]) -> str:
        path = self.resolve(args.get("path"))
        content = _arg(args, "content", str)
        if content is None:
            raise ToolError("'content' is required")
        if path.is_dir():
            raise ToolError(f"'{args.get('path')}' is a directory")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        return f"wrote {len(content.encode('utf-8'))} bytes to {self.shown(path)}"

    def edit_file(self, args: dict[str, Any]) -> str:
        path = self.resolve(args.get("path"))
        old, new = _arg(args, "old_text", str), _arg(args, "new_text", str)
        if not old or new is None:
            raise ToolError("'old_text' (not empty) and 'new_text' are required")
        if not path.is_file():
            raise ToolError(f"'{args.get('path')}' is not a file")
        text = path.read_text(encoding="utf-8")
        count = text.count(old)
        if count == 0:
            raise ToolError(f"old_text was not found in {self.shown(path)}")
        if count > 1 and not args.get("replace_all"):
            raise ToolError(f"old_text occurs {count} times in {self.shown(path)}; give more "
                            "context or set replace_all")
        path.write_text(text.replace(old, new), encoding="utf-8")
        return f"replaced {count} occurrence(s) in {self.shown(path)}"

    # ------------------------------------------------------------------ commands

    def run_command(self, args: dict[str, Any]) -> str:
        command = _arg(args, "command", str)
        if not command or not command.strip():
            raise ToolError("'command' is required")
        timeout = _arg(args, "timeout", (int, float), None) or self.command_timeout
        timeout = min(max(1.0, float(timeout)), COMMAND_MAX_TIMEOUT)
        shell = shutil.which("bash") or "/bin/sh"
        env = {k: v for k, v in os.environ.items() if k not in self.hidden}
        done = processes.start(Command(
            [shell, "-c", command], env, cwd=str(self.root), run_id=self.run_id,
            output_cap=COMMAND_OUTPUT_BYTES, wait_for_output=False)).finish(timeout)
        head = (f"timed out after {timeout:g}s (process group killed)" if done.timed_out
                else f"exit code: {done.returncode}")
        return f"{head}\nstdout:\n{_shown(done.stdout)}\nstderr:\n{_shown(done.stderr)}"


def _shown(captured: Captured) -> str:
    body = captured.text()
    if captured.dropped:
        body += f"\n[... {captured.dropped} more bytes cut by podium]"
    return body
