"""An agent's `validator:` (spec 3.3): a second model call judges the output against the rubric;
on a fail the agent runs once more with the issues. Fail-open by default (Conductor), fail
closed with podium's `on_error: fail`. Through the real loader and engine with the scripted
provider, through the CLI (exit codes, replay, `validate --budget`) and once through the real
OpenAI SDK against the local fake server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fakes.openai_server import answer
from helpers_engine import diagnostics, run_cli, run_workflow, write
from helpers_providers import Servers, fake_servers, run_real_yaml
from podium.events.model import (
    ModelExchange,
    PromptRendered,
    StepFinished,
    ValidationFailed,
    ValidatorFinished,
    ValidatorStarted,
    Warning_,
)

WF = """
workflow:
  name: haiku
  entry_point: writer
  runtime: {provider: openai, default_model: gpt-4o}
agents:
  - name: writer
    prompt: "Write a haiku about rain"
    output:
      poem: {type: string}
    validator:
      criteria: "Exactly three lines, about rain."
      VALIDATOR_EXTRA
output:
  poem: "{{ writer.output.poem }}"
"""


def _wf(tmp_path: Path, extra: str = "") -> Path:
    text = WF.replace("VALIDATOR_EXTRA", extra.replace("\n", "\n      ") or "max_retries: 1")
    return write(tmp_path, text)


def _entry(output: Any, tokens: tuple[int, int] = (1000, 100)) -> dict[str, Any]:
    return {"output": output, "usage": {"input_tokens": tokens[0], "output_tokens": tokens[1]}}


FIRST = _entry({"poem": "rain"})
FAILED = _entry({"passed": False, "issues": ["needs three lines", "say 'rain' once"]},
                (500, 50))
PASSED = _entry({"passed": True, "issues": []}, (500, 50))
RERUN = _entry({"poem": "rain\non the\nroof"}, (1200, 120))


def _cost(tokens_in: int, tokens_out: int) -> float:
    return (tokens_in * 2.5 + tokens_out * 10) / 1e6  # gpt-4o


def test_a_passing_verdict_keeps_the_output(tmp_path: Path) -> None:
    run = run_workflow(_wf(tmp_path), responses={"agents": {
        "writer": [FIRST], "writer.validator": [PASSED]}})
    assert run.exit_code == 0, run.error_text()
    assert run.output == {"poem": "rain"}
    (started,) = run.of(ValidatorStarted)
    assert (started.model, started.criteria_preview) == ("gpt-4o", "Exactly three lines, about "
                                                                   "rain.")
    (done,) = run.of(ValidatorFinished)
    assert (done.passed, done.issues, done.errored) == (True, [], False)
    assert (done.input_tokens, done.output_tokens) == (500, 50)
    assert done.cost_usd == pytest.approx(_cost(500, 50))
    assert run.of(ValidationFailed) == []
    # the verdict is one more call of the same provider, with the rubric and the task
    calls = run.provider.requests
    assert [(c["step"], c["call"]) for c in calls] == [("writer", None),
                                                       ("writer.validator", "validator")]
    verdict = calls[1]
    assert "Exactly three lines, about rain." in verdict["system_prompt"]
    assert "Write a haiku about rain" in verdict["message"]
    assert '"poem": "rain"' in verdict["message"]
    assert verdict["tools"] == ()
    assert set(verdict["output_schema"]["properties"]) == {"passed", "issues"}
    # usage rows: the agent's own, and the validator's (Conductor's `<agent> (validator)`)
    rows = run.result.usage_by_step
    assert set(rows) == {"writer", "writer (validator)"}
    assert rows["writer (validator)"].input_tokens == 500
    (finished,) = run.of(StepFinished)
    assert (finished.input_tokens, finished.output_tokens) == (1500, 150)


def test_a_failed_verdict_reruns_the_agent_with_the_feedback(tmp_path: Path) -> None:
    run = run_workflow(_wf(tmp_path), responses={"agents": {
        "writer": [FIRST], "writer.validator": [FAILED], "writer.rerun": [RERUN]}})
    assert run.exit_code == 0, run.error_text()
    assert run.output == {"poem": "rain\non the\nroof"}
    (failed,) = run.of(ValidationFailed)
    assert (failed.issues, failed.will_retry, failed.rerun_errored) == (
        ["needs three lines", "say 'rain' once"], True, False)
    rerun = run.provider.requests[-1]
    assert rerun["call"] == "rerun"
    prompt = rerun["message"]
    assert prompt.startswith("Write a haiku about rain\n\n## Validation feedback\n")
    assert "- needs three lines\n- say 'rain' once\n" in prompt
    rendered = [e for e in run.of(PromptRendered) if e.call == "rerun"]
    assert rendered[0].prompt == prompt
    assert [(e.call, e.attempt) for e in run.of(ModelExchange)] == [
        (None, 1), ("validator", 1), ("rerun", 1)]
    types = run.types()
    order = [t for t in types if t.startswith("valid") or t == "step_finished"]
    assert order == ["validator_started", "validator_finished", "validation_failed",
                     "step_finished"]
    # the re-run's output stands: its execution is the agent's row; the verdict and the
    # replaced first attempt are the validator's, as in Conductor
    rows = run.result.usage_by_step
    assert (rows["writer"].input_tokens, rows["writer"].output_tokens) == (1200, 120)
    assert (rows["writer (validator)"].input_tokens,
            rows["writer (validator)"].output_tokens) == (1500, 150)
    assert run.engine.spent_usd == pytest.approx(_cost(2700, 270))


def test_max_retries_0_reports_the_fail_and_keeps_the_output(tmp_path: Path) -> None:
    run = run_workflow(_wf(tmp_path, "max_retries: 0"), responses={"agents": {
        "writer": [FIRST], "writer.validator": [FAILED]}})
    assert run.exit_code == 0, run.error_text()
    assert run.output == {"poem": "rain"}
    (failed,) = run.of(ValidationFailed)
    assert failed.will_retry is False
    assert [c["call"] for c in run.provider.requests] == [None, "validator"]


def test_an_unreadable_verdict_passes_with_errored(tmp_path: Path) -> None:
    run = run_workflow(_wf(tmp_path), responses={"agents": {
        "writer": [FIRST], "writer.validator": [{"text": "Looks good to me!"}]}})
    assert run.exit_code == 0, run.error_text()
    assert run.output == {"poem": "rain"}
    (done,) = run.of(ValidatorFinished)
    assert (done.passed, done.errored, done.issues) == (True, True, [])
    assert done.error == "the verdict is not a JSON object"
    assert any("fail-open" in w.message for w in run.of(Warning_))
    assert run.of(ValidationFailed) == []


@pytest.mark.parametrize("verdict", [{"passed": "maybe"}, {"issues": ["x"]}])
def test_a_verdict_without_a_boolean_passed_is_errored(tmp_path: Path,
                                                       verdict: dict[str, Any]) -> None:
    run = run_workflow(_wf(tmp_path), responses={"agents": {
        "writer": [FIRST], "writer.validator": [{"output": verdict}]}})
    assert run.exit_code == 0
    (done,) = run.of(ValidatorFinished)
    assert (done.passed, done.errored) == (True, True)


def test_a_failing_validator_call_fails_open(tmp_path: Path) -> None:
    # the responses file has no answer for the verdict: the call fails, the output stands
    run = run_workflow(_wf(tmp_path), responses={"agents": {"writer": [FIRST]}})
    assert run.exit_code == 0, run.error_text()
    (done,) = run.of(ValidatorFinished)
    assert (done.errored, done.passed) == (True, True)
    assert "writer.validator" in (done.error or "")


def test_a_failing_rerun_keeps_the_first_output(tmp_path: Path) -> None:
    run = run_workflow(_wf(tmp_path), responses={"agents": {
        "writer": [FIRST], "writer.validator": [FAILED],
        "writer.rerun": [{"attempts": [{"text": "no json"}] * 3}]}})
    assert run.exit_code == 0, run.error_text()
    assert run.output == {"poem": "rain"}
    first, second = run.of(ValidationFailed)
    assert (first.will_retry, first.rerun_errored) == (True, False)
    assert (second.will_retry, second.rerun_errored) == (False, True)
    assert any("the first output stays" in w.message for w in run.of(Warning_))


def test_on_error_fail_with_no_rerun_left_fails_the_step_naming_the_issues(
        tmp_path: Path) -> None:
    wf = _wf(tmp_path, "max_retries: 0\non_error: fail")
    responses = write(tmp_path, json.dumps({"agents": {
        "writer": [FIRST], "writer.validator": [FAILED]}}), "responses.json")
    proc = run_cli(tmp_path / "home", "run", wf, "--responses", responses)
    assert proc.returncode == 3, proc.stderr
    assert "step 'writer'" in proc.stderr
    assert "the output failed validation: needs three lines; say 'rain' once" in proc.stderr
    assert "validator.on_error: fail" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_on_error_fail_judges_the_rerun_too(tmp_path: Path) -> None:
    wf = _wf(tmp_path, "on_error: fail")
    twice = {"attempts": [FAILED, _entry({"passed": False, "issues": ["still one line"]},
                                         (500, 50))]}
    run = run_workflow(wf, responses={"agents": {
        "writer": [FIRST], "writer.validator": [twice], "writer.rerun": [RERUN]}})
    assert run.exit_code == 3
    assert "failed validation again after its re-run: still one line" in run.error_text()
    assert [e.round for e in run.of(ValidatorFinished)] == [1, 2]
    # the second verdict is asked in the validator's own conversation
    assert [(e.call, e.attempt) for e in run.of(ModelExchange)] == [
        (None, 1), ("validator", 1), ("rerun", 1), ("validator", 2)]
    assert run.result.usage_by_step["writer (validator)"].input_tokens == 500 + 1000 + 500
    passing = {"attempts": [FAILED, PASSED]}
    ok = run_workflow(wf, responses={"agents": {
        "writer": [FIRST], "writer.validator": [passing], "writer.rerun": [RERUN]}})
    assert ok.exit_code == 0, ok.error_text()
    assert ok.output == {"poem": "rain\non the\nroof"}


def test_on_error_fail_fails_on_an_unreadable_verdict(tmp_path: Path) -> None:
    run = run_workflow(_wf(tmp_path, "on_error: fail"), responses={"agents": {
        "writer": [FIRST], "writer.validator": [{"text": "fine"}]}})
    assert run.exit_code == 3
    assert "the validator could not judge the output: the verdict is not a JSON object" in \
        run.error_text()
    (done,) = run.of(ValidatorFinished)
    assert (done.passed, done.errored) == (False, True)


def test_a_validator_model_of_its_own_is_priced_as_its_own(tmp_path: Path) -> None:
    run = run_workflow(_wf(tmp_path, "model: gpt-4o-mini"), responses={"agents": {
        "writer": [FIRST], "writer.validator": [PASSED]}})
    assert run.provider.requests[1]["model"] == "gpt-4o-mini"
    row = run.result.usage_by_step["writer (validator)"]
    assert row.model == "gpt-4o-mini"
    assert row.cost_usd == pytest.approx((500 * 0.15 + 50 * 0.6) / 1e6)


def test_the_validator_runs_for_parallel_members(tmp_path: Path) -> None:
    path = write(tmp_path, """
        workflow: {name: p, entry_point: both, runtime: {provider: openai}}
        agents:
          - name: a
            prompt: "a"
            validator: {criteria: "non-empty", max_retries: 0}
          - {name: b, prompt: "b"}
        parallel:
          - {name: both, agents: [a, b]}
    """)
    run = run_workflow(path, responses={"agents": {
        "a": [{"text": "A"}], "b": [{"text": "B"}],
        "a.validator": [{"output": {"passed": False, "issues": ["too short"]}}]}})
    assert run.exit_code == 0, run.error_text()
    (failed,) = run.of(ValidationFailed)
    assert (failed.step, failed.issues) == ("a", ["too short"])


def test_the_block_is_typed_with_conductors_ranges(tmp_path: Path) -> None:
    def errors(block: str) -> list[str]:
        path = write(tmp_path, WF.replace("VALIDATOR_EXTRA", "").replace(
            '      criteria: "Exactly three lines, about rain."\n', block))
        return [d for d in diagnostics(path) if "warning" not in d]

    assert any("criteria" in d and "blank" in d for d in errors('      criteria: "   "\n'))
    assert any("criteria" in d for d in errors("      model: x\n"))
    assert any("max_retries" in d for d in errors("      criteria: c\n      max_retries: 2\n"))
    assert any("on_error" in d for d in errors("      criteria: c\n      on_error: retry\n"))
    assert errors("      criteria: c\n      on_error: fail\n      max_retries: 0\n") == []


def test_a_replay_of_a_validated_run_is_identical(tmp_path: Path) -> None:
    home = tmp_path / "home"
    wf = _wf(tmp_path)
    responses = write(tmp_path, json.dumps({"agents": {
        "writer": [FIRST], "writer.validator": [FAILED], "writer.rerun": [RERUN]}}),
        "responses.json")
    ran = run_cli(home, "run", wf, "--responses", responses, "--json")
    assert ran.returncode == 0, ran.stderr
    run_id = json.loads(ran.stdout)["run_id"]
    replay = run_cli(home, "replay", run_id, "--json")
    assert replay.returncode == 0, replay.stdout + replay.stderr
    # the validator's call is replayed like the agent's: an edited rubric is a different
    # system prompt for 'writer.validator'
    wf.write_text(wf.read_text().replace("about rain.", "about snow."), encoding="utf-8")
    diverged = run_cli(home, "replay", run_id)
    assert diverged.returncode == 6
    assert "a different system prompt was rendered for 'writer.validator'" in \
        diverged.stdout + diverged.stderr


def test_validate_budget_counts_the_validator_calls(tmp_path: Path) -> None:
    def budget(extra: str) -> dict[str, Any]:
        wf = _wf(tmp_path, extra)
        proc = run_cli(tmp_path / "home", "validate", "--budget", "--format", "json", wf)
        assert proc.returncode == 0, proc.stderr
        data: dict[str, Any] = json.loads(proc.stdout)["files"][0]["budget"]["cost"]
        return data

    one = budget("max_retries: 0")
    call = one["per_call_usd"]["writer"]["max"]
    assert one["per_execution"]["writer"]["calls_min"] == 2
    assert one["per_execution"]["writer"]["calls_max"] == 2
    assert one["outcomes"]["$end"] == {"min_usd": round(2 * call, 4),
                                       "max_usd": round(2 * call, 4)}
    retry = budget("max_retries: 1")["per_execution"]["writer"]
    assert (retry["calls_min"], retry["calls_max"]) == (2, 3)
    assert retry["max_usd"] == pytest.approx(3 * call, abs=1e-4)
    closed = budget("on_error: fail")["per_execution"]["writer"]
    assert (closed["calls_min"], closed["calls_max"]) == (2, 4)
    cheap = budget("model: gpt-4o-mini")
    assert cheap["per_execution"]["writer"]["min_usd"] < 2 * call
    text = run_cli(tmp_path / "home", "validate", "--budget", _wf(tmp_path)).stdout
    assert "writer: 2-3 model calls per execution" in text
    assert "+1 re-run on a failed verdict" in text


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch) -> Iterator[Servers]:
    yield from fake_servers(monkeypatch)


def test_the_validator_through_the_openai_sdk(tmp_path: Path, servers: Servers) -> None:
    oa = servers.openai
    oa.script(answer(json.dumps({"poem": "rain"}), model="gpt-4o", usage=(1000, 100, 0)),
              answer(json.dumps({"passed": False, "issues": ["needs three lines"]}),
                     model="gpt-4o-mini", usage=(500, 50, 0)),
              answer(json.dumps({"poem": "rain\non the\nroof"}), model="gpt-4o",
                     usage=(1200, 120, 0)))
    run = run_real_yaml(tmp_path, WF.replace("VALIDATOR_EXTRA", "model: gpt-4o-mini"))
    assert run.exit_code == 0, run.error_text()
    assert run.outputs["writer"] == {"poem": "rain\non the\nroof"}
    first, verdict, rerun = (r.body for r in oa.chat_requests())
    assert verdict["model"] == "gpt-4o-mini"
    assert "tools" not in verdict
    schema = verdict["response_format"]["json_schema"]["schema"]
    assert schema["required"] == ["passed", "issues"]
    assert "Exactly three lines, about rain." in verdict["messages"][0]["content"]
    assert "## Validation feedback" in rerun["messages"][-1]["content"]
    assert "- needs three lines" in rerun["messages"][-1]["content"]
    assert first["messages"][-1]["content"] == "Write a haiku about rain"
    (done,) = run.of(ValidatorFinished)
    assert (done.passed, done.model, done.input_tokens) == (False, "gpt-4o-mini", 500)
    rows = run.result.usage_by_step
    assert rows["writer"].input_tokens == 1200
    assert rows["writer (validator)"].input_tokens == 1500
    assert rows["writer (validator)"].cost_usd == pytest.approx(
        (500 * 0.15 + 50 * 0.6) / 1e6 + _cost(1000, 100))
