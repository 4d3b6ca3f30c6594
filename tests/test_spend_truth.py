"""What a run spent is the sum of its model calls, in every view (docs/decisions/0023): the
budget (audit and enforce) counts the calls of steps that failed, in groups too; a failed
contract's error carries its spend; `show`, `runs` and `diff` agree with the recorded
`model_exchange` events of a run and its sub-workflows; and each API request is a `chat` span."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fakes.openai_server import answer, call
from helpers_engine import run_cli, run_yaml, write
from helpers_providers import Servers, fake_servers, run_real_yaml
from podium.events.model import BudgetExceeded, ModelExchange, StepFailed, StepFinished

PRICED = """
  runtime: {provider: copilot, default_model: team-model}
  limits: {budget_usd: 0.03, budget_mode: MODE}
  cost:
    pricing:
      team-model: {input_per_mtok: 1.0, output_per_mtok: 0}
"""

BAD = {"text": "not json", "usage": {"input_tokens": 15_600, "output_tokens": 0}}


def _priced(mode: str) -> str:
    return PRICED.replace("MODE", mode)


def test_a_parallel_member_that_breaks_its_contract_counts_in_an_audit_budget(
        tmp_path: Path) -> None:
    run = run_yaml(tmp_path, f"""
workflow:
  name: spend
  entry_point: team
{_priced("audit")}
agents:
  - {{name: good, prompt: "fine"}}
  - {{name: bad, prompt: "json please", output: {{v: {{type: string}}}}}}
parallel:
  - {{name: team, agents: [good, bad], failure_mode: continue_on_error}}
""", responses={"agents": {"good": [{"text": "ok"}],
                           "bad": [{"attempts": [BAD, BAD, BAD]}]}})
    assert run.exit_code == 0, run.error_text()
    assert len(run.of(ModelExchange)) == 4
    # three priced calls of $0.0156: the budget saw them all
    (exceeded,) = run.of(BudgetExceeded)
    assert exceeded.spent_usd == pytest.approx(0.0468)
    assert exceeded.budget_mode == "audit"
    assert run.result.budget is not None
    assert run.result.budget.spent_usd == pytest.approx(0.0468)
    # the member's end and its group's both say what it spent (the usage agent.py attaches)
    (failed,) = [e for e in run.of(StepFailed) if e.step == "bad"]
    assert (failed.input_tokens, failed.cost_usd) == (46_800, pytest.approx(0.0468))
    (group,) = [e for e in run.of(StepFinished) if e.step == "team"]
    assert group.input_tokens == 46_800
    assert run.result.usage_by_step["bad"].input_tokens == 46_800


def test_an_enforced_budget_stops_a_for_each_whose_items_fail_their_contracts(
        tmp_path: Path) -> None:
    bad = {"text": "nope", "usage": {"input_tokens": 20_000, "output_tokens": 0}}
    run = run_yaml(tmp_path, f"""
workflow:
  name: spend
  entry_point: fan
{_priced("enforce")}
  input: {{items: {{type: array}}}}
agents:
  - {{name: unused, type: set, value: 0}}
for_each:
  - name: fan
    type: for_each
    source: workflow.input.items
    as: item
    max_concurrent: 1
    failure_mode: continue_on_error
    agent:
      name: judge
      prompt: "judge {{{{ item }}}}"
      output: {{v: {{type: string}}}}
      retry: {{max_parse_recovery_attempts: 0}}
""", inputs={"items": [1, 2]}, responses={"agents": {"judge": {"every": bad}}})
    assert len(run.of(ModelExchange)) == 2
    assert run.exit_code == 4, run.error_text()
    assert "over its budget of $0.03" in run.error_text()
    (exceeded,) = run.of(BudgetExceeded)
    assert exceeded.spent_usd == pytest.approx(0.04)


def _home_run(tmp_path: Path, wf: str, responses: str, *extra: str) -> tuple[Path, str]:
    home = tmp_path / "home"
    path = write(tmp_path, wf)
    answers = write(tmp_path, responses, "responses.yaml")
    run_cli(home, "run", path, "--responses", answers, *extra)
    proc = run_cli(home, "runs", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    rows = [r for r in json.loads(proc.stdout) if not r.get("parent_run_id")]
    return home, str(rows[0]["id"])


def test_a_failed_contract_shows_its_tokens_and_its_error_carries_them(tmp_path: Path) -> None:
    home, run_id = _home_run(tmp_path, """
