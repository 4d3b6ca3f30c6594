"""`runtime.skill_discovery`: the skills already on the machine, found once per run and given
to every agent alike whatever its provider (Conductor's meaning).

Sources, scanned in a fixed order whatever order `sources` lists them in: `project` (the
`.github/skills` and `.claude/skills` folders of the workflow's folder and of each parent up to
the repository root, nearest first), then `personal` (`~/.copilot/skills`, `~/.claude/skills`).
A skill is a folder holding a `SKILL.md` whose front matter names it and describes it. The first
skill of a name wins; a later one of the same name, one a declared skill already names, and one
`exclude` lists are left out; a broken discovered skill (unreadable, or without that front
matter) is skipped with a warning, never an error: discovery is ambient, declared skills are
what a workflow vouches for.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from podium.providers.skills import SKILL_FILE, SkillProblem
from podium.records import record

PROJECT_DIRS = (".github/skills", ".claude/skills")
PERSONAL_DIRS = (".copilot/skills", ".claude/skills")
ORDER = ("project", "personal")
FRONT_LIMIT = 64 * 1024  # bytes of SKILL.md read for its front matter


@record(frozen=True)
class Discovered:
    skills: tuple[tuple[str, Path], ...]  # (name, folder) in effect, in scan order
    notes: tuple[str, ...]  # what a person should know: empty sources, skipped skills

    @property
    def folders(self) -> tuple[str, ...]:
        return tuple(str(p) for _, p in self.skills)


def skill_name(folder: Path) -> str:
    """The name a skill folder's SKILL.md front matter gives. Raises SkillProblem."""
    try:
        with (folder / SKILL_FILE).open("rb") as fh:
            head = fh.read(FRONT_LIMIT).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SkillProblem(f"{SKILL_FILE} cannot be read ({type(exc).__name__})") from None
    lines = head.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        raise SkillProblem(f"{SKILL_FILE} has no front matter (a '---' block with name and "
                           "description)")
    fields: dict[str, str] = {}
    for line in lines[1:]:
        if line.strip() == "---":
            break
        key, sep, value = line.partition(":")
        if sep and not key.startswith((" ", "\t")):
            fields[key.strip()] = value.strip().strip("'\"")
    else:
        raise SkillProblem(f"{SKILL_FILE}'s front matter does not end ('---')")
    missing = [k for k in ("name", "description") if not fields.get(k)]
    if missing:
        raise SkillProblem(f"{SKILL_FILE}'s front matter has no {' or '.join(missing)}")
    return fields["name"]


def declared_name(folder: Path) -> str:
    """A declared skill's name: its front matter's, else its folder's."""
    try:
        return skill_name(folder)
    except SkillProblem:
        return folder.name


def declared_names(entries: Sequence[object] | None, base: Path) -> list[str]:
    """The names of the skills `runtime.skills` declares (entries that do not load count for
    nothing here; they are errors of their own)."""
    from podium.providers.skills import skill_dirs

    out: list[str] = []
    for entry in entries or []:
        try:
            out += [declared_name(d) for d in skill_dirs(entry, base)]
        except SkillProblem:
            continue
    return out


def _repo_chain(start: Path) -> list[Path]:
    """`start` and its parents up to the repository root (the folder with `.git`); `start`
    alone when it is in no repository."""
    chain = [start, *start.parents]
    for i, folder in enumerate(chain):
        if (folder / ".git").exists():
            return chain[:i + 1]
    return [start]


def source_roots(source: str, workflow_dir: Path, home: Path) -> list[Path]:
    if source == "personal":
        return [home / d for d in PERSONAL_DIRS]
    return [folder / d for folder in _repo_chain(workflow_dir) for d in PROJECT_DIRS]


def shown(path: Path, home: Path) -> str:
    try:
        return "~/" + path.relative_to(home).as_posix()
    except ValueError:
        return str(path)


def discover(sources: Iterable[str], exclude: Iterable[str], workflow_dir: Path, home: Path,
             declared: Iterable[str] = ()) -> Discovered:
    """The skills discovery puts in effect, and the notes about what it left out."""
    wanted = set(sources)
    excluded, taken = set(exclude), set(declared)
    found: list[tuple[str, Path]] = []
    notes: list[str] = []
    for source in (s for s in ORDER if s in wanted):
        roots = source_roots(source, workflow_dir.resolve(), home)
        before = len(found)
        seen_any = False
        for root in roots:
            if not root.is_dir():
                continue
            for folder in sorted(d for d in root.iterdir() if (d / SKILL_FILE).is_file()):
                seen_any = True
                try:
                    name = skill_name(folder)
                except SkillProblem as exc:
                    notes.append(f"discovered skill {shown(folder, home)} skipped: {exc}")
                    continue
                if name in excluded:
                    continue
                if name in taken:
                    notes.append(f"discovered skill '{name}' ({shown(folder, home)}) skipped: "
                                 "a skill of that name is already in effect")
                    continue
                taken.add(name)
                found.append((name, folder.resolve()))
        if len(found) == before and not seen_any:
            looked = ", ".join(shown(r, home) for r in roots)
            notes.append(f"skill_discovery source '{source}' found no skill (looked in "
                         f"{looked})")
    return Discovered(tuple(found), tuple(notes))
