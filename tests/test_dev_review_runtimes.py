"""The article's workflow, unchanged (examples/dev-review/workflow.yaml: `runtime.provider:
copilot`, the reviewer on `claude`), on the real Copilot runtime in bring-your-own-key mode
against the local OpenAI-compatible server, and podium's Anthropic provider against the local
Anthropic server. The developer edits the repository through the Copilot CLI's own `edit`
tool; pytest and the diff collector run for real; the reviewer is offered no tool; the run
reaches the human acceptance gate and, with nobody to answer it, parks there (exit 5)."""

from __future__ import annotations

import json
from pathlib import Path

from fakes.anthropic_server import FakeAnthropic, message, text
from fakes.openai_server import FakeOpenAI, answer, call
from helpers_engine import EXAMPLES, git_repo_copy
from runtime_helpers import events_of, needs_copilot, podium, runtime_env

DEV_REVIEW = EXAMPLES / "dev-review"


@needs_copilot
def test_article_workflow_with_copilot_developer_parks_at_human_acceptance(
        tmp_path: Path) -> None:
    repo = git_repo_copy(DEV_REVIEW / "sample-repo", tmp_path / "repo")
    original = (repo / "textkit.py").read_text(encoding="utf-8")
    fixed = (DEV_REVIEW / "fixtures" / "textkit_fixed.py").read_text(encoding="utf-8")
    log = tmp_path / "events.jsonl"
    with FakeOpenAI() as oa, FakeAnthropic() as an:
        oa.script(
            # developer (Copilot runtime): edit the file with the runtime's own tool, answer
            answer(tool_calls=[call("edit", {"path": str(repo / "textkit.py"),
                                             "old_str": original, "new_str": fixed})],
                   model="gpt-5-mini", usage=(2000, 400, 0)),
            answer(json.dumps({"summary": "Added slugify(text) to textkit.py.",
                               "files_changed": ["textkit.py"]}), model="gpt-5-mini",
                   usage=(2600, 60, 0)),
            # handoff_summary (Copilot too: the workflow's default provider)
            answer("- Added `slugify(text)` to `textkit.py`.", model="gpt-5-mini",
                   usage=(400, 50, 0)))
        an.script(message(text('{"verdict": "approve", "findings": []}'),
                          model="claude-sonnet-5", usage=(3000, 120, 0, 0)))
        proc = podium(tmp_path, "run", DEV_REVIEW / "workflow.yaml",
                      "--input", f"ticket={DEV_REVIEW / 'tickets' / 'add-slugify.md'}",
                      "--input", f"repo_dir={repo}", "--events", log,
                      env=runtime_env(tmp_path, {
                          "COPILOT_PROVIDER_BASE_URL": oa.url + "/v1",
                          "COPILOT_PROVIDER_API_KEY": "sk-dummy",
                          "ANTHROPIC_BASE_URL": an.url, "ANTHROPIC_API_KEY": "sk-ant-dummy"}),
                      timeout=120)
        dev_requests = [r.body for r in oa.chat_requests()]
        review_requests = [r.body for r in an.message_requests()]
    assert proc.returncode == 5, proc.stderr  # parked at a human gate
    steps = [e["step"] for e in events_of(log, "step_started")]
    assert steps == ["validate_ticket", "developer", "run_tests", "collect_diff", "reviewer",
                     "review_count", "handoff_summary", "human_acceptance"]
    assert "human_acceptance" in proc.stderr

    # the Copilot runtime's own tool changed the repository; the real tests pass on it
    assert (repo / "textkit.py").read_text(encoding="utf-8") == fixed
    (tool,) = events_of(log, "tool_called")
    assert (tool["tool"], tool["source"]) == ("edit", "copilot")
    # (run_tests routed to collect_diff: pytest exited 0 on the edited repository)

    # developer: templated model, effort medium, in the repository, the runtime's tools
    dev = dev_requests[0]
    assert (dev["model"], dev["reasoning_effort"]) == ("gpt-5-mini", "medium")
    assert f"Current working directory: {repo}" in dev["messages"][0]["content"]
    assert "edit" in {t["function"]["name"] for t in dev["tools"]}
    assert dev_requests[2]["reasoning_effort"] == "low"  # handoff_summary
    # the reviewer stayed on its own provider (claude) and was offered no tool at all
    (review,) = review_requests
    assert "tools" not in review
    assert review["model"] == "claude-sonnet-5"
    assert review["output_config"]["effort"] == "high"

    # usage and cost per agent, all priced (budget_mode: enforce counts them)
    finished = {e["step"]: e for e in events_of(log, "step_finished")}
    for step in ("developer", "reviewer", "handoff_summary"):
        assert finished[step]["priced"] is True, step
        assert finished[step]["cost_usd"] > 0, step
    assert finished["developer"]["input_tokens"] == 4600