workflow:
  name: heavy
  entry_point: writer
  runtime: {provider: copilot, default_model: gpt-4o}
agents:
  - name: writer
    prompt: "Write JSON"
    output: {v: {type: string}}
""", """
agents:
  writer:
    - attempts:
        - {text: "no", usage: {input_tokens: 100000, output_tokens: 10}}
        - {text: "no", usage: {input_tokens: 100000, output_tokens: 10}}
        - {text: "no", usage: {input_tokens: 100000, output_tokens: 10}}
""")
    shown = json.loads(run_cli(home, "show", run_id, "--format", "json").stdout)
    assert shown["run"]["status"] == "error"
    row = shown["cost_per_agent"]["writer"]
    assert (row["input_tokens"], row["output_tokens"]) == (300_000, 30)
    assert row["cost_usd"] > 0
    assert shown["run"]["input_tokens"] == 300_000
    assert shown["spend"]["calls"] == 3
    events = [json.loads(line) for line in run_cli(home, "events", run_id).stdout.splitlines()]
    (failed,) = [e for e in events if e["type"] == "step_failed"]
    assert failed["input_tokens"] == 300_000
    assert failed["details"]["usage"]["input_tokens"] == 300_000
    assert "300000 in / 30 out" in run_cli(home, "show", run_id).stdout


def test_a_resumed_run_budgets_from_every_call_it_made(tmp_path: Path) -> None:
    home, run_id = _home_run(tmp_path, """
workflow:
  name: again
  entry_point: writer
  runtime: {provider: copilot, default_model: team-model}
  limits: {budget_usd: 0.05, budget_mode: audit}
  cost: {pricing: {team-model: {input_per_mtok: 1.0, output_per_mtok: 0}}}
agents:
  - {name: writer, prompt: "Write JSON", output: {v: {type: string}},
     retry: {max_parse_recovery_attempts: 0}}
""", """
agents:
  writer:
    every: {text: "no", usage: {input_tokens: 30000, output_tokens: 0}}
""")
    # $0.03 spent by a call whose step failed; the resume's call makes $0.06
    resumed = run_cli(home, "resume", run_id)
    assert resumed.returncode == 3, resumed.stderr
    assert "budget: $0.0600 spent of $0.05" in resumed.stderr
    events = [json.loads(line) for line in run_cli(home, "events", run_id).stdout.splitlines()]
    (exceeded,) = [e for e in events if e["type"] == "budget_exceeded"]
    assert exceeded["spent_usd"] == pytest.approx(0.06)
    shown = json.loads(run_cli(home, "show", run_id, "--format", "json").stdout)
    assert shown["spend"]["input_tokens"] == shown["run"]["input_tokens"] == 60_000


# --------------------------------------------------------------------------- the corpus

SUB = """
workflow: {name: child, entry_point: helper, runtime: {provider: copilot, default_model: gpt-4o}}
agents:
  - {name: helper, prompt: "help"}
output:
  said: "{{ helper.output.result }}"
"""

CORPUS = """
workflow:
  name: corpus
  entry_point: team
  runtime: {provider: copilot, default_model: gpt-4o}
  limits: {budget_usd: 0.0001, budget_mode: audit}
  input: {items: {type: array, default: [1, 2]}}
agents:
  - {name: good, prompt: "fine"}
  - {name: bad, prompt: "json", output: {v: {type: string}}}
  - {name: sub, type: workflow, workflow: child.yaml, routes: [{to: checked}]}
  - name: checked
    prompt: "write"
    output: {draft: {type: string}}
    validator: {criteria: "Is it good?"}
    routes: [{to: talk}]
  - name: talk
    prompt: "explain"
    output: {text: {type: string}}
    dialog: {trigger_prompt: "Ask the reader if anything is unclear."}
    routes: [{to: last}]
  - {name: last, prompt: "final json", output: {v: {type: string}}}
