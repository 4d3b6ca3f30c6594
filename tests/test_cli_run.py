"""`podium run` as a user runs it: every documented exit code, stdout holding only the final
output, progress on stderr, and model text printed literally.

Exit codes (podium distinguishes what Conductor reports as 1): 0 success, 1 failed terminate,
2 invalid workflow or usage, 3 runtime error or missing file, 4 limit, 130 interrupted.
"""

from __future__ import annotations

import contextlib
import functools
import json
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers_engine import (
    REPO_ROOT,
    cli_env,
    podium_argv,
    process_gone,
    read_jsonl,
    run_cli,
    wait_until,
    write,
)

OK_WF = """
workflow:
  name: cli-ok
  entry_point: s
  input:
    n: {type: number}
agents:
  - name: s
    type: script
    command: python
    args: ["-c", "print('progress goes to stdout of the script, not of podium')"]
    routes: [{to: t}]
  - {name: t, type: set, value: "{{ workflow.input.n * 2 }}"}
output:
  doubled: "{{ t.output }}"
"""


def test_exit_0_stdout_is_only_the_output_json(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    proc = run_cli(tmp_path / "home", "run", write(tmp_path, OK_WF), "--input", "n=21",
                   "--events", log)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"doubled": 42}
    assert "progress goes to" not in proc.stdout
    run_id = read_jsonl(log)[0]["run_id"]
    first = proc.stderr.splitlines()[0]
    assert run_id in first
    assert first.startswith("podium: run ")


