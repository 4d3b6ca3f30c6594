"""A model endpoint that answers 200 and then misbehaves, through the real CLI and SDKs: a
stream that never ends (an SSE comment now and then) is held to a total deadline, and data
that is not JSON fails the step with one clear line; never a traceback, never a run left
"interrupted"."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from fakes.hostile_stream import HostileStream
from helpers_engine import cli_env, podium_argv, write

OPENAI = """
workflow: {name: t, entry_point: a, runtime: {provider: openai}}
agents:
  - {name: a, model: gpt-5-mini, timeout_seconds: TIMEOUT, tools: [], prompt: hi}
"""
CLAUDE = """
workflow: {name: t, entry_point: a, runtime: {provider: claude}}
agents:
  - {name: a, model: claude-sonnet-5, tools: [], prompt: hi}
"""


def _run(tmp_path: Path, flow: str, url: str) -> subprocess.CompletedProcess[str]:
    path = write(tmp_path, flow, "flow.yaml")
    env = cli_env(tmp_path / "home", {"OPENAI_BASE_URL": url + "/v1", "OPENAI_API_KEY": "sk-x",
                                      "ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "sk-x"})
    return subprocess.run(podium_argv("run", path, "--json"), env=env, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=100, check=False)


def _status(tmp_path: Path) -> str:
    env = cli_env(tmp_path / "home")
    runs = subprocess.run(podium_argv("runs", "--format", "json"), env=env, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=60, check=True)
    (run,) = json.loads(runs.stdout)
    return str(run["status"])


def test_a_stream_that_never_ends_is_cut_at_the_agents_timeout(tmp_path: Path) -> None:
    with HostileStream(b": hello\n\n", trickle=0.2) as srv:
        proc = _run(tmp_path, OPENAI.replace("TIMEOUT", "2"), srv.url)
    assert "Traceback" not in proc.stderr
    assert proc.returncode in (3, 4), proc.stderr
    assert "step 'a'" in proc.stderr
    assert "the answer did not end within 2s" in proc.stderr
    assert _status(tmp_path) == "error"  # not "interrupted": it can be resumed


@pytest.mark.parametrize("flow", [OPENAI.replace("TIMEOUT", "60"), CLAUDE],
                         ids=["openai", "claude"])
def test_stream_data_that_is_not_json_fails_the_step_clearly(tmp_path: Path, flow: str) -> None:
    body = b"event: message_start\ndata: {not json at all\n\n"
    with HostileStream(body) as srv:
        proc = _run(tmp_path, flow, srv.url)
    assert "Traceback" not in proc.stderr
    assert "JSONDecodeError" not in proc.stderr
    assert proc.returncode == 3, proc.stderr
    assert "the stream sent data that is not JSON" in proc.stderr
    assert "'{not json at all'" in proc.stderr
    assert "step 'a'" in proc.stderr
    assert _status(tmp_path) == "error"  # not "interrupted": it can be resumed
