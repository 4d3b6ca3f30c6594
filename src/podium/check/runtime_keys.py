"""Validate checks for the Conductor keys that only some runtimes act on, so that none of them
is accepted and then ignored:

- `context_tier` (agent) and `runtime.default_context_tier`: only copilot takes them; a literal
  must be `default` or `long_context`;
- `skills` and `plugins` (runtime default, per agent): loaded by copilot and claude-agent-sdk,
  given as folders or (skills) the names of the skills podium ships; other providers, other
  names and `skill_injection` are errors; plugins by `name@marketplace` resolve through
  `plugin_sources` (a git source not fetched yet is a warning: validate never fetches);
- `skill_discovery`: what it puts in effect and what it skips are warnings; an agent that
  would get the discovered skills on a provider that cannot load skills is an error;
- an agent's `sandbox:` block configures Conductor's `aca` runtime: not supported by podium;
- `runtime.tool_output.spill_to_file: false` turns Copilot's limit off: a warning.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from podium.language.diagnostics import KeyPath
from podium.providers.catalog import RUNTIME_CAPABILITIES, canonical, info
from podium.providers.skills import SkillProblem, plugin_dir, skill_dirs
from podium.templating.text import is_template

if TYPE_CHECKING:
    from podium.check.semantic import Checker
    from podium.language.model import AgentStep

TIERS = ("default", "long_context")
_RUNTIME: KeyPath = ("workflow", "runtime")


def _takes(provider: str, what: str) -> bool:
    caps = RUNTIME_CAPABILITIES.get(canonical(provider))
    return bool(caps is not None and getattr(caps, what))


def _having(what: str) -> str:
    return ", ".join(n for n, c in RUNTIME_CAPABILITIES.items() if getattr(c, what))


def check_runtime_keys(checker: Checker, agents: list[tuple[KeyPath, AgentStep]]) -> None:
    """Add the diagnostics of the runtime-only keys of the workflow to `checker`."""
    runtime = checker.wf.workflow.runtime
    default = runtime.provider_name
    placed = [(path, step, step.provider or default) for path, step in agents]
    _check_context_tier(checker, placed)
    for key in ("skills", "plugins"):
        _check_list(checker, key, placed)
    if runtime.skill_discovery is not None:
        _check_discovery(checker, placed)
    _check_sources(checker)
    for key in ("skill_injection",):
        if key in runtime.model_fields_set:
            checker.err((*_RUNTIME, key), f"{key}: not supported by podium yet (skills and "
                        "plugins are loaded only from the folders `skills:` and `plugins:` "
                        "name)", code="not-supported")
    out = runtime.tool_output
    if out is not None and out.enabled and not out.spill_to_file and any(
            canonical(p) == "copilot" for _, _, p in placed):
        checker.warn((*_RUNTIME, "tool_output", "spill_to_file"), "on copilot, spill_to_file: "
                     "false turns the tool output limit off (the Copilot runtime cannot cut a "
                     "result without writing it to a file)", code="provider-capability")
    for path, step, _ in placed:
        if step.sandbox is not None:
            checker.err((*path, "sandbox"), f"agent '{step.name}': sandbox: is not supported "
                        "by podium (it configures Conductor's aca sandbox runtime)",
                        code="not-supported")


# --------------------------------------------------------------------------- context tier


def _check_context_tier(checker: Checker, placed: list[tuple[KeyPath, AgentStep, str]]) -> None:
    runtime = checker.wf.workflow.runtime
    inheriting: list[str] = []
    for path, step, pname in placed:
        tier = step.context_tier
        known = info(pname) is not None
        if tier is None:
            if known and not _takes(pname, "context_tier"):
                inheriting.append(step.name)
            continue
        where = (*path, "context_tier")
        if not is_template(tier) and tier not in TIERS:
            checker.err(where, f"context_tier must be {' or '.join(TIERS)} (or a template), "
                        f"not '{tier}'", code="schema", at="value")
        elif known and not _takes(pname, "context_tier"):
            checker.err(where, f"agent '{step.name}': context_tier: podium does not support "
                        f"context tiers for provider '{canonical(pname)}' (only "
                        f"{_having('context_tier')} has them)", code="provider-capability")
    if runtime.default_context_tier is None or not inheriting:
        return
    where = (*_RUNTIME, "default_context_tier")
    llm = [s.name for _, s, p in placed if info(p) is not None]
    if len(inheriting) == len(llm):
        checker.err(where, f"default_context_tier: podium does not support context tiers for "
                    f"the providers these agents use (only {_having('context_tier')} has "
                    "them)", code="provider-capability")
    else:
        shown = ", ".join(f"'{n}'" for n in inheriting[:3]) + (" ..." if len(inheriting) > 3
                                                                 else "")
        checker.warn(where, f"default_context_tier applies only to agents on "
                     f"{_having('context_tier')}; not to {shown}", code="provider-capability")


# --------------------------------------------------------------------------- skills, plugins


def _check_list(checker: Checker, key: str, placed: list[tuple[KeyPath, AgentStep, str]]
                ) -> None:
    """`skills` or `plugins`: each entry loads, and every agent that gets them can."""
    runtime = checker.wf.workflow.runtime
    default: list[Any] | None = getattr(runtime, key)
    base = checker.result.path.resolve().parent
    if key == "skills":
        resolve: Any = skill_dirs
    else:
        sources = runtime.plugin_sources
        located: list[Any] = []

        def resolve(entry: Any, where: Any) -> Any:
            if not located:  # the first entry (a workflow without plugins reads no index)
                from podium.providers.plugin_sources import fetched_locator

                located.append(fetched_locator())
            return plugin_dir(entry, where, sources, located[0])
    if default:
        _check_entries(checker, (*_RUNTIME, key), default, base, resolve)
    inheriting: list[tuple[str, str]] = []
    for path, step, pname in placed:
        own: list[Any] | None = getattr(step, key)
        if own is None:
            if default and info(pname) is not None and not _takes(pname, "skills"):
                inheriting.append((step.name, canonical(pname)))
            continue
        _check_entries(checker, (*path, key), own, base, resolve)
        if own and info(pname) is not None and not _takes(pname, "skills"):
            checker.err((*path, key), f"agent '{step.name}': {key}: podium does not support "
                        f"{key} for provider '{canonical(pname)}' yet (they load on "
                        f"{_having('skills')})", code="provider-capability")
    if inheriting:
        providers = sorted({p for _, p in inheriting})
        names = ", ".join(f"'{n}'" for n, _ in inheriting[:3]) + (
            " ..." if len(inheriting) > 3 else "")
        checker.err((*_RUNTIME, key), f"{key}: podium does not support {key} for provider "
                    f"{', '.join(repr(p) for p in providers)} yet (agents {names} get this "
                    f"list; {key} load on {_having('skills')})",
                    f"give those agents '{key}: []'", code="provider-capability")


def _check_discovery(checker: Checker, placed: list[tuple[KeyPath, AgentStep, str]]) -> None:
    from pathlib import Path

    from podium.providers.skill_discovery import ORDER, declared_names, discover, shown

    cfg = checker.wf.workflow.runtime.skill_discovery
    assert cfg is not None
    where: KeyPath = (*_RUNTIME, "skill_discovery")
    for j, source in enumerate(cfg.sources):
        if source not in ORDER:
            checker.err((*where, "sources", j), f"unknown skill_discovery source '{source}' "
                        f"(sources are {', '.join(ORDER)})", code="schema", at="value")
    base = checker.result.path.resolve().parent
    home = Path.home()
    found = discover(cfg.sources, cfg.exclude, base, home,
                     declared_names(checker.wf.workflow.runtime.skills, base))
    for note in found.notes:
        checker.warn(where, note, code="skill-discovery")
    if found.skills:
        listed = ", ".join(f"{n} ({shown(p, home)})" for n, p in found.skills)
        checker.warn(where, f"skill_discovery puts {len(found.skills)} skill(s) in effect for "
                     f"the agents without skills: of their own: {listed}",
                     code="skill-discovery")
    cannot = [(s.name, canonical(p)) for _, s, p in placed
              if s.skills is None and info(p) is not None and not _takes(p, "skills")]
    if cannot:
        names = ", ".join(f"'{n}'" for n, _ in cannot[:3]) + (" ..." if len(cannot) > 3
                                                               else "")
        providers = ", ".join(sorted({repr(p) for _, p in cannot}))
        checker.err(where, f"skill_discovery: provider {providers} cannot load discovered "
                    f"skills (agents {names} would get them; skills load on "
                    f"{_having('skills')})", "give those agents 'skills: []' or name their "
                    "skills", code="provider-capability")


def _check_entries(checker: Checker, where: KeyPath, entries: list[Any], base: Any,
                   resolve: Any) -> None:
    from podium.providers.plugin_sources import NotFetched

    for j, entry in enumerate(entries):
        try:
            resolve(entry, base)
        except NotFetched as exc:  # validate never fetches: the run will
            checker.warn((*where, j), str(exc), code="skill", at="value")
        except SkillProblem as exc:
            checker.err((*where, j), str(exc), code="skill", at="value")


def _check_sources(checker: Checker) -> None:
    """Each `plugin_sources` entry is a folder or a git repository podium can fetch."""
    raw = checker.wf.workflow.runtime.plugin_sources
    where: KeyPath = (*_RUNTIME, "plugin_sources")
    if raw is None:
        return
    from podium.providers.plugin_sources import parse_source

    if not isinstance(raw, dict):
        checker.err(where, "plugin_sources maps each marketplace name to its source",
                    code="schema")
        return
    for market, value in raw.items():
        try:
            parse_source(str(market), value)
        except SkillProblem as exc:
            checker.err((*where, str(market)), str(exc), code="skill", at="value")

