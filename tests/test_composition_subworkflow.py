"""Sub-workflows (`type: workflow`, spec 3.10 and 6.5) through the real loader and engine.

In-process runs (FakeClock, scripted answers) pin inputs, isolation, output, cost and failure;
the store-backed behaviour (child runs linked to their parent, resume at depth after SIGKILL,
a gate parked inside a child) goes through the real `podium` CLI with PODIUM_HOME in tmp.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sqlite3
import subprocess
import threading
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from helpers_engine import (
    Run,
    cli_env,
    diagnostics,
    podium_argv,
    run_cli,
    run_workflow,
    wait_until,
    write,
)
from podium.errors import LimitExceeded, StepError
from podium.events.model import Event, RunFinished, RunStarted, StepFailed, StepFinished
from podium.steps.base import Usage
from podium.store.base import GateRecord
from podium.store.sqlite import SQLiteStore

USAGE = {"input_tokens": 1000, "output_tokens": 200}


def child_events(run: Run, cls: type[Any]) -> list[Any]:
    return [e for e in run.of(cls) if e.parent_run_id is not None]


def parent_events(run: Run, cls: type[Any]) -> list[Any]:
    return [e for e in run.of(cls) if e.parent_run_id is None]


# --------------------------------------------------------------------------- inputs

ECHO_CHILD = """
workflow:
  name: echo
  entry_point: show
  input:
    who: {type: string, required: false, default: nobody}
agents:
  - name: show
    type: set
    value: "{{ workflow.input | tojson }}"
    output_type: dict
output:
  seen: "{{ show.output | tojson }}"
