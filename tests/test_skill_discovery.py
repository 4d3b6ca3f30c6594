"""`runtime.skill_discovery` with Conductor's meaning, and the skill podium ships: the project
folders (nearest first, up to the repository root) then the personal ones are scanned once;
every agent without `skills:` of its own gets the same discovered set on top of the declared
skills; a broken discovered skill, a shadowed one and a source that found nothing are warnings,
an excluded one is left out, a broken declared skill is an error; agents that would get the
set on a provider without skills are an error; the built-in skill loads as `podium` and as
`conductor`, and the real Copilot CLI receives discovered and built-in skills."""

from __future__ import annotations

import json
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from helpers_engine import run_workflow, write
from podium.check.validate import validate_file
from podium.events.model import Warning_
from podium.providers.base import AgentRequest, Provider, Session
from podium.providers.scripted import ScriptedProvider
from podium.providers.skills import BUILTIN_ROOT, skill_dirs
from runtime_helpers import needs_copilot, podium, runtime_env


def put(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def skill(root: Path, name: str, folder: str | None = None) -> Path:
    return put(root, f"{folder or name}/SKILL.md", f"---\nname: {name}\ndescription: The "
               f"{name} skill, ZEBRA-{name}.\n---\nAlways say ZEBRA-{name}.\n").parent


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A repository with project skills at its root and in the workflow's folder, a personal
    skill library under a HOME of its own, and a broken and a shadowing skill."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    flows = repo / "flows"
    home = tmp_path / "userhome"
    monkeypatch.setenv("HOME", str(home))
    put(repo / ".claude" / "skills", "broken/SKILL.md", "no front matter here\n")
    return {
        "near": skill(flows / ".github" / "skills", "near"),
        "root": skill(repo / ".claude" / "skills", "rooted"),
        "shadow": skill(repo / ".github" / "skills", "near", folder="near-again"),
        "personal": skill(home / ".claude" / "skills", "mine"),
        "dropped": skill(home / ".copilot" / "skills", "dropped"),
        "flows": flows, "home": home, "repo": repo,
    }


FLOW = """
    workflow:
      name: t
      entry_point: a
      runtime:
        provider: copilot
        default_model: gpt-5-mini
        skills: [conductor]
        skill_discovery: {sources: [personal, project], exclude: [dropped]}
    agents:
      - {name: a, prompt: A, routes: [{to: b}]}
      - {name: b, prompt: B, skills: [], routes: [{to: c}]}
      - {name: c, prompt: C, skills: [podium]}
"""


def test_validate_reports_what_discovery_puts_in_effect(layout: dict[str, Path]) -> None:
    flow = write(layout["flows"], FLOW)
    found = validate_file(flow, environ={})
    assert not found.sink.errors, [d.format() for d in found.sink.errors]
    messages = [d.message for d in found.sink.sorted()]
    assert any("skill_discovery puts 3 skill(s) in effect" in m and
               m.index("near (") < m.index("rooted (") < m.index("mine (~/.claude/skills/mine)")
               for m in messages), messages
    assert any("broken/SKILL.md" not in m and "broken skipped: SKILL.md has no front matter"
               in m for m in messages), messages
    assert any("discovered skill 'near'" in m and "already in effect" in m for m in messages)
    assert not any("dropped" in m for m in messages)  # excluded: not even a note


def test_a_source_that_finds_nothing_warns_and_an_unknown_one_is_an_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "empty-home"))
    flow = write(tmp_path, """
        workflow:
          name: t
          entry_point: a
          runtime: {provider: copilot, skill_discovery: {sources: [personal, team]}}
        agents:
          - {name: a, prompt: A}
    """)
    found = validate_file(flow, environ={})
    lines = [d.format() for d in found.sink.sorted()]
    assert any("sources[1]: unknown skill_discovery source 'team'" in ln for ln in lines), lines
    assert any("source 'personal' found no skill (looked in ~/.copilot/skills, "
               "~/.claude/skills)" in ln for ln in lines), lines


