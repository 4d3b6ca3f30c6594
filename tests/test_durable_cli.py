"""Durable runs through the real CLI: `podium runs`, `show`, `events`, `stop`, `resume`,
`gate list` and `gate answer`, each as a subprocess with PODIUM_HOME in tmp_path and no
terminal (stdin is /dev/null), so a human gate or an exhausted iteration limit parks the run
(exit 5) instead of asking.

The tests marked ON_BOTH run on each backend: SQLite in PODIUM_HOME, and PODIUM_STORE naming a
database on the real PostgreSQL server the tests start (tests/store_backends.py); those that
edit the SQLite file under podium, or check no store behaviour, stay on SQLite.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers_engine import cli_env, podium_argv, wait_until, write
from store_backends import BACKENDS, make_store

TIMEOUT = 60.0


class Home:
    """One PODIUM_HOME and the workflows of a test, with the CLI as methods."""

    def __init__(self, root: Path, store_env: dict[str, str] | None = None) -> None:
        self.root = root
        self.home = root / "home"
        self.store_env = store_env or {}

    def write(self, name: str, text: str) -> Path:
        return write(self.root, text, name)

    def __call__(self, *args: str | Path, env: dict[str, str] | None = None,
                 ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(podium_argv(*args), cwd=self.root,
                              env=cli_env(self.home, {**self.store_env, **(env or {})}),
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              encoding="utf-8", errors="replace", timeout=TIMEOUT, check=False)

    def start(self, *args: str | Path, env: dict[str, str] | None = None,
              ) -> subprocess.Popen[str]:
        return subprocess.Popen(podium_argv(*args), cwd=self.root,
                                env=cli_env(self.home, {**self.store_env, **(env or {})}),
                                stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def runs(self, *args: str) -> list[dict[str, Any]]:
        proc = self("runs", "--format", "json", *args)
        assert proc.returncode == 0, proc.stderr
        rows: list[dict[str, Any]] = json.loads(proc.stdout)
        return rows

    def only_run(self) -> dict[str, Any]:
        (row,) = self.runs()
        return row

    def events(self, run_id: str) -> list[dict[str, Any]]:
        proc = self("events", run_id)
        assert proc.returncode == 0, proc.stderr
        return [json.loads(line) for line in proc.stdout.splitlines()]

    def show(self, run_id: str) -> dict[str, Any]:
        proc = self("show", run_id, "--format", "json")
        assert proc.returncode == 0, proc.stderr
        data: dict[str, Any] = json.loads(proc.stdout)
        return data

    def steps(self, run_id: str) -> list[str]:
        return [s["step"] for s in self.show(run_id)["steps"]]


@pytest.fixture
def home(tmp_path: Path, request: pytest.FixtureRequest) -> Home:
    """A SQLite home; under ON_BOTH, each backend in turn."""
    return Home(tmp_path, make_store(request, getattr(request, "param", "sqlite")).env)


ON_BOTH = pytest.mark.parametrize("home", BACKENDS, indirect=True)


def _consecutive(events: list[dict[str, Any]]) -> None:
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))


def _output(proc: subprocess.CompletedProcess[str]) -> Any:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


GATE_WF = """
workflow:
  name: gated
  entry_point: draft
agents:
  - {name: draft, type: set, value: "v1", routes: [{to: review}]}
  - name: review
    type: human_gate
    prompt: "Accept draft {{ draft.output }}?"
    options:
      - {label: Accept, value: accept, route: accepted}
      - {label: Revise, value: revise, route: revised, prompt_for: feedback}
  - name: accepted
    type: terminate
    status: success
    reason: accepted
  - {name: revised, type: set, value: "{{ review.output.additional_input.feedback }}"}
output:
  selected: "{{ review.output.selected }}"
  feedback: "{{ review.output.additional_input.feedback | default('') }}"
"""

# A loop of script steps (each prints its count); max_iterations stops it after three.
COUNT_PY = """
import json, os, signal, sys
from pathlib import Path
n = int(sys.argv[1]) + 1
marker = Path(sys.argv[2])
if os.environ.get("DURABLE_KILL_AT") == str(n) and not marker.exists():
    marker.touch()
    print(json.dumps({"n": n}), flush=True)
    os.kill(os.getppid(), signal.SIGKILL)  # dies before podium records this step
print(json.dumps({"n": n}))
"""

LOOP_WF = """
workflow:
  name: looping
  entry_point: count
  limits: {max_iterations: 3}