"""


def test_input_mapping_is_rendered_then_json_coerced(tmp_path: Path) -> None:
    write(tmp_path, """
        workflow:
          name: typed
          entry_point: show
          input:
            n: {type: number}
            flag: {type: boolean}
            name: {type: string}
            items: {type: array}
            raw: {type: number}
        agents:
          - {name: show, type: set, value: "{{ workflow.input.n + 1 }}", output_type: integer}
        output:
          next: "{{ show.output }}"
    """, "typed.yaml")
    run = run_workflow(write(tmp_path, """
        workflow:
          name: parent
          entry_point: sub
          input:
            who: {type: string, default: ada}
        agents:
          - name: sub
            type: workflow
            workflow: typed            # the extension is optional
            input_mapping:
              n: "{{ 40 + 2 }}"
              flag: "true"
              name: "{{ workflow.input.who }}"
              items: "[1, 2]"
              raw: 7
        output:
          next: "{{ sub.output.next }}"
    """, "parent.yaml"))
    assert run.exit_code == 0, run.error_text()
    (started,) = child_events(run, RunStarted)
    assert started.inputs == {"n": 42, "flag": True, "name": "ada", "items": [1, 2], "raw": 7}
    assert run.output == {"next": 43}


@pytest.mark.parametrize(("mapping", "seen"), [
    ("input_mapping: {}", {"who": "nobody"}),   # empty mapping: no inputs, child defaults
    ("", {"who": "ada"}),                         # absent: the parent's inputs, forwarded
])
def test_empty_or_absent_input_mapping(tmp_path: Path, mapping: str, seen: dict[str, Any]) -> None:
    write(tmp_path, ECHO_CHILD, "echo.yaml")
    run = run_workflow(write(tmp_path, f"""
        workflow:
          name: parent
          entry_point: sub
          input:
            who: {{type: string, default: ada}}
        agents:
          - name: sub
            type: workflow
            workflow: echo.yaml
            {mapping}
        output:
          seen: "{{{{ sub.output.seen | tojson }}}}"
    """, "parent.yaml"))
    assert run.exit_code == 0, run.error_text()
    (started,) = child_events(run, RunStarted)
    assert started.inputs == seen
    assert run.output == {"seen": seen}


def test_a_required_child_input_missing_from_the_mapping_fails_clearly(tmp_path: Path) -> None:
    write(tmp_path, """
        workflow:
          name: needs
          entry_point: a
          input:
            ticket: {type: string}
        agents:
          - {name: a, type: set, value: "{{ workflow.input.ticket }}"}
    """, "needs.yaml")
    parent = write(tmp_path, """
        workflow: {name: parent, entry_point: sub}
        agents:
          - {name: sub, type: workflow, workflow: needs.yaml, input_mapping: {}}
    """, "parent.yaml")
    # validate says it first (Conductor's finds it only when the child reads the input) ...
    assert [d.split("parent.yaml:", 1)[1] for d in diagnostics(parent)] == [
        "3:55: agents[0].input_mapping: sub-workflow 'needs.yaml' needs input(s) ticket, "
        "which input_mapping does not give (add ticket: to input_mapping)"]
    # ... and a run that gets there anyway (the child changed since) fails as clearly
    run = run_workflow(parent, check=False)
    assert run.exit_code == 3
    assert "needs input(s) ticket (give them in input_mapping)" in run.error_text()


# --------------------------------------------------------------------------- isolation, output


def test_child_has_its_own_limits_counter_and_context(tmp_path: Path) -> None:
    write(tmp_path, """
        workflow:
          name: inner
          entry_point: a
          limits: {max_iterations: 4}
        agents:
          - name: a
            type: set
            value: "{{ context.iteration }}"
            routes: [{to: b}]
          - name: b
            type: set
            value: "{{ first is defined }}"
            routes: [{to: c}]
          - name: c
            type: set
            value: "{{ context.history | join(',') }}"
            routes: [{to: d}]
          - {name: d, type: set, value: ok}
        output:
          first_iteration: "{{ a.output }}"
          leaked: "{{ b.output }}"
          history: "{{ c.output }}"
          verdict: "{{ d.output }}"
    """, "inner.yaml")
    run = run_workflow(write(tmp_path, """
        workflow:
          name: outer
          entry_point: first
          limits: {max_iterations: 3}
        agents:
          - {name: first, type: set, value: 1, routes: [{to: sub}]}
          - name: sub
            type: workflow
            workflow: inner.yaml
            routes:
              - {to: good, when: "{{ sub.output.verdict == 'ok' }}"}
              - {to: bad}
          - {name: good, type: set, value: "{{ sub.output.first_iteration + 10 }}"}
          - {name: bad, type: set, value: 0}
        output:
          child: "{{ sub.output | tojson }}"
          good: "{{ good.output }}"
    """, "outer.yaml"))
    assert run.exit_code == 0, run.error_text()
    # four child steps under the child's max_iterations 4; the parent counts the step as one
    assert run.output == {"child": {"first_iteration": 0, "leaked": False, "history": "a,b",
                                    "verdict": "ok"},
                          "good": 10}
    assert run.result.iterations == 3
    assert run.result.path == ["first", "sub", "good"]
    (child_done,) = child_events(run, RunFinished)
    assert (child_done.status, child_done.iterations) == ("success", 4)
    # the child's steps are not the parent's
    assert set(run.outputs) == {"first", "sub", "good"}


# --------------------------------------------------------------------------- cost

PRICED_CHILD = """
workflow:
  name: priced
  entry_point: worker
  # max_tokens: 1 keeps each call's worst case (steps/budget.py) under the tiny budgets below,
  # so the call is made and its actual cost passes the budget after the fact
  runtime: {provider: copilot, default_model: gpt-5-mini, max_tokens: 1}
agents:
  - name: worker
    prompt: "Do the work"
    output:
      done: {type: boolean}
    routes:
      - {to: broken, when: "{{ workflow.input.fail | default(false) }}"}
      - {to: $end}
  - {name: broken, type: terminate, status: failed, reason: "the worker gave up"}
output:
  done: "{{ worker.output.done }}"
"""

PRICED_PARENT = """
workflow:
  name: buyer
  entry_point: sub
  input:
    fail: {{type: boolean, default: false}}
  limits: {{{limits}}}
agents:
  - {{name: sub, type: workflow, workflow: priced.yaml, routes: [{{to: after}}]}}
  - {{name: after, type: set, value: done}}
"""


def _priced(tmp_path: Path, limits: str, fail: bool) -> Run:
    write(tmp_path, PRICED_CHILD, "priced.yaml")
    path = write(tmp_path, PRICED_PARENT.format(limits=limits), "buyer.yaml")
    return run_workflow(path, inputs={"fail": fail}, responses={
        "agents": {"worker": [{"output": {"done": True}, "usage": USAGE}]}})


def child_cost(run: Run) -> float:
    """What the child's agent cost, as the child recorded it (gpt-5-mini is priced)."""
    (done,) = [e for e in child_events(run, StepFinished) if e.step == "worker"]
    assert (done.model, done.input_tokens, done.output_tokens) == ("gpt-5-mini", 1000, 200)
    assert done.cost_usd is not None
    assert done.cost_usd > 0.0001
    return float(done.cost_usd)


