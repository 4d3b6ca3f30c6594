"""`validate` on Conductor's semantics, in-process: no false positive for explicit-mode group
references or for either branch of an `is defined` guard; "did you mean" hints that offer only
names valid where they are written; every key Conductor acts on either works or is an error
at its file:line (context_tier, skills, plugins, the aca runtime and its sandbox block; hermes
is a provider with its own fields); runtime tool names for the agents whose runtime has them; and the partials
of `!file` prompts, resolved and parsed."""

from __future__ import annotations

import textwrap
from pathlib import Path

from podium.check.validate import validate_file
from podium.language.diagnostics import Diagnostic


def check(tmp_path: Path, text: str, name: str = "wf.yaml") -> list[Diagnostic]:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return validate_file(path, environ={}).sink.sorted()


def lines(found: list[Diagnostic]) -> list[str]:
    """The text form, files shown by their name relative to the test's folder."""
    out = []
    for d in found:
        text = d.format()
        out.append(text.replace(d.file, Path(d.file).name, 1) if "/" in d.file else text)
    return out


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------- false positives


def test_explicit_mode_group_references_that_are_declared(tmp_path: Path) -> None:
    found = check(tmp_path, """
        workflow: {name: t, entry_point: team, context: {mode: explicit}}
        parallel:
          - name: team
            agents: [a, b]
            routes: [{to: fan}]
        for_each:
          - name: fan
            type: for_each
            source: workflow.input.items
            as: item
            agent: {name: one, prompt: "{{ item }}"}
            routes: [{to: sum}]
        agents:
          - {name: a, prompt: A, output: {x: {type: string}}}
          - {name: b, prompt: B}
          - name: sum
            input: [team.outputs.a, team.outputs.b.result, team.errors, fan.outputs, fan.count]
            prompt: |
              {{ team.outputs.a.x }} {{ team.outputs.b.result }} {{ team.type }}
              {% for k, e in team.errors.items() %}{{ k }}{% endfor %}
              {{ fan.outputs[0] }} {{ fan.count }}
        """)
    assert found == []


def test_explicit_mode_still_reports_an_undeclared_group_field(tmp_path: Path) -> None:
    found = check(tmp_path, """
        workflow: {name: t, entry_point: team, context: {mode: explicit}}
        parallel: [{name: team, agents: [a, b], routes: [{to: sum}]}]
        agents:
          - {name: a, prompt: A}
          - {name: b, prompt: B}
          - name: sum
            input: [team.outputs.a]
            prompt: "{{ team.outputs.b }}"
        """)
    assert lines(found) == [
        "wf.yaml:8:13: agents[2].prompt: warning: 'team.outputs.b' is not in the input: list "
        "of 'sum', which has only team.outputs.a (context mode is explicit) (add "
        "'team.outputs.b' to its input:)"]


def test_both_branches_of_an_is_defined_guard(tmp_path: Path) -> None:
    # a → (fix | skip) → report: on the else branch of `fix is defined`, skip has run
    found = check(tmp_path, """
        workflow: {name: t, entry_point: a}
        agents:
          - name: a
            prompt: A
            output: {bad: {type: boolean}}
            routes: [{to: fix, when: "{{ output.bad }}"}, {to: skip}]
          - {name: fix, prompt: F, routes: [{to: report}]}
          - {name: skip, prompt: S, routes: [{to: report}]}
          - name: report
            prompt: |
              {% if fix is defined %}{{ fix.output.result }}{% else %}{{ skip.output.result }}{% endif %}
              {{ skip.output.result if fix is not defined else fix.output.result }}
              {% if skip is not defined %}{{ fix.output.result }}{% endif %}
              {{ fix is defined or skip.output.result }}
        output:
          text: "{% if fix is defined %}{{ fix.output.result }}{% else %}{{ skip.output.result }}{% endif %}"
          chain: |
            {% if fix is defined %}{{ fix.output.result }}{% elif skip is defined %}{{ skip.output.result }}{% else %}none{% endif %}
        """)
    assert found == []


