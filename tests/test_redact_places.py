"""Secrets out of the places issue 28 (item 2) found them in, each on the real parts: spans,
guidance and gate answers in the store, the graph views, the reaper's environment, the MCP
server, `podium test`, spilled tool output, the fleet TUI's live data, and replay of a run
that read a secret (issue 27, item 4).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from helpers_engine import cli_env, podium_argv, write
from podium.events.model import DialogMessage, GuidanceAdded, ModelDelta
from test_telemetry import agent_events, feed, sink

# ----------------------------------------------------------------------------- spans


def _with_content() -> list[Any]:
    events = agent_events()
    extra = [ModelDelta(step="a", iteration=1, kind="text", text="streamed words"),
             DialogMessage(step="a", iteration=1, role="user", content="said by a person"),
             GuidanceAdded(text="guided words", step="a", iteration=1)]
    return [*events[:4], *extra, *events[4:]]


def _span_text(exporter: Any) -> str:
    return "".join(repr(dict(s.attributes or {})) + repr([(e.name, dict(e.attributes or {}))
                                                           for e in s.events])
                   for s in exporter.get_finished_spans())


def test_spans_carry_no_streamed_or_said_text_without_the_capture_variable() -> None:
    trace_sink, exporter = sink()
    feed(trace_sink, *_with_content())
    text = _span_text(exporter)
    for said in ("streamed words", "said by a person", "guided words"):
        assert said not in text
    assert "model_delta" not in text  # no span event for a piece at all
    assert "dialog_message" in text  # the turn itself is still seen


def test_spans_carry_the_text_with_the_capture_variable() -> None:
    trace_sink, exporter = sink(capture=True)
    feed(trace_sink, *_with_content())
    text = _span_text(exporter)
    for said in ("streamed words", "said by a person", "guided words"):
        assert said in text


# ----------------------------------------------------------------------------- the reaper

LOOK = r'''
import json, os, time
me, podium = os.getpid(), os.getppid()
found = None
for _ in range(500):  # the reaper starts once this command is registered
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        if b"podium-reaper" in argv and ppid == podium:
            with open(f"/proc/{pid}/environ", "rb") as f:
                found = f.read().decode("utf-8", "replace")
            break
    if found is not None:
        break
    time.sleep(0.02)
print(json.dumps({"found": found is not None,
                  "key": "OPENAI_API_KEY" in (found or ""),
                  "token": "MY_TOKEN" in (found or ""),
                  "value": os.environ["EXPECT"] in (found or "")}))
'''

REAPED = """
workflow:
  name: reaped
  entry_point: look
  secrets: [MY_TOKEN]
agents:
  - name: look
    type: script
    command: python
    args: [look.py]
output:
  seen: "{{ look.output.stdout }}"
"""


def test_the_reaper_keeps_no_key_or_secret_in_its_environment(tmp_path: Path) -> None:
    write(tmp_path, LOOK, "look.py")
    flow = write(tmp_path, REAPED, "flow.yaml")
    env = cli_env(tmp_path / "home", {"OPENAI_API_KEY": "sk-reaper-key-1234",
                                      "MY_TOKEN": "tok-reaper-5678",
                                      "EXPECT": "tok-reaper-5678"})
    done = subprocess.run(podium_argv("run", flow, "--json"), env=env, cwd=tmp_path,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)["output"]["seen"]
    seen = json.loads(seen) if isinstance(seen, str) else seen
    assert seen == {"found": True, "key": False, "token": False, "value": False}


# ----------------------------------------------------------------------------- replay

TOKEN = "tok-replay-SECRET-99"

SECRETIVE = """
workflow:
  name: secretive
  entry_point: show
  secrets: [MY_TOKEN]
