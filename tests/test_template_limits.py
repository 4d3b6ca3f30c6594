"""Bounded templates: every hostile template of tests/corpus/hostile_templates.yaml fails with a
RenderFailure naming the limit it reached, within 5 s and without growing past 1 GB; a step's
timeout and the run's timeout stop a render too; ordinary templates render as before; and the
`quote` filter makes a value one shell word.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from helpers_engine import run_cli, write
from podium.check.shell import command_string_index
from podium.check.validate import validate_file
from podium.templating import (
    MAX_RENDER_CHARS,
    MAX_VALUE_SIZE,
    Deadline,
    RenderFailure,
    TemplateEngine,
)

CORPUS = Path(__file__).parent / "corpus" / "hostile_templates.yaml"
BIG = "x" * 1_000_000
CONTEXT: dict[str, Any] = {
    "big": BIG, "items": list(range(1000)), "x": {"a": 1},
    "workflow": {"input": {"title": "a title"}},
}
SECONDS = 5.0  # the bound for a hostile template
MEMORY = 1 << 30  # and its bound for memory: 1 GB


def _corpus() -> list[tuple[str, str]]:
    entries = YAML(typ="safe").load(CORPUS.read_text(encoding="utf-8"))
    cases = []
    for entry in entries:
        if "unroll" in entry:
            head, body, times, tail = entry["unroll"]
            template = head + body * times + tail
        else:
            template = entry["template"]
        cases.append((entry["attack"], template))
    return cases


CASES = _corpus()


def test_the_corpus_has_at_least_seventy_attacks() -> None:
    assert len(CASES) >= 70
    assert len({attack for attack, _ in CASES}) == len(CASES)  # each says what it attacks


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("attack", "template"), CASES, ids=[a for a, _ in CASES])
def test_hostile_template_fails_within_bounds(attack: str, template: str) -> None:
    engine = TemplateEngine()
    engine.compile(template)  # compiling is not rendering: time the render alone
    tracemalloc.start()
    # the render's own CPU time: on a machine busy with other work (the suite runs on parallel
    # workers) wall time also counts the time spent waiting for a core
    started = time.process_time()
    try:
        with pytest.raises(RenderFailure) as failure:
            engine.render(template, CONTEXT, Deadline(30, "the test's deadline of 30s"))
        elapsed = time.process_time() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert elapsed < SECONDS, f"{attack}: {elapsed:.2f} s"
    assert peak < MEMORY, f"{attack}: {peak / 2**20:.0f} MiB"
    exc = failure.value
    assert exc.kind in ("size", "limit", "timeout", "error", "security", "undefined"), exc
    if exc.kind in ("size", "limit", "timeout"):
        assert exc.limit in ("output", "value", "memory", "steps", "time"), exc
        assert "limit" in str(exc) or "larger than" in str(exc), exc


def test_the_step_deadline_names_itself_and_comes_before_the_default() -> None:
    slow = ("{% set a = range(100000) | list %}{% set b = range(100000) | list %}"
            "{% for i in range(100000) %}{% if a == b %}{% endif %}{% endfor %}")
    started = time.monotonic()
    with pytest.raises(RenderFailure) as failure:
        TemplateEngine().render(slow, {}, Deadline(0.3, "the step's timeout of 0.3s"))
    assert time.monotonic() - started < 1.5
    assert (failure.value.kind, failure.value.limit) == ("timeout", "step-timeout")
    assert str(failure.value) == "rendering was stopped by the step's timeout of 0.3s"


def test_the_output_cap_is_checked_while_the_output_streams() -> None:
    with pytest.raises(RenderFailure) as failure:
        TemplateEngine().render("{% for i in range(100000) %}{{ big[:100] }}{% endfor %}",
                                CONTEXT)
    assert failure.value.limit == "output"
    assert f"{MAX_RENDER_CHARS:,}" in str(failure.value)


@pytest.mark.parametrize(("template", "expected"), [
    ("{{ items | length }} {{ big | length }}", "1000 1000000"),
    ("{% for i in items[:3] %}{{ i }},{% endfor %}", "0,1,2,"),
    ("{{ [items[:2], items[:2]] }}", "[[0, 1], [0, 1]]"),
    ("{{ 'ab' * 3 }}|{{ [1] * 3 }}|{{ 'a' ~ 1 ~ none }}", "ababab|[1, 1, 1]|a1None"),
    ("{{ '%5d|%-3s|' % (42, 'x') }}{{ '{:>4}'.format(7) }}", "   42|x  |   7"),
    ("{{ 'x' | center(5) }}|{{ 'a\nb' | indent(2) }}", "  x  |a\n  b"),
    ("{% set ns = namespace(s='') %}{% for i in range(5) %}{% set ns.s = ns.s ~ i %}"
     "{% endfor %}{{ ns.s }}", "01234"),
    ("{% macro m(a) %}<{{ a }}>{% endmacro %}{% set b %}{{ m(1) }}{{ m(2) }}{% endset %}{{ b }}",
     "<1><2>"),
    ("{% for i in [[1, [2]], [3]] recursive %}{{ i if i is number else loop(i) }}{% endfor %}",
     "123"),
    ("{{ [[1], [2, 3]] | sum(start=[]) }}|{{ items[:4] | batch(3, 0) | list }}",
     "[1, 2, 3]|[[0, 1, 2], [3, 0, 0]]"),
    ("{{ x | json }}|{{ x | tojson }}|{{ dict(b=2) }}", '{\n  "a": 1\n}|{"a": 1}|{\'b\': 2}'),
    ("{{ big[:5].replace('x', 'yz') }}|{{ '-'.join(['a', 'b']) }}|{{ 'a b'.split() }}",
     "yzyzyzyzyz|a-b|['a', 'b']"),
    ("{{ namespace(a=1) }}|{{ lipsum(1, false, 3, 5) | length > 0 }}", "<Namespace>|True"),
])
def test_ordinary_templates_render_as_before(template: str, expected: str) -> None:
    assert TemplateEngine().render(template, CONTEXT) == expected


def test_a_value_just_under_the_limit_is_allowed() -> None:
    text = TemplateEngine().render(f"{{{{ ('x' | center({MAX_VALUE_SIZE})) | length }}}}", {})
    assert text == str(MAX_VALUE_SIZE)


# --------------------------------------------------------------------------- quote


@pytest.mark.parametrize("value", [
    "plain", "two words", "it's", '"double"', "$(touch pwned)", "`id`", "a;b|c&d", "",
    "new\nline", "glob*?[x]", "~user", "-n", "ünïcödé",
])
def test_quote_makes_one_shell_word(value: str) -> None:
    quoted = TemplateEngine().render("{{ v | quote }}", {"v": value})
    assert quoted == shlex.quote(value)
    assert shlex.split(quoted) == [value]


def test_quote_of_lists_none_and_numbers() -> None:
    engine = TemplateEngine()
    assert engine.render("{{ v | quote }}", {"v": ["a b", "c", "it's"]}) == "'a b' c 'it'\"'\"'s'"
    assert shlex.split(engine.render("{{ v | quote }}", {"v": ["a b", "$x"]})) == ["a b", "$x"]
    assert engine.render("{{ v | quote }}", {"v": None}) == "''"
    assert engine.render("{{ 42 | quote }} {{ 1.5 | quote }} {{ true | quote }}", {}) == \
        "42 1.5 True"


def test_quote_keeps_a_hostile_input_out_of_bash(tmp_path: Path) -> None:
    hostile = "$(touch pwned) `touch pwned2`; touch pwned3 'quoted' \"dq\" \\"
    path = write(tmp_path, """
        workflow:
          name: quoted
          entry_point: echo
          input:
            title: {type: string}
        agents:
          - name: echo
            type: script
            command: bash
            args: ["-c", "printf '%s' {{ workflow.input.title | quote }}"]
            working_dir: "{{ workflow.dir }}"
        output:
          said: "{{ echo.output.stdout }}"
    """)
    proc = run_cli(tmp_path / "home", "run", path, "-i", f"title={hostile}", "-q")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"said": hostile}
    assert not any(tmp_path.glob("pwned*"))


# --------------------------------------------------------------------------- end to end


def _one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error")]
    assert len(errors) == 1, proc.stderr
    return errors[0]


@pytest.mark.timeout(60)
def test_a_hostile_set_step_fails_the_run_with_exit_3(tmp_path: Path) -> None:
    path = write(tmp_path, """
        workflow: {name: hostile, entry_point: build}
        agents:
          - name: build
            type: set
            value: "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    """)
    started = time.monotonic()
    proc = run_cli(tmp_path / "home", "run", path)
    assert time.monotonic() - started < 30
    assert proc.returncode == 3, proc.stderr
    line = _one_error_line(proc)
    assert "step 'build'" in line
    assert "more than 1,000,000 steps" in line
    assert "the limit of one render" in line