def test_a_read_that_no_branch_makes_safe_still_warns(tmp_path: Path) -> None:
    found = check(tmp_path, """
        workflow: {name: t, entry_point: a}
        agents:
          - name: a
            prompt: A
            output: {bad: {type: boolean}}
            routes: [{to: fix, when: "{{ output.bad }}"}, {to: skip}]
          - {name: fix, prompt: F, routes: [{to: report}]}
          - {name: skip, prompt: S, routes: [{to: report}]}
          - name: report
            prompt: "{% if a is defined %}{{ skip.output.result }}{% endif %}"
        """)
    assert [d.message for d in found] == [
        "reads 'skip.output' but 'skip' may not have run when 'report' runs: e.g. a → fix → "
        "report"]


# --------------------------------------------------------------------------- hints


def test_hints_offer_only_names_valid_there(tmp_path: Path) -> None:
    found = check(tmp_path, """
        workflow:
          name: t
          entry_point: review
          input: {topic: {type: string}}
          hooks: {on_start: "{{ result }}", on_complete: "{{ result }}"}
        parallel: [{name: reviews, agents: [reviewer, checker], routes: [{to: report}]}]
        for_each:
          - {name: items, type: for_each, source: workflow.input.topic, as: it,
             agent: {name: each, prompt: "{{ _key }}"}}
        agents:
          - {name: review, prompt: R, routes: [{to: items, when: "{{ false }}"}, {to: reviews}]}
          - {name: reviewer, prompt: R}
          - {name: checker, prompt: C}
          - name: report
            prompt: |
              {{ reviews.output }}
              {{ reviewe.output }}
              {{ review.outputs }}
              {{ reviewsx.outputs }}
              {{ topic }}
        """)
    assert lines(found) == [
        # a hook never fails a run (Conductor renders hooks leniently): only a warning
        "wf.yaml:5:21: workflow.hooks.on_start: warning: unknown name 'result'",
        "wf.yaml:9:34: for_each[0].agent.prompt: unknown name '_key'",
        "wf.yaml:15:13: agents[3].prompt: group 'reviews' has no 'output' (did you mean "
        "'outputs'?)",
        # `reviewer` is a parallel member: its output lives only inside its group
        "wf.yaml:17:7: agents[3].prompt: unknown step 'reviewe' (did you mean 'review'?)",
        "wf.yaml:18:7: agents[3].prompt: 'review.outputs': a step exposes only "
        "'review.output' (did you mean 'review.output'?)",
        "wf.yaml:19:7: agents[3].prompt: unknown group 'reviewsx' (did you mean 'reviews'?)",
        "wf.yaml:20:7: agents[3].prompt: unknown name 'topic' (did you mean "
        "'workflow.input.topic'?)",
    ]


def test_explicit_mode_hints_say_what_to_declare(tmp_path: Path) -> None:
    found = check(tmp_path, """
        workflow: {name: t, entry_point: planner, context: {mode: explicit}}
        agents:
          - {name: planner, prompt: P, routes: [{to: writer}]}
          - {name: writer, prompt: "{{ planer.output }}"}
        """)
    assert lines(found) == [
        "wf.yaml:4:28: agents[1].prompt: unknown step 'planer' (did you mean 'planner'? then "
        "add 'planner.output' to its input:)"]


def test_an_unknown_output_key_of_a_script_is_not_taken_for_a_typo(tmp_path: Path) -> None:
    # Conductor's wait-step example: `status` is a key the script prints, not 'check_status'
    found = check(tmp_path, """
        workflow: {name: t, entry_point: check_status}
        agents:
          - name: check_status
            type: script
            command: echo
            routes: [{to: $end, when: "status == 'ready'"}, {to: check_status}]
        """)
    assert found == []


# --------------------------------------------------------------------------- hermes and aca


def test_aca_is_not_supported_not_unknown_and_hermes_is_a_provider(tmp_path: Path) -> None:
    found = check(tmp_path, """
        workflow:
          name: t
          entry_point: a
          runtime:
            provider: {name: aca, pool_endpoint: "https://x.example", inner_provider: copilot}
        agents:
          - name: a
            prompt: A
            sandbox: {identifier_scope: item, working_dir: /workspace}
          - {name: b, provider: hermes, prompt: B}
        """)
    assert [(d.line, d.col, d.path, d.code) for d in found] == [
        (5, 22, "workflow.runtime.provider.name", "not-supported"),
        (9, 5, "agents[0].sandbox", "not-supported"),
        (10, 12, "agents[1].name", "unreachable"),
    ]
    messages = [d.message for d in found if d.severity == "error"]
    assert "provider 'aca' (Conductor's Azure Container Apps sandbox runtime) is not " \
           "supported by podium" in messages[0]
    assert "sandbox: is not supported by podium" in messages[1]
    assert not [d for d in found if "unknown key" in d.message]