agents:
  - name: show
    type: script
    command: python
    args: ["-c", "import os; print(os.environ['MY_TOKEN'])"]
    routes: [{to: ask}]
  - name: ask
    prompt: "repeat ${MY_TOKEN} and {{ show.output.stdout | trim }}"
    output:
      echo: {type: string}
    routes: [{to: measure}]
  - name: measure
    type: set
    value: "{{ (show.output.stdout | trim) ~ '${MY_TOKEN}' ~ ask.output.echo }}"
    routes: [{to: count}]
  - name: count
    type: set
    value: "{{ measure.output | length }}"
output:
  length: "{{ count.output }}"
"""


def test_replay_of_a_run_that_read_a_secret_is_identical(tmp_path: Path) -> None:
    home = tmp_path / "home"
    flow = write(tmp_path, SECRETIVE, "flow.yaml")
    answers = write(tmp_path, f"agents:\n  ask:\n    - output: {{echo: '{TOKEN}'}}\n",
                    "answers.yaml")
    env = cli_env(home, {"MY_TOKEN": TOKEN})

    def podium(*args: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(podium_argv(*args), env=env, cwd=tmp_path,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=120, check=False)

    ran = podium("run", flow, "--json", "--responses", answers)
    assert ran.returncode == 0, ran.stderr
    done = json.loads(ran.stdout)
    assert done["output"] == {"length": 3 * len(TOKEN)}
    replayed = podium("replay", done["run_id"], "--json")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    report = json.loads(replayed.stdout)
    assert report["identical"] is True, report
    assert report["output"] == {"length": 3 * len(TOKEN)}
    assert TOKEN not in replayed.stdout + replayed.stderr


# ----------------------------------------------------------------------------- guidance, gates

GUIDED = """
workflow:
  name: guided
  entry_point: ask
  secrets: [MY_TOKEN]
  runtime: {provider: openai, default_model: gpt-4o-mini}
agents:
  - name: ask
    type: human_gate
    prompt: Go on?
    options: [{label: Go, value: go, route: writer, prompt_for: note}]
  - name: writer
    prompt: "Write a line about {{ ask.output.additional_input.note }}."
    routes: [{to: $end}]
output: {line: "{{ writer.output.result }}"}
"""

GUIDE_TOKEN = "tok-guided-SECRET-31"


def _store_text(db: Path) -> str:
    import sqlite3

    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT options FROM runs").fetchall()
        rows += con.execute("SELECT additional_input FROM gates").fetchall()
        rows += con.execute("SELECT body FROM events").fetchall()
    finally:
        con.close()
    return "\n".join(str(r[0]) for r in rows)


def test_guidance_and_a_gates_text_are_stored_redacted_and_reach_the_model_whole(
        tmp_path: Path) -> None:
    from fakes.openai_server import FakeOpenAI, answer

    home = tmp_path / "home"
    flow = write(tmp_path, GUIDED, "flow.yaml")
    with FakeOpenAI() as srv:
        srv.script(answer('{"result": "done"}'), answer('{"result": "done"}'))
        env = cli_env(home, {"MY_TOKEN": GUIDE_TOKEN, "OPENAI_API_KEY": "sk-test-guided",
                             "OPENAI_BASE_URL": srv.url + "/v1"})

        def podium(*args: str | Path) -> subprocess.CompletedProcess[str]:
            return subprocess.run(podium_argv(*args), env=env, cwd=tmp_path,
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=120, check=False)

        parked = podium("run", flow, "--no-interactive", "--json")
        assert parked.returncode == 5, parked.stderr
        run_id = json.loads(parked.stdout)["run_id"]
        guided = podium("guide", run_id, "--text", f"the key is {GUIDE_TOKEN}")
        assert guided.returncode == 0, guided.stderr
        answered = podium("gate", "answer", run_id, "go", "--no-resume",
                          "--text", f"key {GUIDE_TOKEN}")
        assert answered.returncode == 0, answered.stderr
        stored = _store_text(home / "podium.db")
        assert "<secret:MY_TOKEN>" in stored
        assert GUIDE_TOKEN not in stored
        resumed = podium("resume", run_id, "--guidance", f"again {GUIDE_TOKEN}")
        assert resumed.returncode == 0, resumed.stderr
        sent = json.dumps(srv.chat_requests()[-1].body)
    # the model was given what the person wrote: the owner put the values back
    assert f"Write a line about key {GUIDE_TOKEN}." in sent
    assert f"the key is {GUIDE_TOKEN}" in sent
    assert f"again {GUIDE_TOKEN}" in sent
    assert GUIDE_TOKEN not in _store_text(home / "podium.db")


# ----------------------------------------------------------------------------- mcp serve

MCP_TOKEN = "tok-mcp-SECRET-2468"

TELLS = """
workflow:
  name: tell
  description: Tells the key.
  entry_point: say
  secrets: [MY_TOKEN]
