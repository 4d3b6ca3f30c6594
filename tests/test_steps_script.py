"""The script step with real subprocesses: argv, templating, cwd, env, stdin, timeouts, the
output cap and the stdout contract (spec 3.6; section-15 cases 21-27).

Deliberate difference from Conductor: without `stdin:` the child's stdin is /dev/null (Conductor
lets the child inherit the parent's stdin).
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from helpers_engine import Run, process_gone, run_yaml, wait_until, write
from podium.errors import OutputContractError, StepError
from podium.events.model import ScriptOutput, StepFailed, StepFinished

PY = sys.executable


def script_run(tmp_path: Path, code: str, extra: str = "", routes: str = "",
               **kwargs: object) -> Run:
    """Run one script step executing `python -c CODE` (CODE as a YAML literal block)."""
    lines = textwrap.dedent(code).strip("\n").splitlines()
    body = "\n".join("                " + line for line in lines)
    text = f"""
        workflow: {{name: script, entry_point: s}}
        agents:
          - name: s
            type: script
            command: {json.dumps(PY)}
            args:
              - "-c"
              - |
{body}
{extra}
{routes}
    """
    return run_yaml(tmp_path, text, **kwargs)


def test_argv_is_passed_without_a_shell(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    hostile = f"x; rm -rf {victim} && echo pwned"
    run = run_yaml(tmp_path, f"""
        workflow:
          name: argv
          entry_point: s
          input:
            word: {{type: string}}
        agents:
          - name: s
            type: script
            command: python
            args: ["-c", "import json, sys; print(json.dumps({{'argv': sys.argv[1:]}}))",
                   "{{{{ workflow.input.word }}}}", "$HOME", "*", {json.dumps(hostile)}]
    """, inputs={"word": "it's \"quoted\" $(whoami)"})
    assert run.exit_code == 0
    assert run.outputs["s"]["argv"] == ["it's \"quoted\" $(whoami)", "$HOME", "*", hostile]
    assert victim.is_dir()
    (event,) = run.of(ScriptOutput)
    assert event.argv[0] == "python"
    assert event.argv[-1] == hostile


def test_working_dir_and_env(tmp_path: Path) -> None:
    work = tmp_path / "work dir"
    work.mkdir()
    run = script_run(tmp_path, """
        import json, os
        print(json.dumps({"cwd": os.getcwd(), "flag": os.environ["PODIUM_T_FLAG"],
                          "utf8": os.environ["PYTHONUTF8"], "home": "PODIUM_HOME" in os.environ}))
    """, extra="""
            working_dir: "{{ workflow.dir }}/work dir"
            env:
              PODIUM_T_FLAG: "{{ not rendered }}"
    """)
    assert run.exit_code == 0, run.error_text()
    out = run.outputs["s"]
    assert out["cwd"] == str(work)
    assert out["flag"] == "{{ not rendered }}"  # env values are not templates (spec 3.6)
    assert out["utf8"] == "1"
    assert run.of(ScriptOutput)[0].working_dir == str(work)


def test_missing_working_dir_fails_the_step(tmp_path: Path) -> None:
    run = script_run(tmp_path, "print(1)", extra="""
            working_dir: "/nonexistent/podium-test"
    """)
    assert run.exit_code == 3
    assert "working_dir '/nonexistent/podium-test' does not exist" in run.error_text()


def test_command_not_found(tmp_path: Path) -> None:
    run = run_yaml(tmp_path, """
        workflow: {name: nf, entry_point: s}
        agents:
          - {name: s, type: script, command: podium-no-such-command-xyz}
    """)
    assert run.exit_code == 3
    assert isinstance(run.result.error, StepError)
    assert "command not found: 'podium-no-such-command-xyz'" in run.error_text()


def test_stdin_is_rendered_and_piped(tmp_path: Path) -> None:
    # case 27 (podium has no stdin_bytes field: the child's view is what is asserted)
    run = run_yaml(tmp_path, """
        workflow: {name: stdin, entry_point: data}
        agents:
          - name: data
            type: set
            values:
              items: [1, "dos", {"tres": 3}]
              name: "Zoë"
            routes: [{to: s}]
          - name: s
            type: script
            command: python
            args: ["-c", "import sys, json; d = json.load(sys.stdin); print(json.dumps({'got': d}))"]
            stdin: "{{ data.output | tojson }}"
    """)
    assert run.exit_code == 0, run.error_text()
    assert run.outputs["s"]["got"] == {"items": [1, "dos", {"tres": 3}], "name": "Zoë"}


def test_stdin_is_dev_null_when_not_set(tmp_path: Path) -> None:
    # podium differs from Conductor (inherited stdin): a script never waits on the terminal
    run = script_run(tmp_path, """
        import json, os, sys
        print(json.dumps({"data": sys.stdin.read(), "fd0": os.path.realpath("/proc/self/fd/0")}))
    """)
    assert run.exit_code == 0, run.error_text()
    assert run.outputs["s"]["data"] == ""
    if sys.platform.startswith("linux"):
        assert run.outputs["s"]["fd0"] == "/dev/null"


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="process groups are POSIX")
def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    run = script_run(tmp_path, f"""
        import subprocess, sys, time
        child = subprocess.Popen(["sleep", "30"])
        with open({str(pid_file)!r}, "w") as fh:
            fh.write(str(child.pid))
        print("spawned", flush=True)
        time.sleep(30)
    """, extra="""
            timeout: 1
    """)
    assert run.exit_code == 3
    assert isinstance(run.result.error, StepError)
    assert "timed out after 1s" in run.error_text()
    assert "process group" in run.error_text()
    grandchild = int(pid_file.read_text())
    assert wait_until(lambda: process_gone(grandchild), timeout=10), \
        f"grandchild {grandchild} survived the timeout"
    failed = run.of(StepFailed)[0]
    assert (failed.step, failed.error_type) == ("s", "StepError")
    assert run.of(StepFinished) == []


def test_stdout_past_its_limit_fails_the_step_and_keeps_an_excerpt(tmp_path: Path) -> None:
    run = script_run(tmp_path, """
        import sys
        sys.stderr.write("e" * 50)
        sys.stderr.flush()
        sys.stdout.write("o" * (1 << 20) + "p" * 5000)
    """, extra="""
            max_output_mb: 1
    """)
    assert run.exit_code == 3
    assert "passed its limit of 1 MB" in run.error_text()
    assert "max_output_mb" in run.error_text()
    (event,) = run.of(ScriptOutput)
    assert event.stdout_truncated is True
    assert event.stdout.startswith("o" * 1024 + "\n[... podium cut ")
    tail = event.stdout.partition(" here ...]\n")[2]  # the last KB read before the stop
    assert len(tail) == 1024
    assert set(tail) <= {"o", "p"}
    assert event.stderr == "e" * 50
    assert event.stderr_truncated is False
    assert run.of(StepFailed)[0].error_type == "StepError"
    assert run.of(StepFinished) == []


def test_stderr_past_the_limit_is_cut_not_failed(tmp_path: Path) -> None:
    # stderr is for people: its first part and its last KB are kept, the step goes on
    run = script_run(tmp_path, """
        import sys
        sys.stderr.write("e" * (1 << 20) + "f" * 3000)
        sys.stderr.buffer.write(b"\\xff\\x00")
        print("done")
    """, extra="""
            max_output_mb: 1
    """)
    assert run.exit_code == 0, run.error_text()
    (event,) = run.of(ScriptOutput)
    assert event.stderr_truncated is True
    assert event.stderr.startswith("e" * (1 << 20) + "\n[... podium cut 3,002 bytes")
    assert event.stderr.endswith("f" * 1022 + "\ufffd\ufffd")
    assert run.outputs["s"]["stdout"] == "done\n"


def test_lenient_json_object_is_merged_and_routes_on_its_keys(tmp_path: Path) -> None:
    # case 21
    run = script_run(tmp_path, """
        import json, sys
        print(json.dumps({"route": "planning", "issue_count": 3}))
        print("log line", file=sys.stderr)
    """, routes="""
            routes:
              - to: planning
                when: "route == 'planning'"
              - to: $end
          - {name: planning, type: set, value: planned}
    """)
    out = run.outputs["s"]
    assert out["route"] == "planning"
    assert out["issue_count"] == 3
    assert out["exit_code"] == 0
    assert out["stderr"] == "log line\n"
    assert json.loads(out["stdout"]) == {"route": "planning", "issue_count": 3}
    assert run.routes()[0] == ("s", "planning")


@pytest.mark.parametrize("printed", ["[1, 2]", "42", "not json {", '{"a": 1}\ntrailing'])
def test_lenient_non_object_stdout_is_not_merged(tmp_path: Path, printed: str) -> None:
    # case 22 (first half)
    run = script_run(tmp_path, f"print({printed!r})")
    assert run.exit_code == 0
    assert set(run.outputs["s"]) == {"stdout", "stderr", "exit_code"}
    assert run.outputs["s"]["stdout"] == printed + "\n"


@pytest.mark.parametrize(("printed", "why"), [
    ("[1, 2]", "is a JSON list, not an object"),
    ("42", "is a JSON number, not an object"),
    ('{"a": 1}\nlog line', "stdout is not one JSON object"),
    ("", "stdout is not one JSON object"),  # case 24: `output: {}` and empty stdout
])
def test_strict_mode_requires_one_json_object(tmp_path: Path, printed: str, why: str) -> None:
    # case 22 (second half) and 24
    code = f"import sys; sys.stdout.write({printed!r})"
    run = script_run(tmp_path, code, extra="""
            output: {}
    """)
    assert run.exit_code == 3
    assert isinstance(run.result.error, OutputContractError)
    assert why in run.error_text()


def test_json_keys_shadow_the_builtins(tmp_path: Path) -> None:
    # case 23
    run = script_run(tmp_path, """print('{"exit_code": "ok"}')""")
    assert run.outputs["s"]["exit_code"] == "ok"


def test_strict_schema_failure_names_the_field_and_stores_nothing(tmp_path: Path) -> None:
    # case 25
    run = script_run(tmp_path, """
        import json, sys
        print(json.dumps({"count": "three"}))
        print("warned", file=sys.stderr)
        sys.exit(2)
    """, extra="""
            output:
              count: {type: number}
    """)
    assert run.exit_code == 3
    assert isinstance(run.result.error, OutputContractError)
    text = run.error_text()
    assert "output field 'count' has wrong type: expected number, got string" in text
    (failed,) = run.of(StepFailed)
    assert failed.error_type == "OutputContractError"
    assert failed.details["exit_code"] == 2
    assert failed.details["stderr"] == "warned\n"
    assert json.loads(failed.details["stdout"]) == {"count": "three"}
    assert run.of(StepFinished) == []
    assert "s" not in run.outputs
    assert run.result.iterations == 0


def test_strict_missing_field_is_named(tmp_path: Path) -> None:
    run = script_run(tmp_path, """print('{"other": 1}')""", extra="""
            output:
              verdict: {type: string}
    """)
    assert run.exit_code == 3
    assert "missing required output field: verdict" in run.error_text()


def test_strict_success_keeps_the_builtins(tmp_path: Path) -> None:
    run = script_run(tmp_path, """print('{"valid": true}')""", extra="""
            output:
              valid: {type: boolean}
    """)
    assert run.exit_code == 0
    assert run.outputs["s"]["valid"] is True
    assert run.outputs["s"]["exit_code"] == 0


def test_non_zero_exit_is_not_an_error_routes_decide(tmp_path: Path) -> None:
    # case 26
    run = script_run(tmp_path, "import sys; sys.exit(1)", routes="""
            routes:
              - to: ok
                when: "exit_code == 0"
              - to: fix
          - {name: ok, type: set, value: ok}
          - {name: fix, type: set, value: fix}
    """)
    assert run.exit_code == 0
    assert run.steps() == ["s", "fix"]
    assert run.outputs["s"]["exit_code"] == 1


def test_relative_command_with_a_separator_runs_from_working_dir(tmp_path: Path) -> None:
    tool = write(tmp_path, """
        #!/bin/sh
        echo "tool ran in $(pwd)"
    """, name="bin/tool.sh")
    tool.chmod(0o755)
    run = run_yaml(tmp_path, f"""
        workflow: {{name: rel, entry_point: s}}
        agents:
          - name: s
            type: script
            command: ./tool.sh
            working_dir: {json.dumps(str(tmp_path / "bin"))}
    """)
    assert run.exit_code == 0, run.error_text()
    assert run.outputs["s"]["stdout"] == f"tool ran in {tmp_path / 'bin'}\n"
