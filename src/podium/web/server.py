"""Starting the console: `podium serve` (in the foreground) and `podium run --web` (a thread of
the run's process that serves while the run goes on, and after it until Ctrl+C when a person
is at the terminal).

The listening socket is bound before uvicorn starts, so the URL (with the real port when
`--port 0` asked for a free one) is known and printed at once.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
import time
import webbrowser
from dataclasses import field
from pathlib import Path
from types import FrameType
from typing import Any

import uvicorn

from podium import exitcodes
from podium.records import record
from podium.web.api import Console
from podium.web.app import create_app
from podium.web.limits import BACKLOG, KEEP_ALIVE, limits, protocol
from podium.web.queries import Reader, store_source
from podium.web.security import GuardConfig, is_loopback, is_wildcard, load_or_create_token
from podium.web.sse import ChangeFeed


class _Server(uvicorn.Server):
    """uvicorn's server, which also ends the live streams when asked to stop (so shutdown
    does not wait for them) and treats Ctrl+C as a normal stop."""

    feed: ChangeFeed | None = None
    loop: Any = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.close_streams()
        super().handle_exit(sig, frame)
        captured = getattr(self, "_captured_signals", None)
        if isinstance(captured, list):
            captured.clear()

    def close_streams(self) -> None:
        if self.feed is not None and self.loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is already closed
                self.loop.call_soon_threadsafe(self.feed.close)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        import asyncio

        self.loop = asyncio.get_running_loop()
        await super().startup(sockets=sockets)


@record
class ConsoleServer:
    home: Path
    host: str = "127.0.0.1"
    port: int = 8765
    allow_remote: bool = False
    token: str = ""
    token_path: Path | None = None
    console: Console | None = None
    _sock: socket.socket | None = None
    _server: _Server | None = None
    _thread: threading.Thread | None = None
    _closers: list[Any] = field(default_factory=list)

    def prepare(self, store: Any = None) -> None:
        """Open the store (or use `store`, the open store of this process's run), read (or
        create) the token, bind the socket. Raises OSError or a PodiumError for the caller to
        report."""
        from podium.app.home import open_store

        if store is None:
            store = open_store(home=self.home)
            self._closers.append(store.close)
        path = store_source(store)
        reader = Reader(path)
        self._closers.append(reader.close)
        self.token, self.token_path = load_or_create_token(self.home)
        self._sock = _bind(self.host, self.port)
        self.port = int(self._sock.getsockname()[1])
        remote = not is_loopback(self.host)
        feed = ChangeFeed(path)
        self.console = Console(self.home, store, reader, feed, remote=remote)
        guard = GuardConfig(self.token, self.host, self.port, remote=remote)
        bounds = limits()
        config = uvicorn.Config(create_app(self.console, guard), log_level="warning",
                                access_log=False, lifespan="on", timeout_graceful_shutdown=1,
                                server_header=False, ws="none", http=protocol(bounds),
                                loop="asyncio", backlog=BACKLOG, timeout_keep_alive=KEEP_ALIVE,
                                # past this many at once, a request is answered 503
                                limit_concurrency=bounds.max_connections + 1)
        self._server = _Server(config)
        self._server.feed = feed

    def url(self, path: str = "/") -> str:
        host = "127.0.0.1" if is_wildcard(self.host) else self.host
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}{path}#token={self.token}"

    def catch_stops(self) -> None:
        """From now on SIGTERM and Ctrl+C stop the console as a normal stop (exit 0), also
        before uvicorn puts in its own handlers: a stop that comes right after the URL was
        printed, while the server is still starting, is not a death by signal."""
        assert self._server is not None
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._server.handle_exit)

    def serve_forever(self) -> None:
        assert self._server is not None
        assert self._sock is not None
        try:
            self._server.run(sockets=[self._sock])
        finally:
            self.close()

    def start_background(self, timeout: float = 15.0) -> None:
        assert self._server is not None
        assert self._sock is not None
        server, sock = self._server, self._sock
        self._thread = threading.Thread(target=lambda: server.run(sockets=[sock]),
                                        name="podium-console", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not server.started and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        if not server.started:
            raise OSError("the console did not start")

    def drain(self, run_id: str, timeout: float = 3.0) -> None:
        """Give connected pages up to `timeout` seconds to receive the run's last event."""
        assert self.console is not None
        row = self.console.reader.run_row(run_id)
        if row is None:
            return
        final = int(row["last_seq"])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.console.feed.behind(run_id, final):
            time.sleep(0.05)

    def stop(self) -> None:
        if self._server is not None:
            self._server.close_streams()
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.close()

    def close(self) -> None:
        while self._closers:
            with contextlib.suppress(Exception):
                self._closers.pop()()


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    if host == "localhost":
        host = "127.0.0.1"
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(BACKLOG)  # a short queue: see web/limits.py
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(False)
    return sock


