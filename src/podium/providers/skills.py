"""Where `skills:` and `plugins:` entries point: skill folders (a `SKILL.md` each) and plugin
folders, resolved relative to the workflow's folder. podium loads them on the runtimes that
have skills of their own (copilot, claude-agent-sdk); `validate` and the agent step share
these rules. Entries are paths, or the name of a skill podium ships (`podium`, and the same
skill under Conductor's name `conductor`); plugins are paths or `name@marketplace` from
`runtime.plugin_sources` (providers/plugin_sources.py). Installed skills and plugins by name
are not supported by podium yet.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

SKILL_FILE = "SKILL.md"
# the skills podium ships (src/podium/builtin_skills): how to write and check workflows
BUILTIN_ROOT = Path(__file__).resolve().parent.parent / "builtin_skills"
BUILTIN_SKILLS: tuple[str, ...] = ("podium", "conductor")


class SkillProblem(ValueError):
    """An entry that cannot be loaded; the message says why, for a person."""


def is_path_entry(entry: str) -> bool:
    """Conductor's rule: an entry is a path when it starts with `~` or `.` or has a slash."""
    return entry.startswith(("~", ".")) or "/" in entry or "\\" in entry


def effective(own: list[Any] | None, default: list[Any] | None) -> list[Any] | None:
    """An agent's list: its own when it has one (`[]` opts out), else the runtime's."""
    return own if own is not None else default


def _folder(entry: str, base: Path) -> Path:
    return Path(os.path.normpath(base / os.path.expanduser(entry)))


def skill_dirs(entry: Any, base: Path) -> list[Path]:
    """The skill folders a `skills:` entry names: a folder with SKILL.md, or a folder of such
    folders. Raises SkillProblem."""
    if not isinstance(entry, str) or not entry.strip():
        raise SkillProblem("a skill is given by the path of its folder (a string)")
    if not is_path_entry(entry):
        if entry in BUILTIN_SKILLS:
            return [BUILTIN_ROOT / entry]
        raise SkillProblem(f"skill '{entry}' is a name: podium ships only the skills "
                           f"{', '.join(BUILTIN_SKILLS)} and does not support other skills by "
                           f"name yet; give the skill's folder (e.g. ./skills/{entry})")
    folder = _folder(entry, base)
    if not folder.is_dir():
        raise SkillProblem(f"skill folder not found: '{entry}' (looked for {folder})")
    if (folder / SKILL_FILE).is_file():
        return [folder]
    found = sorted(d for d in folder.iterdir() if (d / SKILL_FILE).is_file())
    if not found:
        raise SkillProblem(f"'{entry}' has no {SKILL_FILE}, nor folders that have one")
    return found


def plugin_dir(entry: Any, base: Path, sources: Any = None, locate: Any = None) -> Path:
    """The plugin folder a `plugins:` entry names: a path, or `name@marketplace` from
    `runtime.plugin_sources` (`sources`, as written; `locate` finds a fetched git source,
    providers/plugin_sources.py). Raises SkillProblem."""
    if isinstance(entry, dict):
        raise SkillProblem("the object form of a plugin entry is not supported by podium yet; "
                           "give the plugin's folder or name@marketplace as a string")
    if not isinstance(entry, str) or not entry.strip():
        raise SkillProblem("a plugin is given by the path of its folder (a string)")
    if not is_path_entry(entry):
        if "@" in entry:
            from podium.providers.plugin_sources import resolve_named

            return resolve_named(entry, base, sources, locate)
        raise SkillProblem(f"plugin '{entry}' is a name: installed plugins are not supported "
                           "by podium yet; give the plugin's folder (e.g. ./plugins/name) or "
                           "name@marketplace with the marketplace in runtime.plugin_sources")
    folder = _folder(entry, base)
    if not folder.is_dir():
        raise SkillProblem(f"plugin folder not found: '{entry}' (looked for {folder})")
    return folder


def resolve_all(skills: list[Any] | None, plugins: list[Any] | None, base: Path,
                sources: Any = None, locate: Any = None
                ) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
    """(skill folders, plugin folders) as absolute paths; None where nothing is declared.
    Raises SkillProblem for the first entry that cannot be loaded."""
    out_skills = None if skills is None else tuple(
        dict.fromkeys(str(d) for e in skills for d in skill_dirs(e, base)))
    out_plugins = None if plugins is None else tuple(
        dict.fromkeys(str(plugin_dir(e, base, sources, locate)) for e in plugins))
    return out_skills, out_plugins
