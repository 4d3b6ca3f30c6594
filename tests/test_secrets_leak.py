"""No secret reaches anything podium records or serves.

A workflow puts a non-ASCII declared secret (`workflow.secrets`) and a provider API key through
every place a value can travel: a run input given on the command line, a script's stdout and
stderr (as is, JSON-escaped, URL-encoded), an agent's prompt, the model's reply, a tool call's
arguments and its result, a sub-workflow (which declares no secret of its own), a parked
gate's prompt, a resume that needs the input again, and a failed step's error. Then every byte
of the run store's folder (the database with its free pages, the write-ahead log kept alive by
a running console, the JSONL logs) and every console and CLI answer about those runs are
searched for every form of both values.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from fakes.openai_server import FakeOpenAI, answer, call
from helpers_engine import cli_env, podium_argv, write

SECRET = "pässwörd-ключ-🔑-4242"
API_KEY = "sk-test-leak-0123456789"
TIMEOUT = 60.0

CHILD = """
workflow:
  name: child
  entry_point: echo
  input: {token: {type: string}}
agents:
  - {name: echo, type: set, value: "child has {{ workflow.input.token }}"}
output:
  echo: "{{ echo.output }}"
"""

LEAKY = """
workflow:
  name: leaky
  entry_point: shout
  secrets: [MY_TOKEN]
  runtime: {provider: openai, default_model: gpt-5-mini}
  input: {token: {type: string}}
agents:
  - name: shout
    type: script
    command: python
    args: ["{{ workflow.dir }}/shout.py"]
    routes: [{to: ask}]
  - name: ask
    prompt: "Use the token {{ workflow.input.token }}; the script said {{ shout.output.raw }}"
    tools: [run_command]
    output: {said: {type: string}}
    routes: [{to: child}]
  - name: child
    type: workflow
    workflow: child.yaml
    input_mapping: {token: "{{ workflow.input.token }}"}
    routes: [{to: approve}]
  - name: approve
    type: human_gate
    prompt: "Release with {{ workflow.input.token }}? The agent said: {{ ask.output.said }}"
    options:
      - {label: Release, value: release, route: done}
  - {name: done, type: terminate, status: success, reason: released}
output:
  said: "{{ ask.output.said }}"
  child: "{{ child.output.echo }}"
"""

SHOUT = """
import json, os, sys, urllib.parse
t = os.environ["MY_TOKEN"]
print(json.dumps({"raw": t, "url": urllib.parse.quote(t), "key": os.environ["OPENAI_API_KEY"]},
                 ensure_ascii=True))
print("stderr has", t, file=sys.stderr)
"""

FAILING = """
workflow:
  name: failing
  entry_point: broken
  secrets: [MY_TOKEN]
  input: {token: {type: string}}
agents:
  - name: broken
    type: script
    command: python
    args: ["-c", "import sys; print('not json: ' + sys.argv[1]); sys.exit(1)",
           "{{ workflow.input.token }}"]
    output: {ok: {type: boolean}}
"""


def _forms(value: str) -> dict[str, bytes]:
    raw = value.encode("utf-8")
    return {
        "utf-8": raw,
        "json ascii": json.dumps(value, ensure_ascii=True)[1:-1].encode(),
        "json ascii (lower hex)": json.dumps(value, ensure_ascii=True)[1:-1].lower().encode(),
        "url": quote(value, safe="").encode(),
        "url+": quote_plus(value).encode(),
        "base64": base64.b64encode(raw).rstrip(b"="),
        "utf-16-le": value.encode("utf-16-le"),
    }


def _leaks(data: bytes) -> list[str]:
    found = []
    for name, value in (("MY_TOKEN", SECRET), ("OPENAI_API_KEY", API_KEY)):
        for form, needle in _forms(value).items():
            if needle in data:
                found.append(f"{name} ({form})")
    return found


def _env(home: Path, server: FakeOpenAI) -> dict[str, str]:
    return cli_env(home, {"MY_TOKEN": SECRET, "OPENAI_API_KEY": API_KEY,
                          "OPENAI_BASE_URL": server.url + "/v1"})


def _cli(root: Path, env: dict[str, str], *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(podium_argv(*args), cwd=root, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, encoding="utf-8", timeout=TIMEOUT,
                          check=False)


class _Console:
    """`podium serve` on a free port: it holds the store open (so its write-ahead log stays on
    disk to be searched) and answers the API."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(podium_argv("serve", "--port", "0", "--no-open"), cwd=root,
                                     env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/#token=(\S+)", line)
        assert match, line
        self.port, self.token = int(match.group(1)), match.group(2)

    def get(self, path: str) -> bytes:
        import http.client

        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=20)
        try:
            conn.request("GET", path, headers={"Authorization": f"Bearer {self.token}",
                                               "Host": f"127.0.0.1:{self.port}"})
            res = conn.getresponse()
            body = res.read()
            assert res.status == 200, (path, res.status, body[:200])
            return body
        finally:
            conn.close()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()


