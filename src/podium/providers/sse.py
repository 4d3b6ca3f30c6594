"""Server-sent events from a streamed HTTP response: its lines (`lines`), then (event, data)
pairs (`events`), each event's JSON (`data_json`), and the whole stream held to a total
deadline (`within`). What the SDKs' own stream readers parse, without the typed object they
build for every event (for a short answer that object is most of the SDK's CPU per call)."""

from __future__ import annotations

import codecs
import json
import re
import time
from collections.abc import Iterable, Iterator
from typing import Any

from podium.providers.base import ProviderError

QUOTED = 80  # characters of a bad event quoted in its error

# The only line endings of an event stream (the SSE spec): CRLF, LF, CR. Not str.splitlines,
# which httpx's iter_lines uses: it also splits at U+2028, U+2029 and U+0085, which JSON may
# carry unescaped inside a `data:` line (servers that write UTF-8 as it is do: vLLM, Node).
_EOL = re.compile(r"\r\n|\r|\n")


def lines(chunks: Iterable[bytes]) -> Iterator[str]:
    """The lines of a stream's body (`response.iter_bytes()`), without their endings, decoded
    as UTF-8 (an event stream's only encoding; a broken sequence becomes U+FFFD). A line may
    arrive over several chunks (kept as pieces, joined once), and a CRLF split between two."""
    decode = codecs.getincrementaldecoder("utf-8")("replace").decode
    pieces: list[str] = []  # the line being read
    after_cr = False  # the last chunk ended a line with CR: an LF opening the next is its pair
    for chunk in chunks:
        text = decode(chunk)
        if after_cr and text:
            after_cr = False
            if text.startswith("\n"):
                text = text[1:]
        if not text:
            continue
        after_cr = text.endswith("\r")
        parts = _EOL.split(text)
        if len(parts) == 1:
            pieces.append(text)
            continue
        if pieces:
            parts[0] = "".join(pieces) + parts[0]
        pieces = [parts.pop()]
        yield from parts
    rest = "".join(pieces) + decode(b"", True)
    if rest:
        yield rest


def events(lines: Iterable[str]) -> Iterator[tuple[str | None, str]]:
    """Each event of the stream: its `event:` name (None when it has none) and its `data:`
    lines joined by newlines. Comments and other fields are skipped; an event is complete at
    a blank line (or at the end of the stream)."""
    name: str | None = None
    data: list[str] = []
    for line in lines:
        if not line:
            if data or name is not None:
                yield name, "\n".join(data)
            name, data = None, []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "event":
            name = value
        elif field == "data":
            data.append(value)
    if data or name is not None:
        yield name, "\n".join(data)


def within(chunks: Iterable[bytes], seconds: float, label: str) -> Iterator[bytes]:
    """`chunks` while the stream is younger than `seconds`: the per-read timeout alone lets
    an endpoint that sends a keep-alive comment now and then hold a step forever."""
    deadline = time.monotonic() + seconds
    for chunk in chunks:
        if time.monotonic() > deadline:
            raise ProviderError(f"{label}: the answer did not end within {seconds:.3g}s (the "
                                "agent's timeout_seconds, else 600 s per model call); the "
                                "stream was closed", retryable=True, category="timeout")
        yield chunk


def data_json(data: str, label: str) -> Any:
    """The JSON of one event's data; a ProviderError quoting its first characters if it is
    not JSON (a broken or hostile endpoint)."""
    try:
        return json.loads(data)
    except json.JSONDecodeError as exc:  # an integer past the digit limit is the loop's
        shown = data if len(data) <= QUOTED else data[:QUOTED] + "..."
        raise ProviderError(f"{label}: the stream sent data that is not JSON ({exc}): "
                            f"{shown!r}") from None
