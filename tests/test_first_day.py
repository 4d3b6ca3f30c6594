"""The first day (issue 30), as a new user meets it: the real CLI in a subprocess, PODIUM_HOME
in tmp_path. Failures visible at the default verbosity, mistakes caught before they cost,
hints that are commands that work."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from helpers_engine import cli_env, podium_argv, write
from runtime_helpers import needs_claude, needs_copilot, podium, runtime_env

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


# ----------------------------------------------------------------------- item 4: validate


def test_validate_refuses_a_loop_with_no_way_to_end(tmp_path: Path) -> None:
    flow = write(tmp_path, """
        workflow: {name: spin, entry_point: dev}
        agents:
          - {name: dev, prompt: Implement., routes: [{to: review}]}
          - name: review
            prompt: Review.
            output:
              verdict: {type: string, enum: [approve, revise]}
            routes:
              - {to: dev, when: "{{ review.output.verdict == 'revise' }}"}
              - {to: dev}
        """)
    proc = _cli(tmp_path, "validate", flow)
    assert proc.returncode == 2
    assert ("wf.yaml:3:12: agents[0].name: no terminate step or $end is reachable from 'dev'"
            in proc.stdout)
    assert proc.stdout.count("no terminate step") == 1  # the loop is one mistake


def test_a_loop_with_a_gate_that_can_end_is_valid(tmp_path: Path) -> None:
    flow = write(tmp_path, """
        workflow: {name: spin, entry_point: dev}
        agents:
          - {name: dev, prompt: Implement., tools: [], routes: [{to: ask}]}
          - name: ask
            type: human_gate
            prompt: Ship it?
            options:
              - {label: Ship, value: ship, route: done}
              - {label: Again, value: again, route: dev}
          - {name: done, type: terminate, status: success, reason: shipped}
        """)
    proc = _cli(tmp_path, "validate", "--strict", flow)
    assert proc.returncode == 0, proc.stdout


def test_a_comparison_with_a_value_outside_the_enum_is_an_error(tmp_path: Path) -> None:
    flow = write(tmp_path, """
        workflow: {name: judge, entry_point: review}
        agents:
          - name: review
            prompt: Review.
            output:
              verdict: {type: string, enum: [approve, revise]}
            routes:
              - {to: $end, when: "{{ review.output.verdict == 'approved' }}"}
              - {to: $end, when: "verdict != 'revised'"}
              - {to: $end, when: "verdict == 'approve'"}
              - {to: review}
        """)
    proc = _cli(tmp_path, "validate", flow)
    assert proc.returncode == 2
    lines = proc.stdout.splitlines()
    assert lines[0] == (
        "wf.yaml:8:26: agents[0].routes[0].when: 'approved' is not a value of "
        "review.output.verdict (its enum: [approve, revise]), so this comparison never holds "
        "(did you mean 'approve'?)")
    assert "routes[1].when: 'revised' is not a value" in lines[1]
    assert "so this comparison always holds" in lines[1]
    assert "routes[2]" not in proc.stdout


TYPO = """
    workflow:
      name: typo
      entry_point: a
      runtime: {provider: openai, default_model: gpt-4o-mnii}
    agents:
      - {name: a, prompt: hi}
    """


def test_a_model_name_typo_warns_and_is_never_priced_as_another(tmp_path: Path) -> None:
    flow = write(tmp_path, TYPO)
    proc = _cli(tmp_path, "validate", "--budget", flow)
    assert proc.returncode == 0, proc.stdout
    assert ("model 'gpt-4o-mnii' is not a model podium's price tables know, so its cost is not "
            "counted and --budget cannot price it (did you mean 'gpt-4o-mini'?)") in proc.stdout
    assert "unpriced (partial): gpt-4o-mnii" in proc.stdout
    assert "$0.0200" not in proc.stdout  # what gpt-4o's price gave it
    assert _cli(tmp_path, "validate", "--strict", flow).returncode == 2
    dated = write(tmp_path, TYPO.replace("gpt-4o-mnii", "gpt-4o-2024-08-06"), "dated.yaml")
    assert "warning" not in _cli(tmp_path, "validate", dated).stdout


LOOP = """
    workflow:
      name: cli-loop
      entry_point: a
      limits: {max_iterations: 3}
    agents:
      - name: a
        type: set
        value: 1
        routes: [{to: $end, when: "{{ a.output > 1 }}"}, {to: a}]
    """


def test_an_exhausted_limit_with_nobody_to_ask_fails_with_exit_4(tmp_path: Path) -> None:
    flow = write(tmp_path, LOOP)
    proc = _cli(tmp_path, "run", flow)  # stdin is not a terminal, nothing said about gates
    assert proc.returncode == 4, proc.stderr
    assert "the run reached max_iterations (3) before 'a'" in proc.stderr
    parked = _cli(tmp_path, "run", flow, "--no-interactive")  # asked to park
    assert parked.returncode == 5, parked.stderr
    assert "waiting for a person to grant more iterations" in parked.stderr


# ----------------------------------------------------------------------- item 8: Ctrl+C


def test_an_interruption_is_one_line_then_the_resume_command(tmp_path: Path) -> None:
    from helpers_engine import read_jsonl
    from test_cli_run import interrupt_when

    flow = write(tmp_path, """
        workflow: {name: cli-wait, entry_point: pause}
        agents:
          - {name: pause, type: wait, duration: 120, routes: [{to: after}]}
          - {name: after, type: set, value: 1}
        """)
    log = tmp_path / "events.jsonl"

    def in_the_wait() -> bool:
        return log.exists() and any(e["type"] == "step_started" for e in read_jsonl(log))

    code, _, err = interrupt_when(tmp_path, flow, in_the_wait)
    assert code == 130, err
    run_id = read_jsonl(log)[0]["run_id"]
    assert err.count("interrupted") == 1, err
    tail = err.rstrip("\n").splitlines()[-2:]
    assert tail[0].startswith(f"run {run_id} interrupted at 'pause' after ")
    assert tail[1] == f"next: podium resume {run_id}"


# ----------------------------------------------------------------------- item 7: before spending


RUNTIME_FLOW = """
    workflow:
      name: rt
      entry_point: prep
      runtime: {provider: PROVIDER}
    agents:
      - {name: prep, type: script, command: touch, args: [prepared], routes: [{to: ask}]}
      - {name: ask, prompt: hi}
    """


@pytest.mark.parametrize(("provider", "needed"), [
    pytest.param("copilot", ("GH_TOKEN", "copilot login"), marks=needs_copilot),
    pytest.param("claude-agent-sdk", ("ANTHROPIC_API_KEY", "claude login"), marks=needs_claude),
])
def test_a_runtime_without_a_login_stops_before_the_first_step(
        tmp_path: Path, provider: str, needed: tuple[str, ...]) -> None:
    flow = write(tmp_path, RUNTIME_FLOW.replace("PROVIDER", provider))
    env = runtime_env(tmp_path, {"HOME": str(tmp_path / "user")})  # no token, no login
    proc = podium(tmp_path, "run", flow, env=env)
    assert proc.returncode == 2, proc.stderr
    assert not (tmp_path / "prepared").exists()  # the script never ran
    for part in (*needed, "nothing was run", "--responses FILE", "-p PROVIDER"):
        assert part in proc.stderr, proc.stderr


# ----------------------------------------------------------------------- item 5: hints that work


GATED = """
    workflow: {name: gated, entry_point: ask}
    agents:
      - name: ask
        type: human_gate
        prompt: Ship?
        options: [{label: Ship, value: ship, route: $end}]
    """


def test_after_an_edit_gate_answer_takes_the_allow_changed_it_names(tmp_path: Path) -> None:
    flow = write(tmp_path, GATED)
    parked = _cli(tmp_path, "run", flow, "--no-interactive", "--json")
    assert parked.returncode == 5, parked.stderr
    run_id = json.loads(parked.stdout)["run_id"]
    flow.write_text(flow.read_text(encoding="utf-8") + "# edited\n", encoding="utf-8")
    refused = _cli(tmp_path, "gate", "answer", run_id, "ship")
    assert refused.returncode == 2
    assert "Pass --allow-changed" in refused.stderr
    done = _cli(tmp_path, "gate", "answer", run_id, "ship", "--allow-changed")
    assert done.returncode == 0, done.stderr  # the gate was still open for it
    rows = json.loads(_cli(tmp_path, "runs", "--format", "json").stdout)
    assert rows[0]["run_id"] == rows[0]["id"] == run_id  # one key name, the old one kept
    assert rows[0]["status"] == "success"
    shown = json.loads(_cli(tmp_path, "show", run_id, "-f", "json").stdout)
    assert shown["run"]["run_id"] == run_id
    listed = json.loads(_cli(tmp_path, "fleet", "list", "--format", "json").stdout)
    assert listed["runs"][0]["run_id"] == listed["runs"][0]["id"] == run_id


def test_fork_takes_no_interactive(tmp_path: Path) -> None:
    proc = _cli(tmp_path, "fork", "--help")
    assert "--no-interactive" in proc.stdout


def test_validate_takes_a_folder_as_test_does(tmp_path: Path) -> None:
    write(tmp_path, GATED, "flows/gated.yaml")
    write(tmp_path, TYPO, "flows/deep/typo.yaml")
    write(tmp_path, "agents: {ask: [{text: hi}]}\n", "flows/responses.yaml")  # not a workflow
    proc = _cli(tmp_path, "validate", "flows")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "2 files: valid: 1 warning"
    (tmp_path / "nothing").mkdir()
    empty = _cli(tmp_path, "validate", "nothing")
    assert empty.returncode == 3
    assert "nothing: no workflow files under it" in empty.stderr


# ----------------------------------------------------------------------- item 9: the demo


def test_the_demo_shows_tests_verdicts_loop_and_gate_then_what_next(tmp_path: Path) -> None:
    from helpers_engine import EXAMPLES, VENV_BIN

    env = cli_env(tmp_path / "home", {"TMPDIR": str(tmp_path)})
    env["PATH"] = f"{VENV_BIN}:{env['PATH']}"  # as `make demo` runs it, in the venv
    proc = subprocess.run(["bash", str(EXAMPLES / "dev-review" / "demo.sh")], env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=110, check=False)
    assert proc.returncode == 0, proc.stderr
    recap = proc.stderr.split("\nwhat happened:\n", 1)[1]
    lines = recap.splitlines()
    assert lines[0].startswith("  tests #1: passed (exit 0)")
    assert lines[1].startswith("  review #1: changes (2 finding(s)): ")
    assert lines[3] == "  review #2: approve (0 finding(s))"
    assert "  gate human_acceptance: accept (by responses)" in lines
    assert "the loop developer → tests → review went round once more" in recap
    assert "try next:\n  podium show " in recap
    assert "podium serve" in recap
    assert "(happy | tests-fail-once | three-reviews-stop | malformed-then-corrected)" in recap


# ----------------------------------------------------------------------- item 6: run --web


# tests/web/test_run_web.py holds `run --web` keeping its console (a real pseudo-terminal)


def test_the_fleet_lists_waiting_runs_first_and_a_dead_runs_time_stops(tmp_path: Path) -> None:
    from podium.app.fleet import fleet
    from podium.app.owners import this_host
    from podium.store.base import Owner, RunRecord
    from podium.store.sqlite import SQLiteStore

    parked = _cli(tmp_path, "run", write(tmp_path, GATED), "--no-interactive", "--json")
    assert parked.returncode == 5, parked.stderr
    done = _cli(tmp_path, "run", write(tmp_path, BOOM, "boom.yaml"), "--json")
    assert done.returncode == 0, done.stderr
    store = SQLiteStore(tmp_path / "home" / "podium.db")
    try:
        dead = "dead0000-0000-4000-8000-000000000001"
        store.create_run(RunRecord(dead, "orphan", str(tmp_path / "o.yaml"), "x", {},
                                   current_step="work", created_at=1.0),
                         Owner(2 ** 22 + 12345, 1.0, this_host(), "run"))
        rows = fleet(store)
        later = fleet(store, now=rows[0].created_at + 86_400.0)  # a day on
    finally:
        store.close()
    ids = [r.id for r in rows]
    assert ids[0] == json.loads(parked.stdout)["run_id"]  # waiting, though not the newest
    assert ids[1] == json.loads(done.stdout)["run_id"]  # then newest first
    orphan = next(r for r in rows if r.id == dead)
    assert orphan.status == "interrupted"
    # up to its last record, not up to now: it does not grow while nobody runs it
    assert next(r for r in later if r.id == dead).elapsed == orphan.elapsed