agents:
  - name: count
    type: script
    command: python
    args: ["{{ workflow.dir }}/count.py", "{{ context.history | length }}",
           "{{ workflow.dir }}/killed-once"]
    routes:
      - to: count
        when: "{{ count.output.n < 5 }}"
      - to: done
  - name: done
    type: terminate
    status: success
    reason: counted
    output_template:
      n: "{{ count.output.n }}"
"""


# ---------------------------------------------------------------------- seeing runs


def test_run_names_its_id_first_and_runs_lists_newest_first(home: Home) -> None:
    wf = home.write("wf.yaml", GATE_WF)
    other = home.write("other.yaml", GATE_WF.replace("name: gated", "name: other"))
    first = home("run", wf, "--skip-gates")
    parked = home("run", other)
    failing = home("run", home.write("bad.yaml", """
        workflow: {name: broken, entry_point: s}
        agents:
          - {name: s, type: script, command: python, args: ["-c", "import sys; sys.exit(7)"],
             output: {ok: {type: boolean}}}
    """))
    assert (first.returncode, parked.returncode, failing.returncode) == (0, 5, 3)
    ids = []
    for proc in (first, parked, failing):
        line = proc.stderr.splitlines()[0]
        assert line.startswith("podium: run "), line
        assert " started" in line, line
        ids.append(line.split()[2])
    rows = home.runs()
    assert [r["id"] for r in rows] == ids[::-1]
    for row in rows:
        assert {"id", "workflow", "status", "current_step", "created_at", "input_tokens",
                "output_tokens", "cost_usd"} <= set(row)
    assert [(r["workflow"], r["status"], r["current_step"]) for r in rows] == [
        ("broken", "error", "s"), ("other", "waiting", "review"), ("gated", "success", "accepted")]
    assert [r["id"] for r in home.runs("--status", "waiting")] == [ids[1]]
    assert [r["id"] for r in home.runs("--workflow", "gated")] == [ids[0]]
    assert [r["id"] for r in home.runs("--limit", "2")] == ids[:0:-1]
    assert home.runs("--status", "interrupted") == []
    text = home("runs").stdout.splitlines()
    assert text[0].split() == ["ID", "WORKFLOW", "STATUS", "STEP", "AGE", "TOKENS", "COST"]
    assert [line.split()[0] for line in text[1:]] == ids[::-1]
    assert "waiting" in text[2]


def test_show_and_events_of_a_priced_run(home: Home) -> None:
    wf = home.write("wf.yaml", """
        workflow:
          name: priced
          entry_point: writer
          runtime: {provider: copilot, default_model: gpt-4o}
        agents:
          - name: writer
            prompt: "Write."
            output: {text: {type: string}}
            routes: [{to: check}]
          - {name: check, type: set, value: "{{ writer.output.text | length }}",
             output_type: integer}
        output:
          text: "{{ writer.output.text }}"
          length: "{{ check.output }}"
    """)
    responses = home.write("responses.yaml", """
        agents:
          writer:
            - output: {text: "draft ✓"}
              usage: {input_tokens: 1000, output_tokens: 500}
    """)
    out = _output(home("run", wf, "--responses", responses))
    assert out == {"text": "draft ✓", "length": 7}
    run_id = home.only_run()["id"]
    shown = home.show(run_id)
    assert [(s["step"], s["output"], s["route_to"]) for s in shown["steps"]] == [
        ("writer", {"text": "draft ✓"}, "check"), ("check", 7, "$end")]
    assert shown["run"]["output"] == out
    assert shown["cost_per_agent"]["writer"]["input_tokens"] == 1000
    assert shown["cost_per_agent"]["writer"]["cost_usd"] == pytest.approx(0.0075)
    text = home("show", run_id).stdout
    for piece in ("writer (agent", "check (set", "writer: $0.0075 · gpt-4o · 1000 in / 500 out",
                  '"length": 7', "success"):
        assert piece in text
    row = home.only_run()
    assert (row["input_tokens"], row["output_tokens"]) == (1000, 500)
    assert row["cost_usd"] == pytest.approx(0.0075)
    events = home.events(run_id)
    _consecutive(events)
    assert events[0]["type"] == "run_started"
    assert events[-1]["type"] == "run_finished"
    assert all(e["run_id"] == run_id for e in events)
    assert home("events", run_id, "--after", "3").stdout.count("\n") == len(events) - 3


def test_show_names_the_error_of_a_failed_run(home: Home) -> None:
    wf = home.write("wf.yaml", """
        workflow: {name: broken, entry_point: s}
        agents:
          - name: s
            type: script
            command: python
            args: ["-c", "import sys; print('boom', file=sys.stderr); sys.exit(7)"]
            output: {ok: {type: boolean}}
    """)
    assert home("run", wf).returncode == 3
    run_id = home.only_run()["id"]
    text = home("show", run_id).stdout
    assert "error:" in text
    assert home.show(run_id)["run"]["error"]


def test_unknown_run_ids_are_one_line_errors(home: Home) -> None:
    for args in (["show", "nope"], ["events", "nope"], ["resume", "nope"], ["stop", "nope"],
                 ["gate", "answer", "nope", "x"]):
        proc = home(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.strip().count("\n") == 0
        assert "nope" in proc.stderr
        assert "Traceback" not in proc.stderr


# ---------------------------------------------------------------------- parked gates


def test_a_parked_human_gate_is_answered_later(home: Home) -> None:
    wf = home.write("wf.yaml", GATE_WF)
    parked = home("run", wf)
    assert parked.returncode == 5, parked.stderr
    assert parked.stdout == ""
    run_id = home.only_run()["id"]
    assert f"podium gate answer {run_id}" in parked.stderr
    assert home.only_run()["status"] == "waiting"
    listed = home("gate", "list")
    assert run_id in listed.stdout
    assert "review" in listed.stdout
    assert "accept, revise" in listed.stdout
    (gate,) = json.loads(home("gate", "list", "--format", "json").stdout)
    assert (gate["run_id"], gate["step"], gate["kind"], gate["workflow"]) == \
        (run_id, "review", "human_gate", "gated")
    wrong = home("gate", "answer", run_id, "maybe")
    assert wrong.returncode == 2
    assert "accept, revise" in wrong.stderr
    done = home("gate", "answer", run_id, "revise", "--text", "shorter, please")
    assert _output(done) == {"selected": "revise", "feedback": "shorter, please"}
    assert home.only_run()["status"] == "success"
    assert "no gates are waiting" in home("gate", "list").stdout
    assert home("gate", "answer", run_id, "accept").returncode == 2  # nothing waits now
    events = home.events(run_id)
    _consecutive(events)
    answered = [e for e in events if e["type"] == "gate_answered"]
    assert [(e["selected"], e["additional_input"], e["answered_by"]) for e in answered] == [
        ("revise", {"feedback": "shorter, please"}, "cli")]
    assert home.steps(run_id) == ["draft", "review", "revised"]


def test_the_iteration_limit_parks_and_a_grant_finishes_the_run(home: Home) -> None:
    home.write("count.py", COUNT_PY)
    wf = home.write("wf.yaml", LOOP_WF)
    parked = home("run", wf, "--no-interactive")  # asked to park
    assert parked.returncode == 5, parked.stderr
    run_id = home.only_run()["id"]
    listed = home("gate", "list")
    assert "iteration_limit" in listed.stdout
    assert run_id in listed.stdout
    bad = home("gate", "answer", run_id, "lots")
    assert bad.returncode == 2
    assert "whole number" in bad.stderr
    assert _output(home("gate", "answer", run_id, "3")) == {"n": 5}
    row = home.only_run()
    assert (row["status"], row["iterations"]) == ("success", 6)
    granted = [e for e in home.events(run_id) if e["type"] == "limit_resolved"]
    assert [(e["granted"], e["new_maximum"]) for e in granted] == [(3, 6)]


@ON_BOTH
def test_with_skip_gates_the_limit_fails_and_stays_resumable(home: Home) -> None:
    home.write("count.py", COUNT_PY)
    wf = home.write("wf.yaml", LOOP_WF)
    limited = home("run", wf, "--skip-gates")
    assert limited.returncode == 4, limited.stderr
    run_id = home.only_run()["id"]
    assert home.only_run()["status"] == "limit"
    assert home("resume", run_id).returncode == 4  # still --skip-gates: still the limit
    assert home("resume", run_id, "--no-skip-gates").returncode == 5  # now a person decides
    assert home("gate", "answer", run_id, "2").returncode == 5  # and keeps deciding
    assert _output(home("gate", "answer", run_id, "1")) == {"n": 5}
    assert home.steps(run_id) == ["count"] * 5 + ["done"]


@ON_BOTH
def test_a_grant_survives_a_kill_before_the_next_step_commits(home: Home) -> None:
    home.write("count.py", COUNT_PY)
    wf = home.write("wf.yaml", LOOP_WF)
    assert home("run", wf, "--no-interactive").returncode == 5  # asked to park
    run_id = home.only_run()["id"]
    killed = home("gate", "answer", run_id, "3", env={"DURABLE_KILL_AT": "4"})
    assert killed.returncode == -signal.SIGKILL
    assert (home.root / "killed-once").exists()
    assert _output(home("resume", run_id)) == {"n": 5}  # not asked again
    assert home.steps(run_id) == ["count"] * 5 + ["done"]
    assert len([e for e in home.events(run_id) if e["type"] == "limit_resolved"]) == 1


# ---------------------------------------------------------------------- stop


SLOW_PY = """
import json, sys, time
from pathlib import Path
marker = Path(sys.argv[1])
if marker.exists():
    print(json.dumps({"slept": False}))
    sys.exit(0)
