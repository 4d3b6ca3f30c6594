"""`podium mcp serve FOLDER`: the folder's workflows as MCP tools, driven by the MCP SDK's own
client over stdio (a real `python -m podium mcp serve` process) and over streamable HTTP."""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from helpers_engine import cli_env, podium_argv, run_cli, wait_until, write

pytest.importorskip("mcp")

SIMPLE = """
workflow:
  name: greet
  description: Say hello to someone.
  entry_point: hello
  input:
    who: {type: string, description: Whom to greet}
    times: {type: number, default: 1}
    loud: {type: boolean, required: false}
agents:
  - {name: hello, type: set, value: "hello {{ workflow.input.who }}"}
output:
  greeting: "{{ hello.output }}"
  times: "{{ workflow.input.times }}"
"""

GATED = """
workflow:
  name: review draft
  entry_point: draft
agents:
  - {name: draft, type: set, value: "v1", routes: [{to: review}]}
  - name: review
    type: human_gate
    prompt: "Accept draft {{ draft.output }}?"
    options:
      - {label: Accept, value: accept, route: accepted}
      - {label: Revise, value: revise, route: revised, prompt_for: feedback}
  - name: accepted
    type: terminate
    status: success
    reason: accepted
  - {name: revised, type: set, value: "{{ review.output.additional_input.feedback }}"}
output:
  selected: "{{ review.output.selected }}"
"""


FAILS = """
workflow: {name: refuse, entry_point: stop}
agents:
  - {name: stop, type: terminate, status: failed, reason: "nothing to do today"}
"""


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "flows"
    write(folder, FAILS, "refuse.yaml")
    write(folder, SIMPLE, "greet.yaml")
    write(folder, GATED, "review.yml")
    write(folder, "workflow: {name: broken\n", "broken.yaml")  # left out, noted on stderr
    write(folder, "not: a workflow\n", "greet.test.yaml")  # workflow tests are not tools
    return folder


def _data(result: Any) -> dict[str, Any]:
    assert result.structured_content is not None, result
    data: dict[str, Any] = result.structured_content
    assert json.loads(result.content[0].text.splitlines()[-1]) == data
    return data


def _stdio(tmp_path: Path, body: Callable[[Any], Awaitable[None]]) -> None:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    folder = _folder(tmp_path)
    argv = podium_argv("mcp", "serve", folder)
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=cli_env(tmp_path / "home"),
                                   cwd=str(tmp_path))

    async def main() -> None:
        with (tmp_path / "server.err").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                await body(client)

    anyio.run(main)


def test_stdio_lists_workflows_and_runs_them_in_the_store(tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    async def body(client: Any) -> None:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert sorted(tools) == ["greet", "podium_answer", "podium_status", "refuse",
                                "review_draft"]
        greet = tools["greet"]
        assert greet.description == "Say hello to someone."
        assert greet.input_schema == {
            "type": "object", "required": ["who"], "properties": {
                "who": {"type": "string", "description": "Whom to greet"},
                "times": {"type": "number", "default": 1},
                "loud": {"type": "boolean"}}}
        assert tools["review_draft"].input_schema == {"type": "object", "properties": {}}
        done = await client.call_tool("greet", {"who": "Ada", "times": 2})
        assert not done.is_error
        data = _data(done)
        assert data["status"] == "success"
        assert data["output"] == {"greeting": "hello Ada", "times": 2}
        seen["run_id"] = data["run_id"]
        status = _data(await client.call_tool("podium_status", {"run_id": data["run_id"]}))
        assert (status["status"], status["output"], status["workflow"]) == \
            ("success", {"greeting": "hello Ada", "times": 2}, "greet")
        bad = await client.call_tool("greet", {"whom": "Ada"})
        assert bad.is_error
        assert "unknown input 'whom'" in bad.content[0].text
        missing = await client.call_tool("greet", {})
        assert missing.is_error
        assert "missing required input: who" in missing.content[0].text
        failed = await client.call_tool("refuse", {})
        assert failed.is_error
        assert failed.content[0].text.splitlines()[0] == "nothing to do today"
        assert _data(failed)["status"] == "failed"

    _stdio(tmp_path, body)
    runs = json.loads(run_cli(tmp_path / "home", "runs", "--format", "json").stdout)
    assert sorted((r["workflow"], r["status"]) for r in runs) == \
        [("greet", "success"), ("refuse", "failed")]
    assert seen["run_id"] in {r["id"] for r in runs}
    err = (tmp_path / "server.err").read_text()
    assert "broken.yaml is left out" in err


def test_stdio_a_gate_parks_and_podium_answer_resumes_it(tmp_path: Path) -> None:
    async def body(client: Any) -> None:
        parked = await client.call_tool("review_draft", {})
        assert not parked.is_error
        data = _data(parked)
        assert data["status"] == "waiting"
        assert data["gate"]["step"] == "review"
        assert data["gate"]["prompt"] == "Accept draft v1?"
        assert [o["value"] for o in data["options"]] == ["accept", "revise"]
        assert "podium_answer" in data["how"]
        run_id = data["run_id"]
        waiting = _data(await client.call_tool("podium_status", {"run_id": run_id}))
        assert (waiting["status"], waiting["gate"]["step"]) == ("waiting", "review")
        wrong = await client.call_tool("podium_answer", {"run_id": run_id, "value": "maybe"})
        assert wrong.is_error
        assert "accept, revise" in wrong.content[0].text
        done = await client.call_tool("podium_answer", {"run_id": run_id, "value": "accept"})
        assert not done.is_error
        finished = _data(done)
        assert (finished["status"], finished["run_id"], finished["output"]) == \
            ("success", run_id, {"selected": "accept"})
        again = await client.call_tool("podium_answer", {"run_id": run_id, "value": "accept"})
        assert again.is_error

    _stdio(tmp_path, body)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_streamable_http_on_loopback(tmp_path: Path) -> None:
    from mcp import Client

    folder = _folder(tmp_path)
    port = _free_port()
    proc = subprocess.Popen(podium_argv("mcp", "serve", folder, "--http", "--port", str(port)),
                            cwd=tmp_path, env=cli_env(tmp_path / "home"),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)

    def listening() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            assert proc.poll() is None, proc.communicate()
            return False

    try:
        assert wait_until(listening, timeout=30)

        async def main() -> None:
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                names = {t.name for t in (await client.list_tools()).tools}
                assert {"greet", "review_draft", "podium_answer"} <= names
                data = _data(await client.call_tool("greet", {"who": "Lin"}))
                assert (data["status"], data["output"]["greeting"]) == ("success", "hello Lin")

        anyio.run(main)
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=10)
    assert out == ""
    assert f"listening on http://127.0.0.1:{port}/mcp" in err


def test_http_refuses_a_non_loopback_host(tmp_path: Path) -> None:
    proc = run_cli(tmp_path / "home", "mcp", "serve", str(_folder(tmp_path)), "--http",
                   "--host", "0.0.0.0")
    assert proc.returncode == 2
    assert "--allow-remote" in proc.stderr
