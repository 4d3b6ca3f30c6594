"""A model endpoint for fan-out benchmarks: OpenAI's Chat Completions and Anthropic's Messages,
both streamed, each answer held LATENCY seconds without holding up any other connection.

    python bench/_stub_llm.py [LATENCY]    # prints its port on the first stdout line

One asyncio event loop, HTTP/1.1 keep-alive, TCP_NODELAY on every accepted socket, a listen
backlog of 4096. A request is read (headers, then content-length bytes; the body is not
parsed), its answer is chosen by path and scheduled with `call_later(LATENCY)`, so a
thousand connections wait at once at no cost; the answer is one canned SSE body written in
one `write`:

  POST .../chat/completions  the chunks of `{"ok": true}` with stream_options.include_usage
                             (role, content, finish reason, usage, [DONE]);
  POST .../messages          message_start, a text block of `{"ok": true}`, message_delta,
                             message_stop.

GET /stats returns connections accepted, requests answered, the most connections open at
once, the CPU time of the handling (time.process_time of this process, i.e. parsing and
writing, the held time excluded since the process is idle then) and how late each answer went
out against its scheduled time (median and max ms); POST /reset zeroes them. Standard library
only.
"""

from __future__ import annotations

import asyncio
import json
import socket
import statistics
import sys
import time
from typing import Any

LATENCY = float(sys.argv[1]) if len(sys.argv) > 1 else 0.05
ANSWER = '{"ok": true}'


def _sse(events: list[tuple[str | None, Any]]) -> bytes:
    out = []
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        body = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
        out.append(f"{head}data: {body}\n\n")
    return "".join(out).encode()


def _openai_body() -> bytes:
    head = {"id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": 1_700_000_000,
            "model": "gpt-5-mini-2025-08-07"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[None, Any]:
        return None, dict(head, choices=[{"index": 0, "delta": delta, "logprobs": None,
                                          "finish_reason": finish}])

    usage = {"prompt_tokens": 120, "completion_tokens": 8, "total_tokens": 128,
             "prompt_tokens_details": {"cached_tokens": 0}}
    return _sse([chunk({"role": "assistant", "content": ""}), chunk({"content": ANSWER}),
                 chunk({}, "stop"), (None, dict(head, choices=[], usage=usage)),
                 (None, "[DONE]")])


def _anthropic_body() -> bytes:
    usage = {"input_tokens": 120, "output_tokens": 1, "cache_read_input_tokens": 0,
             "cache_creation_input_tokens": 0}
    start = {"id": "msg_stub", "type": "message", "role": "assistant",
             "model": "claude-sonnet-4-5-20250929", "content": [], "stop_reason": None,
             "stop_sequence": None, "usage": usage}
    return _sse([
        ("message_start", {"type": "message_start", "message": start}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": ANSWER}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                           "usage": {"output_tokens": 8}}),
        ("message_stop", {"type": "message_stop"})])


def _response(body: bytes, kind: bytes = b"text/event-stream") -> bytes:
    return (b"HTTP/1.1 200 OK\r\ncontent-type: " + kind + b"\r\ncontent-length: " +
            str(len(body)).encode() + b"\r\n\r\n" + body)


OPENAI = _response(_openai_body())
ANTHROPIC = _response(_anthropic_body())
EMPTY = _response(b"{}", b"application/json")


class Stats:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.connections = self.requests = self.open = self.most_open = 0
        self.cpu0 = time.process_time()
        self.late: list[float] = []

    def view(self) -> dict[str, Any]:
        late = sorted(self.late) or [0.0]
        return {"connections": self.connections, "requests": self.requests,
                "most_open": self.most_open, "cpu_s": time.process_time() - self.cpu0,
                "late_ms_median": statistics.median(late) * 1000,
                "late_ms_max": late[-1] * 1000, "latency_s": LATENCY}


STATS = Stats()


class Conn(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.need = -1  # body bytes still to come for the current request, -1: in headers
        self.head = b""
        STATS.connections += 1
        STATS.open += 1
        STATS.most_open = max(STATS.most_open, STATS.open)

    def connection_lost(self, exc: Exception | None) -> None:
        STATS.open -= 1

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            if self.need < 0:
                end = self.buf.find(b"\r\n\r\n")
                if end < 0:
                    return
                self.head, self.buf = self.buf[:end], self.buf[end + 4:]
                self.need = 0
                for line in self.head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        self.need = int(value)
            if len(self.buf) < self.need:
                return
            self.buf = self.buf[self.need:]
            self.need = -1
            self._answer(self.head.split(b" ", 2))

    def _answer(self, line: list[bytes]) -> None:
        path = line[1] if len(line) > 1 else b"/"
        if path == b"/stats":
            self.transport.write(_response(json.dumps(STATS.view()).encode(),
                                           b"application/json"))
            return
        if path == b"/reset":
            STATS.reset()
            self.transport.write(EMPTY)
            return
        payload = ANTHROPIC if path.endswith(b"/messages") else OPENAI
        loop = asyncio.get_running_loop()
        due = loop.time() + LATENCY
        loop.call_at(due, self._send, payload, due, loop)

    def _send(self, payload: bytes, due: float, loop: asyncio.AbstractEventLoop) -> None:
        STATS.late.append(loop.time() - due)
        STATS.requests += 1
        if not self.transport.is_closing():
            self.transport.write(payload)


async def main() -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Conn, "127.0.0.1", 0, backlog=4096)
    port = server.sockets[0].getsockname()[1]
    sys.stdout.write(f"{port}\n")
    sys.stdout.flush()
    await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
