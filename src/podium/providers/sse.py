"""Server-sent events from a streamed HTTP response: its lines (`lines`), then (event, data)
pairs (`events`), each event's JSON (`data_json`), and the whole stream held to a total
deadline (`within`). What the SDKs' own stream readers parse, without the typed object they
build for every event (for a short answer that object is most of the SDK's CPU per call)."""

from __future__ import annotations

import codecs
import json
import re
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

from podium.providers.base import ProviderError

QUOTED = 80  # characters of a bad event quoted in its error

# The only line endings of an event stream (the SSE spec): CRLF, LF, CR. Not str.splitlines,
# which httpx's iter_lines uses: it also splits at U+2028, U+2029 and U+0085, which JSON may
# carry unescaped inside a `data:` line (servers that write UTF-8 as it is do: vLLM, Node).
_EOL = re.compile(r"\r\n|\r|\n")
_UTF8 = codecs.getincrementaldecoder("utf-8")  # looked up once, not per response


class LineReader:
    """The lines of a stream's body fed chunk by chunk, without their endings, decoded as
    UTF-8 (an event stream's only encoding; a broken sequence becomes U+FFFD). A line may
    arrive over several chunks (kept as pieces, joined once), and a CRLF split between two."""

    def __init__(self) -> None:
        self.decode = _UTF8("replace").decode
        self.pieces: list[str] = []  # the line being read
        self.after_cr = False  # the last chunk ended a line with CR: an LF next is its pair

    def feed(self, chunk: bytes) -> list[str]:
        text = self.decode(chunk)
        if self.after_cr and text:
            self.after_cr = False
            if text.startswith("\n"):
                text = text[1:]
        if not text:
            return []
        self.after_cr = text.endswith("\r")
        parts = _EOL.split(text)
        if len(parts) == 1:
            self.pieces.append(text)
            return []
        if self.pieces:
            parts[0] = "".join(self.pieces) + parts[0]
        self.pieces = [parts.pop()]
        return parts

    def end(self) -> list[str]:
        rest = "".join(self.pieces) + self.decode(b"", True)
        return [rest] if rest else []


def lines(chunks: Iterable[bytes]) -> Iterator[str]:
    """The lines of a stream's body (`response.iter_bytes()`): LineReader's."""
    reader = LineReader()
    for chunk in chunks:
        yield from reader.feed(chunk)
    yield from reader.end()


async def body_lines(response: Any, seconds: float, label: str, *,
                     aio: bool) -> AsyncIterator[str]:
    """The lines of a streamed httpx response's body, held to `seconds` (`within`): read with
    `aiter_bytes` when `aio` (an async client's response), else `iter_bytes` (it then never
    suspends: podium/aio.py drive)."""
    reader = LineReader()
    deadline = time.monotonic() + seconds
    if aio:
        async for chunk in response.aiter_bytes():
            _check(deadline, seconds, label)
            for line in reader.feed(chunk):
                yield line
    else:
        for chunk in response.iter_bytes():
            _check(deadline, seconds, label)
            for line in reader.feed(chunk):
                yield line
    for line in reader.end():
        yield line


class EventReader:
    """Events from lines fed one by one: `feed` returns the event a blank line completes, as
    (its `event:` name or None, its `data:` lines joined by newlines); `end` the last one.
    Comments and other fields are skipped."""

    def __init__(self) -> None:
        self.name: str | None = None
        self.data: list[str] = []

    def feed(self, line: str) -> tuple[str | None, str] | None:
        if not line:
            return self.end()
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "event":
            self.name = value
        elif field == "data":
            self.data.append(value)
        return None

    def end(self) -> tuple[str | None, str] | None:
        found = (self.name, "\n".join(self.data)) if self.data or self.name is not None \
            else None
        self.name, self.data = None, []
        return found


def events(lines: Iterable[str]) -> Iterator[tuple[str | None, str]]:
    """Each event of the stream (EventReader's)."""
    reader = EventReader()
    for line in lines:
        if (found := reader.feed(line)) is not None:
            yield found
    if (found := reader.end()) is not None:
        yield found


def within(chunks: Iterable[bytes], seconds: float, label: str) -> Iterator[bytes]:
    """`chunks` while the stream is younger than `seconds`: the per-read timeout alone lets
    an endpoint that sends a keep-alive comment now and then hold a step forever."""
    deadline = time.monotonic() + seconds
    for chunk in chunks:
        _check(deadline, seconds, label)
        yield chunk


def _check(deadline: float, seconds: float, label: str) -> None:
    if time.monotonic() > deadline:
        raise ProviderError(f"{label}: the answer did not end within {seconds:.3g}s (the "
                            "agent's timeout_seconds, else 600 s per model call); the "
                            "stream was closed", retryable=True, category="timeout")


def data_json(data: str, label: str) -> Any:
    """The JSON of one event's data; a ProviderError quoting its first characters if it is
    not JSON (a broken or hostile endpoint)."""
    try:
        return json.loads(data)
    except json.JSONDecodeError as exc:  # an integer past the digit limit is the loop's
        shown = data if len(data) <= QUOTED else data[:QUOTED] + "..."
        raise ProviderError(f"{label}: the stream sent data that is not JSON ({exc}): "
                            f"{shown!r}") from None
