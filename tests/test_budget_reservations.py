"""Budget reservations (steps/budget.py): under `budget_mode: enforce` each model call reserves
its worst case (prompt estimated at characters / 4 at the input price, plus its output limit at
the output price) before it starts; a call that would take spent + reserved past the budget is
not made (the scripted provider never sees it) and the run stops with exit code 4. Parallel
members and for-each items reserve before they call; what a run spends stays within its budget
plus at most one call's actual cost beyond its worst case, and the summary reports it. `audit`
refuses nothing.

Prices: team-model's input is free and each output token costs $0.01, so with
`runtime.max_tokens: 2` every call's worst case is exactly $0.02."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from helpers_engine import Run, run_workflow, write
from podium.cli.summary import print_summary
from podium.errors import LimitExceeded
from podium.events.model import BudgetExceeded, LimitReached
from podium.language.model import ModelPricing
from podium.steps.budget import DEFAULT_MAX_OUTPUT_TOKENS, worst_case

HEAD = """
workflow:
  name: b
  entry_point: ENTRY
  runtime: {provider: copilot, default_model: team-model MAX_TOKENS}
  limits: {budget_usd: BUDGET, budget_mode: MODE}
  input:
    items: {type: array, default: [1, 2, 3, 4, 5]}
  cost:
    pricing:
      team-model: {input_per_mtok: 0, output_per_mtok: 10000}
"""


def _run(tmp_path: Path, body: str, answers: dict[str, Any], *, entry: str = "a",
         budget: float = 0.05, mode: str = "enforce", max_tokens: int | None = 2) -> Run:
    head = (HEAD.replace("ENTRY", entry).replace("BUDGET", str(budget)).replace("MODE", mode)
            .replace(" MAX_TOKENS", f", max_tokens: {max_tokens}" if max_tokens else ""))
    return run_workflow(write(tmp_path, head + body), responses={"agents": answers})


def _answer(tokens: int = 2, n: int = 1) -> list[dict[str, Any]]:
    return [{"text": "ok", "usage": {"input_tokens": 10, "output_tokens": tokens}}] * n


def _made(run: Run) -> list[str]:
    return sorted(str(r["step"]) for r in run.provider.requests)


def _refusal(run: Run) -> LimitExceeded:
    err = run.result.error
    assert isinstance(err, LimitExceeded), run.error_text()
    assert err.limit == "budget"
    return err


def test_worst_case_is_the_prompt_at_input_price_plus_the_output_limit() -> None:
    pricing = {"m": ModelPricing(input_per_mtok=1_000_000, output_per_mtok=2_000_000)}
    worst = worst_case("the call of agent 'a'", "m", provider="openai", pricing=pricing,
                       sent=["s" * 40, "p" * 360, None], max_tokens=5)
    assert (worst.input_tokens, worst.output_tokens) == (100, 5)  # 400 characters / 4
    assert worst.usd == pytest.approx(100 * 1.0 + 5 * 2.0)
    default = worst_case("x", "m", provider="openai", pricing=pricing, sent=["p"],
                         max_tokens=None)
    assert default.output_tokens == DEFAULT_MAX_OUTPUT_TOKENS
    unpriced = worst_case("x", "qwen2.5-coder:7b", provider="openai", pricing={}, sent=["p"],
                          max_tokens=None)
    assert unpriced.usd is None


def test_a_call_whose_worst_case_passes_the_budget_is_not_made(tmp_path: Path) -> None:
    # no runtime.max_tokens: the worst case counts DEFAULT_MAX_OUTPUT_TOKENS ($81.92 here)
    run = _run(tmp_path, """
agents:
  - {name: a, prompt: "one"}
""", {"a": _answer()}, max_tokens=None)
    assert run.exit_code == 4
    assert run.provider.requests == []  # the provider never saw it
    err = _refusal(run)
    text = run.error_text()
    assert "the call of agent 'a' was not made" in text
    assert "its worst case $81.9200" in text
    assert "would pass the budget of $0.05" in text
    assert "$0.0000 spent and $0.0000 reserved by calls in flight" in text
    assert "set runtime.max_tokens" in text
    assert err.step == "a"
    (reached,) = run.of(LimitReached)
    assert (reached.limit, reached.step, reached.maximum) == ("budget", "a", 0.05)
    assert run.engine.spent_usd == 0.0


def test_a_sequence_stops_before_the_call_that_would_pass(tmp_path: Path) -> None:
    # the reported bug: an enforced $0.05 budget spent $0.15; now the third call is refused
    run = _run(tmp_path, """
agents:
  - {name: a, prompt: "one", routes: [{to: b}]}
  - {name: b, prompt: "two", routes: [{to: c}]}
  - {name: c, prompt: "three"}
""", {"a": _answer(), "b": _answer(), "c": _answer()})
    assert run.exit_code == 4
    assert _made(run) == ["a", "b"]
    assert run.engine.spent_usd == pytest.approx(0.04)
    assert "$0.0400 spent and $0.0000 reserved" in run.error_text()
    assert run.of(BudgetExceeded) == []  # nothing was spent past the budget
    assert run.result.budget is not None
    assert (run.result.budget.spent_usd, run.result.budget.overshoot_usd) == (0.04, 0.0)


def test_the_validator_call_reserves_too(tmp_path: Path) -> None:
    run = _run(tmp_path, """
