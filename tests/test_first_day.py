"""The first day (issue 30), as a new user meets it: the real CLI in a subprocess, PODIUM_HOME
in tmp_path. Failures visible at the default verbosity, mistakes caught before they cost,
hints that are commands that work."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from helpers_engine import cli_env, podium_argv, write

TIMEOUT = 60.0


def _cli(root: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(podium_argv(*args), cwd=root, env=cli_env(root / "home"),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=TIMEOUT, check=False)


def _run_id(proc: subprocess.CompletedProcess[str]) -> str:
    first = proc.stderr.split("podium: run ", 1)[1]
    return first.split()[0]


BOOM = """
    workflow: {name: boom, entry_point: s}
    agents:
      - name: s
        type: script
        command: sh
        args: ["-c", "echo hi; echo first >&2; echo boom >&2; exit 3"]
    """


def test_a_script_exiting_non_zero_shows_its_code_and_stderr_tail(tmp_path: Path) -> None:
    """Conductor reads a non-zero exit as data (routes decide): the run's outcome stays, but
    the console says the exit code and the end of stderr, not a green mark."""
    proc = _cli(tmp_path, "run", write(tmp_path, BOOM))
    assert proc.returncode == 0, proc.stderr
    assert "    ✗ exit 3 · " in proc.stderr
    assert "    stderr: first\n    stderr: boom\n" in proc.stderr
    assert "✓" not in proc.stderr


def test_a_script_exiting_zero_keeps_its_quiet_mark(tmp_path: Path) -> None:
    flow = write(tmp_path, BOOM.replace("exit 3", "exit 0"))
    proc = _cli(tmp_path, "run", flow)
    assert proc.returncode == 0, proc.stderr
    assert "    ✓ " in proc.stderr
    assert "stderr:" not in proc.stderr
    assert "exit 0" not in proc.stderr


STRICT = """
    workflow: {name: strict, entry_point: s}
    agents:
      - name: s
        type: script
        command: sh
        args: ["-c", "echo 'Running tests...'; echo boom >&2; exit 1"]
        output:
          ok: {type: boolean}
    """


def test_a_broken_script_contract_quotes_stdout_and_show_names_the_step(tmp_path: Path) -> None:
    proc = _cli(tmp_path, "run", write(tmp_path, STRICT))
    assert proc.returncode == 3
    assert 'received "Running tests...\\n"' in proc.stderr
    assert "    stderr: boom\n" in proc.stderr
    shown = _cli(tmp_path, "show", _run_id(proc))
    assert shown.returncode == 0, shown.stderr
    assert "failed at: step 's' (script, iteration 1, OutputContractError)" in shown.stdout
    assert "  stderr: boom\n" in shown.stdout
    as_json = json.loads(_cli(tmp_path, "show", _run_id(proc), "-f", "json").stdout)
    assert as_json["failed_step"]["step"] == "s"


def test_an_answer_that_is_not_json_is_quoted(tmp_path: Path) -> None:
    flow = write(tmp_path, """
        workflow: {name: judge, entry_point: judge}
        agents:
          - name: judge
            prompt: "judge it"
            output:
              verdict: {type: string}
            retry: {max_parse_recovery_attempts: 0}
        """)
    responses = write(tmp_path, json.dumps(
        {"agents": {"judge": [{"text": "I think it is fine, approve."}]}}), "responses.json")
    proc = _cli(tmp_path, "run", flow, "--responses", responses)
    assert proc.returncode == 3, proc.stderr
    assert 'received "I think it is fine, approve."' in proc.stderr
    shown = _cli(tmp_path, "show", _run_id(proc))
    assert "failed at: step 'judge' (agent, iteration 1, OutputContractError)" in shown.stdout
    assert "  answer: I think it is fine, approve." in shown.stdout
