"""Server-sent events from the lines of a streamed HTTP response, as (event, data) pairs: what
the SDKs' own stream readers parse, without the typed object they build for every event
(for a short answer that object is most of the SDK's CPU per call)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator


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