agents:
  - name: a
    prompt: "one"
    validator: {criteria: "non-empty", max_retries: 0}
""", {"a": _answer(), "a.validator": [{"output": {"passed": True, "issues": []}}]},
        budget=0.03)
    assert run.exit_code == 4
    assert [(r["step"], r["call"]) for r in run.provider.requests] == [("a", None)]
    assert "the validator call of agent 'a' was not made" in run.error_text()
    # what the agent's own call cost still counts
    assert run.result.usage_by_step["a"].cost_usd == pytest.approx(0.02)
    assert run.engine.spent_usd == pytest.approx(0.02)


PARALLEL = """
agents:
  - {name: m1, prompt: "first"}
  - {name: m2, prompt: "second"}
  - {name: m3, prompt: "third"}
parallel:
  - {name: group, agents: [m1, m2, m3], failure_mode: continue_on_error}
"""


@pytest.mark.parametrize("tokens", [2, 3])  # actual = worst case; actual above it
def test_parallel_members_reserve_before_they_call(tmp_path: Path, tokens: int) -> None:
    run = _run(tmp_path, PARALLEL, {m: _answer(tokens) for m in ("m1", "m2", "m3")},
               entry="group")
    assert run.exit_code == 4
    # two worst cases ($0.04) fit in $0.05, three do not, whichever member comes last
    assert len(_made(run)) == 2
    one_call = tokens * 0.01
    assert run.engine.spent_usd == pytest.approx(2 * one_call)
    assert run.engine.spent_usd <= 0.05 + one_call  # at most one call's cost beyond
    text = run.error_text()
    assert "parallel group 'group': the budget refused 1 member(s) of 3 (2 finished)" in text
    assert "would pass the budget of $0.05" in text
    assert "reserved by calls in flight" in text
    refused = [m for m in ("m1", "m2", "m3") if m not in _made(run)]
    assert refused[0] not in run.result.usage_by_step
    assert sum(u.cost_usd or 0 for u in run.result.usage_by_step.values()) == \
        pytest.approx(2 * one_call)


@pytest.mark.parametrize("concurrent", [1, 5])
def test_for_each_items_reserve_before_they_call(tmp_path: Path, concurrent: int) -> None:
    run = _run(tmp_path, f"""
agents:
  - {{name: unused, type: set, value: 0}}
for_each:
  - name: fan
    type: for_each
    source: workflow.input.items
    as: n
    max_concurrent: {concurrent}
    failure_mode: continue_on_error
    agent: {{name: each, prompt: "item {{{{ n }}}}"}}
""", {"each": _answer(n=5)}, entry="fan")
    assert run.exit_code == 4
    assert len(run.provider.requests) == 2
    assert run.engine.spent_usd == pytest.approx(0.04)
    assert "for-each group 'fan': the budget refused 3 item(s) of 5 (2 finished)" in \
        run.error_text()
    assert "the call of agent 'each[" in run.error_text()


def test_audit_mode_refuses_nothing(tmp_path: Path) -> None:
    run = _run(tmp_path, PARALLEL, {m: _answer() for m in ("m1", "m2", "m3")},
               entry="group", mode="audit", max_tokens=None)
    assert run.exit_code == 0, run.error_text()
    assert _made(run) == ["m1", "m2", "m3"]
    assert run.of(LimitReached) == []
    (exceeded,) = run.of(BudgetExceeded)
    assert exceeded.spent_usd == pytest.approx(0.06)
    assert run.result.budget is not None
    assert (run.result.budget.mode, run.result.budget.refused) == ("audit", 0)
    assert run.result.budget.overshoot_usd == pytest.approx(0.01)


def test_the_summary_reports_spent_budget_and_overshoot(tmp_path: Path) -> None:
    # the answer costs three times its worst case: the run passes its budget by that call
    run = _run(tmp_path, """
agents:
  - {name: a, prompt: "one", routes: [{to: b}]}
  - {name: b, prompt: "two"}
""", {"a": _answer(tokens=6), "b": _answer()})
    assert run.exit_code == 4
    assert _made(run) == ["a"]
    report = run.result.budget
    assert report is not None
    assert (report.budget_usd, report.mode, report.spent_usd) == (0.05, "enforce", 0.06)
    assert report.overshoot_usd == pytest.approx(0.01)
    assert report.overshoot_usd <= 0.06  # at most the one call's actual cost
    out = io.StringIO()
    print_summary(run.engine, run.result, out)
    text = out.getvalue()
    assert "budget: $0.0600 spent of $0.05 (enforce), over by $0.0100" in text
    assert "overshoot: the call of agent 'a': $0.0600, its worst case $0.0200" in text

    within = _run(tmp_path / "within", """
agents:
  - {name: a, prompt: "one"}
""", {"a": _answer()})
    assert within.exit_code == 0, within.error_text()
    out = io.StringIO()
    print_summary(within.engine, within.result, out)
    assert "budget: $0.0200 spent of $0.05 (enforce)\n" in out.getvalue()