marker.write_text("started")
for _ in range(6000):  # bounded: 60 s, until podium stops it
    time.sleep(0.01)
print(json.dumps({"slept": True}))
"""

SLOW_WF = """
workflow:
  name: slow
  entry_point: first
agents:
  - {name: first, type: set, value: 1, routes: [{to: slow}]}
  - name: slow
    type: script
    command: python
    args: ["{{ workflow.dir }}/slow.py", "{{ workflow.dir }}/slow-started"]
    routes: [{to: last}]
  - {name: last, type: set, value: "{{ first.output + 1 }}"}
output:
  last: "{{ last.output }}"
  slept: "{{ slow.output.slept }}"
"""


def _running_at(home: Home, step: str) -> str:
    """Wait until the store says the (only) run is running `step`; its id."""
    def at_step() -> bool:
        rows = home.runs()
        return bool(rows) and (rows[0]["status"], rows[0]["current_step"]) == ("running", step)

    assert wait_until(at_step, TIMEOUT)
    run_id: str = home.only_run()["id"]
    return run_id


def test_stop_interrupts_a_running_run_and_it_resumes(home: Home) -> None:
    home.write("slow.py", SLOW_PY)
    wf = home.write("wf.yaml", SLOW_WF)
    proc = home.start("run", wf)
    try:
        run_id = _running_at(home, "slow")
        assert wait_until((home.root / "slow-started").exists, TIMEOUT)
        live = home("resume", run_id)
        assert live.returncode == 2
        assert "still running" in live.stderr
        stop = home("stop", run_id)
        assert stop.returncode == 0, stop.stderr
        assert "stopped (status: interrupted)" in stop.stdout
        assert f"podium resume {run_id}" in stop.stdout
        _, err = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    row = home.only_run()
    assert (row["status"], row["current_step"]) == ("interrupted", "slow")
    assert home("stop", run_id).stdout.startswith(f"run {run_id} is not running")
    assert _output(home("resume", run_id)) == {"last": 2, "slept": False}
    events = home.events(run_id)
    _consecutive(events)
    assert [e["type"] for e in events].count("run_started") == 2
    assert home.steps(run_id) == ["first", "slow", "last"]


def test_stop_refuses_to_stop_its_own_caller(home: Home) -> None:
    wf = home.write("wf.yaml", f"""
        workflow: {{name: selfstop, entry_point: stopper}}
        agents:
          - name: stopper
            type: script
            command: {json.dumps(sys.executable)}
            args:
              - "-c"
              - |
                import json, subprocess, sys
                podium = [sys.executable, "-m", "podium"]
                rows = json.loads(subprocess.run(podium + ["runs", "--format", "json"],
                                                 capture_output=True, text=True).stdout)
                me = subprocess.run(podium + ["stop", rows[0]["id"]], capture_output=True,
                                    text=True)
                print(json.dumps({{"code": me.returncode, "said": me.stderr.strip()}}))
        output:
          code: "{{{{ stopper.output.code }}}}"
          said: "{{{{ stopper.output.said }}}}"
    """)
    out = _output(home("run", wf))
    assert out["code"] == 2
    assert "this very process" in out["said"]
    assert home.only_run()["status"] == "success"


def test_stop_checks_the_process_identity(home: Home) -> None:
    """A run left 'running' by a killed process, whose pid now belongs to another process:
    `stop` must not signal that process."""
    wf = home.write("wf.yaml", GATE_WF)
    assert home("run", wf).returncode == 5
    run_id = home.only_run()["id"]
    stranger = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                                stdin=subprocess.PIPE, text=True)
    try:
        con = sqlite3.connect(home.home / "podium.db")
        con.execute("UPDATE runs SET status = 'running', pid = ?, pid_start = '1' WHERE id = ?",
                    (stranger.pid, run_id))
        con.commit()
        con.close()
        stop = home("stop", run_id)
        assert stop.returncode == 0
        assert "no live process" in stop.stdout
        assert stranger.poll() is None  # untouched
        con = sqlite3.connect(home.home / "podium.db")
        stored = con.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()[0]
        con.close()
        assert stored == "interrupted"
        # its gate is still open, so people read it as waiting (app/owners.py held())
        assert home.only_run()["status"] == "waiting"
    finally:
        stranger.communicate("")
    assert stranger.returncode == 0


# ---------------------------------------------------------------------- resume


FLAKY_WF = """
workflow:
  name: flaky
  entry_point: prepare
