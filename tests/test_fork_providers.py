"""`podium fork RUN --from STEP` builds its live providers the way run and resume do: with
OPENAI_API_KEY from the environment, or the workflow's provider object (base_url +
api_key_env), the forked run goes on live from the fork point against a real SDK talking to a
local OpenAI-compatible server, and sends the key it was given."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from fakes.openai_server import FakeOpenAI, answer
from helpers_engine import cli_env, podium_argv, write

_AGENTS = """
agents:
  - name: draft
    model: gpt-5-mini
    tools: []
    prompt: "write a draft"
    routes: [{to: polish}]
  - name: polish
    model: gpt-5-mini
    tools: []
    prompt: "polish {{ draft.output.result }}"
    routes: [{to: $end}]
output:
  text: "{{ polish.output.result }}"
"""


def _cli(home: Path, env: dict[str, str], *args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(podium_argv(*(str(a) for a in args)), env=cli_env(home, env),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=100, check=False)


def _run_then_fork(tmp_path: Path, oa: FakeOpenAI, wf: Path, env: dict[str, str]
                   ) -> tuple[dict[str, object], subprocess.CompletedProcess[str]]:
    home = tmp_path / "home"
    oa.script(answer("first draft"), answer("polished once"), answer("polished twice"))
    ran = _cli(home, env, "run", wf, "--json")
    assert ran.returncode == 0, ran.stderr
    first = json.loads(ran.stdout)
    fork = _cli(home, env, "fork", first["run_id"], "--from", "polish", "--json")
    return first, fork


def test_fork_goes_live_with_the_environment_key(tmp_path: Path) -> None:
    wf = write(tmp_path, "workflow: {name: f, entry_point: draft, runtime: {provider: openai}}\n"
               + _AGENTS)
    with FakeOpenAI() as oa:
        env = {"OPENAI_BASE_URL": oa.url + "/v1", "OPENAI_API_KEY": "sk-env-key"}
        first, fork = _run_then_fork(tmp_path, oa, wf, env)
        requests = oa.chat_requests()
    assert first["output"] == {"text": "polished once"}
    assert fork.returncode == 0, fork.stderr
    assert json.loads(fork.stdout)["output"] == {"text": "polished twice"}
    assert len(requests) == 3  # draft replayed from the recording, polish asked again live
    assert all(r.headers["authorization"] == "Bearer sk-env-key" for r in requests)


def test_fork_goes_live_with_the_workflow_provider_object(tmp_path: Path) -> None:
    with FakeOpenAI() as oa:
        wf = write(tmp_path, f"""
workflow:
  name: f
  entry_point: draft
  runtime:
    provider: {{name: openai, base_url: "{oa.url}/v1", api_key_env: TEAM_LLM_KEY}}
""" + _AGENTS)
        first, fork = _run_then_fork(tmp_path, oa, wf, {"TEAM_LLM_KEY": "sk-team"})
        requests = oa.chat_requests()
    assert first["output"] == {"text": "polished once"}
    assert fork.returncode == 0, fork.stderr
    assert json.loads(fork.stdout)["output"] == {"text": "polished twice"}
    assert [r.headers["authorization"] for r in requests] == ["Bearer sk-team"] * 3


def test_fork_keeps_the_parents_provider_flag(tmp_path: Path) -> None:
    """The parent ran with `--provider openai` over a workflow whose default is claude (no
    Anthropic key here): the fork goes on with openai, as `resume` of the parent would."""
    wf = write(tmp_path, "workflow: {name: f, entry_point: draft, runtime: {provider: claude}}\n"
               + _AGENTS)
    home = tmp_path / "home"
    with FakeOpenAI() as oa:
        env = {"OPENAI_BASE_URL": oa.url + "/v1", "OPENAI_API_KEY": "sk-env-key"}
        oa.script(answer("first draft"), answer("polished once"), answer("polished twice"))
        ran = _cli(home, env, "run", wf, "--json", "--provider", "openai")
        assert ran.returncode == 0, ran.stderr
        fork = _cli(home, env, "fork", json.loads(ran.stdout)["run_id"], "--from", "polish",
                    "--json")
        served = len(oa.chat_requests())
    assert fork.returncode == 0, fork.stderr
    assert json.loads(fork.stdout)["output"] == {"text": "polished twice"}
    assert served == 3
