"""Shared by the console tests: workflows that park, block or loop; a `podium serve` process;
a small HTTP client that can send any Host and Origin; an SSE reader."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers_engine import cli_env, podium_argv, wait_until

XSS_SCRIPT = "<script>window.__xss=1</script>"
XSS_IMG = '<img src=x onerror="window.__xss=2">'

GATE_FLOW = """
workflow:
  name: release-approval
  description: Draft notes, a person approves, publish.
  entry_point: draft
  limits: {max_iterations: 20}
agents:
  - name: draft
    type: agent
    model: gpt-4o-mini
    prompt: "Write the release notes for {{ workflow.input.version | default('v1.2') }}"
    routes: [{to: approval}]
  - name: approval
    type: human_gate
    prompt: |
      ## Release approval
      The draft says: {{ draft.output.result }}

      Approve **v1.2**? <script>window.__xss=1</script> <img src=x onerror="window.__xss=2">
    options:
      - {label: Approve, value: approved, route: publish}
      - {label: Request changes, value: changes, route: draft, prompt_for: feedback}
      - {label: Abort, value: aborted, route: aborted}
  - name: publish
    type: set
    value: "published"
    routes: [{to: released}]
  - name: released
    type: terminate
    status: success
    reason: "released"
  - name: aborted
    type: terminate
    status: failed
    reason: "aborted by a person"
"""

GATE_RESPONSES = """
agents:
  draft:
    every:
      text: 'Notes: <script>window.__xss=1</script><img src=x onerror="window.__xss=3"> fixed the parser'
      usage: {input_tokens: 1200, output_tokens: 340}
      model: gpt-4o-mini
"""

BLOCK_FLOW = """
workflow:
  name: blocker
  description: A script step waits for a file named go next to the workflow.
  entry_point: prepare
agents:
  - name: prepare
    type: set
    value: "ready"
    routes: [{to: hold}]
  - name: hold
    type: script
    command: python
    args: ["{{ workflow.dir }}/hold.py"]
    routes: [{to: finish}]
  - name: finish
    type: set
    value: "finished"
    routes: [{to: done}]
  - name: done
    type: terminate
    status: success
    reason: "all done"
"""

HOLD_PY = """
import json, pathlib, sys, time
here = pathlib.Path(__file__).parent
for _ in range(6000):  # bounded: 60 s
    if (here / "go").exists():
        print(json.dumps({"held": True}))
        sys.exit(0)
    time.sleep(0.01)
sys.exit(7)
"""

LOOP_FLOW = """
workflow:
  name: looper
  entry_point: count
  limits: {max_iterations: 3}
agents:
  - name: count
    type: set
    value: "{{ (count.output if count is defined else 0) + 1 }}"
    output_type: integer
    routes:
      - to: done
        when: "{{ count.output >= 5 }}"
      - to: count
  - name: done
    type: terminate
    status: success
    reason: "counted to {{ count.output }}"
"""


def write_flow(folder: Path, name: str, text: str, extra: dict[str, str] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    for fname, body in (extra or {}).items():
        (folder / fname).write_text(textwrap.dedent(body).lstrip("\n"), encoding="utf-8")
    return path


CLEAN_PROMPT = """      The draft says: {{ draft.output.result }}

      Publish **v1.2** to the stable channel? Reply *Request changes* to send it back with notes."""

CLEAN_ANSWER = "Notes: fixed the CSV parser (`--strict` now reports the line); added `--dry-run`."


def gate_flow(folder: Path, *, hostile: bool = True) -> tuple[Path, Path]:
    """The release-approval workflow and its scripted model answers; `hostile` puts script
    tags and image handlers in the model's answer and in the gate prompt."""
    flow_text, answers = GATE_FLOW, GATE_RESPONSES
    name = "release"
    if not hostile:
        name = "clean-release"
        start = flow_text.index("      The draft says")
        end = flow_text.index("    options:")
        flow_text = flow_text[:start] + CLEAN_PROMPT + "\n" + flow_text[end:]
        answers = answers.replace(answers[answers.index("text: ") + 6:answers.index("\n",
                                  answers.index("text: "))], json.dumps(CLEAN_ANSWER))
    flow = write_flow(folder, f"{name}.yaml", flow_text)
    responses = write_flow(folder, f"{name}.responses.yaml", answers)
    return flow, responses


def block_flow(folder: Path) -> Path:
    return write_flow(folder, "blocker.yaml", BLOCK_FLOW, {"hold.py": HOLD_PY})


