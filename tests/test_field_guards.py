"""Guards over output fields (issue 29): a guarded read of a field a step does not bind
passes `validate` and renders its fallback at run time; an unguarded one stays an error at
its file:line. The verdicts against Conductor's own are in test_conductor_parity_workflows.py;
this file pins the diagnostics."""

from __future__ import annotations

from pathlib import Path

from helpers_engine import diagnostics, run_workflow, write

HEAD = """
workflow:
  name: g
  entry_point: a
agents:
  - name: a
    type: set
    values:
      x: "1"
    routes: [{to: b}]
  - name: b
    type: set
    values:
"""


def _flow(tmp_path: Path, *values: str) -> Path:
    body = "".join(f"      v{i}: |-\n        {v}\n" for i, v in enumerate(values))
    return write(tmp_path, HEAD + body + "output:\n" + "".join(
        f"  v{i}: \"{{{{ b.output.v{i} }}}}\"\n" for i in range(len(values))))


GUARDED = ["{{ a.output.zz | default('x') }}", "{{ a.output['zz'] | d('x') }}",
           "{{ 'y' if a.output.zz is defined else 'n' }}",
           "{{ (a.output.zz is defined) and a.output.zz }}",
           "{% if a.output.zz is defined %}{{ a.output.zz }}{% else %}n{% endif %}",
           "{% if a.output.zz is undefined %}n{% else %}{{ a.output.zz }}{% endif %}",
           "{{ a.output.zz if 'zz' in a.output else 'n' }}",
           "{{ 'n' if 'zz' not in a.output else a.output.zz }}",
           "{{ workflow.version | default('none') }}"]


def test_every_guard_form_passes_and_renders_its_fallback(tmp_path: Path) -> None:
    path = _flow(tmp_path, *GUARDED)
    assert diagnostics(path) == []
    run = run_workflow(path)
    assert run.exit_code == 0, run.error_text()
    assert run.output == {"v0": "x", "v1": "x", "v2": "n", "v3": False, "v4": "n",
                          "v5": "n", "v6": "n", "v7": "n", "v8": "none"}


def test_an_unguarded_read_is_an_error_at_its_line(tmp_path: Path) -> None:
    path = _flow(tmp_path, "{{ a.output.zz }}", "{% if a is defined %}{{ a.output.zz }}{% endif %}",
                 "{{ a.output.zz.w | default('x') }}", "{{ workflow.version }}")
    found = [d.split(tmp_path.name + "/", 1)[-1] for d in diagnostics(path)]
    assert found == [
        "wf.yaml:13:11: agents[1].values.v0: 'a' has no output field 'zz' (its fields: x)",
        "wf.yaml:15:11: agents[1].values.v1: 'a' has no output field 'zz' (its fields: x)",
        "wf.yaml:17:11: agents[1].values.v2: 'a' has no output field 'zz' (its fields: x)",
        "wf.yaml:19:11: agents[1].values.v3: 'workflow' has no 'version'",
    ]


def test_a_guard_on_one_field_does_not_cover_another(tmp_path: Path) -> None:
    path = _flow(tmp_path, "{% if a.output.zz is defined %}{{ a.output.yy }}{% endif %}")
    assert [d.split(": ", 2)[2] for d in diagnostics(path)] == [
        "'a' has no output field 'yy' (its fields: x)"]


def test_explicit_optional_field_passes_and_reads_its_fallback(tmp_path: Path) -> None:
    path = write(tmp_path, """
        workflow: {name: g, entry_point: a, context: {mode: explicit}}
        agents:
          - {name: a, type: set, values: {x: "1"}, routes: [{to: b}]}
          - name: b
            type: set
            input: [a.output.zz?]
            value: "{{ a.output.zz | default('none') }}"
        output:
          r: "{{ b.output }}"
        """)
    assert diagnostics(path) == []
    assert run_workflow(path).output == {"r": "none"}


def test_a_bare_step_in_input_is_refused_at_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, """
        workflow: {name: g, entry_point: a}
        agents:
          - {name: a, type: set, values: {x: "1"}, routes: [{to: b}]}
          - {name: b, type: set, input: [a], value: "{{ a.output.x }}"}
        """)
    assert [d.split(tmp_path.name + "/", 1)[-1] for d in diagnostics(path)] == [
        "wf.yaml:4:34: agents[1].input[0]: 'a' is not a valid input reference "
        "(write 'a.output' for the whole output of 'a')"]


def test_a_script_schema_does_not_hide_the_other_stdout_keys(tmp_path: Path) -> None:
    path = write(tmp_path, """
        workflow: {name: g, entry_point: s}
        agents:
          - name: s
            type: script
            command: echo
            args: ['{"k": 1, "extra": "e"}']
            output:
              k: {type: number}
            routes:
              - {to: $end, when: "extra == 'e'", output: {r: "{{ s.output.extra }}"}}
              - {to: $end}
        """)
    assert diagnostics(path) == []
    assert run_workflow(path).output == {"r": "e"}


def test_hook_templates_only_warn(tmp_path: Path) -> None:
    path = write(tmp_path, """
        workflow:
          name: g
          entry_point: a
          hooks: {on_complete: "{{ nosuch.output.x }} {{ a.output | nosuchfilter }}"}
        agents:
          - {name: a, type: set, value: "1"}
        output:
          r: "{{ a.output }}"
        """)
    found = diagnostics(path)
    assert len(found) == 2
    assert all(": warning: " in d for d in found), found
    assert run_workflow(path).output == {"r": 1}
