"""Rough edges a new user meets in the first hour, each as the user meets it: the real CLI in a
subprocess, PODIUM_HOME in tmp_path."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from helpers_engine import EXAMPLES, cli_env, podium_argv, wait_until, write

TIMEOUT = 60.0


def _cli(root: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(podium_argv(*args), cwd=root, env=cli_env(root / "home"),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=TIMEOUT, check=False)


def _runs(root: Path, *args: str) -> list[dict[str, Any]]:
    proc = _cli(root, "runs", "--format", "json", *args)
    assert proc.returncode == 0, proc.stderr
    rows: list[dict[str, Any]] = json.loads(proc.stdout)
    return rows


TINY = "workflow: {name: release-notes, entry_point: a}\nagents:\n  - {name: a, type: set, value: 1}\n"


def test_runs_refuses_an_unknown_status_and_matches_any_part_of_a_name(tmp_path: Path) -> None:
    flow = write(tmp_path, TINY)
    assert _cli(tmp_path, "run", flow).returncode == 0
    bogus = _cli(tmp_path, "runs", "--status", "bogus")
    assert bogus.returncode == 2
    assert "--status bogus: not a run status; one of: running, waiting" in bogus.stderr
    assert [r["workflow"] for r in _runs(tmp_path, "-w", "notes")] == ["release-notes"]
    assert [r["workflow"] for r in _runs(tmp_path, "-w", "RELEASE")] == ["release-notes"]
    assert _runs(tmp_path, "-w", "%") == []  # a LIKE wildcard is a plain character here


def test_gate_list_shows_the_whole_prompt(tmp_path: Path) -> None:
    flow = write(tmp_path, """
        workflow: {name: gated, entry_point: ask}
        agents:
          - name: ask
            type: human_gate
            prompt: |
              Ship release 4.2?
              The changelog has 12 entries.
              Rollback plan: revert the tag.
            options: [{label: Ship, value: ship, route: $end}]
        """)
    assert _cli(tmp_path, "run", flow).returncode == 5
    listed = _cli(tmp_path, "gate", "list").stdout
    for line in ("Ship release 4.2?", "The changelog has 12 entries.",
                 "Rollback plan: revert the tag."):
        assert f"    {line}\n" in listed


def test_replay_of_a_missing_file_says_so(tmp_path: Path) -> None:
    proc = _cli(tmp_path, "replay", "nosuch.jsonl")
    assert proc.returncode == 3
    assert proc.stderr.strip() == ("podium: nosuch.jsonl: no such file (a run id, or an event "
                                   "log written by `podium events RUN_ID > FILE`)")


@pytest.mark.parametrize("command", [
    ["run"], ["fork"], ["resume"], ["gate", "answer"], ["gate", "list"], ["validate"], ["runs"],
    ["show"], ["events"], ["stop"], ["replay"], ["diff"], ["test"], ["graph"], ["serve"],
    ["doctor"]])
def test_help_shows_no_python_types(tmp_path: Path, command: list[str]) -> None:
    proc = _cli(tmp_path, *command, "--help")
    assert proc.returncode == 0
    for python_type in ("<str>", "<int>", "<float>", "<path>", "list[", "<"):
        assert python_type not in proc.stdout, proc.stdout


def test_fork_reuses_the_parents_scripted_answers(tmp_path: Path) -> None:
    flow = EXAMPLES / "dev-review" / "workflow.yaml"
    repo = tmp_path / "repo"
    subprocess.run(["cp", "-r", str(EXAMPLES / "dev-review" / "sample-repo"), str(repo)],
                   check=True)
    for git in (["init", "-q"], ["add", "-A"],
                ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "s"]):
        subprocess.run(["git", "-C", str(repo), *git], check=True)
    ran = _cli(tmp_path, "run", flow, "-i", f"ticket={EXAMPLES}/dev-review/tickets/"
               "add-slugify.md", "-i", f"repo_dir={repo}", "--responses",
               EXAMPLES / "dev-review" / "responses" / "happy.yaml", "--json")
    assert ran.returncode == 0, ran.stderr
    parent = json.loads(ran.stdout)["run_id"]
    forked = _cli(tmp_path, "fork", parent, "--from", "reviewer", "--json")
    assert forked.returncode == 0, forked.stderr  # its live part answered from the file too
    assert json.loads(forked.stdout)["status"] == "success"


def test_show_puts_a_scripts_parsed_fields_before_its_raw_output(tmp_path: Path) -> None:
    flow = write(tmp_path, """
        workflow: {name: parse, entry_point: emit}
        agents:
          - name: emit
            type: script
            command: python
            args: ["-c", "import json; print(json.dumps({'verdict': 'ok', 'pad': 'x' * 400}))"]
        """)
    ran = _cli(tmp_path, "run", flow, "--json")
    shown = _cli(tmp_path, "show", json.loads(ran.stdout)["run_id"]).stdout
    line = next(x for x in shown.splitlines() if x.strip().startswith('{"verdict"'))
    assert '"verdict": "ok"' in line  # first, not cut off behind the raw stdout


def test_an_interrupted_run_says_it_once_and_how_to_resume(tmp_path: Path) -> None:
    flow = write(tmp_path, """
        workflow: {name: slow, entry_point: wait}
        agents:
          - {name: wait, type: script, command: sleep, args: ["30"]}
        """)
    proc = subprocess.Popen(podium_argv("run", flow), cwd=tmp_path,
                            env=cli_env(tmp_path / "home"), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_until(lambda: bool(_runs(tmp_path)) and
                          _runs(tmp_path)[0]["current_step"] == "wait", TIMEOUT)
        time.sleep(0.2)  # into the step's wait
        proc.send_signal(signal.SIGINT)  # Ctrl+C
        _, err = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130
    run_id = _runs(tmp_path)[0]["id"]
    assert err.count("interrupted") == 1, err  # one line, then how to go on (issue 30)
    assert "error:" not in err
    assert f"next: podium resume {run_id}" in err
    assert "Traceback" not in err
    assert "Aborted" not in err


def test_validate_of_a_test_file_says_what_it_is(tmp_path: Path) -> None:
    tests = EXAMPLES / "dev-review" / "workflow.test.yaml"
    proc = _cli(tmp_path, "validate", tests)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "a workflow test file: 9 tests of" in proc.stdout
    assert f"run them with `podium test {tests}`" in proc.stdout
    bad = write(tmp_path, "workflow: wf.yaml\ntests: [{name: a}]\n", "bad.test.yaml")
    write(tmp_path, TINY, "wf.yaml")
    proc = _cli(tmp_path, "validate", bad)
    assert proc.returncode == 2
    assert "bad.test.yaml:2:9: tests[0]: a test needs 'expect:'" in proc.stdout


def test_a_run_without_its_providers_key_stops_before_its_first_step(tmp_path: Path) -> None:
    flow = write(tmp_path, """
        workflow:
          name: keyless
          entry_point: prepare
          runtime: {provider: openai, default_model: gpt-5-mini}
        agents:
          - name: prepare
            type: script
            command: python
            args: ["-c", "open('prepared', 'w').write('spent')"]
            routes: [{to: ask}]
          - {name: ask, prompt: "hello", output: {ok: {type: boolean}}}
        """)
    proc = _cli(tmp_path, "run", flow)  # cli_env passes no OPENAI_API_KEY
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    for needed in ("provider 'openai'", "OPENAI_API_KEY", "'ask'", "--responses", "-p"):
        assert needed in line, line
    assert not (tmp_path / "prepared").exists()  # nothing was run
    assert _runs(tmp_path) == []  # nor recorded
    answers = write(tmp_path, '{"agents": {"ask": [{"output": {"ok": true}}]}}', "a.json")
    offline = _cli(tmp_path, "run", flow, "--responses", answers)
    assert offline.returncode == 0, offline.stderr


def test_a_missing_provider_sdk_is_named_by_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from podium.providers import base

    monkeypatch.setitem(base.SDK_EXTRAS, "openai", ("podium_no_such_sdk", "openai"))
    with pytest.raises(base.ProviderError) as info:
        base.ProviderRegistry().get("openai")
    assert "uv pip install 'podium[openai]'" in str(info.value)
    # keeps the other extras and adds no dev tools (a plain `uv sync --extra` did both)
    assert "uv sync --inexact --no-dev --extra openai" in str(info.value)
    assert "then set OPENAI_API_KEY" in str(info.value)  # what it needs next