agents:
  - {name: say, type: set, value: "the key is ${MY_TOKEN}"}
output:
  said: "{{ say.output }}"
"""


def test_mcp_serve_returns_a_runs_output_redacted(tmp_path: Path) -> None:
    import anyio
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    folder = tmp_path / "flows"
    write(folder, TELLS, "tell.yaml")
    argv = podium_argv("mcp", "serve", folder)
    params = StdioServerParameters(command=argv[0], args=argv[1:],
                                   env=cli_env(tmp_path / "home", {"MY_TOKEN": MCP_TOKEN}),
                                   cwd=str(tmp_path))
    got: list[str] = []

    async def main() -> None:
        with (tmp_path / "server.err").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                done = await client.call_tool("tell", {})
                got.append(json.dumps(done.structured_content))
                got.append(done.content[0].text)

    anyio.run(main)
    said = json.loads(got[0])
    assert said["status"] == "success"
    assert said["output"] == {"said": "the key is <secret:MY_TOKEN>"}
    assert MCP_TOKEN not in "".join(got)


# ----------------------------------------------------------------------------- podium test

def test_podium_test_prints_no_secret_in_a_failed_expectation(tmp_path: Path) -> None:
    write(tmp_path, TELLS, "tell.yaml")
    write(tmp_path, "workflow: tell.yaml\ntests:\n  - name: wrong\n"
                    "    expect: {output: {said: nothing}}\n", "tell.test.yaml")
    env = cli_env(tmp_path / "home", {"MY_TOKEN": MCP_TOKEN})
    shown = []
    for fmt in ("text", "json"):
        done = subprocess.run(podium_argv("test", "tell.test.yaml", "--format", fmt), env=env,
                              cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=120, check=False)
        assert done.returncode == 1, done.stdout + done.stderr
        shown.append(done.stdout + done.stderr)
    assert "<secret:MY_TOKEN>" in shown[0]
    assert MCP_TOKEN not in "".join(shown)


# ----------------------------------------------------------------------------- spilled output

SPILL_TOKEN = "tok-spill-SECRET-1357"


def test_a_spilled_tool_result_holds_no_secret(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from fakes.openai_server import FakeOpenAI, answer, call
    from helpers_providers import run_real_yaml

    spill = tmp_path / "spill"
    (tmp_path / "big.txt").write_text("line\n" * 400 + f"key={SPILL_TOKEN}\n" + "end\n" * 50,
                                      encoding="utf-8")
    monkeypatch.setenv("MY_TOKEN", SPILL_TOKEN)
    with FakeOpenAI() as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-spill")
        srv.script(answer(tool_calls=[call("read_file", {"path": "big.txt"})]),
                   answer('{"result": "read"}'))
        done = run_real_yaml(tmp_path, f"""
workflow:
  name: spills
  entry_point: a
  secrets: [MY_TOKEN]
  runtime:
    provider: openai
    default_model: gpt-4o-mini
    tool_output: {{max_chars: 1000, spill_dir: "{spill}"}}
agents:
  - name: a
    working_dir: "{tmp_path}"
    tools: [read_file]
    prompt: read big.txt
""")
    assert done.exit_code == 0, done.error_text()
    (path,) = spill.iterdir()
    text = path.read_text(encoding="utf-8")
    assert "key=<secret:MY_TOKEN>" in text
    assert SPILL_TOKEN not in text