def _can_open_browser() -> bool:
    if sys.platform in ("darwin", "win32"):
        return sys.stdout.isatty()
    return sys.stdout.isatty() and bool(os.environ.get("DISPLAY")
                                        or os.environ.get("WAYLAND_DISPLAY"))


def _open_later(url: str) -> None:
    threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()


def _home() -> Path:
    from podium.app.home import podium_home

    return podium_home()


# ----------------------------------------------------------------------------- podium serve


def serve_command(host: str, port: int, allow_remote: bool, open_browser: bool | None) -> int:
    from podium.errors import PodiumError

    if not is_loopback(host) and not allow_remote:
        sys.stderr.write(f"podium serve: {host} is not a loopback address; the console shows "
                         "every prompt and output and can answer gates. Pass --allow-remote "
                         "to listen there (every request then needs the token)\n")
        return exitcodes.INVALID
    if not 0 <= port <= 65535:
        sys.stderr.write(f"podium serve: --port {port} is not a port (0 picks a free one)\n")
        return exitcodes.INVALID
    server = ConsoleServer(_home(), host, port, allow_remote)
    try:
        server.prepare()
    except PodiumError as exc:
        server.close()
        sys.stderr.write(f"podium serve: {exc}\n")
        return exc.exit_code
    except OSError as exc:
        server.close()
        sys.stderr.write(f"podium serve: cannot listen on {host}:{port}: {exc.strerror or exc}"
                         + (" (pass --port 0 for a free port)" if port else "") + "\n")
        return exitcodes.RUNTIME_ERROR
    url = server.url()
    server.catch_stops()
    sys.stdout.write(f"podium console: {url}\n")
    sys.stdout.flush()
    sys.stderr.write(f"podium: the token is kept in {server.token_path} (mode 0600); "
                     "Ctrl+C stops the console\n")
    if not is_loopback(host):
        sys.stderr.write(f"podium: listening on {host}:{server.port}; every request needs "
                         "the token\n")
    if open_browser or (open_browser is None and _can_open_browser()):
        _open_later(url)
    server.serve_forever()
    return exitcodes.OK


# ----------------------------------------------------------------------------- podium run --web


class ConsoleAnswerer:
    """Gates of a `run --web` run are answered in the console: the gate is opened in the
    store and the run waits (in its own process) until someone answers it there."""

    def __init__(self, store: Any, url: str, poll: float = 0.1) -> None:
        self.store = store
        self.url = url
        self.poll = poll

    def answer(self, request: Any) -> Any:
        from podium.gates.base import GateAnswer
        from podium.store.base import GateRecord

        options = [o.model_dump(exclude_none=True) for o in request.options]
        gate_id = self.store.open_gate(GateRecord(0, request.run_id, request.step, request.kind,
                                                  request.prompt, options, "open", time.time()))
        what = ("grant more iterations" if request.kind == "iteration_limit"
                else f"answer gate '{request.step}'")
        sys.stderr.write(f"podium: waiting for a person to {what} in the console: {self.url}\n")
        while True:
            for gate in self.store.gates(run_id=request.run_id):
                if gate.id == gate_id and gate.status == "answered" and gate.answer is not None:
                    self.store.consume_gate(gate_id)
                    from podium.app.secrets import restore, run_redactor

                    # stored redacted (app/runs.py answer_gate): the run gets what was typed
                    given = restore(dict(gate.additional_input),
                                    run_redactor(self.store.get_run(gate.run_id)))
                    return GateAnswer(gate.answer, given, gate.answered_by or "console")
            time.sleep(self.poll)


