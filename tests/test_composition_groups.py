"""Parallel groups (spec 3.11) and for-each groups (3.12) through the real loader and engine.

Concurrency is proven without timing: a test executor wraps the real one and waits on a
threading.Barrier that only opens when every member has started (it would time out and fail
the member if they ran one after another), or counts how many items run at the same time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helpers_engine import load, run_workflow, write
from podium.app.inputs import parse_inputs
from podium.clock import FakeClock
from podium.engine.run import Engine
from podium.errors import LimitExceeded, StepError
from podium.events.model import (
    LimitReached,
    RunStarted,
    StepFailed,
    StepFinished,
    StepStarted,
)
from podium.events.sinks.jsonl import MemorySink
from podium.gates.base import ChainAnswerer, ScriptedAnswerer
from podium.providers.base import ProviderRegistry
from podium.providers.scripted import ResponsesFile, ScriptedProvider
from podium.steps.agent import execute_agent
from podium.steps.base import StepCall, StepOutcome
from podium.steps.set_step import execute_set

Executor = Callable[[StepCall], StepOutcome]


def run_with(path: Path, executors: dict[str, Executor], *,
             responses: dict[str, Any] | None = None,
             inputs: dict[str, Any] | None = None) -> tuple[Engine, MemorySink, Any]:
    """Build the engine as `podium run` does, with some executors replaced, and run it."""
    wf = load(path)
    answers = ResponsesFile.model_validate(responses or {})
    engine = Engine(wf, path, inputs=inputs if inputs is not None else parse_inputs(wf, [], None),
                    providers=ProviderRegistry(ScriptedProvider(answers)),
                    answerer=ChainAnswerer([ScriptedAnswerer(answers.gate_answers())]),
                    clock=FakeClock())
    engine.executors.update(executors)
    sink = MemorySink()
    engine.bus.add(sink)
    return engine, sink, engine.run()


def barrier_executor(inner: Executor, members: set[str]) -> Executor:
    """A call of one of `members` waits until all of them have started (it fails after 10 s
    otherwise); other steps run as usual."""
    barrier = threading.Barrier(len(members), timeout=10)

    def execute(call: StepCall) -> StepOutcome:
        if call.step.name not in members:
            return inner(call)
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            raise StepError("members did not run at the same time", step=call.step.name) \
                from None
        return inner(call)

    return execute


# --------------------------------------------------------------------------- parallel


def test_parallel_set_members_run_at_the_same_time(tmp_path: Path) -> None:
    path = write(tmp_path, """
        workflow: {name: p, entry_point: fan}
        agents:
          - {name: a, type: set, value: 1}
          - {name: b, type: set, value: 2}
          - {name: c, type: set, value: 3}
          - name: total
            type: set
            value: "{{ fan.outputs.a + fan.outputs.b + fan.outputs.c }}"
        parallel:
          - {name: fan, agents: [a, b, c], routes: [{to: total}]}
        output:
          total: "{{ total.output }}"
    """)
    engine, sink, result = run_with(path, {"set": barrier_executor(execute_set, {"a", "b", "c"})})
    assert result.exit_code == 0, result.error
    assert result.output == {"total": 6}
    assert engine.state.outputs["fan"] == {"type": "parallel",
                                           "outputs": {"a": 1, "b": 2, "c": 3}, "errors": {}}
    # members are not stored under their own names; the group counts one per member
    assert "a" not in engine.state.outputs
    assert result.iterations == 4
    members = [e for e in sink.events if isinstance(e, StepStarted) and e.group == "fan"]
    assert sorted(e.step for e in members) == ["a", "b", "c"]


def test_parallel_agents_run_at_the_same_time(tmp_path: Path) -> None:
    path = write(tmp_path, """
        workflow:
          name: p
          entry_point: review
          runtime: {provider: copilot, default_model: gpt-5-mini}
        agents:
          - {name: style, prompt: "style?", output: {ok: {type: boolean}}}
          - name: security
            prompt: "security?"
            model: claude-sonnet-5
            output: {ok: {type: boolean}}
        parallel:
          - {name: review, agents: [style, security]}
        output:
          both: "{{ review.outputs.style.ok and review.outputs.security.ok }}"
    """)
    usage = {"input_tokens": 100, "output_tokens": 10}
    responses = {"agents": {"style": [{"output": {"ok": True}, "usage": usage}],
                            "security": [{"output": {"ok": True}, "usage": usage}]}}
    _, sink, result = run_with(
        path, {"agent": barrier_executor(execute_agent, {"style", "security"})},
        responses=responses)
    assert result.exit_code == 0, result.error
    assert result.output == {"both": True}
    assert set(result.usage_by_step) == {"style", "security"}
    assert result.usage_by_step["security"].model == "claude-sonnet-5"
    # the group's own event sums its members and names both models, not the last one
    (group,) = [e for e in sink.events if isinstance(e, StepFinished) and e.step == "review"]
    assert (group.model, group.input_tokens, group.output_tokens) == \
        ("gpt-5-mini, claude-sonnet-5", 200, 20)


FAILING_GROUP = """
workflow:
  name: p
  entry_point: checks
  runtime: {{provider: copilot}}
