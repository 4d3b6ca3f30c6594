"""The `mcp` step against a real MCP server process (tests/fakes/mcp_tools_server.py, built
with the official SDK): started over stdio by the step itself, or serving streamable HTTP in a
subprocess. No model is involved; the tool's result is the step's output."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers_engine import Run, run_cli, run_workflow, wait_until, write
from podium.errors import LimitExceeded, OutputContractError, StepError
from podium.events.model import McpCalled, StepFailed

SERVER = Path(__file__).resolve().parent / "fakes" / "mcp_tools_server.py"
PYTHON = sys.executable


def workflow(tmp_path: Path, agents: str, *, server: str | None = None,
             extra: str = "") -> Path:
    """A workflow whose `tickets` server is the fake server over stdio."""
    server = server or f"{{command: {json.dumps(PYTHON)}, args: [{json.dumps(str(SERVER))}]}}"
    return write(tmp_path, f"""
workflow:
  name: m
  entry_point: call
  input:
    tid: {{type: string, default: T-1}}
    a: {{type: number, default: 2}}
    who: {{type: string, default: ada}}
  runtime:
    mcp_servers:
      tickets: {server}
{textwrap.indent(textwrap.dedent(extra).strip(), "  ") if extra else ""}
agents:
{textwrap.indent(textwrap.dedent(agents).strip(), "  ")}
""")


def called(run: Run) -> McpCalled:
    (event,) = run.of(McpCalled)
    return event


def test_structured_result_is_the_output_and_routes_on_it(tmp_path: Path) -> None:
    run = run_workflow(workflow(tmp_path, """
        - name: call
          type: mcp
          server: tickets
          tool: lookup_ticket
          arguments: {id: "{{ workflow.input.tid }}"}
          routes:
            - {to: urgent, when: "{{ call.output.priority <= 2 }}"}
            - {to: later}
        - {name: urgent, type: set, value: "{{ call.output.title }} is urgent"}
        - {name: later, type: set, value: later}
    """))
    assert run.exit_code == 0, run.error_text()
    ticket = {"id": "T-1", "title": "Add slugify", "priority": 2, "labels": ["text", "small"]}
    assert run.outputs["call"] == ticket
    assert run.result.path == ["call", "urgent"]
    assert run.outputs["urgent"] == "Add slugify is urgent"
    event = called(run)
    assert (event.step, event.iteration, event.server, event.tool) == \
        ("call", 1, "tickets", "lookup_ticket")
    assert event.arguments == {"id": "T-1"}
    assert event.result == ticket
    assert event.is_error is False
    assert event.elapsed == 0.0  # measured on the run's clock, which this test holds still


def test_arguments_render_as_native_values(tmp_path: Path) -> None:
    calls = tmp_path / "calls.txt"
    server = (f"{{command: {json.dumps(PYTHON)}, args: [{json.dumps(str(SERVER))}], "
              f"env: {{MCP_CALLS_FILE: {json.dumps(str(calls))}}}}}")
    run = run_workflow(workflow(tmp_path, """
        - name: call
          type: mcp
          server: tickets
          tool: add
          arguments: {a: "{{ workflow.input.a }}", b: "{{ 40 }}"}
          output:
            result: {type: number}
          routes: [{to: types}]
        - name: types
          type: mcp
          server: tickets
          tool: kinds
          arguments:
            payload:
              number: "{{ call.output.result }}"
              list: "{{ [1, workflow.input.a] }}"
              object: "{{ {'k': workflow.input.who} }}"
              flag: "{{ workflow.input.a > 1 }}"
              text: "Hello {{ workflow.input.who }}!"
              padded: "  {{ workflow.input.a }}  "
              literal: 3
              plain: no template
          routes: [{to: greet}]
        - name: greet
          type: mcp
          server: tickets
          tool: echo
          arguments: {text: "Hello {{ workflow.input.who }}, {{ call.output.result }}!"}
    """, server=server))
    assert run.exit_code == 0, run.error_text()
    assert run.outputs["call"] == {"result": 42}
    assert run.outputs["types"] == {"number": "number", "list": "array", "object": "object",
                                    "flag": "boolean", "text": "string", "padded": "number",
                                    "literal": "number", "plain": "string"}
    assert run.outputs["greet"] == {"result": "Hello ada, 42!"}
    events = run.of(McpCalled)
    assert events[0].arguments == {"a": 2, "b": 40}
    assert events[1].arguments["payload"]["object"] == {"k": "ada"}
    # the server's env came from the workflow: it wrote its side effect where told
    assert calls.read_text() == "add 2 40\n"


def test_unstructured_results(tmp_path: Path) -> None:
    run = run_workflow(workflow(tmp_path, """
        - name: call
          type: mcp
          server: tickets
          tool: ticket_json
          arguments: {id: T-2}
          routes: [{to: text}]
        - name: text
          type: mcp
          server: tickets
          tool: note
          arguments: {text: "{{ call.output.title }}"}
    """))
    assert run.exit_code == 0, run.error_text()
    assert run.outputs["call"] == {"id": "T-2", "title": "Big refactor", "priority": 1,
                                   "labels": ["core"]}
    assert run.outputs["text"] == {"text": "noted: Big refactor"}


def test_output_schema_is_enforced_naming_the_field(tmp_path: Path) -> None:
    run = run_workflow(workflow(tmp_path, """
        - name: call
          type: mcp
          server: tickets
          tool: lookup_ticket
          arguments: {id: T-1}
          output:
            title: {type: string}
            priority: {type: string}
    """))
    assert run.exit_code == 3
    assert isinstance(run.result.error, OutputContractError)
    assert ("the result of MCP tool 'lookup_ticket' breaks the output schema: output field "
            "'priority' has wrong type: expected string, got number") in run.error_text()
    assert called(run).is_error is False


def test_tool_error_is_a_step_error(tmp_path: Path) -> None:
    run = run_workflow(workflow(tmp_path, """
        - {name: call, type: mcp, server: tickets, tool: fail}
    """))
    assert run.exit_code == 3
    assert isinstance(run.result.error, StepError)
    text = run.error_text()
    assert "step 'call' (iteration 1)" in text
    assert "MCP tool 'fail' of server 'tickets' returned an error:" in text
    assert "the ticket system is down" in text
    event = called(run)
    assert event.is_error is True
    assert "the ticket system is down" in event.result
    (failed,) = run.of(StepFailed)
    assert failed.details["tool"] == "fail"


def test_arguments_the_tool_rejects_give_a_one_line_error(tmp_path: Path) -> None:
    run = run_workflow(workflow(tmp_path, """
        - {name: call, type: mcp, server: tickets, tool: add, arguments: {a: seven}}
    """))
    assert run.exit_code == 3
    message = str(run.result.error)
    assert message.startswith("MCP tool 'add' of server 'tickets' returned an error: ")
    assert "\n" not in message
    assert "validation error" in message
    assert "\n" in called(run).result  # the event keeps the server's text whole


@pytest.mark.parametrize(("agents", "server", "message"), [
    ("- {name: call, type: mcp, server: tickets, tool: lookup_tiket, arguments: {id: T-1}}",
     None, "MCP server 'tickets' has no tool 'lookup_tiket' (did you mean 'lookup_ticket'?); "
           "it has: add, echo, fail, kinds, lookup_ticket, nap, note, ticket_json"),
    ("- {name: call, type: mcp, server: tickets, tool: echo, arguments: {text: hi}}",
     f"{{command: {json.dumps(PYTHON)}, args: [{json.dumps(str(SERVER))}], tools: [add]}}",
     "MCP server 'tickets' has no tool 'echo'; it has: add"),
    ("- {name: call, type: mcp, server: tikets, tool: add}",
     None, "unknown MCP server 'tikets' (did you mean 'tickets'?); "
           "workflow.runtime.mcp_servers declares: tickets"),
    ("- {name: call, type: mcp, server: tickets, tool: add}",
     f"{{command: {json.dumps(PYTHON)}, args: [{json.dumps(str(SERVER))}, --crash]}}",
     "MCP server 'tickets' ended or closed its connection before answering ("),
    ("- {name: call, type: mcp, server: tickets, tool: add}",
     "{command: no-such-mcp-server}",
     "cannot start MCP server 'tickets': command 'no-such-mcp-server' not found on PATH"),
], ids=["unknown-tool", "filtered-tool", "unknown-server", "crashes-at-start", "no-command"])
def test_clear_errors(tmp_path: Path, agents: str, server: str | None, message: str) -> None:
    # loader only, as Conductor's `run` does: the step's own errors are the last defence
    run = run_workflow(workflow(tmp_path, agents, server=server), check=False)
    assert run.exit_code == 3
    assert message in run.error_text()
    assert run.of(McpCalled) == []
    if "--crash" in (server or ""):
        # what the server said on stderr is in the message, and nowhere else
        assert "its stderr ends with: mcp_tools_server: cannot open the ticket database" \
            in run.error_text()


def test_validate_reports_an_unknown_server(tmp_path: Path) -> None:
    from podium.check.validate import validate_file

    result = validate_file(workflow(tmp_path, "- {name: call, type: mcp, server: tikets, "
                                              "tool: add}", server=None))
    (d,) = result.sink.errors
    assert d.path == "agents[0].server"
    assert d.message == "unknown MCP server 'tikets'"
    assert d.hint == "did you mean 'tickets'?"


def test_no_servers_declared(tmp_path: Path) -> None:
    run = run_workflow(write(tmp_path, """
        workflow: {name: m, entry_point: call}
        agents:
          - {name: call, type: mcp, server: tickets, tool: add}
    """), check=False)
    assert run.exit_code == 3
    assert ("unknown MCP server 'tickets': the workflow declares none (add it under "
            "workflow.runtime.mcp_servers)") in run.error_text()


def test_template_error_in_arguments_names_the_argument(tmp_path: Path) -> None:
    run = run_workflow(workflow(tmp_path, """
        - name: call
          type: mcp
          server: tickets
          tool: add
          arguments: {a: "{{ 1 // 0 }}", b: 1}
    """))
    assert run.exit_code == 3
    assert "arguments.a: expression failed: ZeroDivisionError" in run.error_text()


def test_call_timeout(tmp_path: Path) -> None:
    run = run_workflow(workflow(tmp_path, """
        - {name: call, type: mcp, server: tickets, tool: nap, arguments: {seconds: 30},
           timeout: 0.3}
    """))
    assert run.exit_code == 3
    assert "MCP server 'tickets': calling the tool took longer than 0.3s" in run.error_text()


def test_the_runs_timeout_bounds_the_call(tmp_path: Path) -> None:
    run = run_workflow(workflow(tmp_path, """
        - {name: call, type: mcp, server: tickets, tool: nap, arguments: {seconds: 30}}
    """, extra="limits: {timeout_seconds: 1}"))
    assert run.exit_code == 4
    assert isinstance(run.result.error, LimitExceeded)
    assert run.result.error.limit == "timeout"
    assert "the run's timeout expired during MCP tool 'nap'" in run.error_text()


def test_cli_runs_the_server_from_the_workflows_folder(tmp_path: Path) -> None:
    shutil.copy(SERVER, tmp_path / "tools_server.py")
    path = write(tmp_path, f"""
        workflow:
          name: m
          entry_point: call
          runtime:
            mcp_servers:
              tickets: {{command: {json.dumps(PYTHON)}, args: [tools_server.py]}}
        agents:
          - name: call
            type: mcp
            server: tickets
            tool: lookup_ticket
            arguments: {{id: T-2}}
        output:
          title: "{{{{ call.output.title }}}}"
    """)
    home = tmp_path / "home"
    proc = run_cli(home, "run", path, "--json", cwd=Path("/"))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["output"] == {"title": "Big refactor"}
    events = [json.loads(line) for line in
              run_cli(home, "events", result["run_id"]).stdout.splitlines()]
    (event,) = [e for e in events if e["type"] == "mcp_called"]
    assert (event["server"], event["tool"], event["arguments"]) == \
        ("tickets", "lookup_ticket", {"id": "T-2"})
    assert event["result"]["title"] == "Big refactor"
    assert "Traceback" not in proc.stderr


# --------------------------------------------------------------------------- HTTP


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(params=["http", "sse"])
def http_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """The fake server on a free port with the streamable HTTP or the SSE transport, every
    request needing `Authorization: Bearer s3cret`; yields (type, url)."""
    kind = str(request.param)
    port = _free_port()
    log = (tmp_path / "http-server.log").open("w")
    proc = subprocess.Popen([PYTHON, str(SERVER), f"--{kind}", str(port), "--token", "s3cret"],
                            stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    try:
        assert wait_until(lambda: _listening(port) or proc.poll() is not None, 30)
        assert proc.poll() is None, (tmp_path / "http-server.log").read_text()
        yield kind, f"http://127.0.0.1:{port}/{'mcp' if kind == 'http' else 'sse'}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_remote_server_with_headers(tmp_path: Path, http_server: tuple[str, str]) -> None:
    kind, url = http_server

    def run_with(headers: dict[str, Any], folder: str) -> Run:
        server = json.dumps({"type": kind, "url": url, "headers": headers})
        (tmp_path / folder).mkdir()
        return run_workflow(workflow(tmp_path / folder, """
            - name: call
              type: mcp
              server: tickets
              tool: add
              arguments: {a: "{{ workflow.input.a }}", b: 5}
        """, server=server))

    ok = run_with({"Authorization": "Bearer s3cret"}, "ok")
    assert ok.exit_code == 0, ok.error_text()
    assert ok.outputs["call"] == {"result": 7}
    refused = run_with({}, "refused")
    assert refused.exit_code == 3
    assert (f"MCP server 'tickets' did not answer (could not connect to {url}:"
            in refused.error_text())
    assert "); check its url and headers" in refused.error_text()
