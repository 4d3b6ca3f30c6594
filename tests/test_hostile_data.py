"""Hostile data through the real CLI (`python -m podium run`, PODIUM_HOME in tmp_path): JSON
10,000 levels deep, integers of 5,000 digits, stdout that is not text (invalid UTF-8, NUL
bytes), stdout past its limit, from scripts, input files, `-i` values, model answers and MCP
tools. Each fails with one clear error line and no traceback: a step's output fails its step
(exit 3; the run is `error`, its events end with step_failed and run_finished, and the store
holds nothing oversized), a command-line value is a usage error (exit 2).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from fakes.openai_server import FakeOpenAI, answer
from fakes.wire import Canned
from helpers_engine import cli_env, podium_argv, write
from podium.jsontext import MAX_DEPTH
from podium.language.model import DEFAULT_SCRIPT_OUTPUT_MB, ScriptStep

TIMEOUT = 60.0
DEEP = 10_000
DEEP_JSON = '{"a": ' + "[" * DEEP + "]" * DEEP + "}"
HUGE_INT = "9" * 5000
STORE_BUDGET = 512 * 1024  # bytes: the store and the event log of one small failed run


class Home:
    """A PODIUM_HOME in tmp_path and the CLI as a method."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"

    def write(self, name: str, text: str) -> Path:
        return write(self.root, text, name)

    def __call__(self, *args: str | Path, env: dict[str, str] | None = None,
                 ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(podium_argv(*args), cwd=self.root, env=cli_env(self.home, env),
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              encoding="utf-8", errors="replace", timeout=TIMEOUT, check=False)

    def script_workflow(self, code: str, extra: str = "") -> Path:
        """One script step running `python script.py` (CODE), then $end."""
        self.write("script.py", textwrap.dedent(code))
        keys = textwrap.indent(textwrap.dedent(extra).strip(), " " * 16)
        return self.write("wf.yaml", f"""
            workflow: {{name: hostile, entry_point: s}}
            agents:
              - name: s
                type: script
                command: {json.dumps(sys.executable)}
                args: [script.py]
{keys}
                routes: [{{to: $end}}]
            """)

    def only_run(self) -> dict[str, Any]:
        proc = self("runs", "--format", "json")
        assert proc.returncode == 0, proc.stderr
        (row,) = json.loads(proc.stdout)
        assert isinstance(row, dict)
        return row

    def events(self, run_id: str) -> list[dict[str, Any]]:
        proc = self("events", run_id)
        assert proc.returncode == 0, proc.stderr
        return [json.loads(line) for line in proc.stdout.splitlines()]

    def stored_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.home.rglob("*") if p.is_file())


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return Home(tmp_path)


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    """The one line that says what went wrong: a usage error is all of stderr; a failed run
    prints its progress, then one `error:` line."""
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    if proc.returncode != 2:
        lines = [line for line in lines if line.startswith("error:")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def failed_step(home: Home, proc: subprocess.CompletedProcess[str], *,
                error_type: str = "StepError") -> dict[str, Any]:
    """The run failed cleanly at step s: exit 3, one error line, status error, events ending
    with step_failed + run_finished, nothing oversized stored. Returns the step_failed event."""
    assert proc.returncode == 3, proc.stderr
    one_error_line(proc)
    row = home.only_run()
    assert row["status"] == "error"
    events = home.events(row["id"])
    assert [e["type"] for e in events[-2:]] == ["step_failed", "run_finished"]
    failed, finished = events[-2:]
    assert failed["step"] == "s"
    assert failed["error_type"] == error_type
    assert finished["status"] == "error"
    assert not [e for e in events if e["type"] == "step_finished"]
    assert home.stored_bytes() < STORE_BUDGET
    assert all(len(json.dumps(e)) < 64 * 1024 for e in events)
    return failed


# --------------------------------------------------------------------------- script stdout


@pytest.mark.parametrize("schema", [None, "output: {a: {type: array}}"], ids=["lenient",
                                                                           "schema"])
def test_deep_json_on_stdout_fails_the_step(home: Home, schema: str | None) -> None:
    wf = home.script_workflow(f"""
        import sys
        sys.stdout.write({DEEP_JSON!r})
    """, extra=schema or "")
    proc = home("run", wf)
    failed = failed_step(home, proc, error_type="OutputContractError" if schema
                         else "StepError")
    assert f"stdout JSON of script 's' is nested deeper than {MAX_DEPTH} levels" in \
        failed["message"]
    assert "nested deeper than" in one_error_line(proc)


def test_huge_integer_in_stdout_json_fails_the_step(home: Home) -> None:
    wf = home.script_workflow(f"""
        print('{{"n": {HUGE_INT}}}')
    """)
    proc = home("run", wf)
    failed = failed_step(home, proc)
    assert "holds an integer of 5,000 digits (podium reads at most 4,300)" in failed["message"]


def test_lone_surrogate_in_stdout_json_fails_the_step(home: Home) -> None:
    wf = home.script_workflow(r"""
        print('{"a": "x\\ud800"}')
    """)
    failed = failed_step(home, home("run", wf))
    assert "lone UTF-16 surrogate (\\ud800)" in failed["message"]


def test_invalid_utf8_on_stdout_fails_the_step(home: Home) -> None:
    wf = home.script_workflow(r"""
        import sys
        sys.stdout.buffer.write(b'{"ok": true}\xff\xfe')
    """)
    proc = home("run", wf)
    failed = failed_step(home, proc)
    assert "stdout of script 's' is not UTF-8 text (byte 0xff at offset 12)" in \
        failed["message"]
    assert "write binary data to a file" in failed["message"]
    (out,) = [e for e in home.events(home.only_run()["id"]) if e["type"] == "script_output"]
    assert out["stdout"] == '{"ok": true}\ufffd\ufffd'


def test_nul_byte_on_stdout_fails_the_step(home: Home) -> None:
    wf = home.script_workflow(r"""
        import sys
        sys.stdout.buffer.write(b"text" + b"\x00" + b"more")
    """)
    failed = failed_step(home, home("run", wf))
    assert "stdout of script 's' holds a NUL byte at offset 4" in failed["message"]
    assert "outputs are text" in failed["message"]


def test_stdout_past_its_limit_stops_the_script_and_fails_the_step(home: Home) -> None:
    # endless output: the script is stopped at the limit, not read to its end
    wf = home.script_workflow("""
        import sys
        chunk = b"y" * 65536
        while True:
            sys.stdout.buffer.write(chunk)
    """, extra="max_output_mb: 1")
    proc = home("run", wf)
    failed = failed_step(home, proc)
    assert "stdout of script 's' passed its limit of 1 MB" in failed["message"]
    assert "max_output_mb" in failed["message"]
    assert "passed its limit of 1 MB" in one_error_line(proc)
    (out,) = [e for e in home.events(home.only_run()["id"]) if e["type"] == "script_output"]
    assert out["stdout_truncated"] is True
    assert out["stdout"].startswith("y" * 1024 + "\n[... podium cut ")
    assert len(out["stdout"]) < 4096  # an excerpt: the first and the last KB


def test_raised_limit_lets_the_output_through(home: Home) -> None:
    wf = home.script_workflow("""
        import sys
        sys.stdout.write("z" * (1536 * 1024))
    """, extra="max_output_mb: 2")
    proc = home("run", wf, "--json")
    assert proc.returncode == 0, proc.stderr


def test_deep_text_read_again_by_templates_stays_text(home: Home) -> None:
    # stdout that is not a JSON object is text; a set step and the workflow's output read it
    # again as data, and keep it as text rather than recurse 10,000 levels
    home.write("script.py", 'import sys\nsys.stdout.write("[" * 10000 + "]" * 10000)\n')
    wf = home.write("wf.yaml", f"""
        workflow: {{name: hostile, entry_point: s}}
        agents:
          - name: s
            type: script
            command: {json.dumps(sys.executable)}
            args: [script.py]
            routes: [{{to: t}}]
          - {{name: t, type: set, value: "{{{{ s.output.stdout }}}}"}}
        output:
          text: "{{{{ t.output }}}}"
        """)
    proc = home("run", wf, "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["output"]["text"] == "[" * DEEP + "]" * DEEP


def test_the_default_limit_is_64_mb(home: Home) -> None:
    assert DEFAULT_SCRIPT_OUTPUT_MB == 64
    assert ScriptStep.model_fields["max_output_mb"].default == 64
    step = ScriptStep.model_validate({"type": "script", "name": "s", "command": "true"})
    assert step.max_output_mb == 64


def test_validate_checks_the_limit_key(home: Home) -> None:
    wf = home.write("wf.yaml", """
        workflow: {name: v, entry_point: a}
        agents:
          - {name: a, type: script, command: "true", max_output_mb: 0, routes: [{to: b}]}
          - {name: b, type: script, command: "true", max_output_mb: 5000, routes: [{to: c}]}
          - {name: c, type: script, command: "true", max_output_mb: lots, routes: [{to: d}]}
          - {name: d, type: script, command: "true", max_output_mb: true, routes: [{to: e}]}
          - {name: e, type: set, value: 1, max_output_mb: 2}
        """)
    proc = home("validate", wf)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = (proc.stdout + proc.stderr).splitlines()
    assert lines[:5] == [
        "wf.yaml:3:61: agents[0].max_output_mb: must be greater than or equal to 1 (got 0)",
        "wf.yaml:4:61: agents[1].max_output_mb: must be less than or equal to 1024 (got 5000)",
        "wf.yaml:5:61: agents[2].max_output_mb: must be an integer (got a string)",
        "wf.yaml:6:61: agents[3].max_output_mb: must be a whole number of megabytes, not a "
        "boolean",
        "wf.yaml:7:36: agents[4].max_output_mb: 'set' steps cannot have 'max_output_mb'"]
    ok = home.write("ok.yaml", """
        workflow: {name: v, entry_point: a}
        agents:
          - {name: a, type: script, command: "true", max_output_mb: 1024}
        """)
    assert home("validate", ok).returncode == 0


# --------------------------------------------------------------------------- command line


INPUTS_WORKFLOW = """
    workflow:
      name: inputs
      entry_point: s
      input:
        n: {type: number, required: false}
        o: {type: object, required: false}
    agents:
      - {name: s, type: set, value: ok}
    """


@pytest.mark.parametrize(("name", "content", "message"), [
    ("big.json", '{"n": ' + HUGE_INT + "}",
     "big.json:1:7: n: an integer of 5,000 digits is longer than podium reads"),
    ("big.yaml", "n: " + HUGE_INT + "\n",
     "big.yaml:1:4: n: an integer of 5,000 digits is longer than podium reads"),
    ("deep.json", '{"o": ' + "[" * DEEP + "]" * DEEP + "}",
     "deep.json:1:206: o: nesting is deeper than 200 levels"),
    ("deeper.json", '{"o": ' + "[" * 150 + "]" * 150 + "}",
     f"deeper.json: the inputs are data that is nested deeper than {MAX_DEPTH} levels"),
], ids=["int-json", "int-yaml", "deep", "deeper-than-data"])
def test_hostile_input_file_is_a_usage_error(home: Home, name: str, content: str,
                                             message: str) -> None:
    wf = home.write("wf.yaml", INPUTS_WORKFLOW)
    (home.root / name).write_text(content, encoding="utf-8")
    proc = home("run", wf, "--input-file", name)
    assert proc.returncode == 2, proc.stderr
    line = one_error_line(proc)
    assert message in line
    assert len(line) < 300
    assert not home.home.joinpath("podium.db").exists() or \
        json.loads(home("runs", "--format", "json").stdout) == []


@pytest.mark.parametrize(("pair", "message"), [
    ("n=" + HUGE_INT, "--input n: the value holds an integer of 5,000 digits"),
    ("o=" + DEEP_JSON, f"--input o: the value is JSON that is nested deeper than {MAX_DEPTH}"),
], ids=["int", "deep"])
def test_hostile_input_value_is_a_usage_error(home: Home, pair: str, message: str) -> None:
    wf = home.write("wf.yaml", INPUTS_WORKFLOW)
    proc = home("run", wf, "-i", pair)
    assert proc.returncode == 2, proc.stderr
    line = one_error_line(proc)
    assert message in line
    assert len(line) < 300


# --------------------------------------------------------------------------- model answers


AGENT_WORKFLOW = """
    workflow:
      name: agent
      entry_point: s
      runtime: {{provider: {provider}, default_model: gpt-5-mini}}
    agents:
      - name: s
        type: agent
        prompt: answer
        output: {{a: {{type: array}}}}
        retry: {{max_parse_recovery_attempts: 0}}
        routes: [{{to: $end}}]
    """


def test_deep_json_from_a_scripted_model_fails_the_step(home: Home) -> None:
    wf = home.write("wf.yaml", AGENT_WORKFLOW.format(provider="copilot"))
    responses = home.write("responses.yaml", "agents:\n  s:\n    - text: "
                           + json.dumps(DEEP_JSON) + "\n")
    proc = home("run", wf, "--responses", responses)
    failed = failed_step(home, proc, error_type="OutputContractError")
    assert f"the answer's JSON is nested deeper than {MAX_DEPTH} levels" in failed["message"]


def test_deep_json_from_a_model_endpoint_fails_the_step(home: Home) -> None:
    with FakeOpenAI() as srv:
        srv.script(answer(DEEP_JSON))
        wf = home.write("wf.yaml", AGENT_WORKFLOW.format(provider="openai"))
        proc = home("run", wf, env={"OPENAI_BASE_URL": srv.url + "/v1",
                                    "OPENAI_API_KEY": "sk-dummy"})
    failed = failed_step(home, proc, error_type="OutputContractError")
    assert f"the answer's JSON is nested deeper than {MAX_DEPTH} levels" in failed["message"]


@pytest.mark.parametrize(("extra", "message"), [
    ("[" * DEEP + "]" * DEEP, "the API's answer is JSON nested too deeply to read"),
    (HUGE_INT, "the API's answer holds an integer too long to read"),
], ids=["deep", "int"])
def test_hostile_http_body_from_a_model_endpoint_fails_the_step(home: Home, extra: str,
                                                                message: str) -> None:
    body = json.dumps(answer('{"a": []}'))[:-1] + ', "extra": ' + extra + "}"
    with FakeOpenAI() as srv:
        srv.script(Canned(raw=body.encode()))
        wf = home.write("wf.yaml", AGENT_WORKFLOW.format(provider="openai"))
        proc = home("run", wf, env={"OPENAI_BASE_URL": srv.url + "/v1",
                                    "OPENAI_API_KEY": "sk-dummy"})
    failed = failed_step(home, proc, error_type="ProviderError")
    assert message in failed["message"]


# --------------------------------------------------------------------------- MCP tools


def test_deep_json_from_an_mcp_tool_fails_the_step(home: Home) -> None:
    server = home.write("server.py", """
        from mcp.server.mcpserver import MCPServer

        app = MCPServer("hostile", log_level="WARNING")


        @app.tool(structured_output=False)
        def deep() -> str:
            \"\"\"JSON text nested 10,000 levels deep.\"\"\"
            return '{"a": ' + "[" * 10000 + "]" * 10000 + "}"


        if __name__ == "__main__":
            app.run()
        """)
    wf = home.write("wf.yaml", f"""
        workflow:
          name: mcp
          entry_point: s
          runtime:
            mcp_servers:
              tools: {{command: {json.dumps(sys.executable)}, args: [{json.dumps(str(server))}]}}
        agents:
          - {{name: s, type: mcp, server: tools, tool: deep}}
        """)
    failed = failed_step(home, home("run", wf))
    assert f"MCP tool 'deep' of server 'tools' returned JSON that is nested deeper than " \
        f"{MAX_DEPTH} levels" in failed["message"]


@pytest.mark.parametrize("error", [RecursionError, MemoryError])
def test_a_step_that_runs_out_of_depth_or_memory_fails_cleanly(tmp_path: Path,
                                                               error: type) -> None:
    """The engine's last line of defence: whatever data no bound caught fails its step."""
    from helpers_engine import load
    from podium.engine.run import Engine
    from podium.events.sinks.jsonl import MemorySink
    from podium.gates.base import ChainAnswerer
    from podium.providers.base import ProviderRegistry

    path = write(tmp_path, """
        workflow: {name: deep, entry_point: a}
        agents:
          - {name: a, type: set, value: 1}
        """)
    engine = Engine(load(path), path, inputs={}, providers=ProviderRegistry(),
                    answerer=ChainAnswerer([]))

    def explode(call: object) -> object:
        raise error()

    engine.executors["set"] = explode  # type: ignore[assignment]
    sink = MemorySink()
    engine.bus.add(sink)
    result = engine.run()
    assert (result.status, result.exit_code) == ("error", 3)
    assert [e.type for e in sink.events][-2:] == ["step_failed", "run_finished"]
    assert "beyond what podium can handle" in str(result.error)
