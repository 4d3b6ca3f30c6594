"""Recorded on real provider adapters, replayed offline: the article's workflow runs with the
developer on an OpenAI-compatible endpoint and the reviewer on Anthropic (local protocol
servers); once the servers are stopped, `podium replay` re-executes the run from its recording
with an identical trajectory, and a fork from the reviewer with another verdict takes the other
route."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from fakes.anthropic_server import FakeAnthropic, message, text
from fakes.openai_server import FakeOpenAI, answer, call
from helpers_dev_review import dev_review_with_tools
from helpers_engine import EXAMPLES, cli_env, git_repo_copy, podium_argv, write

DEV_REVIEW = EXAMPLES / "dev-review"
LOCAL = "qwen2.5-coder:7b"


def _developer(fixed: str, summary: str) -> list[dict[str, object]]:
    return [
        answer(tool_calls=[call("write_file", {"path": "textkit.py", "content": fixed})],
               model=LOCAL, usage=(1800, 400, 0)),
        answer(json.dumps({"summary": summary, "files_changed": ["textkit.py"]}), model=LOCAL,
               usage=(2600, 60, 0)),
    ]


def _run(tmp_path: Path, home: Path, *args: object, env: dict[str, str] | None = None,
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(podium_argv(*args), env=env or cli_env(home, {}),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=180, check=False)


def test_recorded_real_provider_run_replays_offline_and_forks(tmp_path: Path) -> None:
    home = tmp_path / "home"
    repo = git_repo_copy(DEV_REVIEW / "sample-repo", tmp_path / "repo")
    flow = dev_review_with_tools(tmp_path / "dev-review")  # on openai the Dev names its tools
    fixed = (DEV_REVIEW / "fixtures" / "textkit_fixed.py").read_text(encoding="utf-8")
    gates = write(tmp_path, "gates:\n  human_acceptance: [accept]\n", "gates.yaml")
    with FakeOpenAI() as oa, FakeAnthropic() as an:
        oa.script(*_developer(fixed, "Added slugify."),
                  *_developer(fixed, "Documented the slug rules."),
                  answer("- Added `slugify`.", model="gpt-5-mini-2025-08-07",
                         usage=(400, 50, 0)))
        an.script(message(text('{"verdict": "changes", "findings": ["document the rules"]}'),
                          model="claude-sonnet-5", usage=(3000, 120, 0, 0)),
                  message(text('{"verdict": "approve", "findings": []}'),
                          model="claude-sonnet-5", usage=(3100, 90, 0, 0)))
        env = cli_env(home, {"OPENAI_BASE_URL": oa.url + "/v1", "OPENAI_API_KEY": "sk-dummy",
                             "ANTHROPIC_BASE_URL": an.url, "ANTHROPIC_API_KEY": "sk-ant-dummy"})
        proc = _run(tmp_path, home, "run", flow, "--provider", "openai",
                    "--json", "--input", f"ticket={DEV_REVIEW / 'tickets' / 'add-slugify.md'}",
                    "--input", f"repo_dir={repo}", "--responses", gates, env=env)
        served = len(oa.chat_requests()) + len(an.message_requests())
    assert proc.returncode == 0, proc.stderr
    recorded = json.loads(proc.stdout)
    assert recorded["steps"].count("reviewer") == 2

    # the servers are gone: the replay needs nothing but the recording
    replay = _run(tmp_path, home, "replay", recorded["run_id"])
    assert replay.returncode == 0, replay.stderr
    assert json.loads(replay.stdout) == recorded["output"]
    assert "identical trajectory (14 steps" in replay.stderr
    assert served == 7  # all served to the live run; the replay ran after the servers stopped

    # fork at the first review with an approving verdict: the other route, live from there
    answers = write(tmp_path, """
agents:
  reviewer:
    - output: {verdict: approve, findings: []}
  handoff_summary:
    - text: "- Added slugify."
gates:
  human_acceptance: [accept]
""", "fork.yaml")
    fork = _run(tmp_path, home, "fork", recorded["run_id"], "--from", "reviewer:1", "--json",
                "--responses", answers)
    assert fork.returncode == 0, fork.stderr
    steps = json.loads(fork.stdout)["steps"]
    assert steps[4:7] == ["reviewer", "review_count", "handoff_summary"]
    assert steps.count("reviewer") == 1
