"""Checker regressions, in-process: each test pins a bug found in the loader or the checks."""

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
    """The text form, with the file shown by its name only."""
    return [d.format().removeprefix(str(Path(d.file).parent) + "/") for d in found]


def test_names_bound_by_the_template_are_not_steps(tmp_path: Path) -> None:
    found = check(tmp_path, """
        workflow: {name: t, entry_point: a}
        agents:
          - name: a
            prompt: |
              {% for x in [1, 2] %}{{ x.output }}{% endfor %}
              {% for k, v in [[1, 2]] %}{{ k }}{{ v }}{% endfor %}
              {% set total = 3 %}{{ total }}
              {% set block %}x{% endset %}{{ block }}
              {% with w = 2 %}{{ w }}{% endwith %}
              {% macro m(p, q=1) %}{{ p }}{{ q }}{% endmacro %}{{ m(1) }}
        """)
    assert found == []


def test_a_bare_is_defined_guard_counts(tmp_path: Path) -> None:
    found = check(tmp_path, """
        workflow: {name: t, entry_point: a}
        agents:
          - name: a
            prompt: |
              {% if b is defined %}{{ b.output.result }}{% endif %}
              {{ b.output.result if b is defined else '' }}
            routes: [{to: b}]
          - name: b
            prompt: B
            routes: [{to: $end, when: "{{ 'ok' in b.output.result }}"}, {to: a}]
        """)
    assert found == []


def test_default_guards_an_unknown_name_but_flags_a_typo(tmp_path: Path) -> None:
    found = check(tmp_path, """
        workflow: {name: t, entry_point: s}
        agents:
          - {name: s, type: set, value: 1}
        output:
          missing: "{{ missing | default('fallback') }}"
          typo: "{{ ss.output | default('x') }}"
        """)
    assert lines(found) == [
        "wf.yaml:6:9: output.typo: warning: 'ss' is not a step or group, so this guard always "
        "takes its fallback (did you mean 's'?)",
    ]


def test_a_misspelt_key_is_one_mistake(tmp_path: Path) -> None:
    found = check(tmp_path, """
        workflow: {name: t, entrypoint: a}
        agents:
          - {name: a, type: script, comand: make}
        """)
    assert [(d.path, d.message) for d in found] == [
        ("workflow.entrypoint", "unknown key 'entrypoint'"),
        ("agents[0].comand", "unknown key 'comand'"),
    ]


def test_an_unknown_target_does_not_also_make_steps_unreachable(tmp_path: Path) -> None:
    found = check(tmp_path, """
        workflow: {name: t, entry_point: a}
        agents:
          - {name: a, prompt: A, routes: [{to: reviewr}]}
          - {name: reviewer, prompt: R}
          - {name: a, prompt: again}
        """)
    assert [d.code for d in found] == ["unknown-step", "duplicate-name"]


def test_an_included_prompt_is_checked_in_its_own_file(tmp_path: Path) -> None:
    (tmp_path / "prompt.md").write_text("Hello.\n\n{{ reviewr.output.x }}\n", encoding="utf-8")
    found = check(tmp_path, """
        workflow: {name: t, entry_point: a}
        agents:
          - name: a
            prompt: !file prompt.md
            routes: [{to: reviewer}]
          - {name: reviewer, prompt: R}
        """)
    assert [(Path(d.file).name, d.line, d.col, d.message) for d in found] == [
        ("prompt.md", 3, 1, "unknown step 'reviewr'")]


def test_folded_text_is_reported_where_it_starts(tmp_path: Path) -> None:
    # `>` folds line breaks, so the template's line 3 is not the file's: no guessing
    found = check(tmp_path, """
        workflow: {name: t, entry_point: a}
        agents:
          - name: a
            prompt: >
              one
              two

              {{ nope.output }}
        """)
    assert [(d.line, d.col) for d in found] == [(4, 13)]


def test_a_broken_nested_include_is_not_swallowed(tmp_path: Path) -> None:
    (tmp_path / "steps.yaml").write_text("- name: a\n  prompt: !file missing.md\n",
                                         encoding="utf-8")
    found = check(tmp_path, "workflow: {name: t, entry_point: a}\nagents: !file steps.yaml\n")
    assert [(Path(d.file).name, d.line, d.message.split(":")[0]) for d in found] == [
        ("steps.yaml", 2, "included file not found")]


def test_values_with_control_characters_stay_on_one_line(tmp_path: Path) -> None:
    found = check(tmp_path, 'workflow: {name: t, entry_point: "a\\nb\\u001b[31m"}\n'
                            "agents: [{name: a, prompt: A}]\n")
    (line,) = lines(found)
    assert "\n" not in line
    assert "\x1b" not in line
    assert "'a\\nb\\x1b[31m'" in line


def test_a_likely_typo_in_a_script_condition_warns(tmp_path: Path) -> None:
    found = check(tmp_path, """
        workflow: {name: t, entry_point: s}
        agents:
          - name: s
            type: script
            command: make
            routes:
              - {to: $end, when: "exitcode == 0"}
              - {to: $end, when: "route == 'done'"}
              - {to: s}
        """)
    # `route` may come from the script's JSON stdout; `exitcode` looks like `exit_code`
    assert [(d.severity, d.message, d.hint) for d in found] == [
        ("warning", "unknown name 'exitcode' in condition, unless 's' outputs it",
         "did you mean 'exit_code'?")]


def test_templates_too_deep_to_read_are_one_error(tmp_path: Path) -> None:
    deep = "(" * 3000 + "1" + ")" * 3000
    found = check(tmp_path, f"""
        workflow: {{name: t, entry_point: a}}
        agents:
          - name: a
            prompt: "{{{{ {deep} }}}}"
            routes: [{{to: $end, when: "{deep}"}}, {{to: a}}]
        """)
    assert [(d.path, d.message) for d in found] == [
        ("agents[0].prompt", "template syntax error: nesting too deep to read"),
        ("agents[0].routes[0].when", "condition syntax error: nesting too deep to read"),
    ]