def test_child_cost_counts_in_the_parent_totals(tmp_path: Path) -> None:
    run = _priced(tmp_path, "budget_usd: 1.0, budget_mode: enforce", fail=False)
    assert run.exit_code == 0, run.error_text()
    cost = child_cost(run)
    assert run.result.usage_by_step == {
        "sub/worker": Usage(1000, 200, 0, pytest.approx(cost), "gpt-5-mini")}
    (sub_done,) = [e for e in parent_events(run, StepFinished) if e.step == "sub"]
    assert (sub_done.input_tokens, sub_done.output_tokens) == (1000, 200)
    assert sub_done.cost_usd == pytest.approx(cost)
    assert run.engine.spent_usd == pytest.approx(cost)


def test_child_spend_trips_the_parent_budget(tmp_path: Path) -> None:
    run = _priced(tmp_path, "budget_usd: 0.0001, budget_mode: enforce", fail=False)
    assert run.exit_code == 4
    assert isinstance(run.result.error, LimitExceeded)
    assert run.result.error.limit == "budget"
    assert "over its budget of $0.00" in run.error_text()
    assert run.result.path == ["sub"]  # stopped before 'after'


def test_a_failed_child_still_costs_the_parent(tmp_path: Path) -> None:
    run = _priced(tmp_path, "budget_usd: 1.0, budget_mode: enforce", fail=True)
    assert run.exit_code == 3
    assert "ended in its failed terminate 'broken': the worker gave up" in run.error_text()
    cost = child_cost(run)
    assert run.result.usage_by_step["sub/worker"].cost_usd == pytest.approx(cost)
    assert run.engine.spent_usd == pytest.approx(cost)
    # and that spend is enforced too
    tripped = _priced(tmp_path / "again", "budget_usd: 0.0001, budget_mode: enforce",
                      fail=True)
    assert tripped.exit_code == 4
    assert tripped.result.error is not None
    assert "over its budget" in str(tripped.result.error)


# --------------------------------------------------------------------------- failures


@pytest.mark.parametrize(("child", "code", "reason"), [
    ("""
        workflow: {name: c, entry_point: stop}
        agents:
          - {name: stop, type: terminate, status: failed, reason: "ticket rejected"}
     """, 3, "ended in its failed terminate 'stop': ticket rejected"),
    ("""
        workflow: {name: c, entry_point: think}
        agents:
          - {name: think, prompt: "hello"}
     """, 3, "the responses file has no answers for step 'think'"),
    ("""
        workflow: {name: c, entry_point: spin, limits: {max_iterations: 3}}
        agents:
          - name: spin
            type: set
            value: 1
            routes: [{to: $end, when: "{{ spin.output > 1 }}"}, {to: spin}]
     """, 4, "the run reached max_iterations (3) before 'spin'"),
], ids=["failed-terminate", "error", "exhausted-limit"])
def test_child_failure_fails_the_parent_with_the_childs_reason(
        tmp_path: Path, child: str, code: int, reason: str) -> None:
    write(tmp_path, child, "c.yaml")
    run = run_workflow(write(tmp_path, """
        workflow: {name: p, entry_point: sub, limits: {max_iterations: 50}}
        agents:
          - {name: sub, type: workflow, workflow: c.yaml, routes: [{to: after}]}
          - {name: after, type: set, value: 1}
    """, "p.yaml"))
    assert run.exit_code == code
    assert reason in run.error_text()
    assert "step 'sub'" in run.error_text()
    (failed,) = parent_events(run, StepFailed)
    assert failed.step == "sub"
    assert reason in failed.message
    assert run.result.path == []
    if code == 4:
        assert isinstance(run.result.error, LimitExceeded)
        assert run.result.error.limit == "iterations"
    else:
        assert isinstance(run.result.error, StepError)


def test_depth_limit_and_max_depth(tmp_path: Path) -> None:
    for i in range(12):
        write(tmp_path, f"""
            workflow: {{name: level{i}, entry_point: down}}
            agents:
              - {{name: down, type: workflow, workflow: level{i + 1}.yaml}}
        """, f"level{i}.yaml")
    write(tmp_path, """
        workflow: {name: level12, entry_point: leaf}
        agents:
          - {name: leaf, type: set, value: 1}
    """, "level12.yaml")
    run = run_workflow(tmp_path / "level0.yaml")
    assert run.exit_code == 3
    assert "sub-workflow depth limit exceeded (10)" in run.error_text()
    assert len(child_events(run, RunStarted)) == 10  # depths 1..10 started; 11 refused


