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
from typing import Any
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
print(json.dumps({"raw": t, "url": urllib.parse.quote(t), "key": os.environ["OPENAI_API_KEY"],
                  "inner": json.dumps({"t": t, "key": os.environ["OPENAI_API_KEY"]})},
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
        for form, needle in {**_forms(value), **_every_form(value)}.items():
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


# ------------------------------------------------------------- every encoding, on real processes

HARD = "q\"uo\\te'-ü-🔑-7731&<b>"  # what JSON, HTML and the shell all escape
FORMS_SCRIPT = r"""
import base64, html, json, os, shlex, sys, urllib.parse
import markupsafe
t = os.environ["MY_TOKEN"]
b = t.encode()
out = {
    "raw": t,
    "inner": json.dumps({"token": t}),  # JSON text in a string: escaped twice in the event
    "inner2": json.dumps(json.dumps({"token": t}, ensure_ascii=False)),
    "html": html.escape(t), "markup": str(markupsafe.escape(t)),
    "shell": shlex.quote(t), "bash": "'" + t.replace("'", "'\\''") + "'",
    "url": urllib.parse.quote(t, safe=""), "url+": urllib.parse.quote_plus(t),
    "basic": "Basic " + base64.b64encode(b"user:" + b).decode(),
    "b64": [base64.b64encode(p + b).decode() for p in (b"", b"x", b"xy")],
    "b64url": base64.urlsafe_b64encode(b"x" + b).decode(),
}
print(json.dumps(out, ensure_ascii=bool(sys.argv[1:])))
print("stderr:", json.dumps(out, ensure_ascii=False), file=sys.stderr)
"""

FORMS = """
workflow:
  name: forms
  entry_point: shout
  secrets: [MY_TOKEN]
agents:
  - name: shout
    type: script
    command: python
    args: ["{{ workflow.dir }}/forms.py", "ascii"]
    routes: [{to: again}]
  - name: again
    type: script
    command: python
    args: ["{{ workflow.dir }}/forms.py"]
    routes: [{to: render}]
  - name: render
    type: set
    value:
      html: "{{ shout.output.raw | e }}"
      quoted: "{{ shout.output.raw | quote }}"
      json: "{{ shout.output | tojson }}"
      nested: "{{ {'again': shout.output.inner} | tojson }}"
output:
  render: "{{ render.output | tojson }}"
"""


def _every_form(value: str) -> dict[str, bytes]:
    """Each form of `value` (the test's own list) as bytes, once and twice JSON-escaped."""
    import html as html_mod
    import shlex

    import markupsafe

    raw = value.encode()
    base = {
        "raw": value, "html": html_mod.escape(value), "markupsafe": str(markupsafe.escape(value)),
        "shlex": shlex.quote(value), "bash": "'" + value.replace("'", "'\\''") + "'",
        "url": quote(value, safe=""), "url+": quote_plus(value),
    }
    forms: dict[str, bytes] = {}
    for name, text in base.items():
        for ascii_ in (True, False):
            once = json.dumps(text, ensure_ascii=ascii_)[1:-1]
            twice = json.dumps(once, ensure_ascii=ascii_)[1:-1]
            forms[name] = text.encode()
            forms[f"{name} json{'' if ascii_ else ' unicode'}"] = once.encode()
            forms[f"{name} json twice{'' if ascii_ else ' unicode'}"] = twice.encode()
    for offset in range(3):  # the characters the secret's bytes alone decide
        encoded = base64.b64encode(b"\0" * offset + raw + b"\0\0")
        first, last = -(-8 * offset // 6), (8 * (offset + len(raw)) - 6) // 6
        chunk = encoded[first:last + 1]
        forms[f"base64 offset {offset}"] = chunk
        forms[f"base64-url offset {offset}"] = chunk.replace(b"+", b"-").replace(b"/", b"_")
    return forms


def _store_bytes(home: Path) -> dict[str, bytes]:
    return {str(p.relative_to(home)): p.read_bytes() for p in sorted(home.rglob("*"))
            if p.is_file()}


def _found(value: str, places: dict[str, bytes]) -> dict[str, list[str]]:
    forms = _every_form(value)
    return {where: hits for where, data in places.items()
            if (hits := [name for name, needle in forms.items() if needle in data])}


def _hold_wal(home: Path) -> Any:
    """A reader of the store, so that its write-ahead log stays on disk to be searched."""
    import sqlite3

    (db,) = list(home.rglob("*.db"))
    conn = sqlite3.connect(db)
    conn.execute("select count(*) from sqlite_master").fetchall()
    return conn


@pytest.mark.timeout(180)
def test_no_form_of_a_secret_reaches_the_store_show_or_events(tmp_path: Path) -> None:
    """Finding: a secret with characters JSON escapes, inside an event whose body holds JSON
    text as a string (escaped twice), and its HTML, shell-quoted and base64 forms (an HTTP
    Basic header's `user:KEY`) were stored and shown as they were."""
    home = tmp_path / "home"
    write(tmp_path, FORMS_SCRIPT, "forms.py")
    flow = write(tmp_path, FORMS, "forms.yaml")
    env = cli_env(home, {"MY_TOKEN": HARD})
    first = _cli(tmp_path, env, "run", write(tmp_path, """
        workflow: {name: first, entry_point: a}
        agents: [{name: a, type: set, value: x}]
        """, "first.yaml"))
    assert first.returncode == 0, first.stderr
    conn = _hold_wal(home)
    try:
        ran = _cli(tmp_path, env, "run", flow, "--json")
        assert ran.returncode == 0, ran.stderr
        run_id = json.loads(ran.stdout)["run_id"]
        places = _store_bytes(home)
        assert any(name.endswith("-wal") for name in places)  # the log is searched too
    finally:
        conn.close()
    places.update({f"{k} (after close)": v for k, v in _store_bytes(home).items()})
    for args in (("show", run_id), ("show", run_id, "--format", "json"), ("events", run_id)):
        shown = _cli(tmp_path, env, *args)
        assert shown.returncode == 0, shown.stderr
        places[" ".join(args)] = shown.stdout.encode()
    places["run stdout"] = ran.stdout.encode()
    places["run stderr"] = ran.stderr.encode()
    assert _found(HARD, places) == {}
    assert b"<secret:MY_TOKEN>" in places["events " + run_id]
    events = [json.loads(line) for line in
              (home / "runs" / run_id / "events.jsonl").read_text("utf-8").splitlines()]
    outputs = [e["output"] for e in events if e["type"] == "step_finished"]
    # the JSON text in a string is still JSON, holding the token
    assert json.loads(outputs[0]["inner"]) == {"token": "<secret:MY_TOKEN>"}
    assert outputs[2]["quoted"] == "'<secret:MY_TOKEN>'"


NUMERIC = """
workflow:
  name: numeric
  entry_point: count
  secrets: [MY_NUM]
agents:
  - name: count
    type: script
    command: python
    args: ["-c", "import json, os; n = os.environ['MY_NUM']; print(json.dumps({'n': int(n), 's': n}))"]
    routes: [{to: approve}]
  - name: approve
    type: human_gate
    prompt: "Go on with {{ count.output.n }}?"
    options: [{label: Go, value: go, route: use}]
  - {name: use, type: set, value: "{{ count.output.n + 1 }}"}
output: {next: "{{ use.output }}"}
"""


def test_a_numeric_secret_neither_breaks_the_run_nor_its_resume(tmp_path: Path) -> None:
    """Finding: a numeric secret made the run and its resume die with a JSONDecodeError
    traceback (the secret was replaced in the event's JSON text, where it was a number)."""
    home = tmp_path / "home"
    flow = write(tmp_path, NUMERIC)
    env = cli_env(home, {"MY_NUM": "73915468"})
    parked = _cli(tmp_path, env, "run", flow, "--json")
    assert parked.returncode == 5, parked.stderr
    assert "Traceback" not in parked.stderr
    run_id = json.loads(parked.stdout)["run_id"]
    done = _cli(tmp_path, env, "gate", "answer", run_id, "go", "--json")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert json.loads(done.stdout)["output"] == {"next": 73915469}  # the real number ran
    places = _store_bytes(home)
    places["events"] = _cli(tmp_path, env, "events", run_id).stdout.encode()
    assert [w for w, data in places.items() if b"73915468" in data] == []
    assert b"<secret:MY_NUM>" in places["events"]


def test_a_declared_secret_too_short_to_redact_is_refused(tmp_path: Path) -> None:
    """Finding: a 3-character secret was stored raw (secrets under 6 characters were not
    redacted, and nothing said so). Now the run refuses to start, naming the variable."""
    home = tmp_path / "home"
    flow = write(tmp_path, """
        workflow: {name: short, entry_point: a, secrets: [MY_PIN]}
        agents:
          - {name: a, type: script, command: python, args: ["-c", "print('pin zq7')"]}
        """)
    refused = _cli(tmp_path, cli_env(home, {"MY_PIN": "zq7"}), "run", flow)
    assert refused.returncode == 2, refused.stderr
    assert "Traceback" not in refused.stderr
    assert "MY_PIN is 3 characters long" in refused.stderr
    assert "zq7" not in refused.stderr + refused.stdout
    stored = b"".join(_store_bytes(home).values()) if home.exists() else b""
    assert b"zq7" not in stored


def test_a_sub_workflow_declaring_a_short_secret_fails_its_step(tmp_path: Path) -> None:
    """The refusal reaches a sub-workflow's own `secrets:` too: its step fails with the same
    message (the parent run ends in error, exit 3), not a run left behind as interrupted."""
    home = tmp_path / "home"
    write(tmp_path, """
        workflow: {name: child, entry_point: a, secrets: [MY_PIN]}
        agents: [{name: a, type: set, value: x}]
        """, "child.yaml")
    flow = write(tmp_path, """
        workflow: {name: parent, entry_point: c}
        agents: [{name: c, type: workflow, workflow: child.yaml}]
        """)
    env = cli_env(home, {"MY_PIN": "zq"})
    failed = _cli(tmp_path, env, "run", flow, "--json")
    assert failed.returncode == 3, failed.stderr
    assert "child.yaml: workflow.secrets: MY_PIN is 2 characters long" in failed.stderr
    assert json.loads(failed.stdout)["status"] == "error"