agents:
  - {{name: ok, type: set, value: 1}}
  - {{name: ok2, type: set, value: 2}}
  - {{name: bad, prompt: "never answered"}}
  - {{name: also_bad, prompt: "never answered"}}
  - name: report
    type: set
    value: "{{{{ checks.errors | list | sort | join(',') }}}} / {{{{ checks.outputs | dictsort | map('join', '=') | join(',') }}}}"
  - {{name: clean, type: set, value: clean}}
parallel:
  - name: checks
    agents: [{members}]
    failure_mode: {mode}
    routes:
      - {{to: report, when: "{{{{ checks.errors | length > 0 }}}}"}}
      - {{to: clean}}
output:
  report: "{{{{ report.output if report is defined else '' }}}}"
"""


@pytest.mark.parametrize(("mode", "members", "code", "expect"), [
    ("fail_fast", "ok, bad", 3,
     "Agent 'bad' in parallel group 'checks' failed (fail_fast mode): ProviderError: the "
     "responses file has no answers for step 'bad'"),
    ("continue_on_error", "ok, bad", 0, "bad / ok=1"),
    ("continue_on_error", "bad, also_bad", 3,
     "all agents in parallel group 'checks' failed: "),
    ("all_or_nothing", "ok, bad", 3,
     "parallel group 'checks' failed (1 succeeded, 1 failed): bad: ProviderError:"),
    ("all_or_nothing", "ok, ok2", 0, ""),
], ids=["fail_fast", "continue_on_error", "continue_on_error-all-fail", "all_or_nothing",
        "all_or_nothing-ok"])
def test_parallel_failure_modes(tmp_path: Path, mode: str, members: str, code: int,
                                expect: str) -> None:
    run = run_workflow(write(tmp_path, FAILING_GROUP.format(mode=mode, members=members)))
    assert run.exit_code == code, run.error_text()
    if code:
        assert expect in run.error_text()
        assert "checks" not in run.outputs  # nothing stored
        return
    group = run.outputs["checks"]
    assert group["type"] == "parallel"
    if expect:
        # outputs and errors are visible to the group's routes and to later steps
        assert run.result.path == ["checks", "report"]
        assert run.output == {"report": expect}
        assert group["outputs"] == {"ok": 1}
        assert group["errors"]["bad"]["agent_name"] == "bad"
        assert group["errors"]["bad"]["exception_type"] == "ProviderError"
        assert "no answers for step 'bad'" in group["errors"]["bad"]["message"]
        # a failed member still counts as an execution
        assert run.result.iterations == 3
    else:
        assert group == {"type": "parallel", "outputs": {"ok": 1, "ok2": 2}, "errors": {}}
        assert run.result.path == ["checks", "clean"]


@pytest.mark.parametrize(("limits", "code"), [("", 3), ("budget_usd: 0.0001, budget_mode: enforce", 4)])
def test_member_spend_counts_when_the_group_fails(tmp_path: Path, limits: str, code: int) -> None:
    run = run_workflow(write(tmp_path, f"""
        workflow:
          name: p
          entry_point: checks
          # max_tokens: 1 keeps the worst case under the budget (steps/budget.py), so the
          # call is made and its actual cost passes the budget after the fact
          runtime: {{provider: copilot, default_model: gpt-5-mini, max_tokens: 1}}
          limits: {{{limits}}}
        agents:
          - {{name: good, prompt: "answered"}}
          - {{name: bad, prompt: "never answered"}}
        parallel:
          - {{name: checks, agents: [good, bad], failure_mode: all_or_nothing}}
    """), responses={"agents": {"good": [{"text": "fine", "usage": {
        "input_tokens": 1000, "output_tokens": 200}}]}})
    assert run.exit_code == code
    spent = run.result.usage_by_step["good"]
    assert (spent.input_tokens, spent.output_tokens) == (1000, 200)
    assert spent.cost_usd is not None
    assert run.engine.spent_usd == pytest.approx(spent.cost_usd)
    if code == 4:
        assert "over its budget" in run.error_text()
    else:
        assert "parallel group 'checks' failed (1 succeeded, 1 failed)" in run.error_text()
    # the group's step_failed carries that spend, so the run store counts it too
    (failed,) = [e for e in run.of(StepFailed) if e.step == "checks"]
    assert (failed.input_tokens, failed.output_tokens) == (1000, 200)
    assert failed.cost_usd == pytest.approx(spent.cost_usd)
    assert "usage_rows" not in failed.details


PRECHECK = """
workflow:
  name: p
  entry_point: first
  limits: {max_iterations: 3}