def _sse_once(console: _Console, path: str) -> bytes:
    """What a live stream sends first (its backlog), read for a short while."""
    import socket

    with socket.create_connection(("127.0.0.1", console.port), timeout=5) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{console.port}\r\n"
                     f"Authorization: Bearer {console.token}\r\nAccept: text/event-stream"
                     f"\r\n\r\n".encode())
        data = b""
        deadline = time.monotonic() + 2.0
        sock.settimeout(0.5)
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            data += chunk
    return data


@pytest.mark.timeout(180)
def test_no_secret_reaches_the_store_the_logs_or_the_console(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write(tmp_path, CHILD, "child.yaml")
    write(tmp_path, SHOUT, "shout.py")
    leaky = write(tmp_path, LEAKY, "leaky.yaml")
    failing = write(tmp_path, FAILING, "failing.yaml")
    with FakeOpenAI() as server:
        server.script(
            answer(tool_calls=[call("run_command", {"command": f"echo tool saw {SECRET}"})]),
            answer(json.dumps({"said": f"the key is {SECRET} and {API_KEY}"}, ensure_ascii=True)))
        env = _env(home, server)
        console = _Console(tmp_path, env)
        try:
            parked = _cli(tmp_path, env, "run", leaky, "--input", f"token={SECRET}", "--json")
            assert parked.returncode == 5, parked.stderr
            run_id = json.loads(parked.stdout)["run_id"]
            gates = _cli(tmp_path, env, "gate", "list", "--format", "json")
            assert "<secret:MY_TOKEN>" in gates.stdout  # the prompt is there, redacted
            done = _cli(tmp_path, env, "gate", "answer", run_id, "release", "--json")
            assert done.returncode == 0, done.stderr
            # the resumed run had the real value again, from the environment
            assert json.loads(done.stdout)["output"]["child"] == "child has <secret:MY_TOKEN>"
            failed = _cli(tmp_path, env, "run", failing, "--input", f"token={SECRET}",
                          "--json")
            assert failed.returncode == 3, failed.stderr
            failed_id = json.loads(failed.stdout)["run_id"]
            tool_results = [m for r in server.chat_requests() for m in r.body["messages"]
                            if m.get("role") == "tool"]
            assert SECRET in tool_results[0]["content"]  # the tool really ran with it
            answers: dict[str, bytes] = {}
            for rid in (run_id, failed_id):
                answers[f"show {rid}"] = _cli(tmp_path, env, "show", rid).stdout.encode()
                answers[f"show {rid} json"] = _cli(tmp_path, env, "show", rid, "--format",
                                                   "json").stdout.encode()
                answers[f"events {rid}"] = _cli(tmp_path, env, "events", rid).stdout.encode()
                for path in (f"/api/runs/{rid}", f"/api/runs/{rid}/events",
                             f"/api/runs/{rid}/graph"):
                    answers[path] = console.get(path)
                answers[f"stream {rid}"] = _sse_once(console, f"/api/runs/{rid}/stream")
            answers["/api/runs"] = console.get("/api/runs")
            answers["runs"] = _cli(tmp_path, env, "runs", "--format", "json").stdout.encode()
            answers["gate list"] = gates.stdout.encode()
            stored = {str(p.relative_to(home)): p.read_bytes()
                      for p in sorted(home.rglob("*")) if p.is_file()}
            assert any(name.endswith("-wal") for name in stored)  # the log is searched too
        finally:
            console.stop()
    stored.update({f"{k} (after close)": p.read_bytes() for k, p in
                   ((str(p.relative_to(home)), p) for p in home.rglob("*") if p.is_file())})
    problems = {where: leaks for where, data in {**stored, **answers}.items()
                if (leaks := _leaks(data))}
    assert problems == {}
    everything = b"".join(stored.values()) + b"".join(answers.values())
    assert b"<secret:MY_TOKEN>" in everything
    assert b"<secret:OPENAI_API_KEY>" in everything


def test_commands_a_model_runs_see_no_key_and_cannot_read_podiums(tmp_path: Path) -> None:
    home = tmp_path / "home"
    flow = write(tmp_path, """
        workflow:
          name: peek
          entry_point: ask
          secrets: [MY_TOKEN]
          runtime: {provider: openai, default_model: gpt-5-mini}
        agents:
          - {name: ask, prompt: "look around", tools: [run_command],
             output: {done: {type: boolean}}}
        """)
    probe = ("python -c \"import os; print('ENV', sorted(k for k in os.environ "
             "if k in ('MY_TOKEN', 'OPENAI_API_KEY', 'PODIUM_RUN_ID')))\"")
    with FakeOpenAI() as server:
        server.script(answer(tool_calls=[call("run_command", {"command": probe})]),
                      answer('{"done": true}'))
        env = _env(home, server)
        proc = _cli(tmp_path, env, "run", flow)
        assert proc.returncode == 0, proc.stderr
        (result,) = [m["content"] for r in server.chat_requests() for m in r.body["messages"]
                     if m.get("role") == "tool"]
    assert "ENV ['PODIUM_RUN_ID']" in result, result  # neither the key nor the secret


PEEK = """
import json, os
data = open(f"/proc/{os.getppid()}/environ", "rb").read()
print(json.dumps({"has_key": b"0123456789" in data, "has_token": "ключ".encode() in data,
                  "names": b"OPENAI_API_KEY=" in data and b"MY_TOKEN=" in data,
                  "mine": "ключ" in os.environ.get("MY_TOKEN", "")}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
def test_podiums_own_environment_file_shows_no_secret(tmp_path: Path) -> None:
    """/proc/<podium pid>/environ, read by a script (podium's child) while the run is in
    flight."""
    home = tmp_path / "home"
    write(tmp_path, PEEK, "peek.py")
    flow = write(tmp_path, """
        workflow: {name: peek, entry_point: look, secrets: [MY_TOKEN]}
        agents:
          - {name: look, type: script, command: python, args: ["{{ workflow.dir }}/peek.py"]}
        """)
    env = cli_env(home, {"MY_TOKEN": SECRET, "OPENAI_API_KEY": API_KEY})
    proc = _cli(tmp_path, env, "run", flow, "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    shown = json.loads(_cli(tmp_path, env, "show", out["run_id"], "--format", "json").stdout)
    seen = shown["steps"][0]["output"]
    assert seen["names"] is True  # the variables are there, their values are not
    assert (seen["has_key"], seen["has_token"]) == (False, False)
    assert seen["mine"] is True  # a workflow's own script still gets its secrets


def test_a_run_given_a_secret_input_resumes_only_with_the_secret_set(tmp_path: Path) -> None:
    home = tmp_path / "home"
    flow = write(tmp_path, """
        workflow:
          name: wait
          entry_point: keep
          secrets: [MY_TOKEN]
          input: {token: {type: string}}
        agents:
          - {name: keep, type: set, value: "{{ workflow.input.token }}!", routes: [{to: approve}]}
          - name: approve
            type: human_gate
            prompt: "Go?"
            options: [{label: Go, value: go, route: use}]
          - name: use
            type: set
            value: "{{ workflow.input.token | length }} {{ keep.output | length }}"
        output: {lengths: "{{ use.output }}"}
        """)
    with_secret = cli_env(home, {"MY_TOKEN": SECRET})
    parked = _cli(tmp_path, with_secret, "run", flow, "-i", f"token={SECRET}", "--json")
    assert parked.returncode == 5, parked.stderr
    run_id = json.loads(parked.stdout)["run_id"]
    without = _cli(tmp_path, cli_env(home), "gate", "answer", run_id, "go")
    assert without.returncode == 2, without.stderr
    assert "set MY_TOKEN in the environment" in without.stderr
    assert SECRET not in without.stderr
    done = _cli(tmp_path, with_secret, "resume", run_id, "--json")
    assert done.returncode == 0, done.stderr
    # the input and the stored output of `keep` are the real values again after the resume
    assert json.loads(done.stdout)["output"] == {"lengths": f"{len(SECRET)} {len(SECRET) + 1}"}


def test_a_run_whose_workflow_reads_a_secret_replays_identically(tmp_path: Path) -> None:
    """`${MY_TOKEN}` in the workflow file: the recording holds `<secret:MY_TOKEN>`, the replay
    renders the real value again and compares like with like; without the variable it says
    which one it needs. The secret is never printed."""
    home = tmp_path / "home"
    responses = write(tmp_path, '{"agents": {"ask": [{"output": {"ok": true}}]}}',
                      "answers.json")
    flow = write(tmp_path, """
        workflow:
          name: replayed
          entry_point: shout
          secrets: [MY_TOKEN]
          runtime: {provider: copilot, default_model: gpt-5-mini}
          input: {token: {type: string}}
        agents:
          - name: shout
            type: script
            command: python
            args: ["-c", "import sys; print(sys.argv[1] + ' / ' + sys.argv[2])", "${MY_TOKEN}",
                   "{{ workflow.input.token }}"]
            routes: [{to: ask}]
          - name: ask
            prompt: "Token ${MY_TOKEN}, input {{ workflow.input.token }}: {{ shout.output.stdout }}"
            output: {ok: {type: boolean}}
        output: {said: "{{ shout.output.stdout }}"}
        """)
    env = cli_env(home, {"MY_TOKEN": SECRET})
    ran = _cli(tmp_path, env, "run", flow, "-i", f"token={SECRET}", "--responses", responses,
               "--json")
    assert ran.returncode == 0, ran.stderr
    run_id = json.loads(ran.stdout)["run_id"]
    replayed = _cli(tmp_path, env, "replay", run_id)
    assert replayed.returncode == 0, replayed.stderr
    assert "identical trajectory" in replayed.stderr
    assert SECRET not in replayed.stdout + replayed.stderr
    assert "<secret:MY_TOKEN>" in replayed.stdout
    missing = _cli(tmp_path, cli_env(home), "replay", run_id)
    assert missing.returncode in (2, 3), missing.stderr
    assert "MY_TOKEN" in missing.stderr
    assert SECRET not in missing.stdout + missing.stderr
