"""An OpenAI-compatible Chat Completions endpoint that answers instantly, for bench_providers.py.

    python bench/_instant_openai.py        # prints its port on the first stdout line

POST .../chat/completions: when the request offers tools and carries fewer than TOOL_ROUNDS
tool results, it asks for `list_dir`; otherwise it answers `{"n": 1}`. Every answer is a
canned body (no JSON encoding per request beyond the id). GET /stats returns the connections
accepted, the requests served and the seconds spent handling them; POST /reset zeroes them.
Standard library only; HTTP/1.1 keep-alive.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOOL_ROUNDS = int(os.environ.get("TOOL_ROUNDS", "19"))
USAGE = {"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55,
         "prompt_tokens_details": {"cached_tokens": 0}}


def _body(message: dict[str, Any]) -> bytes:
    return json.dumps({"id": "chatcmpl-bench", "object": "chat.completion",
                       "created": 1_700_000_000, "model": "gpt-5-mini-2025-08-07",
                       "choices": [{"index": 0, "message": message, "logprobs": None,
                                    "finish_reason": "tool_calls" if "tool_calls" in message
                                    else "stop"}],
                       "usage": USAGE}).encode()


FINAL = _body({"role": "assistant", "content": '{"n": 1}'})
TOOL = _body({"role": "assistant", "content": None, "tool_calls": [
    {"id": "call_1", "type": "function", "function": {"name": "list_dir",
                                                      "arguments": "{}"}}]})
stats = {"connections": 0, "requests": 0, "seconds": 0.0}
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # no 40 ms delayed-ACK stalls
    wbufsize = 65536  # headers and body in one write

    def setup(self) -> None:
        super().setup()
        with lock:
            stats["connections"] += 1

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, payload: bytes) -> None:
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:
        with lock:
            self._send(json.dumps(stats).encode())

    def do_POST(self) -> None:
        started = time.perf_counter()
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.path == "/reset":
            with lock:
                stats.update(connections=0, requests=0, seconds=0.0)
            self._send(b"{}")
            return
        body = json.loads(raw)
        tool_results = sum(1 for m in body["messages"] if m.get("role") == "tool")
        self._send(TOOL if body.get("tools") and tool_results < TOOL_ROUNDS else FINAL)
        with lock:
            stats["requests"] += 1
            stats["seconds"] += time.perf_counter() - started


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    sys.stdout.write(f"{server.server_address[1]}\n")
    sys.stdout.flush()
    server.serve_forever()