agents:
  - {name: first, type: set, value: 1, routes: [{to: fan}]}
  - {name: a, type: set, value: 1}
  - {name: b, type: set, value: 2}
  - {name: c, type: set, value: 3}
parallel:
  - {name: fan, agents: [a, b, c]}
"""


def test_parallel_group_is_refused_when_its_members_would_pass_the_limit(tmp_path: Path) -> None:
    run = run_workflow(write(tmp_path, PRECHECK))
    assert run.exit_code == 4
    assert isinstance(run.result.error, LimitExceeded)
    assert "before 'fan' (3 executions)" in run.error_text()
    (reached,) = run.of(LimitReached)
    assert (reached.step, reached.current, reached.maximum) == ("fan", 1, 3)
    assert run.steps() == ["first"]  # no member started


def test_parallel_group_runs_when_more_iterations_are_granted(tmp_path: Path) -> None:
    run = run_workflow(write(tmp_path, PRECHECK), responses={"iteration_limit": [1]})
    assert run.exit_code == 0, run.error_text()
    assert run.result.iterations == 4
    assert run.engine.state.max_iterations == 4


# --------------------------------------------------------------------------- for-each


def test_for_each_respects_max_concurrent(tmp_path: Path) -> None:
    path = write(tmp_path, """
        workflow:
          name: f
          entry_point: fan
          input:
            items: {type: array}
          limits: {max_iterations: 20}
        for_each:
          - name: fan
            type: for_each
            source: workflow.input.items
            as: n
            max_concurrent: 3
            agent: {name: square, type: set, value: "{{ n * n }}"}
        agents:
          - {name: unused, type: set, value: 0}
        output:
          squares: "{{ fan.outputs | tojson }}"
    """)
    lock = threading.Condition()
    state = {"now": 0, "peak": 0, "started": 0, "stalled": 0}
    total = 10

    def counting(call: StepCall) -> StepOutcome:
        with lock:
            state["now"] += 1
            state["started"] += 1
            state["peak"] = max(state["peak"], state["now"])
            lock.notify_all()
            # hold until the pool is full (or no more items can come): at most 3 may be here
            if not lock.wait_for(lambda: state["now"] >= 3 or state["started"] >= total, 10):
                state["stalled"] += 1
        try:
            return execute_set(call)
        finally:
            with lock:
                state["now"] -= 1

    _, sink, result = run_with(path, {"set": counting},
                               inputs={"items": list(range(total))})
    assert result.exit_code == 0, result.error
    assert state["peak"] == 3
    assert state["stalled"] == 0
    assert result.output == {"squares": [n * n for n in range(total)]}
    assert result.iterations == total
    labels = sorted(e.step for e in sink.events
                    if isinstance(e, StepFinished) and e.group == "fan")
    assert labels == sorted(f"square[{i}]" for i in range(total))


def test_for_each_item_index_and_key_variables(tmp_path: Path) -> None:
    run = run_workflow(write(tmp_path, """
        workflow:
          name: f
          entry_point: people
          input:
            people: {type: array}
        for_each:
          - name: people
            type: for_each
            source: workflow.input.people
            as: person
            key_by: meta.code
            routes: [{to: plain}]
            agent:
              name: card
              type: set
              values:
                name: "{{ person.name }}"
                index: "{{ _index }}"
                key: "{{ _key }}"
          - name: plain
            type: for_each
            source: workflow.input.people
            as: p
            agent: {name: line, type: set, value: "{{ _index }}:{{ _key is defined }}"}
        agents:
          - {name: unused, type: set, value: 0}
    """), inputs={"people": [{"name": "Ada", "meta": {"code": "A1"}},
                             {"name": "Bob"},  # no key: falls back to its index
                             {"name": "Cy", "meta": {"code": 7}}]})
    assert run.exit_code == 0, run.error_text()
    assert run.outputs["people"] == {
        "type": "for_each", "count": 3, "errors": {},
        "outputs": {"A1": {"name": "Ada", "index": 0, "key": "A1"},
                    "1": {"name": "Bob", "index": 1, "key": 1},
                    "7": {"name": "Cy", "index": 2, "key": 7}}}
    assert run.outputs["plain"]["outputs"] == ["0:False", "1:False", "2:False"]
    assert run.result.iterations == 6


def test_for_each_over_an_empty_list(tmp_path: Path) -> None:
    run = run_workflow(write(tmp_path, """
        workflow:
          name: f
          entry_point: fan
          input:
            items: {type: array, default: []}
        for_each:
          - name: fan
            type: for_each
            source: workflow.input.items
            as: item
            key_by: id
            agent: {name: each, type: set, value: "{{ item }}"}
            routes:
              - {to: nothing, when: "{{ fan.count == 0 }}"}
              - {to: something}
        agents:
          - {name: nothing, type: set, value: none}
          - {name: something, type: set, value: some}
    """))
    assert run.exit_code == 0, run.error_text()
    assert run.outputs["fan"] == {"type": "for_each", "outputs": {}, "errors": {}, "count": 0}
    assert run.result.path == ["fan", "nothing"]
    assert run.result.iterations == 1  # the empty group counts nothing
    assert not [e for e in run.of(StepStarted) if e.group == "fan"]


def test_for_each_source_as_a_json_string_and_a_step_output(tmp_path: Path) -> None:
    run = run_workflow(write(tmp_path, """
        workflow:
          name: f
          entry_point: from_input
          input:
            items: {type: string}
        for_each:
          - name: from_input
            type: for_each
            source: workflow.input.items
            as: word
            agent: {name: upper, type: set, value: "{{ word | upper }}"}
            routes: [{to: plan}]
          - name: from_step
            type: for_each
            source: plan.output.batch.names
            as: name
            agent: {name: greet, type: set, value: "hi {{ name }}"}
        agents:
          - name: plan
            type: set
            value: {batch: {names: '["x", "y"]'}}
            output_type: dict
            routes: [{to: from_step}]
        output:
          upper: "{{ from_input.outputs | join(',') }}"
          greet: "{{ from_step.outputs | join(',') }}"
    """), inputs={"items": '["a", "b", "c"]'})
    assert run.exit_code == 0, run.error_text()
    assert run.output == {"upper": "A,B,C", "greet": "hi x,hi y"}


DIVIDE = """
workflow:
  name: f
  entry_point: div
  input:
    items: {{type: array}}
