"""The console's bounds on connections: how many it holds at once, and how long a request may
take to arrive, so that idle or half-sent connections cannot take it down.

Each connection costs a file descriptor. Without a bound, 1,100 half-sent requests used the
1,024 descriptors of a `podium serve`; its event loop then failed to accept, and the sockets
stayed in CLOSE-WAIT after the clients had gone. Now:

- at most `max_connections` are held (by default well below the descriptor limit, leaving room
  for the store, the streams and the accept queue); one more gets `503 Service Unavailable`
  with a line saying why, and is closed at once;
- a request (its headers and its body) must arrive within `request_timeout` seconds of its
  first byte, or of the connection being opened: a client that never ends its headers
  (slowloris) is answered `408 Request Timeout` and closed. The close lingers: the console
  ends its side after the answer and reads (and drops) what the client still sends for up to
  LINGER seconds, because closing a socket with unread input makes the kernel reset the
  connection, and a reset can destroy the answer before the client reads it;
- between requests an idle keep-alive connection is closed after uvicorn's keep-alive timeout;
- the kernel's accept queue is short (BACKLOG), so one wake-up of the loop never accepts more
  connections than the descriptors left for them.

PODIUM_CONSOLE_MAX_CONNECTIONS and PODIUM_CONSOLE_REQUEST_TIMEOUT change the two bounds.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from podium.records import record

BACKLOG = 64  # connections waiting in the kernel to be accepted (uvicorn's default is 2,048)
KEEP_ALIVE = 5  # seconds an idle connection is kept between requests
LINGER = 2.0  # seconds a timed-out connection still reads after its answer, before the close
_RESERVED = 128  # descriptors kept for the store, the reader, the streams, logs and imports
_MOST = 512  # connections a console needs at most (a few pages, each with one stream)


@record(frozen=True)
class Limits:
    max_connections: int
    request_timeout: float


def _descriptors() -> int:
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def default_max_connections(descriptors: int | None = None) -> int:
    """Connections held at once: below the descriptor limit once the accept queue and what
    the console itself keeps open are counted (416 for the usual 1,024)."""
    limit = _descriptors() if descriptors is None else descriptors
    return max(4, min(_MOST, (limit - BACKLOG - _RESERVED) // 2))


def limits() -> Limits:
    """The bounds of this process's console (the environment may lower or raise them)."""
    most = default_max_connections()
    timeout = 10.0
    raw = os.environ.get("PODIUM_CONSOLE_MAX_CONNECTIONS", "").strip()
    if raw.isdigit() and int(raw) > 0:
        most = min(int(raw), _descriptors() - BACKLOG - 16)
    raw = os.environ.get("PODIUM_CONSOLE_REQUEST_TIMEOUT", "").strip()
    with contextlib.suppress(ValueError):
        timeout = float(raw) if raw and float(raw) > 0 else timeout
    return Limits(max(1, most), timeout)


def _answer(status: str, text: str) -> bytes:
    body = text.encode() + b"\n"
    return (f"HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode() + body


def protocol(bounds: Limits) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with the console's bounds."""

    class Bounded(H11Protocol):
        _shed = False
        _lingering = False  # answered and half-closed: what comes now is read and dropped
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            if len(self.connections) >= bounds.max_connections:
                self._shed = True  # never counted: closed before anything is read
                transport.write(_answer(
                    "503 Service Unavailable",
                    f"podium console: busy, {bounds.max_connections} connections are open "
                    "(the most it holds); try again in a moment"))
                transport.close()
                return
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self._shed or self._lingering:
                return
            if self._deadline is None and self.conn.their_state is not h11.DONE:
                self._arm()  # the first bytes of the next request on a kept-alive connection
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE and \
                    self.conn.their_state is not h11.SEND_BODY:
                self._disarm()  # the whole request is in (or the connection is ending)

        def connection_lost(self, exc: Exception | None) -> None:
            if self._shed:
                return
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(bounds.request_timeout, self._too_slow)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _too_slow(self) -> None:
            self._deadline = None
            if self.transport.is_closing() or self.conn.their_state is h11.DONE:
                return
            if self.conn.our_state is h11.IDLE:
                self.transport.write(_answer(
                    "408 Request Timeout",
                    f"podium console: the request did not arrive in full within "
                    f"{bounds.request_timeout:g} s"))
                if self.transport.can_write_eof():
                    # a lingering close: the answer, then our FIN; the client's bytes are
                    # still read, so no reset discards the answer before the client reads it
                    self.transport.write_eof()
                    self._lingering = True
                    self._deadline = self.loop.call_later(LINGER, self.transport.close)
                    return
            self.transport.close()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self.conn.their_state is h11.IDLE:
                self._disarm()  # idle between requests: the keep-alive timeout applies

    return Bounded
