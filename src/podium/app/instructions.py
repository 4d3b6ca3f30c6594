"""Workspace instructions from the command line, found and read as Conductor does
(src/conductor/config/instructions.py; spec 2.9).

`--workspace-instructions` walks from the working directory up to the repository root (the
nearest folder with a `.git`; without one, only the working directory) and takes, per
convention, the closest AGENTS.md, .github/copilot-instructions.md and CLAUDE.md, then the
.github/instructions/**/*.instructions.md files whose `applyTo` front matter is `**` or a glob
overlapping the working directory. `--instructions FILE` (repeatable) adds files after the
workflow's own `instructions`. Each file is given as `# Instructions from: NAME` and its text,
the files joined by `---` lines. The texts are kept in the run's `run_started` event, so a
resume gives the agents the same prompts and a replay compares against them.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from podium.errors import UsageError
from podium.records import record

FILE_CONVENTIONS = ("AGENTS.md", ".github/copilot-instructions.md", "CLAUDE.md")
DIRECTORY_CONVENTION = ".github/instructions"
ALWAYS_ON = "**"
SIZE_WARNING = 50 * 1024  # bytes: Conductor warns past this too

_FRONT = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)
_SEPARATORS = re.compile(r"[;,]")
_WILDCARD = re.compile(r"[*?\[]")


@record(frozen=True)
class Found:
    path: Path
    source: str  # the convention: AGENTS.md, ..., .github/instructions
    scope: str | None  # the applyTo glob of a .github/instructions file
    reason: str  # file-convention, always-on or scope-overlap


def _git_root(start: Path) -> Path | None:
    current = start
    while True:
        if (current / ".git").exists():
            return current
        if current.parent == current:
            return None
        current = current.parent


def _apply_to(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return None
    match = _FRONT.match(text)
    if match is None:
        return None
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        front = YAML(typ="safe").load(match.group(1))
    except YAMLError:
        return None
    value = front.get("applyTo") if isinstance(front, dict) else None
    if not isinstance(value, str) or not _SEPARATORS.sub("", value).strip():
        return None
    return value


def _normal(p: str) -> str:
    n = p.replace("\\", "/").strip()
    while n.startswith("./"):
        n = n[2:]
    n = n.strip("/")
    return "" if n == "." else n


def _overlaps(scope: str, cwd_rel: str) -> bool:
    cwd = _normal(cwd_rel)
    for sub in _SEPARATORS.split(scope):
        glob = _normal(sub)
        if not glob:
            continue
        prefix_parts: list[str] = []
        for part in glob.split("/"):
            if _WILDCARD.search(part):
                break
            prefix_parts.append(part)
        prefix = "/".join(prefix_parts)
        if not prefix or not cwd or cwd == prefix or cwd.startswith(prefix + "/") \
                or prefix.startswith(cwd + "/"):
            return True
    return False


def discover(start: Path) -> list[Found]:
    """The instruction files `--workspace-instructions` loads when run from `start`."""
    here = start.resolve()
    root = _git_root(here)
    stop = root.resolve() if root is not None else here
    levels = [here]
    while levels[-1] != stop and levels[-1].parent != levels[-1]:
        levels.append(levels[-1].parent)
    found: list[Found] = []
    for name in FILE_CONVENTIONS:
        for level in levels:  # the closest wins
            if (level / name).is_file():
                found.append(Found(level / name, name, None, "file-convention"))
                break
    scoped: dict[str, Found] = {}
    for level in levels:
        base = level / DIRECTORY_CONVENTION
        if not base.is_dir():
            continue
        cwd_rel = os.path.relpath(here, level).replace(os.sep, "/")
        for folder, dirs, files in os.walk(base, followlinks=False):
            dirs.sort()
            for file in sorted(files):
                if not file.endswith(".instructions.md"):
                    continue
                path = Path(folder) / file
                rel = path.relative_to(base).as_posix()
                if rel in scoped:
                    continue
                scope = _apply_to(path)
                if scope is None:
                    continue
                if scope == ALWAYS_ON:
                    scoped[rel] = Found(path, DIRECTORY_CONVENTION, scope, "always-on")
                elif _overlaps(scope, cwd_rel):
                    scoped[rel] = Found(path, DIRECTORY_CONVENTION, scope, "scope-overlap")
    found.extend(scoped[rel] for rel in sorted(scoped))
    return found


def load(paths: list[Path]) -> str:
    """The files' texts, each under `# Instructions from: NAME`, joined by `---` lines."""
    sections = []
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8-sig").strip()
        except (OSError, UnicodeDecodeError) as exc:
            sys.stderr.write(f"podium: warning: cannot read the instruction file {path}: "
                             f"{exc}\n")
            continue
        if text:
            sections.append(f"# Instructions from: {path.name}\n\n{text}")
    joined = "\n\n---\n\n".join(sections)
    if len(joined.encode("utf-8")) > SIZE_WARNING:
        sys.stderr.write(f"podium: warning: the workspace instructions are "
                         f"{len(joined.encode('utf-8')) / 1024:.1f}KB; every agent call "
                         f"sends them\n")
    return joined


@record(frozen=True)
class Instructions:
    workspace: str | None  # before the workflow's own instructions
    cli: str | None  # after them
    found: list[Found]


def gather(workspace: bool, files: list[Path], start: Path | None = None) -> Instructions:
    """What --workspace-instructions and --instructions FILE add to every agent prompt;
    UsageError naming the --instructions files that do not exist."""
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise UsageError(f"--instructions: no such file: {', '.join(missing)}")
    found = discover(start or Path.cwd()) if workspace else []
    return Instructions(load([f.path for f in found]) or None, load(files) or None, found)


def describe(found: list[Found]) -> str:
    """--print-loaded-instructions, in Conductor's words (on stderr)."""
    if not found:
        return "[workspace-instructions] 0 files discovered from CWD.\n"
    lines = [f"[workspace-instructions] {len(found)} file(s) discovered from CWD:"]
    for f in found:
        lines.append(f"  {f.path}")
        scope = f"  applyTo={f.scope!r}" if f.scope and f.scope != ALWAYS_ON else ""
        lines.append(f"    source={f.source}  reason={f.reason}{scope}")
    return "\n".join(lines) + "\n"