parallel:
  - {name: team, agents: [good, bad], failure_mode: continue_on_error, routes: [{to: fan}]}
for_each:
  - name: fan
    type: for_each
    source: workflow.input.items
    as: item
    max_concurrent: 1
    failure_mode: continue_on_error
    routes: [{to: sub}]
    agent:
      name: judge
      prompt: "judge {{ item }}"
      output: {v: {type: string}}
      retry: {max_parse_recovery_attempts: 1}
"""


def _u(i: int, o: int) -> str:
    return f"usage: {{input_tokens: {i}, output_tokens: {o}}}"


def _corpus_responses(last: str) -> str:
    return f"""
agents:
  good: [{{text: "ok", {_u(100, 10)}}}]
  bad: [{{attempts: [{{text: "x", {_u(200, 20)}}}, {{text: "y", {_u(210, 21)}}},
                     {{text: "z", {_u(220, 22)}}}]}}]
  judge: [{{attempts: [{{text: "x", {_u(300, 30)}}}, {{text: "w", {_u(310, 31)}}}]}},
          {{output: {{v: "fine"}}, {_u(320, 32)}}}]
  helper: [{{text: "helped", {_u(400, 40)}}}]
  checked: [{{output: {{draft: "v1"}}, {_u(500, 50)}}}]
  checked.validator: [{{output: {{passed: false, issues: ["short"]}}, {_u(600, 60)}}}]
  checked.rerun: [{{output: {{draft: "v2"}}, {_u(700, 70)}}}]
  talk: [{{output: {{text: "t"}}, {_u(800, 80)}}}]
  talk.dialog: [{{output: {{trigger: true, reason: "r", question: "Clear?"}}, {_u(900, 90)}}}]
  talk.conversation: [{{attempts: [{{text: "Noted.", {_u(1000, 100)}}}]}}]
  talk.after_dialog: [{{output: {{text: "t2"}}, {_u(1100, 110)}}}]
  last: [{last}]
dialogs:
  talk: ["make it simpler", done]