def test_hermes_takes_its_fields_and_toolsets_not_mcp_servers(tmp_path: Path) -> None:
    found = check(tmp_path, """
        workflow:
          name: t
          entry_point: a
          runtime:
            provider: {name: hermes, hermes_toolsets: [web], hermes_skip_memory: true,
                       wire_api: responses}
            mcp_servers: {docs: {command: docs-server}}
        agents:
          - {name: a, prompt: A, tools: [read_file, web, docs__search, telepathy],
             reasoning: {effort: max}, routes: [{to: b}]}
          - {name: b, prompt: B, working_dir: /tmp}
        """)
    assert [(d.line, d.path, d.code) for d in found] == [
        (6, "workflow.runtime.provider.wire_api", "provider-field"),
        (9, "agents[0]", "provider-capability"),
        (9, "agents[0].tools[2]", "provider-capability"),
        (9, "agents[0].tools[3]", "unknown-tool"),
        (10, "agents[0].reasoning.effort", "reasoning-effort"),
        (11, "agents[1]", "provider-capability"),
        (11, "agents[1].working_dir", "provider-capability"),
    ]
    messages = {d.path: d.message for d in found if d.path != "agents[1]"}
    assert "provider 'hermes' cannot use MCP servers" in messages["agents[0]"]
    assert "cannot use MCP servers, so not 'docs__search'" in messages["agents[0].tools[2]"]
    assert "low, medium, high, xhigh" in messages["agents[0].reasoning.effort"]
    assert "takes no working_dir" in messages["agents[1].working_dir"]
    assert "'telepathy' is not a tool podium knows provider 'hermes' to have" in \
        messages["agents[0].tools[3]"]


def test_a_bad_sandbox_key_is_unknown(tmp_path: Path) -> None:
    found = check(tmp_path, """
        workflow: {name: t, entry_point: a}
        agents:
          - {name: a, prompt: A, sandbox: {identifier_scop: item}}
        """)
    assert lines(found) == [
        "wf.yaml:3:36: agents[0].sandbox.identifier_scop: unknown key 'identifier_scop' (did "
        "you mean 'identifier_scope'?)"]


# --------------------------------------------------------------------------- runtime tools


def test_runtime_tool_names_for_the_agents_whose_runtime_has_them(tmp_path: Path) -> None:
    found = check(tmp_path, """
        workflow: {name: t, entry_point: a, runtime: {provider: copilot}}
        tools: [web_search, read_file]
        agents:
          - {name: a, prompt: A, routes: [{to: b}]}
          - {name: b, provider: claude-agent-sdk, tools: [WebSearch, Bash], prompt: B,
             routes: [{to: c}]}
          - {name: c, provider: openai, model: gpt-4o, tools: [web_search], prompt: C,
             routes: [{to: d}]}
          - {name: d, provider: copilot, tools: [file_reader], prompt: D}
        """)
    assert lines(found) == [
        "wf.yaml:7:56: agents[2].tools[0]: 'web_search' is a tool of the copilot runtime, "
        "which provider 'openai' does not have (agent 'c' on provider 'openai'): tools are "
        "read_file, list_dir, search, write_file, edit_file, run_command, or <server>__<tool> "
        "for a server in runtime.mcp_servers (did you mean 'search'?)",
        "wf.yaml:9:42: agents[3].tools[0]: warning: 'file_reader' is not a tool podium knows "
        "provider 'copilot' to have; it is asked of the runtime as is (agent 'd' on provider "
        "'copilot')",
    ]


