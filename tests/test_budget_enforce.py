"""Budgets on real provider calls: prices from genai-prices / podium's table / cost.pricing,
`enforce` stopping at the step boundary that passes the budget (keeping what was done, exit
code 4), `audit` warning and going on, and unpriced models: reported by validate under
enforce (an error unless cost.pricing prices them) and flagged at run time, never silent."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fakes.openai_server import answer
from helpers_engine import cli_env, podium_argv, write
from helpers_providers import Servers, fake_servers, run_real_yaml
from podium.check.providers import check_providers
from podium.check.semantic import Checker
from podium.events.model import BudgetExceeded, LimitReached, StepStarted, Warning_
from podium.language.load import load_workflow


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch) -> Iterator[Servers]:
    yield from fake_servers(monkeypatch)


ENFORCE = """
workflow:
  name: b
  entry_point: a
  runtime: {provider: openai}
  limits: {budget_usd: 1.5, budget_mode: MODE}
  cost:
    pricing:
      team-model: {input_per_mtok: 1000, output_per_mtok: 0}
agents:
  - {name: a, model: team-model, tools: [], prompt: one, routes: [{to: b}]}
  - {name: b, model: team-model, tools: [], prompt: two, routes: [{to: c}]}
  - {name: c, model: team-model, tools: [], prompt: three}
"""


def diagnostics(path: Path) -> list[str]:
    """validate's diagnostics including the provider checks."""
    result = load_workflow(path)
    checker = Checker(result)
    checker.run()
    check_providers(checker)  # a no-op repeat once Checker.run calls it (diagnostics dedupe)
    return [d.format() for d in result.sink.sorted()]


def test_enforce_stops_at_the_step_that_passes_the_budget(tmp_path: Path,
                                                          servers: Servers) -> None:
    servers.openai.handler = lambda req: answer("ok", model="team-model", usage=(1000, 0, 0))
    run = run_real_yaml(tmp_path, ENFORCE.replace("MODE", "enforce"))
    assert run.exit_code == 4
    assert [e.step for e in run.of(StepStarted)] == ["a", "b"]
    assert set(run.outputs) == {"a", "b"}  # what was done is kept
    (exceeded,) = run.of(BudgetExceeded)
    assert (exceeded.spent_usd, exceeded.budget_usd, exceeded.step) == (2.0, 1.5, "b")
    assert "over its budget of $1.50" in run.error_text()
    assert len(servers.openai.chat_requests()) == 2


def test_audit_warns_and_goes_on(tmp_path: Path, servers: Servers) -> None:
    servers.openai.handler = lambda req: answer("ok", model="team-model", usage=(1000, 0, 0))
    run = run_real_yaml(tmp_path, ENFORCE.replace("MODE", "audit"))
    assert run.exit_code == 0, run.error_text()
    assert [e.step for e in run.of(BudgetExceeded)] == ["b"]
    assert run.of(LimitReached) == []
    assert sum(u.cost_usd or 0 for u in run.result.usage_by_step.values()) == pytest.approx(3.0)


def test_an_unpriced_model_at_run_time_is_flagged(tmp_path: Path, servers: Servers) -> None:
    servers.openai.handler = lambda req: answer("ok", model="qwen2.5-coder:7b")
    run = run_real_yaml(tmp_path, ENFORCE.replace("MODE", "enforce"))
    assert run.exit_code == 0, run.error_text()
    (warning,) = run.of(Warning_)  # once per model, not once per call
    assert "model 'qwen2.5-coder:7b' has no known price" in warning.message
    assert "cannot count its calls" in warning.message
    assert all(u.cost_usd is None and not u.priced for u in run.result.usage_by_step.values())


def test_validate_reports_unpriced_models_under_enforce(tmp_path: Path) -> None:
    path = write(tmp_path, """
        workflow:
          name: v
          entry_point: a
          runtime: {provider: openai, default_model: gpt-5-nano}
          limits: {budget_usd: 5, budget_mode: enforce}
          input: {big: {type: boolean, default: false}}
        agents:
          - {name: a, model: qwen2.5-coder:7b, prompt: x, routes: [{to: b}]}
          - name: b
            model: "{{ 'llama3.1:70b' if workflow.input.big else 'gpt-5-mini' }}"
            prompt: x
            routes: [{to: c}]
          - {name: c, prompt: "uses the default model, priced by genai-prices"}
    """)
    found = [d for d in diagnostics(path) if "price" in d]
    assert len(found) == 2
    assert "agents[0].model: agent 'a': model 'qwen2.5-coder:7b' has no known price" in found[0]
    assert "budget_mode: enforce needs one" in found[0]
    assert "price it under cost.pricing: qwen2.5-coder:7b:" in found[0]
    assert "agents[1].model: agent 'b': model 'llama3.1:70b' has no known price" in found[1]


def test_cost_pricing_or_audit_mode_clears_the_error(tmp_path: Path) -> None:
    priced = write(tmp_path, """
        workflow:
          name: v
          entry_point: a
          runtime: {provider: openai}
          limits: {budget_usd: 5, budget_mode: enforce}
          cost: {pricing: {"qwen2.5-coder:7b": {input_per_mtok: 0, output_per_mtok: 0}}}
        agents:
          - {name: a, model: "qwen2.5-coder:7b", prompt: x}
    """, "priced.yaml")
    assert diagnostics(priced) == []
    audit = write(tmp_path, """
        workflow:
          name: v
          entry_point: a
          runtime: {provider: openai}
          limits: {budget_usd: 5}
        agents:
          - {name: a, model: "qwen2.5-coder:7b", prompt: x}
    """, "audit.yaml")
    assert diagnostics(audit) == []


def test_the_article_workflow_has_every_model_priced() -> None:
    root = Path(__file__).resolve().parents[1]
    assert diagnostics(root / "examples" / "dev-review" / "workflow.yaml") == []


def test_podium_run_refuses_an_unenforceable_budget(tmp_path: Path) -> None:
    import subprocess

    path = write(tmp_path, """
        workflow:
          name: v
          entry_point: a
          runtime: {provider: openai}
          limits: {budget_usd: 5, budget_mode: enforce}
        agents:
          - {name: a, model: "qwen2.5-coder:7b", prompt: x}
    """)
    proc = subprocess.run(podium_argv("run", path), env=cli_env(tmp_path / "home"),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 2
    assert "model 'qwen2.5-coder:7b' has no known price" in proc.stderr
    assert "nothing was run" in proc.stderr