"""


def _family_events(home: Path, run_id: str) -> list[dict[str, Any]]:
    """Every model call the run and its sub-workflow runs recorded."""
    proc = run_cli(home, "runs", "--format", "json", "--all")
    if proc.returncode != 0:
        proc = run_cli(home, "runs", "--format", "json")
    ids = [r["id"] for r in json.loads(proc.stdout)
           if r["id"] == run_id or r.get("parent_run_id") == run_id]
    out: list[dict[str, Any]] = []
    for i in ids:
        out += [json.loads(line) for line in run_cli(home, "events", i).stdout.splitlines()]
    return out


def test_every_view_of_a_run_agrees_with_its_model_calls(tmp_path: Path) -> None:
    from podium.events.spend import fold_spend

    write(tmp_path, SUB, "child.yaml")
    home, failed_id = _home_run(tmp_path, CORPUS, _corpus_responses(
        f'{{attempts: [{{text: "a", {_u(50, 5)}}}, {{text: "b", {_u(50, 5)}}}, '
        f'{{text: "c", {_u(50, 5)}}}]}}'))
    events = _family_events(home, failed_id)
    calls = [e for e in events if e["type"] == "model_exchange"]
    # team 1+3, fan 2+1, sub 1, checked 3 (own, validator, rerun), talk 4, last 3
    assert len(calls) == 18, [(e['step'], e.get('call')) for e in calls]
    want_in = sum(int(e["input_tokens"]) for e in calls)
    want_out = sum(int(e["output_tokens"]) for e in calls)
    want_cost = sum(float(e["cost_usd"] or 0) for e in calls)
    assert want_in == 100 + 630 + 930 + 400 + 1800 + 3800 + 150
    shown = json.loads(run_cli(home, "show", failed_id, "--format", "json").stdout)
    assert shown["run"]["status"] == "error"
    spend = shown["spend"]
    assert (spend["input_tokens"], spend["output_tokens"]) == (want_in, want_out)
    assert spend["cost_usd"] == pytest.approx(want_cost)
    per_agent = shown["cost_per_agent"]
    assert sum(r["input_tokens"] for r in per_agent.values()) == want_in
    assert sum(r["cost_usd"] for r in per_agent.values()) == pytest.approx(want_cost)
    assert per_agent["sub/helper"]["input_tokens"] == 400
    assert per_agent["checked (validator)"]["input_tokens"] == 500 + 600  # Conductor's rows
    assert per_agent["talk (dialog)"]["input_tokens"] == 800 + 900 + 1000
    assert spend["by_step"]["team"]["input_tokens"] == 730
    assert spend["by_step"]["fan"]["input_tokens"] == 930
    # the run row (`runs`) is the same sum
    rows = json.loads(run_cli(home, "runs", "--format", "json").stdout)
    row = next(r for r in rows if r["id"] == failed_id)
    assert (row["input_tokens"], row["output_tokens"]) == (want_in, want_out)
    assert row["cost_usd"] == pytest.approx(want_cost, abs=1e-6)
    # the budget saw the same spend
    exceeded = [e for e in events if e["type"] == "budget_exceeded" and
                e["run_id"] == failed_id]
    assert exceeded
    assert exceeded[-1]["spent_usd"] == pytest.approx(want_cost, abs=1e-6)
    # and the fold of the recorded events is the one every view reads
    assert fold_spend(calls).total.input_tokens == want_in
    # a second run that ends well: `diff`'s cost rows are each run's per-agent spend
    _, ok_id = _home_run(tmp_path, CORPUS, _corpus_responses(
        f'{{output: {{v: "done"}}, {_u(60, 6)}}}'))
    diff = json.loads(run_cli(home, "diff", failed_id, ok_id, "--format", "json").stdout)
    cost = {r["agent"]: r for r in diff["cost"]}
    assert sum(r["a_tokens"] for r in cost.values()) == want_in + want_out
    assert cost["last"]["a_tokens"] == 165
    assert cost["last"]["b_tokens"] == 66
    assert cost["sub/helper"]["b_tokens"] == 440


# --------------------------------------------------------------------------- traces


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch) -> Iterator[Servers]:
    yield from fake_servers(monkeypatch)


def test_each_api_request_is_a_chat_span_with_its_tokens(tmp_path: Path,
                                                         servers: Servers) -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from podium.telemetry.spans import TraceSink

    (tmp_path / "notes.txt").write_text("hello", encoding="utf-8")
    turns = iter([answer(tool_calls=[call("read_file", {"path": "notes.txt"})],
                         usage=(120, 15, 0)),
                  answer("it says hello", usage=(180, 25, 0))])
    servers.openai.handler = lambda req: next(turns)
    run = run_real_yaml(tmp_path, f"""
workflow:
  name: tools
  entry_point: reader
  runtime: {{provider: openai, default_model: gpt-5-mini, working_dir: "{tmp_path}"}}
agents:
  - {{name: reader, prompt: "What does notes.txt say?", tools: [read_file]}}
""")
    assert run.exit_code == 0, run.error_text()
    (exchange,) = [e for e in run.sink.events if isinstance(e, ModelExchange)]
    assert (exchange.input_tokens, exchange.output_tokens, exchange.api_calls) == (300, 40, 2)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sink = TraceSink(provider.get_tracer("test"))
    for e in run.sink.events:
        sink.handle(e)
    sink.close()
    chats = sorted((s for s in exporter.get_finished_spans() if s.name.startswith("chat ")),
                   key=lambda s: s.start_time or 0)
    got = [((s.attributes or {})["gen_ai.usage.input_tokens"],
            (s.attributes or {})["gen_ai.usage.output_tokens"],
            tuple((s.attributes or {})["gen_ai.response.finish_reasons"])) for s in chats]
    assert got == [(120, 15, ("tool_calls",)), (180, 25, ("stop",))]
    agent = next(s for s in exporter.get_finished_spans() if s.name == "invoke_agent reader")
    assert all(s.parent is not None and s.parent.span_id == agent.context.span_id
               for s in chats)
    root = next(s for s in exporter.get_finished_spans() if s.name.startswith("invoke_workflow"))
    assert (root.attributes or {})["gen_ai.usage.input_tokens"] == 300