agents:
  - {name: prepare, type: set, value: 20, routes: [{to: flaky}]}
  - name: flaky
    type: script
    command: python
    args:
      - "-c"
      - |
        import json, sys
        from pathlib import Path
        tries = Path(sys.argv[1])
        n = int(tries.read_text()) + 1 if tries.exists() else 1
        tries.write_text(str(n))
        if n == 1:
            sys.exit("the first try fails")
        print(json.dumps({"tries": n}))
      - "{{ workflow.dir }}/tries"
    output: {tries: {type: number}}
    routes: [{to: finish}]
  - {name: finish, type: set, value: "{{ prepare.output + flaky.output.tries }}"}
output:
  total: "{{ finish.output }}"
"""


@ON_BOTH
def test_a_failed_run_resumes_but_not_a_changed_workflow(home: Home) -> None:
    wf = home.write("wf.yaml", FLAKY_WF)
    failed = home("run", wf)
    assert failed.returncode == 3, failed.stderr
    run_id = home.only_run()["id"]
    assert home.only_run()["status"] == "error"
    wf.write_text(wf.read_text() + "# an edit\n", encoding="utf-8")
    refused = home("resume", run_id)
    assert refused.returncode == 2
    assert "changed" in refused.stderr
    assert "--allow-changed" in refused.stderr
    assert (home.root / "tries").read_text() == "1"  # nothing ran
    assert _output(home("resume", run_id, "--allow-changed")) == {"total": 22}
    assert home.steps(run_id) == ["prepare", "flaky", "finish"]  # prepare ran once
    events = home.events(run_id)
    _consecutive(events)
    assert [e["step"] for e in events if e["type"] == "step_started"] == [
        "prepare", "flaky", "flaky", "finish"]
    assert home("resume", run_id).returncode == 2  # finished: nothing to resume


@ON_BOTH
def test_resume_from_a_step_reruns_it_and_keeps_the_history(home: Home) -> None:
    (home.root / "tries").write_text("1")
    wf = home.write("wf.yaml", FLAKY_WF)
    assert _output(home("run", wf)) == {"total": 22}
    run_id = home.only_run()["id"]
    before = home.events(run_id)
    again = home("resume", run_id, "--from", "flaky")
    assert _output(again) == {"total": 23}
    events = home.events(run_id)
    _consecutive(events)
    assert events[:len(before)] == before
    assert home.steps(run_id) == ["prepare", "flaky", "finish", "flaky", "finish"]
    assert home.only_run()["status"] == "success"
    unknown = home("resume", run_id, "--from", "flakey")
    assert unknown.returncode == 2
    assert "flaky" in unknown.stderr


BUDGET_WF = """
workflow:
  name: priced
  entry_point: writer
  runtime: {provider: copilot, default_model: gpt-4o}
  limits: {budget_usd: 0.01, budget_mode: enforce}