for_each:
  - name: div
    type: for_each
    source: workflow.input.items
    as: n
    max_concurrent: {concurrency}
    failure_mode: {mode}
    agent: {{name: inverse, type: set, value: "{{{{ 100 // n }}}}"}}
    routes:
      - {{to: report}}
agents:
  - name: report
    type: set
    value: "{{{{ div.outputs | join(',') }}}}|{{{{ div.errors | list | join(',') }}}}"
output:
  report: "{{{{ report.output }}}}"
"""


def test_for_each_collects_errors_with_continue_on_error(tmp_path: Path) -> None:
    run = run_workflow(write(tmp_path, DIVIDE.format(concurrency=2, mode="continue_on_error")),
                       inputs={"items": [5, 0, 20, 0]})
    assert run.exit_code == 0, run.error_text()
    group = run.outputs["div"]
    assert group["outputs"] == [20, 5]
    assert set(group["errors"]) == {"1", "3"}
    err = group["errors"]["1"]
    assert (err["item_key"], err["exception_type"]) == ("1", "TemplateError")
    assert "ZeroDivisionError" in err["message"]
    assert group["count"] == 4
    assert run.output == {"report": "20,5|1,3"}
    assert run.result.iterations == 5  # four items, then report


@pytest.mark.parametrize(("mode", "items", "started", "expect"), [
    ("fail_fast", [0, 1, 2, 4], ["inverse[0]"],
     "Item '0' in for-each group 'div' failed (fail_fast mode): TemplateError:"),
    ("all_or_nothing", [1, 0, 2, 4], ["inverse[0]", "inverse[1]", "inverse[2]", "inverse[3]"],
     "for-each group 'div' failed (3 succeeded, 1 failed): 1: TemplateError:"),
    ("continue_on_error", [0, 0], ["inverse[0]", "inverse[1]"],
     "all items in for-each group 'div' failed"),
])
def test_for_each_failure_modes(tmp_path: Path, mode: str, items: list[int],
                                started: list[str], expect: str) -> None:
    run = run_workflow(write(tmp_path, DIVIDE.format(concurrency=1, mode=mode)),
                       inputs={"items": items})
    assert run.exit_code == 3
    assert expect in run.error_text()
    # with one worker, fail_fast starts nothing after the first failure
    assert [e.step for e in run.of(StepStarted) if e.group == "div"] == started
    assert "div" not in run.outputs


def test_fail_fast_runs_every_item_in_flight_from_the_start(tmp_path: Path) -> None:
    """The first max_concurrent items all run, however soon one of them fails (as Conductor's
    first batch does); under fail_fast no later item starts. Members start one pass of the
    event loop apart (engine/groups.py), and item 0's prompt fails to render in its first
    step, before items 1 and 2 start: they start all the same."""
    wf = write(tmp_path, """
        workflow:
          name: f
          entry_point: div
          runtime: {provider: copilot, default_model: gpt-4o-mini}
          input:
            items: {type: array}
        for_each:
          - name: div
            type: for_each
            source: workflow.input.items
            as: n
            max_concurrent: 3
            failure_mode: fail_fast
            agent: {name: inverse, prompt: "{{ 100 // n }}"}
        agents: []
        output:
          n: "{{ div.count }}"
        """)
    run = run_workflow(wf, inputs={"items": [0, 1, 2, 4, 5]},
                       responses={"agents": {"inverse": {"every": {"output": {"ok": True}}}}})
    assert run.exit_code == 3
    assert "Item '0' in for-each group 'div' failed (fail_fast mode)" in run.error_text()
    assert sorted(e.step for e in run.of(StepStarted) if e.group == "div") == \
        ["inverse[0]", "inverse[1]", "inverse[2]"]
    assert "div" not in run.outputs


def test_for_each_is_refused_when_its_items_would_pass_the_limit(tmp_path: Path) -> None:
    run = run_workflow(write(tmp_path, DIVIDE.format(concurrency=4, mode="fail_fast")
                             .replace("  name: f\n", "  name: f\n  limits: {max_iterations: 5}\n")),
                       inputs={"items": list(range(1, 11))})
    assert run.exit_code == 4
    assert isinstance(run.result.error, LimitExceeded)
    assert "before 'div' (10 executions)" in run.error_text()
    assert not [e for e in run.of(StepStarted) if e.group == "div"]


def test_for_each_item_can_be_a_subworkflow(tmp_path: Path) -> None:
    write(tmp_path, """
        workflow:
          name: double
          entry_point: calc
          input:
            n: {type: number}
          runtime: {provider: copilot, default_model: gpt-5-mini}
        agents:
          - {name: calc, type: set, value: "{{ workflow.input.n * 2 }}", routes: [{to: note}]}
          - {name: note, prompt: "note {{ calc.output }}", output_mode: raw}
        output:
          doubled: "{{ calc.output }}"
    """, "double.yaml")
    run = run_workflow(write(tmp_path, """
        workflow:
          name: f
          entry_point: fan
          input:
            nums: {type: array}
        for_each:
          - name: fan
            type: for_each
            source: workflow.input.nums
            as: num
            max_concurrent: 3
            agent:
              name: sub
              type: workflow
              workflow: double.yaml
              input_mapping: {n: "{{ num }}"}
        agents:
          - {name: unused, type: set, value: 0}
        output:
          doubled: "{{ fan.outputs | map(attribute='doubled') | join(',') }}"
    """), inputs={"nums": [1, 2, 3]}, responses={"agents": {"note": {"every": {
        "text": "noted", "usage": {"input_tokens": 10, "output_tokens": 5}}}}})
    assert run.exit_code == 0, run.error_text()
    assert run.output == {"doubled": "2,4,6"}
    children = [e for e in run.of(RunStarted) if e.parent_run_id is not None]
    assert sorted(e.inputs["n"] for e in children) == [1, 2, 3]
    assert {e.parent_run_id for e in children} == {run.result.run_id}
    assert len({e.run_id for e in children}) == 3
    # the children's agents count in the parent's totals, under the group's row
    row = run.result.usage_by_step["sub/note"]
    assert (row.input_tokens, row.output_tokens) == (30, 15)
    assert run.result.iterations == 3


def test_for_each_failed_subworkflow_items_still_cost(tmp_path: Path) -> None:
    write(tmp_path, """
        workflow:
          name: maybe
          entry_point: think
          input:
            n: {type: number}
          runtime: {provider: copilot, default_model: gpt-5-mini}
        agents:
          - name: think
            prompt: "think about {{ workflow.input.n }}"
            output_mode: raw
            routes:
              - {to: give_up, when: "{{ workflow.input.n % 2 == 1 }}"}
              - {to: $end}
          - {name: give_up, type: terminate, status: failed, reason: "odd number"}
        output:
          n: "{{ workflow.input.n }}"
    """, "maybe.yaml")
    run = run_workflow(write(tmp_path, """
        workflow:
          name: f
          entry_point: fan
          input:
            nums: {type: array}
        for_each:
          - name: fan
            type: for_each
            source: workflow.input.nums
            as: num
            failure_mode: continue_on_error
            agent:
              name: sub
              type: workflow
              workflow: maybe.yaml
              input_mapping: {n: "{{ num }}"}
        agents:
          - {name: unused, type: set, value: 0}
    """), inputs={"nums": [1, 2, 3]}, responses={"agents": {"think": {"every": {
        "text": "hmm", "usage": {"input_tokens": 10, "output_tokens": 5}}}}})
    assert run.exit_code == 0, run.error_text()
    group = run.outputs["fan"]
    assert group["outputs"] == [{"n": 2}]
    assert set(group["errors"]) == {"0", "2"}
    assert "ended in its failed terminate 'give_up': odd number" in \
        group["errors"]["0"]["message"]
    row = run.result.usage_by_step["sub/think"]
    assert (row.input_tokens, row.output_tokens) == (30, 15)  # all three children spent
    failed = [e for e in run.of(StepFailed) if e.group == "fan"]
    assert sorted(e.step for e in failed) == ["sub[0]", "sub[2]"]
    assert {(e.input_tokens, e.output_tokens) for e in failed} == {(10, 5)}
    assert all("usage_rows" not in e.details for e in failed)