def test_max_depth_on_the_step(tmp_path: Path) -> None:
    write(tmp_path, """
        workflow: {name: leaf, entry_point: a}
        agents:
          - {name: a, type: set, value: 1}
    """, "leaf.yaml")
    write(tmp_path, """
        workflow: {name: mid, entry_point: down}
        agents:
          - {name: down, type: workflow, workflow: leaf.yaml, max_depth: 1}
    """, "mid.yaml")
    run = run_workflow(write(tmp_path, """
        workflow: {name: top, entry_point: down}
        agents:
          - {name: down, type: workflow, workflow: mid.yaml}
    """, "top.yaml"))
    assert run.exit_code == 3
    assert "sub-workflow depth limit exceeded (1)" in run.error_text()


def test_self_recursive_workflow_is_rejected_before_running(tmp_path: Path) -> None:
    # Conductor's `run` skips its semantic validator, so there a self-recursive workflow runs
    # until a route stops it or the depth limit does; its `validate` rejects the cycle (spec
    # 8.7). podium's `run` validates first, so run and validate agree: a cycle never starts.
    path = write(tmp_path, """
        workflow: {name: again, entry_point: again}
        agents:
          - {name: again, type: workflow, workflow: self.yaml}
    """, "self.yaml")
    proc = run_cli(tmp_path / "home", "run", path)
    assert proc.returncode == 2, proc.stderr
    assert "circular sub-workflow reference" in proc.stderr
    assert "nothing was run" in proc.stderr
    # and an engine started without those checks refuses the child when it loads it
    run = run_workflow(path, check=False)
    assert run.exit_code == 3
    assert "sub-workflow 'self.yaml' is invalid:" in run.error_text()
    assert "circular sub-workflow reference" in run.error_text()


# --------------------------------------------------------------------------- the store