agents:
  - name: writer
    prompt: "Write."
    output: {text: {type: string}}
    routes: [{to: editor}]
  - name: editor
    prompt: "Edit {{ writer.output.text }}"
    output: {text: {type: string}}
output:
  text: "{{ editor.output.text }}"
"""

BUDGET_RESPONSES = """
agents:
  writer:
    - output: {text: draft}
      usage: {input_tokens: 1000, output_tokens: 500}
  editor:
    - output: {text: final}
      usage: {input_tokens: 2000, output_tokens: 1000}
"""


def _over_budget(home: Home) -> str:
    wf = home.write("wf.yaml", BUDGET_WF)
    responses = home.write("responses.yaml", BUDGET_RESPONSES)
    over = home("run", wf, "--responses", responses)
    assert over.returncode == 4, over.stderr
    assert home.only_run()["status"] == "limit"
    wf.write_text(wf.read_text().replace("budget_usd: 0.01", "budget_usd: 1.0"),
                  encoding="utf-8")
    run_id: str = home.only_run()["id"]
    return run_id


def test_a_budget_failure_stays_resumable(home: Home) -> None:
    run_id = _over_budget(home)
    assert _output(home("resume", run_id, "--allow-changed")) == {"text": "final"}
    assert home.only_run()["status"] == "success"
    assert home.steps(run_id)[0] == "writer"
    assert home.steps(run_id).count("writer") == 1


@ON_BOTH
def test_the_step_that_overran_the_budget_is_not_run_again(home: Home) -> None:
    run_id = _over_budget(home)
    assert _output(home("resume", run_id, "--allow-changed")) == {"text": "final"}
    assert home.steps(run_id) == ["writer", "editor"]


PARALLEL_WF = """
workflow:
  name: fanned
  entry_point: fan
