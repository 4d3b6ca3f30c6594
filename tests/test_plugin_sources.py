"""`runtime.plugin_sources` and plugins by name, `name@marketplace`: a marketplace is a folder
or a git repository; its catalog (`.claude-plugin/marketplace.json` or
`.github/plugin/marketplace.json`, `metadata.pluginRoot` honoured) says where each plugin is,
and a source without a catalog is one plugin. `validate` reports each entry that cannot
resolve at its file:line and never fetches (a git source not fetched yet is a warning);
`podium run` fetches git sources into the registry cache, pinned by commit, and the real
Copilot CLI loads the plugin; a pinned commit runs again from the cache with the repository
gone."""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
from dataclasses import replace
from pathlib import Path

from helpers_engine import run_workflow, write
from podium.check.validate import validate_file
from podium.providers.base import AgentRequest, Provider, Session
from podium.providers.scripted import ScriptedProvider
from runtime_helpers import needs_copilot, podium, runtime_env


def put(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def plugin(root: Path, name: str) -> Path:
    put(root, ".claude-plugin/plugin.json", json.dumps({"name": name}))
    put(root, f"skills/{name}-skill/SKILL.md", f"---\nname: {name}-skill\ndescription: The "
        f"{name} skill, ZEBRA-{name}.\n---\nAlways say ZEBRA-{name}.\n")
    return root


def market(root: Path, catalog: str = ".claude-plugin/marketplace.json") -> Path:
    plugin(root / "plugins" / "prs", "prs")
    plugin(root / "extra" / "lint", "lint")
    put(root, catalog, json.dumps({"name": "acme", "metadata": {"pluginRoot": "./plugins"},
                                   "plugins": [{"name": "prs", "source": "prs"},
                                               {"name": "lint", "source": "./extra/lint"},
                                               {"name": "far", "source": {
                                                   "source": "github", "repo": "x/y"}}]}))
    return root


def lines(path: Path) -> list[str]:
    found = validate_file(path, environ={})
    return [d.format().replace(str(path.parent) + "/", "") for d in found.sink.sorted()]


def test_plugins_by_name_resolve_from_catalogs_and_report_what_cannot(tmp_path: Path) -> None:
    market(tmp_path / "vendor" / "acme")
    market(tmp_path / "vendor" / "gh", ".github/plugin/marketplace.json")
    plugin(tmp_path / "single", "solo")
    flow = write(tmp_path, """
        workflow:
          name: t
          entry_point: a
          runtime:
            provider: copilot
            plugin_sources:
              acme: ./vendor/acme
              gh: {source: ./vendor, path: gh}
              one: ./single
              remote: acme/agent-plugins#main
              bad: nowhere
            plugins: [prs@acme, lint@gh, solo@one, ghost@acme, far@acme, x@nomarket,
                      other@one, p@remote]
        agents:
          - {name: a, prompt: A}
        """)
    assert lines(flow) == [
        "wf.yaml:11:12: workflow.runtime.plugin_sources.bad: plugin source 'bad': 'nowhere' is "
        "neither a folder (./...) nor a git repository (owner/repo, a URL or git@host:path)",
        "wf.yaml:12:44: workflow.runtime.plugins[3]: plugin 'ghost@acme': marketplace 'acme' "
        "(.claude-plugin/marketplace.json) has no plugin 'ghost' (it lists: prs, lint, far)",
        "wf.yaml:12:56: workflow.runtime.plugins[4]: plugin 'far@acme': its catalog entry's "
        "source is of kind 'github'; podium takes catalog sources that are folders inside the "
        "marketplace",
        "wf.yaml:12:66: workflow.runtime.plugins[5]: plugin 'x@nomarket': marketplace "
        "'nomarket' is not in runtime.plugin_sources (it declares: acme, bad, gh, one, remote)",
        "wf.yaml:13:15: workflow.runtime.plugins[6]: plugin 'other@one': marketplace 'one' has "
        "no catalog and is the plugin 'solo'",
        "wf.yaml:13:26: workflow.runtime.plugins[7]: warning: plugin source 'remote' "
        "(https://github.com/acme/agent-plugins.git#main) is not fetched yet: `podium run` "
        "fetches it before the run starts",
    ]


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


def test_the_agent_gets_the_plugin_folders_the_names_resolve_to(tmp_path: Path) -> None:
    acme = market(tmp_path / "vendor" / "acme")
    flow = write(tmp_path, """
        workflow:
          name: t
          entry_point: a
          runtime:
            provider: copilot
            plugin_sources: {acme: ./vendor/acme}
            plugins: [prs@acme]
        agents:
          - {name: a, prompt: A, routes: [{to: b}]}
          - {name: b, prompt: B, plugins: [lint@acme, ./vendor/acme/plugins/prs]}
        """)
    seen: list[_Capturing] = []

    def wrap(inner: ScriptedProvider) -> Provider:
        seen.append(_Capturing(inner))
        return seen[0]

    run = run_workflow(flow, wrap_provider=wrap, responses={"agents": {
        "a": [{"text": "1"}], "b": [{"text": "2"}]}})
    assert run.exit_code == 0, run.error_text()
    a, b = seen[0].requests
    assert a.plugin_dirs == (str(acme / "plugins" / "prs"),)
    assert b.plugin_dirs == (str(acme / "extra" / "lint"), str(acme / "plugins" / "prs"))


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()


@needs_copilot
def test_a_git_marketplace_is_fetched_pinned_cached_and_loaded_by_copilot(
        tmp_path: Path) -> None:
    from fakes.openai_server import FakeOpenAI, answer

    repo = market(tmp_path / "acme-repo", ".github/plugin/marketplace.json")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "p")
    commit = _git(repo, "rev-parse", "HEAD")
    flow = write(tmp_path / "flows", f"""
        workflow:
          name: t
          entry_point: a
          runtime:
            provider: copilot
            default_model: gpt-5-mini
            plugin_sources: {{acme: "file://{repo}#{commit}"}}
            plugins: [prs@acme]
        agents:
          - {{name: a, prompt: Hello.}}
        """)
    warned = lines(flow)
    assert len(warned) == 1
    assert "is not fetched yet" in warned[0]  # validate does not fetch
    bodies = []
    for _ in range(2):
        with FakeOpenAI() as oa:
            oa.script(answer("hi"))
            env = runtime_env(tmp_path, {"COPILOT_PROVIDER_BASE_URL": oa.url + "/v1"})
            proc = podium(tmp_path, "run", flow, env=env)
            bodies.append(json.dumps([r.body for r in oa.chat_requests()]))
        assert proc.returncode == 0, proc.stderr
        shutil.rmtree(repo)  # the second run has only the cache
        repo.mkdir()
    assert all("ZEBRA-prs" in b for b in bodies)
    assert "ZEBRA-lint" not in bodies[0]
    cached = list((tmp_path / "home" / "registry-cache").glob(f"plugin-*/{commit[:12]}"))
    assert len(cached) == 1
    assert (cached[0] / ".podium-sha256").is_file()