def test_the_root_tools_list_is_checked_for_the_agents_that_inherit_it(tmp_path: Path) -> None:
    found = check(tmp_path, """
        workflow: {name: t, entry_point: a, runtime: {provider: openai, default_model: gpt-4o}}
        tools: [web_search]
        agents:
          - {name: a, prompt: A, routes: [{to: b}]}
          - {name: b, provider: copilot, prompt: B}
        """)
    assert [(d.line, d.col, d.message.split(":")[0]) for d in found] == [
        (2, 9, "'web_search' is a tool of the copilot runtime, which provider 'openai' does "
               "not have (agent 'a' on provider 'openai')")]


# --------------------------------------------------------------------------- context tier


def test_context_tier(tmp_path: Path) -> None:
    found = check(tmp_path, """
        workflow:
          name: t
          entry_point: a
          runtime: {provider: copilot, default_context_tier: long_context}
        agents:
          - {name: a, prompt: A, context_tier: default, routes: [{to: b}]}
          - {name: b, prompt: B, context_tier: "{{ 'long_context' }}", routes: [{to: c}]}
          - {name: c, prompt: C, context_tier: huge, routes: [{to: d}]}
          - {name: d, provider: openai, model: gpt-4o, prompt: D, context_tier: long_context,
             routes: [{to: e}]}
          - {name: e, provider: openai, model: gpt-4o, prompt: E}
        """)
    assert lines(found) == [
        "wf.yaml:4:32: workflow.runtime.default_context_tier: warning: default_context_tier "
        "applies only to agents on copilot; not to 'e'",
        "wf.yaml:8:40: agents[2].context_tier: context_tier must be default or long_context "
        "(or a template), not 'huge'",
        "wf.yaml:9:59: agents[3].context_tier: agent 'd': context_tier: podium does not "
        "support context tiers for provider 'openai' (only copilot has them)",
    ]


def test_a_default_context_tier_no_agent_can_use(tmp_path: Path) -> None:
    found = check(tmp_path, """
        workflow:
          name: t
          entry_point: a
          runtime: {provider: claude-agent-sdk, default_context_tier: long_context}
        agents: [{name: a, prompt: A}]
        """)
    assert lines(found) == [
        "wf.yaml:4:41: workflow.runtime.default_context_tier: default_context_tier: podium "
        "does not support context tiers for the providers these agents use (only copilot has "
        "them)"]


# --------------------------------------------------------------------------- skills, plugins


def test_skills_and_plugins_given_by_folder_on_the_runtimes(tmp_path: Path) -> None:
    write(tmp_path, "skills/notes/SKILL.md", "---\nname: notes\ndescription: d\n---\nx\n")
    write(tmp_path, "more/a/SKILL.md", "---\nname: a\ndescription: d\n---\nx\n")
    write(tmp_path, "plugins/demo/.claude-plugin/plugin.json", '{"name": "demo"}')
    found = check(tmp_path, """
        workflow:
          name: t
          entry_point: a
          runtime: {provider: copilot, skills: [./skills/notes], plugins: [./plugins/demo]}
        agents:
          - {name: a, prompt: A, routes: [{to: b}]}
          - {name: b, provider: claude-agent-sdk, skills: [./more], prompt: B, routes: [{to: c}]}
          - {name: c, provider: openai, model: gpt-4o, skills: [], plugins: [], prompt: C}
        """)
    assert found == []


def test_skills_and_plugins_podium_cannot_load(tmp_path: Path) -> None:
    write(tmp_path, "empty/README.md", "no skill here\n")
    found = check(tmp_path, """
        workflow:
          name: t
          entry_point: a
          runtime:
            provider: copilot
            skills: [conductor, reviewer, ./missing, ./empty]
            plugins: [demo@examples, {name: ado, mcp: false}]
            skill_injection: {max_bytes: 1000}
            plugin_sources: {acme: acme/plugins}
        agents: [{name: a, prompt: A}]
        """)
    assert lines(found) == [
        "wf.yaml:6:25: workflow.runtime.skills[1]: skill 'reviewer' is a name: podium ships "
        "only the skills podium, conductor and does not support other skills by name yet; give "
        "the skill's folder (e.g. ./skills/reviewer)",
        f"wf.yaml:6:35: workflow.runtime.skills[2]: skill folder not found: './missing' "
        f"(looked for {tmp_path / 'missing'})",
        "wf.yaml:6:46: workflow.runtime.skills[3]: './empty' has no SKILL.md, nor folders that "
        "have one",
        "wf.yaml:7:15: workflow.runtime.plugins[0]: plugin 'demo@examples': marketplace "
        "'examples' is not in runtime.plugin_sources (it declares: acme)",
        "wf.yaml:7:30: workflow.runtime.plugins[1]: the object form of a plugin entry is not "
        "supported by podium yet; give the plugin's folder or name@marketplace as a string",
        "wf.yaml:8:5: workflow.runtime.skill_injection: skill_injection: not supported by "
        "podium yet (skills and plugins are loaded only from the folders `skills:` and "
        "`plugins:` name)",
    ]


