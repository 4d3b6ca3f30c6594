"""The article's sub-workflow pattern, for real: examples/dev-review-subworkflow run through the
`podium` CLI on a fresh git copy of the sample repository, with scripted answers. The scripts
(ticket check, pytest, diff collector) run for real, inside the child run."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

from helpers_engine import EXAMPLES, git_repo_copy, read_jsonl, run_cli

HERE = EXAMPLES / "dev-review-subworkflow"
WORKFLOW = HERE / "workflow.yaml"
TICKETS = EXAMPLES / "dev-review" / "tickets"


def scenario(tmp_path: Path, responses: str, ticket: str = "add-slugify.md",
             ) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    repo = git_repo_copy(EXAMPLES / "dev-review" / "sample-repo", tmp_path / "repo")
    log = tmp_path / "events.jsonl"
    proc = run_cli(tmp_path / "home", "run", WORKFLOW, "--input", f"ticket={TICKETS / ticket}",
                   "--input", f"repo_dir={repo}", "--responses", HERE / "responses" / responses,
                   "--events", log, timeout=120)
    return proc, read_jsonl(log)


def runs(tmp_path: Path) -> dict[str, dict[str, Any]]:
    con = sqlite3.connect(f"file:{tmp_path / 'home' / 'podium.db'}?mode=ro", uri=True)
    try:
        con.row_factory = sqlite3.Row
        return {r["workflow_name"]: dict(r) for r in con.execute("SELECT * FROM runs")}
    finally:
        con.close()


def steps(events: list[dict[str, Any]], child: bool) -> list[str]:
    return [e["step"] for e in events if e["type"] == "step_started"
            and (e.get("parent_run_id") is not None) == child]


def summary_rows(stderr: str) -> dict[str, str]:
    return dict(re.findall(r"^  ([\w/]+): (\$\d+\.\d{4}|unpriced) · ", stderr, re.MULTILINE))


def test_happy_path(tmp_path: Path) -> None:
    proc, events = scenario(tmp_path, "happy.yaml")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"summary": (
        "Added slugify(text) to textkit.py: NFKD-normalises to ASCII, lower-cases, turns every "
        "run of other characters into '-' and strips the edges."), "reviews": 1}
    assert steps(events, child=False) == ["validate_ticket", "dev_loop", "handoff_summary",
                                          "human_acceptance", "accepted"]
    assert steps(events, child=True) == ["developer", "run_tests", "collect_diff", "reviewer",
                                         "review_count"]
    by_name = runs(tmp_path)
    assert by_name["dev-loop"]["parent_run_id"] == by_name["dev-review-subworkflow"]["id"]
    assert by_name["dev-loop"]["status"] == "success"
    # the handoff agent saw the child's output, mapped into the parent's context
    (handoff,) = [e for e in events if e["type"] == "prompt_rendered"
                  and e["step"] == "handoff_summary"]
    assert "NFKD-normalises" in handoff["prompt"]
    assert "Reviews: 1" in handoff["prompt"]
    rows = summary_rows(proc.stderr)
    assert set(rows) == {"dev_loop/developer", "dev_loop/reviewer", "handoff_summary"}
    assert "unpriced" not in rows.values()


def test_reviewer_never_approves_exhausts_the_child_and_fails_the_parent(
        tmp_path: Path) -> None:
    proc, events = scenario(tmp_path, "never-approves.yaml")
    assert proc.returncode == 4, proc.stderr
    child_round = ["developer", "run_tests", "collect_diff", "reviewer", "review_count"]
    assert steps(events, child=True) == child_round * 2 + ["developer", "run_tests"]
    assert steps(events, child=False) == ["validate_ticket", "dev_loop"]
    (finished,) = [e for e in events if e["type"] == "run_finished"
                   and e.get("parent_run_id") is None]
    assert (finished["status"], finished["exit_code"], finished["step"]) == \
        ("limit", 4, "dev_loop")
    reason = "the run reached max_iterations (12) before 'collect_diff'"
    assert "sub-workflow 'dev-loop.yaml' (run " in finished["message"]
    assert reason in finished["message"]
    assert f"error: run {finished['run_id']}, step 'dev_loop' (iteration 1): sub-workflow" \
        in proc.stderr
    assert reason in proc.stderr
    by_name = runs(tmp_path)
    assert (by_name["dev-loop"]["status"], by_name["dev-loop"]["exit_code"]) == ("limit", 4)
    # the parent's summary includes what the child's agents cost
    rows = summary_rows(proc.stderr)
    assert set(rows) == {"dev_loop/developer", "dev_loop/reviewer"}
    assert "unpriced" not in rows.values()
    total = sum(float(v[1:]) for v in rows.values())
    (cost_line,) = re.findall(r"^cost: \$(\d+\.\d{4})$", proc.stderr, re.MULTILINE)
    assert abs(float(cost_line) - total) < 0.0002
    assert "dev_loop/developer: $" in proc.stderr
    assert "3600 in / 500 out" in proc.stderr  # three developer answers


def test_invalid_ticket_never_starts_the_child(tmp_path: Path) -> None:
    proc, events = scenario(tmp_path, "happy.yaml", ticket="missing-criteria.md")
    assert proc.returncode == 1, proc.stderr
    assert steps(events, child=False) == ["validate_ticket", "ticket_invalid"]
    assert steps(events, child=True) == []
    assert set(runs(tmp_path)) == {"dev-review-subworkflow"}


def test_both_files_validate_cleanly(tmp_path: Path) -> None:
    proc = run_cli(tmp_path / "home", "validate", WORKFLOW, HERE / "dev-loop.yaml",
                   "--strict")
    assert proc.returncode == 0, proc.stdout + proc.stderr
