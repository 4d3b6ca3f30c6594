"""Running the Conductor keys podium used to accept and ignore, through the real loader and
engine: `{% include %}` / `{% import %}` in `!file` prompts (relative to the prompt's file,
inside the workflow's folder), `context.max_tokens` with each `trim_strategy` (and a resume
that applies the same trim), tool results spilled to a file (`runtime.tool_output`), and
`context_tier`, `skills` and `plugins` reaching the agent runtimes: in the request podium
builds, in each SDK's session options, and (when the runtimes are installed) on the wire of
the real Copilot CLI and Claude Code against the local protocol servers."""

from __future__ import annotations

import json
import os
import stat
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from helpers_engine import run_workflow, write
from podium.engine.history import fold_events
from podium.events.model import ContextTrimmed, PromptRendered
from podium.language.model import ToolOutputConfig
from podium.providers.base import AgentRequest, Provider, Session
from podium.providers.scripted import ScriptedProvider
from podium.steps.agent import output_limit
from podium.tools.base import FILE_HINT, OutputLimit, Toolbox, ToolResult, ToolSpec
from podium.tools.workspace import Workspace
from runtime_helpers import needs_claude, needs_copilot, podium, runtime_env


def put(root: Path, name: str, text: str) -> Path:
    """Write a (dedented) file below `root`."""
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- partials


def _prompt_files(tmp_path: Path) -> None:
    put(tmp_path, "prompts/review.md", """
        {% import 'lib/macros.md' as m %}{% from 'lib/macros.md' import shout %}
        Review {{ workflow.input.topic }}.
        {% include 'lib/rules.md' %}
        {{ m.shout('done') }} {{ shout('twice') }}
    """)
    put(tmp_path, "prompts/lib/rules.md", "Rules for ${TEAM:-everyone}: {% include 'x.md' %}")
    put(tmp_path, "prompts/lib/x.md", "be brief")
    put(tmp_path, "prompts/lib/macros.md",
          "{% macro shout(t) %}{{ t | upper }}{% endmacro %}")


