"""`podium validate` through the real CLI: the article's workflow, output formats, exit codes,
several files, and the validation test cases 58-63 of the spec (section 15)."""

from __future__ import annotations

import json
import re
import subprocess
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from podium.check.validate import validate_file
from podium.language.model import ScriptStep, SetStep

Runner = Callable[..., subprocess.CompletedProcess[str]]

ROOT = Path(__file__).resolve().parents[1]
ARTICLE = "examples/dev-review/workflow.yaml"
DIAG_RE = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): (?P<path>\S+): "
                     r"(?P<warning>warning: )?(?P<message>.+)$")


def write(tmp_path: Path, text: str, name: str = "wf.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


UNNAMED_TOOLS = "gets the default tools of provider"  # tests/test_tools_opt_in.py has those


def diagnostics(proc: subprocess.CompletedProcess[str]) -> list[re.Match[str]]:
    """The diagnostic lines of a text report, parsed (the summary line is not one), but for
    the warnings about a runtime's default tools (the article's agents on copilot get them)."""
    found = [DIAG_RE.match(line) for line in proc.stdout.splitlines()]
    return [m for m in found if m and UNNAMED_TOOLS not in m["message"]]


def without_output_template(tmp_path: Path) -> Path:
    """The article's workflow with the two `output_template` lines of ticket_invalid gone."""
    text = (ROOT / ARTICLE).read_text(encoding="utf-8")
    block = ('    output_template:\n'
             '      summary: "Ticket rejected before implementation"\n')
    assert text.count(block) == 1
    return write(tmp_path, text.replace(block, ""), "dev-review.yaml")


# --------------------------------------------------------------------------- the article


def test_article_workflow_is_valid(podium_cli: Runner) -> None:
    """Valid, with a warning for each agent that gets Copilot's default tools (a shell and
    file edits) without naming them: the developer, as the article intends, and the
    handoff summary; the listing says where each may write."""
    proc = podium_cli("validate", ARTICLE, cwd=ROOT)
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    warned = [m["path"] for m in map(DIAG_RE.match, lines) if m and UNNAMED_TOOLS in m["message"]]
    assert warned == ["agents[1]", "agents[7]"]
    assert lines[-3:] == [
        "  developer (copilot): the runtime's default tools (bash, create, edit, write_bash) "
        "in {{ workflow.input.repo_dir }}",
        "  handoff_summary (copilot): the runtime's default tools (bash, create, edit, "
        "write_bash) in the current directory",
        f"{ARTICLE}: valid: 2 warnings"]
    assert proc.stderr == ""


def test_article_without_output_template_warns_about_the_path(podium_cli: Runner,
                                                             tmp_path: Path) -> None:
    path = without_output_template(tmp_path)
    proc = podium_cli("validate", path.name, cwd=tmp_path)
    assert proc.returncode == 0
    found = diagnostics(proc)
    assert len(found) == 1, proc.stdout
    d = found[0]
    assert d["warning"]
    assert d["file"] == path.name
    assert d["path"] == "output.summary"
    assert "developer" in d["message"]
    assert "ticket_invalid" in d["message"]
    assert proc.stdout.splitlines()[-1] == f"{path.name}: valid: 3 warnings"

    strict = podium_cli("validate", "--strict", path.name, cwd=tmp_path)
    assert strict.returncode == 2
    assert diagnostics(strict)[0].group(0) == d.group(0)
    assert strict.stdout.splitlines()[-1] == f"{path.name}: invalid (--strict): 3 warnings"


# --------------------------------------------------------------------------- formats, files


def test_json_format_shape(podium_cli: Runner, tmp_path: Path) -> None:
    path = without_output_template(tmp_path)
    proc = podium_cli("validate", "--format", "json", str(path), ARTICLE, cwd=ROOT)
    assert proc.returncode == 0
    report = json.loads(proc.stdout)
    assert report["valid"] is True
    assert [f["valid"] for f in report["files"]] == [True, True]
    first, second = report["files"]
    assert [d["code"] for d in second["diagnostics"]] == ["unnamed-tools"] * 2
    assert [a["agent"] for a in second["tool_access"]] == ["developer", "handoff_summary"]
    (diag,) = [d for d in first["diagnostics"] if d["code"] != "unnamed-tools"]
    assert {"file", "line", "col", "path", "severity", "message", "hint"} <= set(diag)
    assert diag["file"] == first["file"]
    assert isinstance(diag["line"], int)
    assert isinstance(diag["col"], int)
    assert diag["path"] == "output.summary"
    assert diag["severity"] == "warning"
    assert "ticket_invalid" in diag["message"]
    assert "output_template" in diag["hint"]

    strict = json.loads(podium_cli("validate", "--format", "json", "--strict", str(path),
                                   cwd=ROOT).stdout)
    assert strict["valid"] is False
    assert strict["files"][0]["valid"] is False


def test_json_format_for_errors(podium_cli: Runner, tmp_path: Path) -> None:
    path = write(tmp_path, """
        workflow: {name: t, entry_point: a}
        agents:
          - name: a
            promt: hi
        """)
    proc = podium_cli("validate", "-f", "json", path.name, cwd=tmp_path)
    assert proc.returncode == 2
    (diag,) = json.loads(proc.stdout)["files"][0]["diagnostics"]
    assert diag == {"file": "wf.yaml", "line": 4, "col": 5, "path": "agents[0].promt",
                    "severity": "error", "code": "unknown-key",
                    "message": "unknown key 'promt'", "hint": "did you mean 'prompt'?"}


def test_unknown_format_is_a_usage_error(podium_cli: Runner) -> None:
    proc = podium_cli("validate", "--format", "xml", ARTICLE, cwd=ROOT)
    assert proc.returncode == 2
    assert "--format" in proc.stderr


def test_missing_file(podium_cli: Runner, tmp_path: Path) -> None:
    proc = podium_cli("validate", "nope.yaml", cwd=tmp_path)
    assert proc.returncode == 3
    assert proc.stdout == ""
    assert proc.stderr == "nope.yaml: file not found\n"


def test_several_files(podium_cli: Runner, tmp_path: Path) -> None:
    bad = write(tmp_path, """
        workflow: {name: t, entry_point: a}
        agents:
          - {name: a, type: set, value: 1, routes: [{to: b}]}
        """, "bad.yaml")
    good = write(tmp_path, """
        workflow: {name: t, entry_point: a}
        agents:
          - {name: a, type: set, value: 1}
        """, "good.yaml")
    proc = podium_cli("validate", good.name, bad.name, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout.splitlines() == [
        "bad.yaml:3:50: agents[0].routes[0].to: unknown step 'b' (one of: a, $end)",
        "2 files: invalid: 1 error",
    ]
    proc = podium_cli("validate", str(good), ARTICLE, cwd=ROOT)
    assert proc.returncode == 0
    assert proc.stdout.splitlines()[-1] == "2 files: valid: 2 warnings"


def test_missing_file_among_others_exits_3(podium_cli: Runner, tmp_path: Path) -> None:
    proc = podium_cli("validate", ARTICLE, str(tmp_path / "nope.yaml"), cwd=ROOT)
    assert proc.returncode == 3
    assert proc.stderr == f"{tmp_path / 'nope.yaml'}: file not found\n"
    assert "error" not in proc.stdout  # the readable file is still checked, and valid


# --------------------------------------------------------------------------- spec 15: 58-63


def messages(podium_cli: Runner, *args: str, cwd: Path) -> list[tuple[str, str, str]]:
    """(key path, severity, message) of every diagnostic, from the JSON report."""
    proc = podium_cli("validate", "--format", "json", *args, cwd=cwd)
    report = json.loads(proc.stdout)
    return [(d["path"], d["severity"], d["message"]) for f in report["files"]
            for d in f["diagnostics"] if d["code"] != "unnamed-tools"]


def test_58_stale_step_references(podium_cli: Runner, tmp_path: Path) -> None:
    write(tmp_path, """
        workflow: {name: t, entry_point: a}
        agents:
          - name: a
            system_prompt: "{{ old_agent.output.x }}"
            prompt: |
              {% for x in [1, 2] %}{{ x.output }}{% endfor %}
              {{ old_agent.output.x }}
            working_dir: "{{ old_agent.output.dir }}"
            routes: [{to: s}]
          - name: s
            type: script
            command: "{{ old_agent.output.cmd }}"
            args: ["{{ old_agent.output.arg }}"]
            working_dir: "{{ old_agent.output.dir }}"
        """)
    stale = ("error", "unknown step 'old_agent'")
    assert messages(podium_cli, "wf.yaml", cwd=tmp_path) == [
        ("agents[0].system_prompt", *stale),
        ("agents[0].prompt", *stale),
        ("agents[0].working_dir", *stale),
        ("agents[1].command", *stale),
        ("agents[1].args[0]", *stale),
        ("agents[1].working_dir", *stale),
    ]
    proc = podium_cli("validate", "wf.yaml", cwd=tmp_path)
    assert proc.returncode == 2
    # the error inside the `|` block points at its own line, not at the block's start
    assert "wf.yaml:7:7: agents[0].prompt: unknown step 'old_agent'\n" in proc.stdout


def test_58_loop_variable_is_not_a_step(podium_cli: Runner, tmp_path: Path) -> None:
    write(tmp_path, """
        workflow:
          name: t
          entry_point: a
          input: {items: {type: array}}
        agents:
          - name: a
            tools: []
            prompt: "{% for x in workflow.input.items %}{{ x.output }}{% endfor %}"
        """)
    proc = podium_cli("validate", "wf.yaml", cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (0, "wf.yaml: valid\n")


@pytest.mark.parametrize(("block", "expected"), [
    ("  input: {ticket: {type: string}}\n", 2),
    ("", 0),
], ids=["with-input-block", "without-input-block"])
def test_59_undeclared_workflow_input(podium_cli: Runner, tmp_path: Path, block: str,
                                      expected: int) -> None:
    (tmp_path / "wf.yaml").write_text(
        "workflow:\n  name: t\n  entry_point: a\n" + block
        + "agents:\n  - name: a\n    tools: []\n    prompt: '{{ workflow.input.nope }}'\n",
        encoding="utf-8")
    proc = podium_cli("validate", "wf.yaml", cwd=tmp_path)
    assert proc.returncode == expected
    if expected:
        assert messages(podium_cli, "wf.yaml", cwd=tmp_path) == [
            ("agents[0].prompt", "error", "unknown workflow input 'nope'")]
    else:
        assert proc.stdout == "wf.yaml: valid\n"


def test_60_explicit_mode_undeclared_dependencies(podium_cli: Runner, tmp_path: Path) -> None:
    write(tmp_path, """
        workflow:
          name: t
          entry_point: a
          context: {mode: explicit}
        agents:
          - name: a
            output: {val: {type: string}, x: {type: string}, y: {type: string}}
            routes: [{to: b}]
          - name: b
            prompt: "{{ a.output.val }}"
            routes: [{to: c}]
          - name: c
            input: [a.output.x]
            prompt: "{{ a.output.y }}"
        """)
    assert messages(podium_cli, "wf.yaml", cwd=tmp_path) == [
        ("agents[1].prompt", "warning", "'a.output.val' is not in the input: list of 'b' "
                                        "(context mode is explicit)"),
        ("agents[2].prompt", "warning", "'a.output.y' is not in the input: list of 'c', which "
                                        "has only a.output.x (context mode is explicit)"),
    ]
    assert podium_cli("validate", "wf.yaml", cwd=tmp_path).returncode == 0
    assert podium_cli("validate", "--strict", "wf.yaml", cwd=tmp_path).returncode == 2


PATHS = """
    workflow: {name: t, entry_point: check}
    agents:
      - name: check
        type: script
        command: "true"
        routes:
          - {to: work, when: "exit_code == 0"}
          - {to: stop}
      - name: work
        tools: []
        output: {summary: {type: string}}
      - name: stop
        type: terminate
        status: failed
        reason: check failed
    output:
      summary: "{{ work.output.summary }}"
    """


def test_61_output_path_coverage(podium_cli: Runner, tmp_path: Path) -> None:
    write(tmp_path, PATHS)
    ((path, severity, message),) = messages(podium_cli, "wf.yaml", cwd=tmp_path)
    assert (path, severity) == ("output.summary", "warning")
    assert "'work' does not run on every path to the end: e.g. check → stop" in message
    assert podium_cli("validate", "wf.yaml", cwd=tmp_path).returncode == 0


def test_61_terminate_with_output_template_is_excluded(podium_cli: Runner,
                                                       tmp_path: Path) -> None:
    text = PATHS.replace("reason: check failed\n", "reason: check failed\n"
                         "        output_template: {summary: stopped}\n")
    assert text != PATHS
    write(tmp_path, text)
    proc = podium_cli("validate", "wf.yaml", cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (0, "wf.yaml: valid\n")


def test_62_gate_routes_and_group_members(podium_cli: Runner, tmp_path: Path) -> None:
    write(tmp_path, """
        workflow:
          name: t
          entry_point: gate
          input: {files: {type: array}}
        agents:
          - name: gate
            type: human_gate
            prompt: Go?
            options:
              - {label: Yes, value: "yes", route: both}
              - {label: No, value: "no", route: nowhere}
          - name: a
            prompt: A
          - name: done
            type: terminate
            status: success
            reason: done
        parallel:
          - name: both
            agents: [a, done]
            routes: [{to: each}]
        for_each:
          - name: each
            type: for_each
            source: workflow.input.files
            as: f
            agent: {name: stop_item, type: terminate, status: failed, reason: "{{ f }}"}
        """)
    assert messages(podium_cli, "wf.yaml", cwd=tmp_path) == [
        ("agents[0].options[1].route", "error", "unknown step 'nowhere'"),
        ("parallel[0].agents[1]", "error", "'done' is a terminate step; parallel members must "
                                           "be agent or set steps"),
        ("for_each[0].agent.type", "error", "a for_each item step cannot be a terminate step"),
    ]
    assert podium_cli("validate", "wf.yaml", cwd=tmp_path).returncode == 2


ENV_WORKFLOW = """
    workflow: {name: t, entry_point: s}
    agents:
      - name: s
        type: script
        command: "${PODIUM_T63_CMD:-make}"
        args: ["${PODIUM_T63_OUTER}", "${PODIUM_T63_EMPTY:-}"]
        routes: [{to: m}]
      - name: m
        type: set
        value: "${PODIUM_T63_MISSING}"
    """


def test_63_missing_env_var_is_a_load_error(podium_cli: Runner, tmp_path: Path) -> None:
    write(tmp_path, ENV_WORKFLOW)
    proc = podium_cli("validate", "wf.yaml", cwd=tmp_path,
                      env={"PODIUM_T63_OUTER": "x"})
    assert proc.returncode == 2
    assert proc.stdout.splitlines() == [
        "wf.yaml:10:12: agents[1].value: environment variable 'PODIUM_T63_MISSING' is not "
        "set (set it, or write ${PODIUM_T63_MISSING:-default})",
    ]


def test_63_defaults_and_nested_env_refs(tmp_path: Path) -> None:
    path = write(tmp_path, ENV_WORKFLOW)
    result = validate_file(path, environ={"PODIUM_T63_OUTER": "${PODIUM_T63_INNER}-out",
                                          "PODIUM_T63_INNER": "in",
                                          "PODIUM_T63_MISSING": "42"})
    assert result.sink.items == []
    assert result.model is not None
    script, setter = result.model.agents
    assert isinstance(script, ScriptStep)
    assert isinstance(setter, SetStep)
    assert script.command == "make"
    assert script.args == ["in-out", ""]
    assert setter.value == "42"


def test_63_escaped_env_ref_is_literal(tmp_path: Path) -> None:
    path = write(tmp_path, """
        workflow: {name: t, entry_point: s}
        agents:
          - {name: s, type: script, command: echo, args: ["$${HOME}"]}
        """)
    result = validate_file(path, environ={})
    assert result.sink.items == []
    assert result.model is not None
    step = result.model.agents[0]
    assert isinstance(step, ScriptStep)
    assert step.args == ["${HOME}"]