@pytest.mark.timeout(60)
def test_a_hostile_script_argument_fails_the_run_with_exit_3(tmp_path: Path) -> None:
    path = write(tmp_path, """
        workflow: {name: hostile, entry_point: run}
        agents:
          - name: run
            type: script
            command: echo
            args: ["{{ '%999999999d' % 1 }}"]
    """)
    proc = run_cli(tmp_path / "home", "run", path)
    assert proc.returncode == 3, proc.stderr
    line = _one_error_line(proc)
    assert "step 'run'" in line
    assert "args[0]" in line
    assert f"more than {MAX_VALUE_SIZE:,} characters" in line


SLOW_ARG = ("{% set a = range(100000) | list %}{% set b = range(100000) | list %}"
            "{% for i in range(100000) %}{% if a == b %}{% endif %}{% endfor %}")


@pytest.mark.timeout(60)
def test_a_script_timeout_stops_its_render_with_exit_3(tmp_path: Path) -> None:
    # the render's own bound is 2 s; the step's timeout of 1 s comes first
    path = write(tmp_path, f"""
        workflow: {{name: slow, entry_point: run}}
        agents:
          - name: run
            type: script
            command: echo
            timeout: 1
            args: ["{SLOW_ARG}"]
    """)
    proc = run_cli(tmp_path / "home", "run", path)
    assert proc.returncode == 3, proc.stderr
    line = _one_error_line(proc)
    assert "step 'run'" in line
    assert "rendering was stopped by the step's timeout of 1s" in line


