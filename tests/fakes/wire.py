"""A scripted HTTP server on 127.0.0.1 for provider tests: each request takes the next canned
response from a queue (or a handler computes it), and every request is recorded (method, path,
query, headers, JSON body) so a test can assert what podium really sent.

Runs on a ThreadingHTTPServer in a daemon thread, HTTP/1.1 with keep-alive; it counts the
TCP connections it accepted, so tests can show that clients reuse them. A stream is one body
by default; with `chunked = True` each SSE event is its own HTTP chunk, written and flushed in
turn (Transfer-Encoding: chunked), as the real APIs stream.
"""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Canned:
    """One response: a JSON body, or an SSE stream of (event, data) pairs."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    events: list[tuple[str | None, Any]] | None = None
    raw: bytes | None = None


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


class WireServer:
    """Subclasses turn a scripted item into a Canned response (`render`)."""

    def __init__(self) -> None:
        self.queue: deque[Any] = deque()
        self.handler: Callable[[Recorded], Any] | None = None
        self.requests: list[Recorded] = []
        self.connections = 0
        self.server_seconds = 0.0  # time spent inside the server's own handling
        self.chunked = False  # streams as one HTTP chunk per SSE event
        # False: SSE data written as UTF-8 as it is (json.dumps(ensure_ascii=False): U+2028
        # and U+0085 unescaped, as servers in Python with pydantic or in Node write them)
        self.ascii = True
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.tls: ssl.SSLContext | None = None  # set before start: served over HTTPS

    # ------------------------------------------------------------------ scripting

    def script(self, *items: Any) -> None:
        self.queue.extend(items)

    def render(self, item: Any, request: Recorded) -> Canned:
        """A scripted item as a response: a Canned as it is, a callable called with the request
        first, anything else as the JSON body, or as its events when the request asks for a
        stream and this API streams (stream_events)."""
        if isinstance(item, Canned):
            return item
        if callable(item):
            return self.render(item(request), request)
        body = request.body if isinstance(request.body, dict) else {}
        events = self.stream_events(item) if body.get("stream") else None
        return Canned(events=events) if events is not None else Canned(body=item)

    def stream_events(self, item: Any) -> list[tuple[str | None, Any]] | None:
        """The server-sent events that stream `item` (None: this fake answers with a body)."""
        return None

    def _respond(self, request: Recorded) -> Canned:
        with self._lock:
            self.requests.append(request)
            if self.queue:
                item = self.queue.popleft()
            elif self.handler is not None:
                item = self.handler(request)
            else:
                return Canned(500, {"error": {"message": "fake server: nothing scripted for "
                                               f"request {len(self.requests)}",
                                               "type": "fake"}})
        return self.render(item, request)

    # ------------------------------------------------------------------ lifecycle

    @property
    def url(self) -> str:
        assert self._httpd is not None
        host, port = self._httpd.server_address[:2]
        return f"{'https' if self.tls else 'http'}://{host}:{port}"

    def start(self) -> WireServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # no 40 ms delayed-ACK stalls
            wbufsize = 65536  # headers and body in one write

            def setup(self) -> None:
                super().setup()
                with server._lock:
                    server.connections += 1

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._handle()

            def do_POST(self) -> None:
                self._handle()

            def _handle(self) -> None:
                started = time.perf_counter()
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                parts = urlsplit(self.path)
                rec = Recorded(self.command, parts.path, parse_qs(parts.query),
                               {k.lower(): v for k, v in self.headers.items()}, body)
                canned = server._respond(rec)
                if canned.raw is None and canned.events is not None and server.chunked:
                    self._stream(canned)
                else:
                    payload, ctype = _payload(canned, server.ascii)
                    self._head(canned, ctype, {"content-length": str(len(payload))})
                    self.wfile.write(payload)
                with server._lock:
                    server.server_seconds += time.perf_counter() - started

            def _head(self, canned: Canned, ctype: str, extra: dict[str, str]) -> None:
                self.send_response(canned.status)
                self.send_header("content-type", ctype)
                for k, v in {**extra, **canned.headers}.items():
                    self.send_header(k, v)
                self.end_headers()

            def _stream(self, canned: Canned) -> None:
                assert canned.events is not None
                self._head(canned, "text/event-stream", {"transfer-encoding": "chunked"})
                for piece in _sse(canned.events, server.ascii):
                    data = piece.encode()
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        if self.tls is not None:  # each accepted connection shakes hands in its own thread
            self._httpd.socket = self.tls.wrap_socket(self._httpd.socket, server_side=True,
                                                      do_handshake_on_connect=False)
        httpd = self._httpd
        self._thread = threading.Thread(target=lambda: httpd.serve_forever(poll_interval=0.02),
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> WireServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ inspection

    def bodies(self) -> list[Any]:
        return [r.body for r in self.requests]


def _payload(canned: Canned, ascii: bool = True) -> tuple[bytes, str]:
    """The whole body of a response and its content type."""
    if canned.raw is not None:
        return canned.raw, "application/json"
    if canned.events is not None:
        return "".join(_sse(canned.events, ascii)).encode(), "text/event-stream"
    return json.dumps(canned.body).encode(), "application/json"


def _sse(events: list[tuple[str | None, Any]], ascii: bool = True) -> list[str]:
    """Each (event, data) pair as the text of one server-sent event."""
    out = []
    for event, data in events:
        head = f"event: {event}\n" if event else ""
        text = data if data == "[DONE]" else json.dumps(data, ensure_ascii=ascii)  # [DONE]: OpenAI's end
        out.append(f"{head}data: {text}\n\n")
    return out