def _json_cli(home: Path, *args: str) -> Any:
    proc = run_cli(home, *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_child_runs_are_linked_to_the_parent_in_the_store(tmp_path: Path) -> None:
    write(tmp_path, PRICED_CHILD, "priced.yaml")
    parent = write(tmp_path, PRICED_PARENT.format(limits=""), "buyer.yaml")
    responses = tmp_path / "responses.json"
    responses.write_text(json.dumps({"agents": {"worker": [{"output": {"done": True},
                                                            "usage": USAGE}]}}))
    home = tmp_path / "home"
    proc = run_cli(home, "run", parent, "--responses", responses, "--json")
    assert proc.returncode == 0, proc.stderr
    parent_id = json.loads(proc.stdout)["run_id"]
    runs = {r["id"]: r for r in _json_cli(home, "runs", "--format", "json")}
    assert len(runs) == 2
    (child_id,) = [i for i in runs if i != parent_id]
    assert runs[child_id]["parent_run_id"] == parent_id
    assert runs[parent_id]["parent_run_id"] is None
    assert runs[child_id]["workflow"] == "priced"
    assert runs[child_id]["status"] == "success"
    assert runs[parent_id]["cost_usd"] == pytest.approx(runs[child_id]["cost_usd"])
    assert runs[parent_id]["cost_usd"] > 0.0001
    child_log = run_cli(home, "events", child_id)
    events = [json.loads(line) for line in child_log.stdout.splitlines()]
    assert events[0]["type"] == "run_started"
    assert {e["parent_run_id"] for e in events} == {parent_id}
    assert {e["run_id"] for e in events} == {child_id}
    # the summary on stderr lists the child's agent under the step's name
    assert re.search(r"^  sub/worker: \$0\.\d{4} · gpt-5-mini · 1000 in / 200 out$",
                     proc.stderr, re.MULTILINE), proc.stderr


def test_a_failed_childs_cost_is_in_the_parents_stored_totals(tmp_path: Path) -> None:
    write(tmp_path, PRICED_CHILD, "priced.yaml")
    parent = write(tmp_path, PRICED_PARENT.format(limits=""), "buyer.yaml")
    responses = tmp_path / "responses.json"
    responses.write_text(json.dumps({"agents": {"worker": [{"output": {"done": True},
                                                            "usage": USAGE}]}}))
    home = tmp_path / "home"
    proc = run_cli(home, "run", parent, "--input", "fail=true", "--responses", responses,
                   "--json")
    assert proc.returncode == 3, proc.stderr
    parent_id = json.loads(proc.stdout)["run_id"]
    runs = {r["id"]: r for r in _json_cli(home, "runs", "--format", "json")}
    (child_id,) = [i for i in runs if i != parent_id]
    assert runs[child_id]["cost_usd"] > 0.0001
    assert runs[parent_id]["cost_usd"] == pytest.approx(runs[child_id]["cost_usd"])


HOLD_PY = '''
"""Append the step's tag to counter.txt; with hold, wait for `go` (or the parent's death)."""
import json, os, sys, time
from pathlib import Path

tag, here = sys.argv[1], Path(sys.argv[2])
ppid = os.getppid()
with open(here / "counter.txt", "a", encoding="utf-8") as fh:
    fh.write(tag + "\\n")
if sys.argv[3:] == ["hold"]:
    (here / "ready.tmp").write_text(str(os.getpid()))
    os.replace(here / "ready.tmp", here / "ready")  # whole or absent: the test reads it at once
    for _ in range(6000):  # bounded: 30 s
        if (here / "go").exists():
            break
        if os.getppid() != ppid:
            sys.exit(9)  # podium died: leave
        time.sleep(0.005)
    else:
        sys.exit(8)
print(json.dumps({"tag": tag}))
'''


def _deep_lab(tmp_path: Path) -> Path:
    """top → first (finishes) → middle → leaf, whose script holds until released."""
    (tmp_path / "hold.py").write_text(HOLD_PY.lstrip(), encoding="utf-8")
    hold = '{name: %s, type: script, command: python, routes: [{to: %s}], args: ["{{ workflow.dir }}/hold.py", %s, "{{ workflow.dir }}"%s]}'
    write(tmp_path, f"""
        workflow: {{name: first, entry_point: tick}}
        agents:
          - {hold % ("tick", "$end", "first", "")}
        output:
          tag: "{{{{ tick.output.tag }}}}"
    """, "first.yaml")
    write(tmp_path, f"""
        workflow: {{name: leaf, entry_point: before}}
        agents:
          - {hold % ("before", "held", "leaf-before", "")}
          - {hold % ("held", "$end", "leaf-held", ", hold")}
        output:
          tag: "{{{{ held.output.tag }}}}"
    """, "leaf.yaml")
    write(tmp_path, """
        workflow: {name: middle, entry_point: warm}
        agents:
          - {name: warm, type: set, value: 1, routes: [{to: deeper}]}
          - {name: deeper, type: workflow, workflow: leaf.yaml}
        output:
          tag: "{{ deeper.output.tag }}"
    """, "middle.yaml")
    return write(tmp_path, """
        workflow: {name: top, entry_point: first}
        agents:
          - {name: first, type: workflow, workflow: first.yaml, routes: [{to: middle}]}
          - {name: middle, type: workflow, workflow: middle.yaml, routes: [{to: last}]}
          - {name: last, type: set, value: "{{ first.output.tag }}+{{ middle.output.tag }}"}
        output:
          result: "{{ last.output }}"
    """, "top.yaml")


def _runs(db: Path) -> dict[str, dict[str, Any]]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        con.row_factory = sqlite3.Row
        return {r["id"]: dict(r) for r in con.execute("SELECT * FROM runs")}
    finally:
        con.close()


def _kill_when_ready(tmp_path: Path, argv: list[str], home: Path) -> None:
    """Start podium, SIGKILL it once a held script says it is ready, wait for the script."""
    with (tmp_path / "err.txt").open("w") as err:
        proc = subprocess.Popen(argv, cwd=tmp_path, env=cli_env(home), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=err)
    try:
        ready = tmp_path / "ready"
        assert wait_until(lambda: ready.exists() or proc.poll() is not None, 30), \
            (tmp_path / "err.txt").read_text()
        assert proc.poll() is None, (tmp_path / "err.txt").read_text()
        script = Path(f"/proc/{int(ready.read_text())}")
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # the held script notices podium's death and leaves
    assert wait_until(lambda: not script.exists()
                      or (script / "stat").read_text().split()[2] == "Z", 30)


def test_resume_at_depth_after_sigkill(tmp_path: Path) -> None:
    top = _deep_lab(tmp_path)
    home = tmp_path / "home"
    _kill_when_ready(tmp_path, podium_argv("run", top), home)
    runs = _runs(home / "podium.db")
    assert len(runs) == 4  # top, first, middle, leaf
    by_name = {r["workflow_name"]: r for r in runs.values()}
    assert by_name["first"]["status"] == "success"
    assert by_name["leaf"]["status"] == "running"  # killed in flight
    assert by_name["leaf"]["parent_run_id"] == by_name["middle"]["id"]
    assert by_name["middle"]["parent_run_id"] == by_name["top"]["id"]
    (tmp_path / "go").touch()
    # resuming by the leaf's id resumes the whole family from the top
    resumed = run_cli(home, "resume", by_name["leaf"]["id"], cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout) == {"result": "first+leaf-held"}
    counter = (tmp_path / "counter.txt").read_text().split()
    # finished work is not repeated; only the execution in flight at the kill runs again
    assert counter == ["first", "leaf-before", "leaf-held", "leaf-held"]
    after = _runs(home / "podium.db")
    assert len(after) == 4  # the same runs, continued
    assert {r["status"] for r in after.values()} == {"success"}


def test_resume_reuses_finished_for_each_subworkflow_items(tmp_path: Path) -> None:
    (tmp_path / "hold.py").write_text(HOLD_PY.lstrip(), encoding="utf-8")
    write(tmp_path, """
        workflow:
          name: item
          entry_point: work
          input:
            n: {type: number}
        agents:
          - name: work
            type: script
            command: python
            args: ["{{ workflow.dir }}/hold.py", "item-{{ workflow.input.n }}",
                   "{{ workflow.dir }}", "{{ 'hold' if workflow.input.n == 2 else 'go' }}"]
        output:
          tag: "{{ work.output.tag }}"
    """, "item.yaml")
    parent = write(tmp_path, """
        workflow:
          name: fan
          entry_point: fan
          input:
            nums: {type: array, default: [1, 2, 3]}
        for_each:
          - name: fan
            type: for_each
            source: workflow.input.nums
            as: num
            max_concurrent: 1
            agent:
              name: each
              type: workflow
              workflow: item.yaml
              input_mapping: {n: "{{ num }}"}
        agents: []
        output:
          tags: "{{ fan.outputs | map(attribute='tag') | join(',') }}"
    """, "fan.yaml")
    home = tmp_path / "home"
    _kill_when_ready(tmp_path, podium_argv("run", parent), home)
    (tmp_path / "go").touch()
    top = [r for r in _runs(home / "podium.db").values() if r["parent_run_id"] is None]
    resumed = run_cli(home, "resume", top[0]["id"], cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout) == {"tags": "item-1,item-2,item-3"}
    # item 1 had finished: reused; item 2 was in flight: run again; item 3 ran once
    assert (tmp_path / "counter.txt").read_text().split() == \
        ["item-1", "item-2", "item-2", "item-3"]
    children = [r for r in _runs(home / "podium.db").values() if r["parent_run_id"]]
    assert len(children) == 3
    assert {r["status"] for r in children} == {"success"}


@pytest.mark.parametrize("answer_to", ["child", "parent"])
def test_gate_parked_inside_a_child(tmp_path: Path, answer_to: str) -> None:
    write(tmp_path, """
        workflow: {name: approval, entry_point: prepare}
        agents:
          - {name: prepare, type: set, value: draft-1, routes: [{to: approve}]}
          - name: approve
            type: human_gate
            prompt: "Ship {{ prepare.output }}?"
            options:
              - {label: Ship, value: ship, route: shipped}
              - {label: Drop, value: drop, route: dropped}
          - {name: shipped, type: set, value: "shipped {{ prepare.output }}"}
          - {name: dropped, type: terminate, status: failed, reason: dropped}
        output:
          result: "{{ shipped.output }}"
    """, "approval.yaml")
    parent = write(tmp_path, """
        workflow: {name: release, entry_point: sub}
        agents:
          - {name: sub, type: workflow, workflow: approval.yaml, routes: [{to: done}]}
          - {name: done, type: set, value: "{{ sub.output.result }}!"}
        output:
          result: "{{ done.output }}"
    """, "release.yaml")
    home = tmp_path / "home"
    first = run_cli(home, "run", parent, "--json")
    assert first.returncode == 5, first.stderr
    parked = json.loads(first.stdout)
    assert parked["status"] == "waiting"
    runs = _runs(home / "podium.db")
    (child,) = [r for r in runs.values() if r["parent_run_id"]]
    assert {r["status"] for r in runs.values()} == {"waiting"}
    assert parked["reason"] == (f"waiting for a person to answer gate 'approve': podium gate "
                                f"answer {child['id']} VALUE")
    target = child["id"] if answer_to == "child" else parked["run_id"]
    answered = run_cli(home, "gate", "answer", target, "ship")
    assert answered.returncode == 0, answered.stderr
    assert json.loads(answered.stdout) == {"result": "shipped draft-1!"}
    assert {r["status"] for r in _runs(home / "podium.db").values()} == {"success"}
    assert len(_runs(home / "podium.db")) == 2


def test_a_child_out_of_iterations_parks_until_more_are_granted(tmp_path: Path) -> None:
    write(tmp_path, """
        workflow: {name: counter, entry_point: spin, limits: {max_iterations: 2}}
        agents:
          - name: spin
            type: set
            value: "{{ (spin.output if spin is defined else 0) + 1 }}"
            routes:
              - {to: $end, when: "{{ spin.output >= 3 }}"}
              - {to: spin}
        output:
          n: "{{ spin.output }}"
    """, "counter.yaml")
    parent = write(tmp_path, """
        workflow: {name: outer, entry_point: sub}
        agents:
          - {name: sub, type: workflow, workflow: counter.yaml}
        output:
          n: "{{ sub.output.n }}"
    """, "outer.yaml")
    home = tmp_path / "home"
    first = run_cli(home, "run", parent, "--json")
    assert first.returncode == 5, first.stderr
    parked = json.loads(first.stdout)
    (child,) = [r for r in _runs(home / "podium.db").values() if r["parent_run_id"]]
    assert parked["reason"] == ("waiting for a person to grant more iterations: podium gate "
                                f"answer {child['id']} VALUE")
    granted = run_cli(home, "gate", "answer", parked["run_id"], "1", "--json")
    assert granted.returncode == 0, granted.stderr
    assert json.loads(granted.stdout)["output"] == {"n": 3}

APPROVAL = """
workflow:
  name: approval
  entry_point: approve
  input:
    n: {type: number}
agents:
  - name: approve
    type: human_gate
    prompt: "Ship {{ workflow.input.n }}?"
    options:
      - {label: Ship, value: ship, route: shipped}
      - {label: Drop, value: drop, route: shipped}
  - {name: shipped, type: set, value: "{{ approve.output.selected }} {{ workflow.input.n }}"}
output:
  result: "{{ shipped.output }}"
"""

FAN = """
workflow:
  name: fan
  entry_point: fan
  input:
    nums: {type: array, default: [1, 2]}
for_each:
  - name: fan
    type: for_each
    source: workflow.input.nums
    as: num
    max_concurrent: 2
    agent:
      name: each
      type: workflow
      workflow: approval.yaml
      input_mapping: {n: "{{ num }}"}
agents: []
output:
  results: "{{ fan.outputs | map(attribute='result') | join(',') }}"
"""


def test_gates_parked_inside_for_each_items(tmp_path: Path) -> None:
    write(tmp_path, APPROVAL, "approval.yaml")
    parent = write(tmp_path, FAN, "fan.yaml")
    home = tmp_path / "home"

    def open_gates() -> list[str]:
        proc = run_cli(home, "gate", "list", "--format", "json")
        assert proc.returncode == 0, proc.stderr
        return sorted(g["prompt"] for g in json.loads(proc.stdout))

    # both items wait for a person: the run parks (it does not fail) with both gates open
    first = run_cli(home, "run", parent, "--json")
    assert first.returncode == 5, first.stderr
    parent_id = json.loads(first.stdout)["run_id"]
    assert open_gates() == ["Ship 1?", "Ship 2?"]
    # one answer resumes the run: that item finishes, the other parks again (one open gate)
    second = run_cli(home, "gate", "answer", parent_id, "drop", "--json")
    assert second.returncode == 5, second.stderr
    assert len(open_gates()) == 1
    third = run_cli(home, "gate", "answer", parent_id, "ship", "--json")
    assert third.returncode == 0, third.stderr
    results = json.loads(third.stdout)["output"]["results"].split(",")
    assert sorted(results) == ["drop 1", "ship 2"] or sorted(results) == ["drop 2", "ship 1"]
    assert open_gates() == []
    assert len(_runs(home / "podium.db")) == 3



class _InProcess:
    """`podium run` and `podium gate answer` called in this process on a store in tmp, each
    command on a store `opener` gives (so a test can force an interleaving of its threads)."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                 opener: Callable[[Path], SQLiteStore] = SQLiteStore) -> None:
        from podium.app import home

        write(tmp_path, APPROVAL, "approval.yaml")
        self.parent = write(tmp_path, FAN, "fan.yaml")
        self.db = tmp_path / "home" / "podium.db"
        monkeypatch.setenv("PODIUM_HOME", str(self.db.parent))

        def open_store(*, verify: bool | None = None) -> SQLiteStore:
            return opener(self.db)

        monkeypatch.setattr(home, "open_store", open_store)

    def run(self) -> int:
        from podium.cli.run_cmd import RunRequest, run_command

        return run_command(RunRequest(self.parent, verbosity=0))

    def answer(self, run_id: str, value: str) -> int:
        from podium.cli.resume_cmd import ResumeRequest, gate_answer_command

        return gate_answer_command(run_id, value, None, True,
                                   ResumeRequest(run_id, verbosity=0))

    def root(self) -> str:
        with closing(SQLiteStore(self.db)) as store:
            (root,) = [r.id for r in store.list_runs() if r.parent_run_id is None]
            return root

    def open_gates(self) -> list[str]:
        with closing(SQLiteStore(self.db)) as store:
            return sorted(g.prompt for g in store.gates(status="open"))



def test_an_item_parks_visibly_while_another_item_commits_its_answer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The interleaving behind a once-flaky resume, forced: the answered item's child is
    between its gate_answered and its checkpoint (its step pending) when the other item's
    child opens its gate again and parks. Each run commits or drops only its own pending
    step: the parked item's gate stays open, the answered item's answer is consumed."""
    forcing = threading.Event()
    answered, parked = threading.Event(), threading.Event()

    class Held(SQLiteStore):
        def open_gate(self, gate: GateRecord) -> int:
            if forcing.is_set():
                answered.wait(10)  # the other child's step is pending now
            return super().open_gate(gate)

        def append_event(self, event: Event) -> None:
            super().append_event(event)
            if not forcing.is_set():
                return
            if isinstance(event, RunFinished) and event.status == "waiting" and \
                    event.parent_run_id is not None:
                parked.set()
            elif event.type == "gate_answered":
                answered.set()
                parked.wait(10)  # hold the step open until the other child has parked

    cli = _InProcess(tmp_path, monkeypatch, Held)
    assert cli.run() == 5
    root = cli.root()
    assert cli.open_gates() == ["Ship 1?", "Ship 2?"]
    forcing.set()
    assert cli.answer(root, "drop") == 5
    assert answered.is_set()  # the interleaving did happen
    assert parked.is_set()
    forcing.clear()
    assert len(cli.open_gates()) == 1
    with closing(SQLiteStore(cli.db)) as store:
        # the answered gate was used; the other, asked again, was withdrawn and reopened
        assert sorted(g.status for g in store.gates()) == ["consumed", "open", "withdrawn"]
        children = {r.id: r for r in store.list_runs(parent=root)}
        assert sorted(r.status for r in children.values()) == ["success", "waiting"]
        # the answered child's gate step is committed with its answer
        done = next(r for r in children.values() if r.status == "success")
        assert [e["selected"] for e in store.events(done.id) if e["type"] == "gate_answered"] \
            == ["drop"]
    assert cli.answer(root, "ship") == 0
    with closing(SQLiteStore(cli.db)) as store:
        out = store.get_run(root).output
        assert out is not None
        assert sorted(out["results"].split(",")) in (["drop 1", "ship 2"], ["drop 2", "ship 1"])
    assert cli.open_gates() == []


def test_every_item_in_flight_parks_at_its_gate_however_threads_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second item starts only once the first item has parked: the second is
    one of the first max_concurrent items, in flight from the start, so it still runs and
    opens its gate (both gates are open for the person, not one, then the other)."""
    from podium.engine import groups

    original = groups._guarded
    calls: list[int] = []
    lock = threading.Lock()

    async def late_second(*args: Any, **kwargs: Any) -> Any:
        parked: asyncio.Event = args[4]  # the group's, on its event loop
        with lock:
            calls.append(len(calls))
            second = len(calls) == 2
        if second:
            await asyncio.wait_for(parked.wait(), 10)
        return await original(*args, **kwargs)

    monkeypatch.setattr(groups, "_guarded", late_second)
    cli = _InProcess(tmp_path, monkeypatch)
    assert cli.run() == 5
    assert cli.open_gates() == ["Ship 1?", "Ship 2?"]