def run_podium(home: Path, *args: str | Path, timeout: float = 60
               ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(podium_argv(*args), env=cli_env(home), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, encoding="utf-8", errors="replace",
                          timeout=timeout, check=False)


def start_podium(home: Path, *args: str | Path) -> subprocess.Popen[str]:
    return subprocess.Popen(podium_argv(*args), env=cli_env(home), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            encoding="utf-8", errors="replace", start_new_session=True)


def run_id_of(proc: subprocess.CompletedProcess[str]) -> str:
    for line in proc.stderr.splitlines():
        if line.startswith("podium: run "):
            return line.split()[2]
    raise AssertionError(f"no run id in:\n{proc.stderr}")


def _one_row(home: Path, sql: str, params: tuple[Any, ...] = ()) -> dict[str, Any]:
    """One row of the store, or {} while the store (or its schema) does not exist yet."""
    import sqlite3

    path = home / "podium.db"
    if not path.exists():
        return {}
    db = sqlite3.connect(str(path), timeout=10)
    try:
        cur = db.execute(sql, params)
        cols = [d[0] for d in cur.description]
        row = cur.fetchone()
        return dict(zip(cols, row, strict=True)) if row else {}
    except sqlite3.OperationalError:
        return {}
    finally:
        db.close()


def store_row(home: Path, run_id: str) -> dict[str, Any]:
    return _one_row(home, "SELECT * FROM runs WHERE id = ?", (run_id,))


def latest_run(home: Path) -> dict[str, Any]:
    return _one_row(home, "SELECT * FROM runs WHERE parent_run_id IS NULL "
                          "ORDER BY created_at DESC LIMIT 1")


def wait_status(home: Path, run_id: str, statuses: tuple[str, ...], timeout: float = 30) -> str:
    ok = wait_until(lambda: store_row(home, run_id).get("status") in statuses, timeout)
    status = str(store_row(home, run_id).get("status"))
    assert ok, f"run {run_id} is {status}, not {statuses}"
    return status


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ----------------------------------------------------------------------------- HTTP


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Client:
    port: int
    token: str = ""
    host: str = "127.0.0.1"

    def request(self, method: str, path: str, body: Any = None, *,
                headers: dict[str, str] | None = None, auth: bool = True,
                raw: bytes | None = None) -> Reply:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=20)
        try:
            hdrs = {"Host": f"127.0.0.1:{self.port}"}
            data = raw
            if body is not None:
                data = json.dumps(body).encode()
                hdrs["Content-Type"] = "application/json"
            if auth and self.token:
                hdrs["Authorization"] = f"Bearer {self.token}"
            hdrs.update(headers or {})
            conn.request(method, path, body=data, headers=hdrs)
            res = conn.getresponse()
            return Reply(res.status, {k.lower(): v for k, v in res.getheaders()}, res.read())
        finally:
            conn.close()

    def get(self, path: str, **kw: Any) -> Reply:
        return self.request("GET", path, **kw)

    def post(self, path: str, body: Any = None, **kw: Any) -> Reply:
        if "raw" in kw:
            return self.request("POST", path, None, **kw)
        return self.request("POST", path, {} if body is None else body, **kw)


@dataclass
class SSE:
    """A server-sent event stream read line by line (bounded by a socket timeout), opened
    with the console token in the Authorization header (as the page opens it)."""

    port: int
    path: str
    headers: dict[str, str] = field(default_factory=dict)
    token: str = ""
    conn: http.client.HTTPConnection | None = None
    res: http.client.HTTPResponse | None = None

    def __enter__(self) -> SSE:
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=20)
        auth = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        self.conn.request("GET", self.path, headers={"Host": f"127.0.0.1:{self.port}",
                                                     "Accept": "text/event-stream",
                                                     **auth, **self.headers})
        self.res = self.conn.getresponse()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.conn is not None
        self.conn.close()

    def next(self) -> tuple[str, str | None, str]:
        """The next message: (event type, id, data)."""
        assert self.res is not None
        kind, ident, data = "message", None, []
        deadline = time.monotonic() + 30
        while True:
            if time.monotonic() > deadline:
                raise AssertionError("no message on the stream for 30 s")
            line = self.res.readline().decode("utf-8")
            if not line:
                raise EOFError("the stream ended")
            line = line.rstrip("\n")
            if not line:
                if data:
                    return kind, ident, "\n".join(data)
                kind, ident, data = "message", None, []
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "event":
                kind = value
            elif name == "id":
                ident = value
            elif name == "data":
                data.append(value)

    def until(self, predicate: Any, limit: int = 10_000) -> list[tuple[str, str | None, str]]:
        seen = []
        for _ in range(limit):
            msg = self.next()
            seen.append(msg)
            if predicate(msg):
                return seen
        raise AssertionError("the stream never sent the expected message")


# ----------------------------------------------------------------------------- podium serve


@dataclass
class Serve:
    """`podium serve` as a subprocess, on a given (or free) port."""

    home: Path
    port: int = 0
    args: tuple[str, ...] = ()
    proc: subprocess.Popen[str] | None = None
    url: str = ""
    token: str = ""

    def start(self) -> Serve:
        self.proc = subprocess.Popen(
            podium_argv("serve", "--port", str(self.port), "--no-open", *self.args),
            env=cli_env(self.home), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, encoding="utf-8", errors="replace",
            start_new_session=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("podium console: "):
            self.stop()
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise AssertionError(f"podium serve did not start: {line!r} {err}")
        self.url = line.split(": ", 1)[1].strip()
        self.port = int(self.url.split(":")[2].split("/")[0])
        self.token = self.url.split("#token=", 1)[1]
        return self

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self) -> Client:
        return Client(self.port, self.token)

    def stop(self, sig: int = signal.SIGTERM) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        return self.proc.returncode


def stop_process(proc: subprocess.Popen[str]) -> None:
    """End a podium subprocess this test started (by its pid), and close its pipes."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def monotonic() -> float:
    return time.monotonic()