def test_skills_for_a_provider_without_them(tmp_path: Path) -> None:
    write(tmp_path, "skills/notes/SKILL.md", "---\nname: notes\ndescription: d\n---\nx\n")
    found = check(tmp_path, """
        workflow:
          name: t
          entry_point: a
          runtime: {provider: openai, default_model: gpt-4o, skills: [./skills/notes]}
        agents:
          - {name: a, prompt: A, routes: [{to: b}]}
          - {name: b, prompt: B, skills: [./skills/notes], plugins: [./skills], routes: [{to: c}]}
          - {name: c, prompt: C, skills: []}
        """)
    assert lines(found) == [
        "wf.yaml:4:54: workflow.runtime.skills: skills: podium does not support skills for "
        "provider 'openai' yet (agents 'a' get this list; skills load on copilot, "
        "claude-agent-sdk) (give those agents 'skills: []')",
        "wf.yaml:7:26: agents[1].skills: agent 'b': skills: podium does not support skills for "
        "provider 'openai' yet (they load on copilot, claude-agent-sdk)",
        "wf.yaml:7:52: agents[1].plugins: agent 'b': plugins: podium does not support plugins "
        "for provider 'openai' yet (they load on copilot, claude-agent-sdk)",
    ]


# --------------------------------------------------------------------------- partials


def test_partials_of_a_file_prompt_are_resolved_and_checked(tmp_path: Path) -> None:
    write(tmp_path, "prompts/review.md",
          "{% import 'lib/macros.md' as m %}{% include 'lib/head.md' %}\n"
          "{% include 'lib/missing.md' %}{{ m.shout(1) }}\n")
    write(tmp_path, "prompts/lib/head.md", "Head {{ reviewr.output }}\n{% include 'deep.md' %}")
    write(tmp_path, "prompts/lib/deep.md", "{% if %}")
    write(tmp_path, "prompts/lib/macros.md", "{% macro shout(x) %}{{ x }}{% endmacro %}")
    found = check(tmp_path, """
        workflow: {name: t, entry_point: a}
        agents:
          - name: a
            prompt: !file prompts/review.md
            routes: [{to: reviewer}]
          - {name: reviewer, prompt: R}
        """)
    assert lines(found) == [
        "deep.md:1:1: agents[0].prompt: template syntax error: Expected an expression, got "
        "'end of statement block'",
        "head.md:1:1: agents[0].prompt: unknown step 'reviewr' (did you mean 'reviewer'?)",
        f"wf.yaml:4:13: agents[0].prompt: {{% include %}}: template not found: "
        f"'lib/missing.md' (looked for {tmp_path / 'prompts/lib/missing.md'})",
    ]


def test_partials_cannot_leave_the_workflow_folder(tmp_path: Path) -> None:
    write(tmp_path, "flow/p.md", "{% include '../../secret.md' %}{% include '/etc/hosts' %}")
    write(tmp_path, "secret.md", "s")
    (tmp_path / "flow" / "wf.yaml").write_text(
        "workflow: {name: t, entry_point: a}\n"
        "agents:\n"
        "  - {name: a, prompt: !file p.md, routes: [{to: b}]}\n"
        "  - {name: b, prompt: \"{% include 'p.md' %}\"}\n", encoding="utf-8")
    found = validate_file(tmp_path / "flow" / "wf.yaml", environ={}).sink.sorted()
    assert [(d.line, d.col, d.message) for d in found] == [
        (3, 23, f"{{% include %}}: '../../secret.md' is outside the workflow's folder (it "
                f"would be {tmp_path.parent / 'secret.md'})"),
        (3, 23, "{% include %}: '/etc/hosts': give a path relative to the including file, not "
                "an absolute one"),
        (4, 23, "{% include %}: 'p.md': {% include %}, {% import %} and {% extends %} need a "
                "prompt read from a file (prompt: !file prompt.md), whose folder their names "
                "are relative to"),
    ]


