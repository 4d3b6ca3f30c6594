"""A local model endpoint that misbehaves after a 200: every POST is answered with an event
stream that is either the given bytes and the end, or (with `trickle`) an SSE comment now and
then and never an answer, until the client goes or the test stops the server; with
`promised`, the response announces a Content-Length of that many bytes and the connection
closes after the given ones: a stream broken off in the middle.

    with HostileStream(b"data: {not json\\n\\n") as srv:   # OPENAI_BASE_URL=srv.url + "/v1"
    with HostileStream(trickle=0.2) as srv:                 # ": keep-alive" every 0.2 s
    with HostileStream(b"data: {...}\\n\\n", promised=5000) as srv:
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

GIVE_UP_SECONDS = 60.0  # a trickle ends by itself after this (the test has failed by then)


class HostileStream:
    def __init__(self, body: bytes = b"", *, trickle: float | None = None,
                 promised: int | None = None) -> None:
        self.body = body
        self.trickle = trickle
        self.promised = promised
        self.requests = 0
        self.stopped = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._httpd is not None
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> HostileStream:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # the body ends when the connection closes

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                server.requests += 1
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                if server.promised is not None:
                    self.send_header("content-length", str(server.promised))
                self.end_headers()
                try:
                    self.wfile.write(server.body)
                    self.wfile.flush()
                    if server.trickle is None:
                        return
                    waited = 0.0
                    while waited < GIVE_UP_SECONDS and not server.stopped.wait(server.trickle):
                        waited += server.trickle
                        self.wfile.write(b": keep-alive\n\n")
                        self.wfile.flush()
                except OSError:
                    return  # the client closed the stream

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        assert self._httpd is not None
        self._httpd.shutdown()
        self._httpd.server_close()