def test_include_and_import_in_a_file_prompt(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    _prompt_files(tmp_path)
    monkeypatch.setenv("TEAM", "the reviewers")
    flow = write(tmp_path, """
        workflow:
          name: t
          entry_point: review
          input: {topic: {type: string}}
        agents:
          - {name: review, prompt: !file prompts/review.md}
    """)
    run = run_workflow(flow, inputs={"topic": "the parser"},
                       responses={"agents": {"review": [{"text": "ok"}]}})
    assert run.exit_code == 0, run.error_text()
    (prompt,) = [e.prompt for e in run.of(PromptRendered)]
    assert prompt == ("\nReview the parser.\nRules for the reviewers: be brief\n"
                      "DONE TWICE\n")


def test_a_partial_that_is_gone_or_outside_fails_the_step(tmp_path: Path) -> None:
    put(tmp_path, "flow/p.md", "{% include 'missing.md' %}")
    put(tmp_path, "flow/q.md", "{% include '../secret.md' %}")
    put(tmp_path, "secret.md", "s")
    flow = write(tmp_path, """
        workflow: {name: t, entry_point: a}
        agents:
          - {name: a, prompt: !file p.md}
          - {name: b, prompt: !file q.md}
    """, name="flow/wf.yaml")
    run = run_workflow(flow, check=False, responses={"agents": {"a": [{"text": "x"}]}})
    assert run.exit_code == 3
    assert "template not found: 'missing.md'" in run.error_text()
    other = write(tmp_path, """
        workflow: {name: t, entry_point: b}
        agents: [{name: b, prompt: !file q.md}]
    """, name="flow/wf2.yaml")
    run = run_workflow(other, check=False, responses={"agents": {"b": [{"text": "x"}]}})
    assert run.exit_code == 3
    assert "'../secret.md' is outside the workflow's folder" in run.error_text()


# --------------------------------------------------------------------------- context trimming


def _trim_flow(tmp_path: Path, strategy: str, max_tokens: int) -> Path:
    return write(tmp_path, f"""
        workflow:
          name: t
          entry_point: a
          context: {{max_tokens: {max_tokens}, trim_strategy: {strategy}}}
        agents:
          - {{name: a, type: set, values: {{text: "{{{{ 'a' * 4000 }}}}", n: 1}}, routes: [{{to: b}}]}}
          - {{name: b, type: set, values: {{text: "{{{{ 'b' * 4000 }}}}", n: 2}}, routes: [{{to: c}}]}}
          - {{name: c, type: set, value: last, routes: [{{to: d}}]}}
          - {{name: d, type: set, value: end}}
        output:
          a: "{{{{ a.output.text | length if a is defined else 'gone' }}}}"
          b: "{{{{ b.output.text | length if b is defined else 'gone' }}}}"
    """)


def test_drop_oldest_removes_whole_outputs_until_the_context_fits(tmp_path: Path) -> None:
    run = run_workflow(_trim_flow(tmp_path, "drop_oldest", 1500))
    assert run.exit_code == 0, run.error_text()
    (event,) = run.of(ContextTrimmed)
    assert (event.step, event.strategy, event.dropped) == ("c", "drop_oldest", ["a"])
    assert event.tokens_before > 1500 >= event.tokens_after
    assert run.output == {"a": "gone", "b": 4000}
    assert "a" not in run.outputs
    assert run.engine.state.history[:1] == ["a"]  # the history itself is kept


def test_truncate_cuts_long_fields_oldest_first(tmp_path: Path) -> None:
    run = run_workflow(_trim_flow(tmp_path, "truncate", 1500))
    assert run.exit_code == 0, run.error_text()
    (event,) = run.of(ContextTrimmed)
    assert event.strategy == "truncate"
    assert list(event.truncated) == ["a"]  # b's cut was not needed
    assert event.truncated["a"]["text"] == "a" * 1000 + "... [truncated]"  # a quarter
    assert run.output == {"a": 1015, "b": 4000}
    assert run.outputs["a"]["n"] == 1
    assert run.engine.state.records[0].output["text"] == "a" * 4000  # the history is not cut


def test_summarize_keeps_the_newest_half(tmp_path: Path) -> None:
    run = run_workflow(_trim_flow(tmp_path, "summarize", 1500))
    assert run.exit_code == 0, run.error_text()
    (event,) = run.of(ContextTrimmed)
    assert (event.step, event.dropped) == ("c", ["a"])  # before c: a and b, keep b
    summary = run.outputs["_context_summary"]
    assert summary == event.summary
    assert summary["dropped_agents"] == ["a"]
    assert summary["summary"] == f"a: text={'a' * 50}... n=1"
    assert run.output == {"a": "gone", "b": 4000}


def test_no_trim_when_the_context_fits(tmp_path: Path) -> None:
    run = run_workflow(_trim_flow(tmp_path, "drop_oldest", 100_000))
    assert run.of(ContextTrimmed) == []
    assert run.output == {"a": 4000, "b": 4000}


def test_a_resume_applies_the_trim_again() -> None:
    events: list[dict[str, Any]] = [
        {"seq": 1, "type": "run_started", "inputs": {}, "max_iterations": 10},
        {"seq": 2, "type": "step_finished", "step": "a", "step_type": "set", "iteration": 1,
         "output": {"text": "x" * 500, "n": 1}},
        {"seq": 3, "type": "step_finished", "step": "b", "step_type": "set", "iteration": 1,
         "output": {"text": "y" * 500}},
    ]
    trims = [ContextTrimmed(step="c", strategy="truncate", max_tokens=10, tokens_before=300,
                            tokens_after=100, truncated={"a": {"text": "x... [truncated]"}}),
             ContextTrimmed(step="c", strategy="drop_oldest", max_tokens=10, tokens_before=300,
                            tokens_after=100, dropped=["b"],
                            summary={"summary": "b: ...", "dropped_agents": ["b"]})]
    for i, t in enumerate(trims):
        events.append({**t.model_dump(), "seq": 4 + i})
    state = fold_events(events)
    assert state.outputs == {"a": {"text": "x... [truncated]", "n": 1},
                             "_context_summary": {"summary": "b: ...", "dropped_agents": ["b"]}}
    assert state.records[0].output["text"] == "x" * 500


# --------------------------------------------------------------------------- spilling


class _Long:
    spec = ToolSpec("dump", "d", {"type": "object", "properties": {}})
    source = "workspace"

    def run(self, arguments: dict[str, Any]) -> ToolResult:
        return ToolResult("".join(f"line {i}\n" for i in range(2000)))


def test_a_long_tool_result_is_spilled_to_a_file_the_model_can_read(tmp_path: Path) -> None:
    spill = tmp_path / "spill"
    work = tmp_path / "work"
    work.mkdir()
    ws = Workspace(work, readable=(spill,))
    box = Toolbox([_Long(), *ws.tools(("read_file",))],
                  limit=OutputLimit(1000, True, spill))
    text = box.call("dump", {}).text
    (path,) = box.spilled
    full = "".join(f"line {i}\n" for i in range(2000))
    assert path.read_text(encoding="utf-8") == full
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(spill.stat().st_mode) == 0o700
    assert text == (f"{full[:1000]}\n\n[output truncated: {len(full)} chars -> 1000 kept; full "
                    f"output saved to: {path}. {FILE_HINT}]")
    part = box.call("read_file", {"path": str(path), "offset": 1500, "limit": 2}).text
    assert part == "1500| line 1499\n1501| line 1500"
    outside = box.call("read_file", {"path": str(tmp_path / "other.txt")})
    assert outside.is_error


def test_spill_to_file_false_cuts_and_enabled_false_keeps_everything(tmp_path: Path) -> None:
    cut = Toolbox([_Long()], limit=output_limit(ToolOutputConfig(max_chars=1000,
                                                                 spill_to_file=False)))
    text = cut.call("dump", {}).text
    full = _Long().run({}).text
    assert cut.spilled == []
    assert text == (f"{full[:1000]}\n\n[output truncated: {len(full)} chars -> 1000 kept. The "
                    "full output was truncated; refine the tool arguments to return less data.]")
    whole = Toolbox([_Long()], limit=output_limit(ToolOutputConfig(enabled=False)))
    assert whole.call("dump", {}).text == full


def test_the_tool_output_settings_become_the_limit(tmp_path: Path) -> None:
    default = output_limit(None)
    assert (default.max_chars, default.enabled) == (50_000, True)
    assert default.spill_dir is not None
    assert default.spill_dir.parts[-2:] == ("podium", "tool-output")
    own = output_limit(ToolOutputConfig(max_chars=2000, spill_dir=str(tmp_path / "s")))
    assert own == OutputLimit(2000, True, tmp_path / "s")


# --------------------------------------------------------------------------- runtimes


class _Capturing:
    """The scripted provider with a runtime's capabilities: records each request."""

    name = "copilot"

    def __init__(self, inner: ScriptedProvider) -> None:
        self.inner = inner
        self.capabilities = replace(inner.capabilities, skills=True, context_tier=True)
        self.requests: list[AgentRequest] = []

    def open_session(self, request: AgentRequest) -> Session:
        self.requests.append(request)
        return self.inner.open_session(request)

    def close(self) -> None:
        self.inner.close()


def _skill(root: Path, name: str) -> Path:
    return put(root, f"{name}/SKILL.md", f"---\nname: {name}\ndescription: The {name} "
                 f"skill, ZEBRA-{name}.\n---\nAlways say ZEBRA-{name}.\n").parent


def test_context_tier_skills_and_plugins_reach_the_request(tmp_path: Path) -> None:
    notes = _skill(tmp_path / "skills", "notes")
    _skill(tmp_path / "more", "style")
    put(tmp_path, "plugins/demo/.claude-plugin/plugin.json", '{"name": "demo"}')
    flow = write(tmp_path, """
        workflow:
          name: t
          entry_point: a
          input: {tier: {type: string, default: long_context}}
          runtime: {provider: copilot, default_model: m, skills: [./skills/notes],
                    plugins: [./plugins/demo], default_context_tier: default}
        agents:
          - {name: a, prompt: A, routes: [{to: b}]}
          - {name: b, prompt: B, skills: [./more], plugins: [], routes: [{to: c}],
             context_tier: "{{ workflow.input.tier }}", input: [workflow.input.tier]}
          - {name: c, prompt: C, skills: []}
    """)
    seen: list[_Capturing] = []

    def wrap(inner: ScriptedProvider) -> Provider:
        seen.append(_Capturing(inner))
        return seen[0]

    run = run_workflow(flow, wrap_provider=wrap, responses={"agents": {
        "a": [{"text": "1"}], "b": [{"text": "2"}], "c": [{"text": "3"}]}})
    assert run.exit_code == 0, run.error_text()
    a, b, c = seen[0].requests
    assert (a.context_tier, a.skill_dirs, a.plugin_dirs) == (
        "default", (str(notes),), (str(tmp_path / "plugins" / "demo"),))
    assert (b.context_tier, b.skill_dirs, b.plugin_dirs) == (
        "long_context", (str(tmp_path / "more" / "style"),), ())
    assert (c.skill_dirs, c.plugin_dirs) == ((), (str(tmp_path / "plugins" / "demo"),))


def test_copilot_session_options() -> None:
    from podium.providers.copilot import CopilotConfig, CopilotProvider, large_output

    big = large_output(ToolOutputConfig(max_chars=4000, spill_dir="/tmp/spill"))
    assert big == {"enabled": True, "max_size_bytes": 4000, "output_directory": "/tmp/spill"}
    assert large_output(ToolOutputConfig(spill_to_file=False)) == {"enabled": False}
    assert large_output(None) is None
    provider = CopilotProvider(CopilotConfig(cli_path="copilot", large_output=big))
    try:
        kwargs = provider._session_kwargs(AgentRequest(
            "r", "a", 1, "copilot", "m", "p", context_tier="long_context",
            skill_dirs=("/s/notes",), plugin_dirs=("/p/demo",),
            tools=("web_search", "read_file", "own_thing")), lambda e: None)
        none = provider._session_kwargs(AgentRequest("r", "a", 1, "copilot", "m", "p",
                                                     skill_dirs=(), plugin_dirs=()),
                                        lambda e: None)
    finally:
        provider.close()
    assert kwargs["context_tier"] == "long_context"
    assert kwargs["skill_directories"] == ["/s/notes"]
    assert kwargs["plugin_directories"] == ["/p/demo"]
    assert kwargs["large_output"] == big
    assert kwargs["available_tools"] == ["builtin:web_search", "builtin:view", "own_thing"]
    assert none["enable_skills"] is False
    assert "context_tier" not in none


def test_claude_agent_session_options(tmp_path: Path) -> None:
    from podium.providers.claude_agent import (
        ClaudeAgentConfig,
        ClaudeAgentProvider,
        ClaudeAgentSession,
    )

    notes = _skill(tmp_path / "a", "notes")
    other = _skill(tmp_path / "b", "notes")
    provider = ClaudeAgentProvider(ClaudeAgentConfig("claude"), environ={})
    try:
        request = AgentRequest("r", "a", 1, "claude-agent-sdk", "m", "p",
                               skill_dirs=(str(notes), str(other)),
                               plugin_dirs=(str(tmp_path / "plug"),),
                               tools=("WebSearch", "read_file"))
        options = ClaudeAgentSession(provider, request, keyed=False).options(None)
        wrapper = Path(options.plugins[0]["path"])
        assert options.plugins == [{"type": "local", "path": str(wrapper)},
                                   {"type": "local", "path": str(tmp_path / "plug")}]
        assert (options.skills, options.setting_sources) == ("all", [])
        assert options.tools == ["WebSearch", "Read"]
        assert json.loads((wrapper / ".claude-plugin" / "plugin.json").read_text())["name"] \
            == "podium-skills"
        assert sorted(os.listdir(wrapper / "skills")) == ["notes", "notes-2"]
        assert (wrapper / "skills" / "notes-2").resolve() == other
        none = ClaudeAgentSession(provider, replace(request, skill_dirs=(), plugin_dirs=()),
                                  keyed=False).options(None)
        assert (none.plugins, none.skills) == ([], [])
        plain = ClaudeAgentSession(provider, replace(request, skill_dirs=None,
                                                     plugin_dirs=None), keyed=False)
        assert plain.options(None).skills is None
    finally:
        provider.close()
    assert not wrapper.exists()


@needs_copilot
def test_copilot_loads_the_skill_and_plugin_folders(tmp_path: Path) -> None:
    from fakes.openai_server import FakeOpenAI, answer

    _skill(tmp_path / "skills", "notes")
    plugin = tmp_path / "plugins" / "demo"
    put(plugin, ".claude-plugin/plugin.json", '{"name": "demo"}')
    _skill(plugin / "skills", "style")
    flow = write(tmp_path, """
        workflow:
          name: t
          entry_point: a
          runtime: {provider: copilot, default_model: gpt-5-mini, skills: [./skills/notes],
                    plugins: [./plugins/demo]}
        agents:
          - {name: a, prompt: Hello., context_tier: long_context, routes: [{to: b}]}
          - {name: b, prompt: Again., skills: [], plugins: []}
    """)
    with FakeOpenAI() as oa:
        oa.script(answer("hi"), answer("hi again"))
        proc = podium(tmp_path, "run", flow, env=runtime_env(tmp_path, {
            "COPILOT_PROVIDER_BASE_URL": oa.url + "/v1"}))
        first, second = [json.dumps(r.body) for r in oa.chat_requests()]
    assert proc.returncode == 0, proc.stderr
    assert "ZEBRA-notes" in first
    assert "ZEBRA-style" in first
    assert "ZEBRA-notes" not in second
    assert "ZEBRA-style" not in second


@needs_claude
def test_claude_code_loads_the_skill_and_plugin_folders(tmp_path: Path) -> None:
    from fakes.anthropic_server import FakeAnthropic, message, text

    _skill(tmp_path / "skills", "notes")
    plugin = tmp_path / "plugins" / "demo"
    put(plugin, ".claude-plugin/plugin.json", '{"name": "demo"}')
    _skill(plugin / "skills", "style")
    flow = write(tmp_path, """
        workflow:
          name: t
          entry_point: a
          runtime: {provider: claude-agent-sdk, default_model: claude-sonnet-4-5,
                    skills: [./skills/notes], plugins: [./plugins/demo]}
        agents:
          - {name: a, prompt: Hello.}
    """)
    with FakeAnthropic() as an:
        an.script(message(text("hi"), usage=(10, 2, 0, 0)))
        proc = podium(tmp_path, "run", flow, env=runtime_env(tmp_path, {
            "ANTHROPIC_BASE_URL": an.url, "ANTHROPIC_API_KEY": "sk-ant-test"}))
        bodies = json.dumps([r.body for r in an.message_requests()])
    assert proc.returncode == 0, proc.stderr
    assert "ZEBRA-notes" in bodies
    assert "ZEBRA-style" in bodies
