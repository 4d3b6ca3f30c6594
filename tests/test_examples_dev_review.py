"""The article's workflow, for real: examples/dev-review/workflow.yaml run through the `podium`
CLI on a fresh git copy of the sample repository, with the scripted responses of each scenario.
Scripts (the ticket check, pytest, the diff collector) run for real."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from helpers_engine import EXAMPLES, git_repo_copy, read_jsonl, run_cli

DEV_REVIEW = EXAMPLES / "dev-review"
WORKFLOW = DEV_REVIEW / "workflow.yaml"
GOOD_TICKET = DEV_REVIEW / "tickets" / "add-slugify.md"
BAD_TICKET = DEV_REVIEW / "tickets" / "missing-criteria.md"

FIRST_PASS = ["validate_ticket", "developer", "run_tests", "collect_diff", "reviewer",
              "review_count"]
REVIEW_LOOP = ["developer", "run_tests", "collect_diff", "reviewer", "review_count"]
ACCEPT = ["handoff_summary", "human_acceptance", "accepted"]


@dataclass
class ScenarioRun:
    proc: subprocess.CompletedProcess[str]
    events: list[dict[str, Any]]
    repo: Path

    @property
    def code(self) -> int:
        return self.proc.returncode

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]

    def steps(self) -> list[str]:
        return [e["step"] for e in self.of("step_started")]

    def outputs(self, step: str) -> list[Any]:
        return [e["output"] for e in self.of("step_finished") if e["step"] == step]

    def prompts(self, step: str) -> list[str]:
        return [e["prompt"] for e in self.of("prompt_rendered") if e["step"] == step]

    def finished(self) -> dict[str, Any]:
        (done,) = self.of("run_finished")
        return done


def scenario(tmp_path: Path, responses: Path, ticket: Path = GOOD_TICKET,
             *extra: str) -> ScenarioRun:
    repo = git_repo_copy(DEV_REVIEW / "sample-repo", tmp_path / "repo")
    log = tmp_path / "events.jsonl"
    proc = run_cli(tmp_path / "home", "run", WORKFLOW, "--input", f"ticket={ticket}",
                   "--input", f"repo_dir={repo}", "--responses", responses, "--events", log,
                   *extra, timeout=120)
    return ScenarioRun(proc, read_jsonl(log), repo)


def test_happy_path(tmp_path: Path) -> None:
    run = scenario(tmp_path, DEV_REVIEW / "responses" / "happy.yaml")
    assert run.code == 0, run.proc.stderr
    assert run.steps() == FIRST_PASS + ACCEPT
    assert len(run.steps()) == 9
    # stdout holds only the final output
    assert json.loads(run.proc.stdout) == {"summary": (
        "Added slugify(text) to textkit.py: NFKD-normalises to ASCII, lower-cases, turns every "
        "run of other characters into '-' and strips the edges.")}
    finished = run.finished()
    assert (finished["status"], finished["terminal"], finished["exit_code"]) == \
        ("success", "accepted", 0)
    assert run.outputs("run_tests")[0]["exit_code"] == 0
    assert "8 passed" in run.outputs("run_tests")[0]["stdout"]
    diff = run.outputs("collect_diff")[0]
    assert diff["truncated"] is False
    assert "def slugify" in diff["diff"]
    # the reviewer gets the evidence, and the model is chosen from the ticket's complexity
    (review_prompt,) = run.prompts("reviewer")
    assert "def slugify" in review_prompt
    assert "Accented letters are reduced" in review_prompt
    models = {e["step"]: e["model"] for e in run.of("prompt_rendered")}
    assert models == {"developer": "gpt-5-mini", "reviewer": "claude-sonnet-5",
                      "handoff_summary": "gpt-5-mini"}
    assert run.outputs("review_count") == [1]
    (gate,) = run.of("gate_answered")
    assert (gate["step"], gate["selected"], gate["answered_by"]) == \
        ("human_acceptance", "accept", "responses")


def test_invalid_ticket_never_reaches_a_model(tmp_path: Path) -> None:
    run = scenario(tmp_path, DEV_REVIEW / "responses" / "happy.yaml", BAD_TICKET)
    assert run.code == 1, run.proc.stderr
    assert run.steps() == ["validate_ticket", "ticket_invalid"]
    assert run.of("prompt_rendered") == []
    assert run.of("model_exchange") == []
    finished = run.finished()
    assert (finished["status"], finished["terminal"]) == ("failed", "ticket_invalid")
    assert finished["reason"] == "no '## Acceptance criteria' section"
    assert json.loads(run.proc.stdout) == {"summary": "Ticket rejected before implementation"}
    assert not (run.repo / "textkit.py").read_text().count("slugify")


def test_failing_tests_go_back_to_the_developer(tmp_path: Path) -> None:
    run = scenario(tmp_path, DEV_REVIEW / "responses" / "tests-fail-once.yaml")
    assert run.code == 0, run.proc.stderr
    assert run.steps() == ["validate_ticket", "developer", "run_tests", "developer",
                           "run_tests", "collect_diff", "reviewer", "review_count", *ACCEPT]
    first, second = run.outputs("run_tests")
    assert first["exit_code"] != 0
    assert "4 failed" in first["stdout"]
    assert second["exit_code"] == 0
    # the second developer prompt carries the failing test output
    _, retry_prompt = run.prompts("developer")
    assert "The tests are failing" in retry_prompt
    assert "4 failed" in retry_prompt
    routes = [(e["from_step"], e["to_step"]) for e in run.of("route_taken")]
    assert routes[2] == ("run_tests", "developer")


def test_changes_then_approve(tmp_path: Path) -> None:
    run = scenario(tmp_path, DEV_REVIEW / "responses" / "changes-then-approve.yaml")
    assert run.code == 0, run.proc.stderr
    assert run.steps() == FIRST_PASS + REVIEW_LOOP + ACCEPT
    assert run.outputs("review_count") == [1, 2]
    assert [o["verdict"] for o in run.outputs("reviewer")] == ["changes", "approve"]
    _, second_prompt = run.prompts("developer")
    assert "Address these findings from the previous review" in second_prompt


def test_three_reviews_without_approval_escalate_and_stop(tmp_path: Path) -> None:
    run = scenario(tmp_path, DEV_REVIEW / "responses" / "three-reviews-stop.yaml")
    assert run.code == 1, run.proc.stderr
    assert run.steps() == FIRST_PASS + REVIEW_LOOP * 2 + ["escalation", "blocked"]
    assert run.outputs("review_count") == [1, 2, 3]
    (opened,) = [e for e in run.of("gate_opened") if e["step"] == "escalation"]
    assert "Reviews so far: 3" in opened["prompt"]
    (answered,) = run.of("gate_answered")
    assert (answered["step"], answered["selected"], answered["route"]) == \
        ("escalation", "stop", "blocked")
    finished = run.finished()
    assert (finished["status"], finished["terminal"], finished["reason"]) == \
        ("failed", "blocked", "Ticket blocked: a person stopped the run")


def test_oversized_diff_ends_in_change_too_large(tmp_path: Path) -> None:
    fixed = (DEV_REVIEW / "fixtures" / "textkit_fixed.py").read_text(encoding="utf-8")
    big = "".join(f"line {i:06d} " + "x" * 90 + "\n" for i in range(2500))
    assert len(big.encode()) > 200_000
    responses = tmp_path / "big.yaml"
    responses.write_text(json.dumps({"agents": {"developer": [{
        "output": {"summary": "Added slugify and a large data file.",
                   "files_changed": ["textkit.py", "data/big.txt"]},
        "files": {"textkit.py": fixed, "data/big.txt": big},
    }]}}), encoding="utf-8")
    run = scenario(tmp_path, responses)
    assert run.code == 1, run.proc.stderr
    assert run.steps() == ["validate_ticket", "developer", "run_tests", "collect_diff",
                           "change_too_large"]
    (diff,) = run.outputs("collect_diff")
    assert diff["truncated"] is True
    assert len(diff["diff"].encode()) <= 200_000
    assert [e["step"] for e in run.of("prompt_rendered")] == ["developer"]
    finished = run.finished()
    assert (finished["status"], finished["terminal"]) == ("failed", "change_too_large")


def test_malformed_review_is_corrected(tmp_path: Path) -> None:
    run = scenario(tmp_path, DEV_REVIEW / "responses" / "malformed-then-corrected.yaml")
    assert run.code == 0, run.proc.stderr
    assert run.steps() == FIRST_PASS + ACCEPT
    (recovery,) = run.of("parse_recovery")
    assert (recovery["step"], recovery["iteration"], recovery["attempt"], recovery["reason"]) \
        == ("reviewer", 1, 1, "syntax")
    exchanges = [e for e in run.of("model_exchange") if e["step"] == "reviewer"]
    assert [(e["iteration"], e["attempt"]) for e in exchanges] == [(1, 1), (1, 2)]
    assert "did not parse as JSON" in exchanges[1]["request"]["message"]
    assert run.outputs("reviewer") == [{"verdict": "approve", "findings": []}]


@pytest.mark.parametrize("responses", ["tests-fail-once.yaml", "three-reviews-stop.yaml"])
def test_invalid_ticket_ends_the_same_way_whatever_the_responses(tmp_path: Path,
                                                                 responses: str) -> None:
    run = scenario(tmp_path, DEV_REVIEW / "responses" / responses, BAD_TICKET, "--json")
    assert run.code == 1
    result = json.loads(run.proc.stdout)
    assert result["steps"] == ["validate_ticket", "ticket_invalid"]
    assert result["status"] == "failed"
    assert run.of("model_exchange") == []
