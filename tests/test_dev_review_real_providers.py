"""The article's workflow on real provider adapters: `podium run examples/dev-review/workflow.yaml
--provider openai`, the developer on an OpenAI-compatible endpoint and the reviewer on
Anthropic, both served by local protocol servers. The developer's tool calls really edit a git
copy of the sample repository; pytest and the diff collector run for real; the reviewer gets no
tools; the summary prices each agent and marks the local model unpriced."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from fakes.anthropic_server import FakeAnthropic, message, text
from fakes.openai_server import FakeOpenAI, answer, call
from helpers_dev_review import dev_review_with_tools
from helpers_engine import EXAMPLES, cli_env, git_repo_copy, podium_argv, read_jsonl, write

DEV_REVIEW = EXAMPLES / "dev-review"
LOCAL = "qwen2.5-coder:7b"  # what the OpenAI-compatible endpoint says it runs: no known price


def test_article_workflow_on_local_protocol_servers(tmp_path: Path) -> None:
    repo = git_repo_copy(DEV_REVIEW / "sample-repo", tmp_path / "repo")
    flow = dev_review_with_tools(tmp_path / "dev-review")  # on openai the Dev names its tools
    fixed = (DEV_REVIEW / "fixtures" / "textkit_fixed.py").read_text(encoding="utf-8")
    gates = write(tmp_path, "gates:\n  human_acceptance: [accept]\n", "gates.yaml")
    log = tmp_path / "events.jsonl"
    with FakeOpenAI() as oa, FakeAnthropic() as an:
        oa.script(
            # developer: look, write the fix, run the tests, answer
            answer(tool_calls=[call("read_file", {"path": "textkit.py"})], model=LOCAL,
                   usage=(1200, 40, 0)),
            answer(tool_calls=[call("write_file", {"path": "textkit.py", "content": fixed})],
                   model=LOCAL, usage=(1800, 400, 0)),
            answer(tool_calls=[call("run_command", {"command": "python -m pytest -q"})],
                   model=LOCAL, usage=(2300, 30, 0)),
            answer(json.dumps({"summary": "Added slugify(text) to textkit.py.",
                               "files_changed": ["textkit.py"]}), model=LOCAL,
                   usage=(2600, 60, 0)),
            # handoff_summary (on the endpoint too, through --provider openai)
            answer("- Added `slugify(text)` to `textkit.py`.", model="gpt-5-mini-2025-08-07",
                   usage=(400, 50, 0)))
        an.script(message(text('{"verdict": "approve", "findings": []}'),
                          model="claude-sonnet-5", usage=(3000, 120, 0, 0)))
        env = cli_env(tmp_path / "home", {
            "OPENAI_BASE_URL": oa.url + "/v1", "OPENAI_API_KEY": "sk-dummy",
            "ANTHROPIC_BASE_URL": an.url, "ANTHROPIC_API_KEY": "sk-ant-dummy"})
        proc = subprocess.run(
            podium_argv("run", flow, "--provider", "openai",
                        "--input", f"ticket={DEV_REVIEW / 'tickets' / 'add-slugify.md'}",
                        "--input", f"repo_dir={repo}", "--responses", gates, "--events", log),
            env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
            check=False)
        dev_requests = [r.body for r in oa.chat_requests()]
        review_requests = [r.body for r in an.message_requests()]
    assert proc.returncode == 0, proc.stderr
    events = read_jsonl(log)
    steps = [e["step"] for e in events if e["type"] == "step_started"]
    assert steps == ["validate_ticket", "developer", "run_tests", "collect_diff", "reviewer",
                     "review_count", "handoff_summary", "human_acceptance", "accepted"]

    # the developer's tool calls really changed the repository, and its tests pass
    assert (repo / "textkit.py").read_text(encoding="utf-8") == fixed
    tests = subprocess.run(["python", "-m", "pytest", "-q"], cwd=repo, env=env,
                           capture_output=True, text=True, check=False, timeout=60)
    assert tests.returncode == 0, tests.stdout
    assert "8 passed" in tests.stdout
    tool_events = [(e["tool"], e["is_error"]) for e in events if e["type"] == "tool_called"]
    assert tool_events == [("read_file", False), ("write_file", False), ("run_command", False)]

    # the developer went to the OpenAI-compatible endpoint with its templated model and effort,
    # offered the workspace tools
    dev = dev_requests[0]
    assert (dev["model"], dev["reasoning_effort"]) == ("gpt-5-mini", "medium")
    assert "write_file" in {t["function"]["name"] for t in dev["tools"]}
    assert dev_requests[4]["reasoning_effort"] == "low"  # handoff_summary
    assert "tools" not in dev_requests[4]  # it names no tool, so it is offered none
    # the reviewer stayed on its own provider (claude), and was offered no tool at all
    (review,) = review_requests
    assert "tools" not in review
    assert "tool_choice" not in review
    assert review["model"] == "claude-sonnet-5"
    assert review["output_config"]["effort"] == "high"
    assert review["output_config"]["format"]["type"] == "json_schema"

    # the summary: cost per agent, the local model unpriced, the total partial
    err = proc.stderr
    assert f"developer: unpriced · {LOCAL}" in err
    assert "reviewer: $" in err
    assert "handoff_summary: $" in err
    assert f"partial: 1 agent(s) unpriced: developer ({LOCAL})" in err
    assert "cost: ~$" in err
    warnings = [e["message"] for e in events if e["type"] == "warning"]
    assert any(f"model '{LOCAL}' has no known price" in w for w in warnings)
    finished = [e for e in events if e["type"] == "step_finished"]
    reviewer = next(e for e in finished if e["step"] == "reviewer")
    assert reviewer["cost_usd"] > 0
    assert reviewer["priced"] is True
