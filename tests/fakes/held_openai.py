"""A local Chat Completions server that streams one answer and holds the stream open in the
middle until the test releases it: a step whose model is still talking, for the tests of the
live view (the console's step panel, the fleet TUI, the store's live rows).

    with HeldOpenAI(TEXT) as srv:          # TEXT is cut after its first third
        ... OPENAI_BASE_URL=srv.url + "/v1" ... start the run ...
        srv.held.wait(30)                  # the first third went out; the stream waits
        ... the partial text is visible ...
        srv.release.set()                  # the rest, the usage and [DONE]

The chunks are fakes/openai_server.py's (the real API's shape); the response has no length and
ends when the connection closes, as an HTTP/1.0 stream does.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from fakes.openai_server import answer, stream_chunks

HOLD_SECONDS = 60.0  # the stream gives up waiting for the test after this (a failed test)


class HeldOpenAI:
    """Streams `text` (as gpt-4o-mini, with `usage`) for the first request; more requests get
    the same answer, not held."""

    def __init__(self, text: str, *, usage: tuple[int, int, int] = (1000, 24, 0)) -> None:
        self.chunks = stream_chunks(answer(text, usage=usage, model="gpt-4o-mini"))
        self.held = threading.Event()  # set once the first part went out
        self.release = threading.Event()  # set by the test: send the rest
        self.requests: list[Any] = []
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._httpd is not None
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def _frames(self, chunks: list[tuple[str | None, Any]]) -> bytes:
        return "".join(f"data: {d if d == '[DONE]' else json.dumps(d)}\n\n"
                       for _, d in chunks).encode()

    def start(self) -> HeldOpenAI:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # the body ends when the connection closes

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                server.requests.append(json.loads(self.rfile.read(length) or b"{}"))
                first = len(server.requests) == 1
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                cut = 2  # the role chunk and the first third of the text
                self.wfile.write(server._frames(server.chunks[:cut]))
                self.wfile.flush()
                if first:
                    server.held.set()
                    server.release.wait(HOLD_SECONDS)
                self.wfile.write(server._frames(server.chunks[cut:]))
                self.wfile.flush()

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        httpd = self._httpd
        threading.Thread(target=lambda: httpd.serve_forever(poll_interval=0.02),
                         daemon=True).start()
        return self

    def stop(self) -> None:
        self.release.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> HeldOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
