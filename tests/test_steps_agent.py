"""Agent steps against the ScriptedProvider: rendered prompts, the output contract, same-session
corrections, raw mode, templated models, usage, and unexpected calls (spec 3.3, 9.3)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from helpers_engine import run_yaml
from podium.errors import OutputContractError
from podium.events.model import ModelExchange, ParseRecovery, PromptRendered, StepFinished
from podium.providers.base import AgentRequest, ProviderError, Reply, Session
from podium.providers.scripted import ScriptedProvider

REVIEW_WF = """
workflow:
  name: review
  entry_point: intake
  runtime: {provider: copilot, default_model: gpt-5-mini}
agents:
  - name: intake
    type: set
    values: {topic: "caching", size: small}
    routes: [{to: reviewer}]
  - name: reviewer
    model: "{{ 'gpt-5-mini' if intake.output.size == 'small' else 'gpt-5.5' }}"
    system_prompt: "You review {{ intake.output.topic }} changes."
    prompt: |
      Review the {{ intake.output.topic }} change.
    output:
      verdict: {type: string, enum: [approve, changes]}
      score: {type: number}
    {extra}
    routes:
      - to: $end
        when: "output_score > 7"
      - to: $end
        output: {low: "yes"}
output:
  verdict: "{{ reviewer.output.verdict }}"
"""


def review_run(tmp_path: Path, answers: list[dict[str, Any]], extra: str = "") -> Any:
    return run_yaml(tmp_path, REVIEW_WF.replace("{extra}", extra),
                    responses={"agents": {"reviewer": answers}})


def test_prompt_and_system_prompt_are_rendered_and_sent(tmp_path: Path) -> None:
    run = review_run(tmp_path, [{"output": {"verdict": "approve", "score": 9}}])
    assert run.exit_code == 0, run.error_text()
    assert run.output == {"verdict": "approve"}
    (request,) = run.provider.requests
    assert request["message"] == "Review the caching change.\n"
    assert request["system_prompt"] == "You review caching changes."
    assert request["model"] == "gpt-5-mini"  # the model template, resolved from `intake`
    assert (request["step"], request["iteration"], request["attempt"]) == ("reviewer", 1, 1)
    assert request["output_schema"]["required"] == ["verdict", "score"]
    (rendered,) = run.of(PromptRendered)
    assert rendered.prompt == "Review the caching change.\n"
    assert rendered.system_prompt == "You review caching changes."
    assert rendered.model == "gpt-5-mini"
    assert run.outputs["reviewer"] == {"verdict": "approve", "score": 9}
    assert run.routes()[-1] == ("reviewer", "$end")


def test_model_template_follows_the_prior_step(tmp_path: Path) -> None:
    text = REVIEW_WF.replace("{extra}", "").replace("size: small", "size: large")
    run = run_yaml(tmp_path, text, responses={
        "agents": {"reviewer": [{"output": {"verdict": "approve", "score": 9}}]}})
    assert run.provider.requests[0]["model"] == "gpt-5.5"
    assert run.of(StepFinished)[-1].model == "gpt-5.5"


class SessionCounter:
    """A Provider that serves the ScriptedProvider's sessions and counts them."""

    def __init__(self, inner: ScriptedProvider) -> None:
        self.inner = inner
        self.name = inner.name
        self.capabilities = inner.capabilities
        self.opened: list[tuple[str, int]] = []
        self.closed = 0

    def open_session(self, request: AgentRequest) -> Session:
        self.opened.append((request.step, request.iteration))
        session = self.inner.open_session(request)
        counter = self

        class Counted:
            def send(self, message: str) -> Reply:
                return session.send(message)

            def close(self) -> None:
                counter.closed += 1
                session.close()

        return Counted()

    def close(self) -> None:
        self.inner.close()


def test_malformed_answer_is_corrected_in_the_same_session(tmp_path: Path) -> None:
    counters: list[SessionCounter] = []

    def wrap(inner: ScriptedProvider) -> SessionCounter:
        counters.append(SessionCounter(inner))
        return counters[-1]

    run = run_yaml(tmp_path, REVIEW_WF.replace("{extra}", ""), wrap_provider=wrap,
                   responses={"agents": {"reviewer": [{"attempts": [
                       {"text": "Sure! {verdict: approve"},
                       {"output": {"verdict": "approve", "score": 8}},
                   ]}]}})
    assert run.exit_code == 0, run.error_text()
    (counter,) = counters
    assert counter.opened == [("reviewer", 1)]
    assert counter.closed == 1
    first, second = run.provider.requests
    # one conversation: attempts 1 and 2 of the same execution
    assert [(r["iteration"], r["attempt"]) for r in (first, second)] == [(1, 1), (1, 2)]
    assert "did not parse as JSON" in second["message"]
    assert "Sure! {verdict: approve" in second["message"]
    assert '"verdict"' in second["message"]  # the schema is quoted back
    (recovery,) = run.of(ParseRecovery)
    assert (recovery.step, recovery.iteration, recovery.attempt, recovery.reason) == \
        ("reviewer", 1, 1, "syntax")
    assert recovery.max_attempts == 2
    assert [e.attempt for e in run.of(ModelExchange)] == [1, 2]
    assert run.outputs["reviewer"] == {"verdict": "approve", "score": 8}
    assert run.result.iterations == 2  # corrections are not iterations


def test_schema_mismatch_is_corrected_with_a_schema_message(tmp_path: Path) -> None:
    run = review_run(tmp_path, [{"attempts": [
        {"output": {"verdict": "maybe", "score": 8}},
        {"output": {"verdict": "changes", "score": 3}},
    ]}])
    assert run.exit_code == 0
    second = run.provider.requests[1]
    assert "did not match the required schema" in second["message"]
    assert "'verdict' must be one of" in second["message"]
    assert run.of(ParseRecovery)[0].reason == "schema"
    assert run.output == {"verdict": "changes", "low": "yes"}