def test_spill_to_file_false_on_copilot_turns_the_limit_off(tmp_path: Path) -> None:
    found = check(tmp_path, """
        workflow:
          name: t
          entry_point: a
          runtime:
            provider: copilot
            tool_output: {max_chars: 2000, spill_to_file: false}
        agents: [{name: a, prompt: A}]
        """)
    assert lines(found) == [
        "wf.yaml:6:36: workflow.runtime.tool_output.spill_to_file: warning: on copilot, "
        "spill_to_file: false turns the tool output limit off (the Copilot runtime cannot cut "
        "a result without writing it to a file)"]


def test_declaration_and_key_hints_name_only_what_fits(tmp_path: Path) -> None:
    found = check(tmp_path, """
        workflow: {name: t, entry_point: team, context: {mode: explicit}}
        parallel: [{name: team, agents: [writer, editor], routes: [{to: report}]}]
        agents:
          - {name: writer, prompt: W}
          - {name: editor, prompt: E}
          - {name: teams, type: script, command: echo, routes: [{to: report}]}
          - {name: report, prompt: R, input: [tem.outputs, writr.output]}
        """)
    assert [(d.path, d.message, d.hint) for d in found if d.severity == "error"] == [
        ("agents[3].input[0]", "unknown step 'tem'", "did you mean 'team'?"),
        # `writer` is a parallel member: its output is only in its group's
        ("agents[3].input[1]", "unknown step 'writr'", None),
    ]
    gate = check(tmp_path, """
        workflow: {name: t, entry_point: gate}
        agents:
          - name: gate
            type: human_gate
            prompt: ok?
            options: [{label: y, value: y, route: $end}]
            rotes: []
        """, name="gate.yaml")
    # gates ignore `routes`: it is not offered for a misspelt key
    assert [(d.path, d.message, d.hint) for d in gate] == [
        ("agents[0].rotes", "unknown key 'rotes'", None)]


LENIENT = """
workflow:
  name: t
  entry_point: a
  runtime: {provider: openai, default_model: m@runtime@}
  limits: {max_iterations: 5@limits@}
  input:
    items: {type: array@input@}
agents:
  - name: a
    prompt: hi
    tools: []
    retry: {max_attempts: 2@retry@}
    routes: [{to: gate}]
  - name: gate
    type: human_gate
    prompt: ok?
    options:
      - {label: yes, value: y, route: fan@option@}
for_each:
  - name: fan
    type: for_each
    source: workflow.input.items
    as: item
    agent: {name: w, tools: [], prompt: "do {{ item }}", retry: {max_attempts: 2@inner@}}
"""
PLACES = {"runtime": "workflow.runtime", "limits": "workflow.limits",
          "input": "workflow.input.items", "retry": "agents[0].retry",
          "option": "agents[1].options[0]", "inner": "for_each[0].agent.retry"}


def _lenient(tmp_path: Path, *unknown: str) -> list[tuple[str, str]]:
    text = LENIENT
    for k in PLACES:
        text = text.replace(f"@{k}@", f", bogus_{k}: 1" if k in unknown else "")
    return [(d.path, d.message) for d in check(tmp_path, text) if d.code == "unknown-key"]


def test_an_unknown_key_of_a_lenient_block_is_warned_of_at_any_depth(tmp_path: Path) -> None:
    # a block Conductor reads leniently (runtime, limits, an input, retry, a gate's option)
    # keeps an unknown key, and validate names each: in the workflow block, in a step, in a
    # step nested in a group, alone or together
    assert _lenient(tmp_path) == []
    assert _lenient(tmp_path, *PLACES) == [
        (f"{where}.bogus_{k}", f"unknown key 'bogus_{k}' is ignored")
        for k, where in PLACES.items()]
    for k, where in PLACES.items():
        assert _lenient(tmp_path, k) == [(f"{where}.bogus_{k}",
                                          f"unknown key 'bogus_{k}' is ignored")], k
