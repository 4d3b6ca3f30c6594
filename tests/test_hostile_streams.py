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


# a member of a for-each group asks through the SDK's async client (podium/aio.py's loop, the
# aiohttp transport); a top-level agent through its sync client: two HTTP stacks to break
MEMBERS = """
workflow:
  name: t
  entry_point: fan
  input: {items: {type: array, default: [1]}}
  runtime: {provider: PROVIDER, default_model: MODEL}
agents: []
for_each:
  - name: fan
    type: for_each
    source: workflow.input.items
    as: item
    agent: {name: a, tools: [], prompt: "hi {{ item }}"}
"""
BROKEN = {
    "openai": b'data: {"id":"c","object":"chat.completion.chunk","created":1,'
              b'"model":"gpt-5-mini","choices":[{"index":0,"delta":{"content":"{\\"o"},'
              b'"finish_reason":null}]}\n\n',
    "claude": b'event: message_start\ndata: {"type":"message_start","message":{"id":"m",'
              b'"type":"message","role":"assistant","model":"claude-sonnet-5","content":[],'
              b'"stop_reason":null,"usage":{"input_tokens":3,"output_tokens":0}}}\n\n',
}


@pytest.mark.parametrize(("provider", "where"),
                         [("openai", "agent"), ("openai", "member"), ("claude", "agent"),
                          ("claude", "member")])
def test_a_stream_broken_off_midway_is_retried_then_fails_clearly(
        tmp_path: Path, provider: str, where: str) -> None:
    """The endpoint promises 5,000 bytes and closes after the first event: each SDK's HTTP
    library raises its own error (openai 2 reads with httpx, anthropic with httpx2), and both
    are a retryable provider failure, never a traceback."""
    model = "gpt-5-mini" if provider == "openai" else "claude-sonnet-5"
    flow = (OPENAI.replace("TIMEOUT", "60") if provider == "openai" else CLAUDE) \
        if where == "agent" else MEMBERS.replace("PROVIDER", provider).replace("MODEL", model)
    with HostileStream(BROKEN[provider], promised=5000) as srv:
        proc = _run(tmp_path, flow, srv.url)
        asked = srv.requests
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 3, proc.stderr
    assert "the stream broke off" in proc.stderr
    assert ("step 'a'" if where == "agent" else "a[0]") in proc.stderr  # where, by name
    assert asked == 3  # the default policy's three attempts: the break is worth asking again
    assert _status(tmp_path) == "error"  # not "interrupted": it can be resumed