def test_failing_after_the_correction_budget_names_the_field(tmp_path: Path) -> None:
    bad = {"output": {"verdict": "approve", "score": "high"}}
    run = review_run(tmp_path, [{"attempts": [bad, bad, bad]}])
    assert run.exit_code == 3
    assert isinstance(run.result.error, OutputContractError)
    text = run.error_text()
    assert "step 'reviewer'" in text
    assert "after 3 attempt(s)" in text
    assert "output field 'score' has wrong type: expected number, got string" in text
    assert len(run.provider.requests) == 3
    assert [e.attempt for e in run.of(ParseRecovery)] == [1, 2]
    assert "reviewer" not in run.outputs


def test_correction_budget_is_configurable(tmp_path: Path) -> None:
    run = review_run(tmp_path, [{"attempts": [{"text": "no json"}, {"text": "still none"}]}],
                     extra="retry: {max_parse_recovery_attempts: 1}")
    assert run.exit_code == 3
    assert "its answer is not valid JSON after 2 attempt(s)" in run.error_text()
    assert "output_mode: raw" in run.error_text()
    assert len(run.provider.requests) == 2


def test_missing_field_is_named(tmp_path: Path) -> None:
    run = review_run(tmp_path, [{"output": {"verdict": "approve"}}],
                     extra="retry: {max_parse_recovery_attempts: 0}")
    assert run.exit_code == 3
    assert "missing required output field: score" in run.error_text()


def test_json_in_a_fenced_block_and_scalar_wrappers_are_accepted(tmp_path: Path) -> None:
    fenced = "Here you go:\n```json\n" + json.dumps(
        {"verdict": {"value": "approve"}, "score": 9}) + "\n```\n"
    run = review_run(tmp_path, [{"text": fenced}])
    assert run.exit_code == 0, run.error_text()
    assert run.outputs["reviewer"] == {"verdict": "approve", "score": 9}
    assert run.of(ParseRecovery) == []


def test_raw_mode_stores_the_text_as_result(tmp_path: Path) -> None:
    run = run_yaml(tmp_path, """
        workflow: {name: raw, entry_point: summary}
        agents:
          - name: summary
            prompt: "Summarise"
            output_mode: raw
        output:
          text: "{{ summary.output.result }}"
    """, responses={"agents": {"summary": [{"text": '{"looks": "like json"} but is prose'}]}})
    assert run.outputs["summary"] == {"result": '{"looks": "like json"} but is prose'}
    assert run.provider.requests[0]["output_schema"] is None


def test_no_schema_means_result_text(tmp_path: Path) -> None:
    run = run_yaml(tmp_path, """
        workflow: {name: plain, entry_point: a}
        agents:
          - {name: a, prompt: "hi", output: {}}
    """, responses={"agents": {"a": [{"output": {"x": 1}}]}})
    assert run.outputs["a"] == {"result": '{"x": 1}'}


def test_unexpected_call_for_an_unscripted_step_fails_loudly(tmp_path: Path) -> None:
    run = review_run(tmp_path, [])
    run2 = run_yaml(tmp_path / "other", REVIEW_WF.replace("{extra}", ""),
                    responses={"agents": {}})
    for r in (run, run2):
        assert r.exit_code == 3
        assert isinstance(r.result.error, ProviderError)
        assert "unexpected model call" in r.error_text()
        assert "step 'reviewer'" in r.error_text()


def test_unexpected_second_execution_fails_loudly(tmp_path: Path) -> None:
    run = run_yaml(tmp_path, """
        workflow: {name: loop, entry_point: a}
        agents:
          - name: a
            prompt: "again"
            routes: [{to: $end, when: "{{ a.output.result == 'done' }}"}, {to: a}]
    """, responses={"agents": {"a": [{"text": "one"}]}})
    assert run.exit_code == 3
    assert "has 1 answer(s) for 'a' but this is execution 2" in run.error_text()
    assert "iteration 2" in run.error_text()
    assert run.steps() == ["a", "a"]


def test_usage_and_cost_are_recorded(tmp_path: Path) -> None:
    run = run_yaml(tmp_path, """
        workflow:
          name: cost
          entry_point: a
          runtime: {default_model: gpt-4o}
        agents:
          - {name: a, prompt: "hi"}
    """, responses={"agents": {"a": [{"text": "hello",
                                      "usage": {"input_tokens": 1000, "output_tokens": 500}}]}})
    finished = run.of(StepFinished)[0]
    assert (finished.model, finished.input_tokens, finished.output_tokens) == \
        ("gpt-4o", 1000, 500)
    assert finished.cost_usd == pytest.approx((1000 * 2.5 + 500 * 10) / 1_000_000)
    assert run.result.usage_by_step["a"].cost_usd == pytest.approx(0.0075)


def test_scripted_files_are_written_in_the_working_dir(tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    run = run_yaml(tmp_path, """
        workflow: {name: files, entry_point: dev}
        agents:
          - {name: dev, prompt: "write it", working_dir: repo}
    """, responses={"agents": {"dev": [{"text": "done", "files": {"pkg/a.py": "x = 1\n"}}]}})
    assert run.exit_code == 0, run.error_text()
    assert (tmp_path / "repo" / "pkg" / "a.py").read_text() == "x = 1\n"
    assert run.provider.requests[0]["working_dir"] == str(tmp_path / "repo")