agents:
  - {name: a, type: set, value: 1}
  - {name: b, type: set, value: 2}
  - name: ok
    type: human_gate
    prompt: "Go on?"
    options:
      - {label: Yes, value: "yes", route: done}
  - name: done
    type: terminate
    status: success
    reason: fanned
    output_template:
      fan: "{{ fan.outputs | tojson }}"
      history: "{{ context.history | join(',') }}"
      iteration: "{{ context.iteration }}"
parallel:
  - name: fan
    agents: [a, b]
    routes: [{to: ok}]
"""


def test_a_run_with_a_parallel_group_resumes_to_the_same_output(home: Home) -> None:
    wf = home.write("wf.yaml", PARALLEL_WF)
    straight = _output(home("run", wf, "--skip-gates"))
    assert home("run", wf).returncode == 5
    parked = home.runs("--status", "waiting")[0]["id"]
    assert _output(home("gate", "answer", parked, "yes")) == straight
    assert home.steps(parked) == ["fan", "ok", "done"]


END_WF = """
workflow: {name: ends, entry_point: a}
agents:
  - name: a
    type: set
    value: 7
    routes:
      - to: $end
        output: {extra: "{{ a.output + 1 }}"}
output:
  a: "{{ a.output }}"
"""


def _interrupted_at_the_end(home: Home, text: str) -> tuple[str, Any]:
    """A finished run made into one interrupted after its last step committed (as when
    SIGTERM lands while the final output renders): the last checkpoint and an interrupted
    run_finished are in the store."""
    wf = home.write("wf.yaml", text)
    out = _output(home("run", wf))
    run_id: str = home.only_run()["id"]
    con = sqlite3.connect(home.home / "podium.db")
    seq, body = con.execute("SELECT seq, body FROM events WHERE type = 'run_finished'").fetchone()
    event = json.loads(body)
    event.update(status="interrupted", exit_code=130, output=None, terminal=None,
                 error_type="Interrupted", message="interrupted")
    con.execute("UPDATE events SET body = ? WHERE seq = ?", (json.dumps(event), seq))
    con.execute("UPDATE runs SET status = 'interrupted', exit_code = 130, output = NULL, "
                "finished_at = NULL, terminal = NULL")
    con.commit()
    con.close()
    return run_id, out


def test_a_run_interrupted_after_its_route_to_end_resumes(home: Home) -> None:
    run_id, out = _interrupted_at_the_end(home, END_WF)
    assert _output(home("resume", run_id)) == out
    assert home.steps(run_id) == ["a"]


def test_a_run_interrupted_after_its_terminate_resumes_without_rerunning_it(
        home: Home) -> None:
    run_id, out = _interrupted_at_the_end(home, """
        workflow: {name: terminates, entry_point: draft}
        agents:
          - {name: draft, type: set, value: "v1", routes: [{to: accepted}]}
          - name: accepted
            type: terminate
            status: success
            reason: accepted
            output_template:
              draft: "{{ draft.output }}"
    """)
    assert _output(home("resume", run_id)) == out
    assert home.steps(run_id) == ["draft", "accepted"]


def test_exit_code_5_is_documented_in_help(home: Home) -> None:
    text = home("--help").stdout
    assert "5 waiting" in " ".join(text.split())