class ConsoleHooks:
    """Starts the console for the run `podium run --web` makes, and stops it afterwards."""

    def __init__(self, req: Any) -> None:
        self.req = req
        self.console = ConsoleServer(_home(), "127.0.0.1", int(getattr(req, "web_port", 0) or 0))
        self.url = ""
        self.ended = False  # the run ended by itself (not interrupted): its console may stay
        self.parked = False  # it ended parked at a gate (answered in the console, it resumes)

    def started(self, engine: Any, store: Any) -> dict[str, Any]:
        from podium.errors import PodiumError, RunError
        from podium.gates.base import ChainAnswerer
        from podium.gates.terminal import TerminalAnswerer

        try:
            self.console.prepare(store)
            assert self.console.console is not None
            self.console.console.run_id = engine.run_id  # the page says "ended", not "offline"
            self.console.start_background()
        except (OSError, PodiumError) as exc:
            raise RunError(f"cannot start the console: {exc}") from None
        url = self.console.url(f"/runs/{engine.run_id}")
        self.url = url
        chain = engine.services.answerer
        if not self.req.skip_gates and isinstance(chain, ChainAnswerer):
            chain.answerers[:] = [a for a in chain.answerers
                                  if not isinstance(a, TerminalAnswerer)]
            chain.answerers.append(ConsoleAnswerer(store, url))
        return {"web": True}

    def recorded(self, engine: Any) -> None:
        """The run is in the store: its page can be opened now, not before."""
        url = self.url
        sys.stderr.write(f"podium console: {url}\n")
        sys.stderr.flush()
        target = os.environ.get("PODIUM_WEB_URL_FILE")
        if target:  # started by `podium run --web-bg`: its parent waits for the URL
            import json
            from pathlib import Path

            tmp = Path(target + ".tmp")
            tmp.write_text(json.dumps({"run_id": engine.run_id, "url": url}), encoding="utf-8")
            tmp.replace(target)
        if _can_open_browser():
            _open_later(url)

    def finished(self, engine: Any) -> None:
        self.console.drain(engine.run_id)
        assert self.console.console is not None
        row = self.console.console.reader.run_row(engine.run_id)
        self.ended = row is not None and row["status"] != "interrupted"
        self.parked = row is not None and row["status"] == "waiting"

    def close(self) -> None:
        if self.ended and keeps_console():
            self._serve_until_stopped()
        self.console.stop()

    def _serve_until_stopped(self) -> None:
        """The run ended: the console goes on serving its page until Ctrl+C (or SIGTERM)."""
        thread = self.console._thread
        if thread is None or not thread.is_alive():
            return
        how = "parked" if self.parked else "finished"
        sys.stderr.write(f"podium: run {how}; the console stays at {self.url} until Ctrl+C\n")
        sys.stderr.flush()
        before = {sig: signal.signal(sig, signal.default_int_handler)
                  for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            thread.join()
        except KeyboardInterrupt:
            pass
        finally:
            for sig, handler in before.items():
                signal.signal(sig, handler)


def keeps_console() -> bool:
    """Whether `podium run --web` keeps its console after its run ended: PODIUM_WEB_KEEP=1 or 0
    decides; otherwise only when stdin is a terminal (someone can press Ctrl+C), so a run in CI,
    a pipe or a test never hangs. The `--web-bg` child never stays: its console ends with its run
    (docs/decisions/0029-run-web-lifetime.md)."""
    if os.environ.get("PODIUM_WEB_URL_FILE"):
        return False
    forced = os.environ.get("PODIUM_WEB_KEEP", "").strip().lower()
    if forced in ("1", "true", "yes", "on"):
        return True
    if forced in ("0", "false", "no", "off"):
        return False
    try:
        return os.isatty(sys.stdin.fileno())
    except (AttributeError, OSError, ValueError):
        return False