@pytest.mark.timeout(60)
def test_the_workflow_timeout_stops_a_render_with_exit_4(tmp_path: Path) -> None:
    path = write(tmp_path, f"""
        workflow:
          name: slow
          entry_point: wait
          limits: {{timeout_seconds: 1}}
        agents:
          - name: wait
            type: script
            command: python
            args: ["-c", "import time; time.sleep(0.5)"]
            routes: [{{to: build}}]
          - name: build
            type: set
            value: "{SLOW_ARG}"
    """)
    started = time.monotonic()
    proc = run_cli(tmp_path / "home", "run", path)
    assert time.monotonic() - started < 30
    assert proc.returncode == 4, proc.stderr
    line = _one_error_line(proc)
    assert "step 'build'" in line
    assert "the run's timeout expired while rendering value" in line


# --------------------------------------------------------------------------- validate


def _validate(tmp_path: Path, text: str) -> list[str]:
    path = write(tmp_path, text)
    found = validate_file(path, environ={}).sink.sorted()
    return [d.format().removeprefix(str(tmp_path) + "/") for d in found
            if d.code == "unquoted-shell"]


SHELL_WF = """
    workflow:
      name: sh
      entry_point: planner
      input:
        title: {{type: string}}
        n: {{type: number}}
    agents:
      - name: planner
        prompt: "plan"
        routes: [{{to: run}}]
      - name: run
        type: script
        command: {command}
        args: {args}
"""


@pytest.mark.parametrize(("command", "args", "expected"), [
    ("bash", '["-c", "echo {{ workflow.input.title }}"]', ["workflow.input.title"]),
    ("/bin/sh", '["-ec", "echo {{ planner.output.result }}"]', ["planner.output.result"]),
    ("zsh", '["-o", "pipefail", "-c", "echo x{{ workflow.input.title ~ \'!\' }}"]',
     ["workflow.input.title"]),
    ("bash", '["-c", "{% for t in workflow.input.title %}echo {{ t }}{% endfor %}"]', ["t"]),
    ("dash", '["-c", "echo {{ workflow.input.title | upper | default(\'x\') }}"]',
     ["workflow.input.title"]),
])
def test_validate_warns_at_an_unquoted_shell_argument(tmp_path: Path, command: str, args: str,
                                                       expected: list[str]) -> None:
    found = _validate(tmp_path, SHELL_WF.format(command=command, args=args))
    assert len(found) == len(expected), found
    for line, ref in zip(found, expected, strict=True):
        index = 3 if "pipefail" in args else 1
        assert line.startswith("wf.yaml:14:"), line
        assert f"agents[1].args[{index}]: warning: '{ref}' is pasted into a shell command " \
               f"unquoted" in line
        assert f"use {{{{ {ref} | quote }}}}" in line


@pytest.mark.parametrize(("command", "args"), [
    ("bash", '["-c", "echo {{ workflow.input.title | quote }}"]'),
    ("bash", '["-c", "echo {{ workflow.input.n | int }} {{ workflow.dir }} {{ run is defined }}"]'),
    ("bash", '["script.sh", "{{ workflow.input.title }}"]'),  # an argument, not shell code
    ("python", '["-c", "print(1)", "{{ workflow.input.title }}"]'),
    ("bash", '["-c", "echo $1", "x", "{{ workflow.input.title }}"]'),  # passed as $1: safe
    ("bash", '["-c", "{% set t = workflow.input.title | quote %}echo {{ t }}"]'),
])
def test_validate_is_quiet_about_quoted_or_non_shell_arguments(tmp_path: Path, command: str,
                                                               args: str) -> None:
    assert _validate(tmp_path, SHELL_WF.format(command=command, args=args)) == []


def test_the_shell_command_string_is_found_after_the_options() -> None:
    assert command_string_index(["-c", "x"]) == 1
    assert command_string_index(["-e", "-u", "-c", "x"]) == 3
    assert command_string_index(["-euxc", "x", "name", "arg"]) == 1
    assert command_string_index(["-o", "pipefail", "-c", "x"]) == 3
    assert command_string_index(["-c", "--", "x"]) == 2
    assert command_string_index(["script.sh", "-c", "x"]) is None
    assert command_string_index(["-e"]) is None