def test_json_flag_prints_the_whole_result(tmp_path: Path) -> None:
    proc = run_cli(tmp_path / "home", "run", write(tmp_path, OK_WF), "--input", "n=1",
                   "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert (result["status"], result["exit_code"], result["output"]) == \
        ("success", 0, {"doubled": 2})
    assert result["steps"] == ["s", "t"]
    assert result["run_id"] in proc.stderr.splitlines()[0]


def test_input_file_and_input_flags(tmp_path: Path) -> None:
    inputs = write(tmp_path, "n: 5\n", name="inputs.yaml")
    proc = run_cli(tmp_path / "home", "run", write(tmp_path, OK_WF), "--input-file", inputs)
    assert json.loads(proc.stdout) == {"doubled": 10}
    proc = run_cli(tmp_path / "home", "run", write(tmp_path, OK_WF), "--input-file", inputs,
                   "--input", "n=7")
    assert json.loads(proc.stdout) == {"doubled": 14}


def test_exit_1_failed_terminate(tmp_path: Path) -> None:
    path = write(tmp_path, """
        workflow: {name: cli-fail, entry_point: stop}
        agents:
          - {name: stop, type: terminate, status: failed, reason: "business says no",
             output_template: {why: "{{ stop.output.reason }}"}}
    """)
    proc = run_cli(tmp_path / "home", "run", path)
    assert proc.returncode == 1
    assert json.loads(proc.stdout) == {"why": "business says no"}
    assert "business says no" in proc.stderr


def test_exit_2_invalid_workflow(tmp_path: Path) -> None:
    path = write(tmp_path, """
        workflow: {name: bad, entry_point: s}
        agents:
          - {name: s, type: sett, value: 1}
    """)
    proc = run_cli(tmp_path / "home", "run", path)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert f"{path}:3:" in proc.stderr
    assert "unknown step type 'sett'" in proc.stderr
    assert "nothing was run" in proc.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--input", "n"], "expected NAME=VALUE"),
    (["--input", "=3"], "the name is empty"),
    (["--input", "n=many"], "expected a number"),
    (["--input", "n=1", "--input", "m=2"], "unknown input 'm'"),
    ([], "missing required input: n"),
])
def test_exit_2_bad_input(tmp_path: Path, args: list[str], message: str) -> None:
    proc = run_cli(tmp_path / "home", "run", write(tmp_path, OK_WF), *args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert message in proc.stderr


def test_exit_3_runtime_error_names_run_step_and_iteration(tmp_path: Path) -> None:
    path = write(tmp_path, """
        workflow: {name: cli-err, entry_point: s}
        agents:
          - name: s
            type: set
            values: {flag: false}
            routes:
              - {to: $end, when: "{{ output.flag }}"}
    """)
    log = tmp_path / "events.jsonl"
    proc = run_cli(tmp_path / "home", "run", path, "--events", log)
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == ""
    run_id = read_jsonl(log)[0]["run_id"]
    assert f"run {run_id}, step 's' (iteration 1): no route matched" in proc.stderr
    assert "'{{ output.flag }}' -> 'False'" in proc.stderr


def test_exit_3_missing_workflow_file(tmp_path: Path) -> None:
    proc = run_cli(tmp_path / "home", "run", tmp_path / "nope.yaml")
    assert proc.returncode == 3
    assert proc.stdout == ""
    assert "nope.yaml" in proc.stderr


def test_exit_4_iteration_limit(tmp_path: Path) -> None:
    path = write(tmp_path, """
        workflow:
          name: cli-loop
          entry_point: a
          limits: {max_iterations: 3}
        agents:
          - name: a
            type: set
            value: 1
            routes: [{to: $end, when: "{{ a.output > 1 }}"}, {to: a}]
    """)
    proc = run_cli(tmp_path / "home", "run", path, "--skip-gates")
    assert proc.returncode == 4, proc.stderr
    assert proc.stdout == ""
    assert "max_iterations (3)" in proc.stderr


def interrupt_when(tmp_path: Path, workflow: Path, ready: Callable[[], bool]
                   ) -> tuple[int, str, str]:
    """Start `podium run`, send SIGINT once `ready()` holds, return (code, stdout, stderr)."""
    log = tmp_path / "events.jsonl"
    proc = subprocess.Popen(podium_argv("run", workflow, "--events", log), cwd=REPO_ROOT,
                            env=cli_env(tmp_path / "home"), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            encoding="utf-8")
    try:
        def poll(seconds: float) -> None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(seconds)

        # ends early when the process exits: the assertions below say how
        assert wait_until(lambda: proc.poll() is not None or ready(), timeout=30, poll=poll)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out, err


def test_exit_130_on_sigint_during_a_wait(tmp_path: Path) -> None:
    path = write(tmp_path, """
        workflow: {name: cli-wait, entry_point: pause}
        agents:
          - {name: pause, type: wait, duration: 120, routes: [{to: after}]}
          - {name: after, type: set, value: 1}
    """)
    log = tmp_path / "events.jsonl"

    def in_the_wait() -> bool:
        return log.exists() and any(e["type"] == "step_started" and e["step"] == "pause"
                                    for e in read_jsonl(log))

    code, out, err = interrupt_when(tmp_path, path, in_the_wait)
    assert code == 130, err
    assert out == ""
    events = read_jsonl(log)
    assert events[-1]["type"] == "run_finished"
    assert events[-1]["status"] == "interrupted"
    assert [e["step"] for e in events if e["type"] == "step_started"] == ["pause"]


def test_sigint_during_a_script_kills_its_process_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    path = write(tmp_path, f"""
        workflow: {{name: cli-script, entry_point: s}}
        agents:
          - name: s
            type: script
            command: python
            args:
              - "-c"
              - |
                import os, subprocess, time
                child = subprocess.Popen(["sleep", "60"])
                with open({str(pids)!r} + ".tmp", "w") as fh:
                    fh.write(f"{{os.getpid()}} {{child.pid}}")
                os.rename({str(pids)!r} + ".tmp", {str(pids)!r})
                time.sleep(60)
    """)
    code, out, err = interrupt_when(tmp_path, path, pids.exists)
    assert code == 130, err
    assert out == ""
    for pid in map(int, pids.read_text().split()):
        assert wait_until(functools.partial(process_gone, pid), timeout=10), f"{pid} survived"


def test_model_text_is_printed_literally(tmp_path: Path) -> None:
    markup = "[bold red]x[/] and [link=https://example.com/evil]click[/link] [/]"
    path = write(tmp_path, """
        workflow: {name: cli-markup, entry_point: talk}
        agents:
          - name: talk
            prompt: "say [italic]something[/italic]"
            output_mode: raw
        output:
          said: "{{ talk.output.result }}"
    """)
    responses = tmp_path / "responses.json"
    responses.write_text(json.dumps({"agents": {"talk": [{"text": markup}]}}), encoding="utf-8")
    proc = run_cli(tmp_path / "home", "run", path, "--responses", responses, "-v")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"said": markup}
    assert markup in proc.stderr
    assert "say [italic]something[/italic]" in proc.stderr
    assert "\x1b[" not in proc.stderr


def test_quiet_shows_less_than_verbose(tmp_path: Path) -> None:
    path = write(tmp_path, OK_WF)
    quiet = run_cli(tmp_path / "home", "run", path, "--input", "n=1", "-q")
    verbose = run_cli(tmp_path / "home", "run", path, "--input", "n=1", "-v")
    assert quiet.returncode == verbose.returncode == 0
    assert quiet.stdout == verbose.stdout
    assert "progress goes to" in verbose.stderr
    assert "progress goes to" not in quiet.stderr
    assert len(quiet.stderr.splitlines()) < len(verbose.stderr.splitlines())