def test_agents_on_a_provider_without_skills_cannot_inherit_discovery(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    flow = write(tmp_path, """
        workflow:
          name: t
          entry_point: a
          runtime: {provider: openai, skill_discovery: {}}
        agents:
          - {name: a, prompt: A, routes: [{to: b}]}
          - {name: b, prompt: B, skills: []}
    """)
    (error,) = validate_file(flow, environ={}).sink.errors
    assert error.path == "workflow.runtime.skill_discovery"
    assert "provider 'openai' cannot load discovered skills (agents 'a' would get them" in \
        error.message


def test_a_broken_declared_skill_is_an_error(tmp_path: Path) -> None:
    put(tmp_path, "skills/bad/README.md", "nothing\n")
    flow = write(tmp_path, """
        workflow:
          name: t
          entry_point: a
          runtime: {provider: copilot, skills: [./skills/bad]}
        agents:
          - {name: a, prompt: A}
    """)
    (error,) = validate_file(flow, environ={}).sink.errors
    assert "has no SKILL.md" in error.message


class _Capturing:
    name = "copilot"

    def __init__(self, inner: ScriptedProvider) -> None:
        self.inner = inner
        self.capabilities = replace(inner.capabilities, skills=True)
        self.requests: list[AgentRequest] = []

    def open_session(self, request: AgentRequest) -> Session:
        self.requests.append(request)
        return self.inner.open_session(request)

    def close(self) -> None:
        self.inner.close()


def test_every_agent_without_its_own_skills_gets_the_same_discovered_set(
        layout: dict[str, Path]) -> None:
    flow = write(layout["flows"], FLOW.replace("routes: [{to: c}]", "routes: [{to: d}]")
                 + "      - {name: d, prompt: D, routes: [{to: c}]}\n")
    seen: list[_Capturing] = []

    def wrap(inner: ScriptedProvider) -> Provider:
        seen.append(_Capturing(inner))
        return seen[0]

    run = run_workflow(flow, wrap_provider=wrap, responses={"agents": {
        n: [{"text": n}] for n in "abcd"}})
    assert run.exit_code == 0, run.error_text()
    a, b, d, c = seen[0].requests
    builtin = str(BUILTIN_ROOT / "conductor")
    discovered = (str(layout["near"]), str(layout["root"]), str(layout["personal"]))
    assert a.skill_dirs == (builtin, *discovered)
    assert d.skill_dirs == a.skill_dirs  # the same set, scanned once
    assert b.skill_dirs == ()  # skills: [] opts out of discovery too
    assert c.skill_dirs == (str(BUILTIN_ROOT / "podium"),)  # its own list replaces both
    notes = [e.message for e in run.events if isinstance(e, Warning_)]
    assert len([n for n in notes if "broken skipped" in n]) == 1  # once per run


def test_the_builtin_skill_ships_as_podium_and_conductor_with_one_body() -> None:
    (podium_dir,) = skill_dirs("podium", Path("."))
    (conductor_dir,) = skill_dirs("conductor", Path("."))
    texts = [(d / "SKILL.md").read_text(encoding="utf-8") for d in (podium_dir,
                                                                     conductor_dir)]
    heads = [t.split("\n---\n", 1) for t in texts]
    assert heads[0][0].startswith("---\nname: podium\n")
    assert heads[1][0].startswith("---\nname: conductor\n")
    assert heads[0][1] == heads[1][1]
    from ruamel.yaml import YAML

    for head in heads:  # the runtimes read the front matter as YAML: it must parse
        meta = YAML(typ="safe").load(head[0].removeprefix("---\n"))
        assert set(meta) == {"name", "description"}
    assert "podium validate" in heads[0][1]


def test_the_builtin_skill_teaches_a_workflow_that_validates(tmp_path: Path) -> None:
    body = (BUILTIN_ROOT / "podium" / "SKILL.md").read_text(encoding="utf-8")
    example = body.split("```yaml\n", 1)[1].split("```", 1)[0]
    flow = tmp_path / "example.yaml"
    flow.write_text(example, encoding="utf-8")
    found = validate_file(flow, environ={})
    assert found.model is not None
    assert not found.sink.errors, [d.format() for d in found.sink.errors]


@needs_copilot
def test_copilot_receives_discovered_and_builtin_skills(layout: dict[str, Path]) -> None:
    from fakes.openai_server import FakeOpenAI, answer

    flow = write(layout["flows"], FLOW)
    with FakeOpenAI() as oa:
        oa.script(answer("one"), answer("two"), answer("three"))
        proc = podium(layout["flows"], "run", flow, env=runtime_env(layout["flows"], {
            "COPILOT_PROVIDER_BASE_URL": oa.url + "/v1", "HOME": str(layout["home"])}))
        first, second, third = [json.dumps(r.body) for r in oa.chat_requests()]
    assert proc.returncode == 0, proc.stderr
    for name in ("near", "rooted", "mine"):
        assert f"ZEBRA-{name}" in first
        assert f"ZEBRA-{name}" not in second
        assert f"ZEBRA-{name}" not in third
    assert "How to write, check and run Conductor workflows with podium" in first
    assert "How to write, check and run podium workflows" in third
    assert "skipped: SKILL.md has no front matter" in proc.stderr


@needs_copilot
def test_conductors_self_improving_example_runs_with_the_builtin_skill_on_copilot(
        tmp_path: Path) -> None:
    from fakes.openai_server import FakeOpenAI, answer

    example = Path(__file__).parent / "corpus" / "conductor-examples" / "examples" / \
        "skills-self-improving-workflow.yaml"
    # unchanged but for a model: the example leaves it to the Copilot login, and a custom
    # endpoint (bring your own key) needs one named
    text = example.read_text(encoding="utf-8")
    assert text.count("    provider: copilot\n") == 1
    flow = tmp_path / example.name
    flow.write_text(text.replace("    provider: copilot\n", "    provider: copilot\n"
                                 "    default_model: gpt-5-mini\n"), encoding="utf-8")
    drafted = "workflow: {name: hello, entry_point: a}\nagents: [{name: a, prompt: Hi}]\n"
    with FakeOpenAI() as oa:
        oa.script(answer(json.dumps({"workflow_yaml": drafted, "notes": "minimal"})),
                  answer(json.dumps({"issues": "no routes", "suggestions": "",
                                     "verdict": "needs_revision"})),
                  answer(json.dumps({"workflow_yaml": drafted, "changelog": "routes"})),
                  answer(json.dumps({"report": "# Hello workflow"})))
        proc = podium(tmp_path, "run", flow, "--input", "task=say hello",
                      env=runtime_env(tmp_path, {"COPILOT_PROVIDER_BASE_URL": oa.url + "/v1",
                                                 "HOME": str(tmp_path / "userhome")}))
        bodies = [json.dumps(r.body) for r in oa.chat_requests()]
    author, reviewer, fixer, formatter = bodies
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"report": "# Hello workflow",
                                       "verdict": "needs_revision"}
    skill = "How to write, check and run Conductor workflows with podium"
    assert skill in author
    assert skill in reviewer
    assert skill in fixer
    assert skill not in formatter  # skills: []
