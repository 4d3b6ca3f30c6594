"""Event streams read as the SSE spec reads them: lines end at CRLF, LF or CR only, however the
body is cut into chunks; characters JSON may carry unescaped (U+2028, U+2029, U+0085) stay
inside their line, through both real SDK adapters."""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from fakes.anthropic_server import message, text
from fakes.openai_server import answer
from helpers_providers import Servers, fake_servers, run_real_yaml
from podium.providers.sse import events, lines

ODD = "line\u2028separator, paragraph\u2029separator, next\x85line"


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    edges = [0, *sorted(cuts), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


@pytest.mark.parametrize(("chunks", "expected"), [
    ([b"a\r", b"\nb\n"], ["a", "b"]),  # a CRLF cut in two ends one line
    ([b"a\rb\r\nc\nd"], ["a", "b", "c", "d"]),  # every ending, and a last line without one
    ([b"\r", b"\n", b"\n"], ["", ""]),
    ([b"\r", b"", b"\n", b"\n"], ["", ""]),
    ([b"\r", b"\r", b"\n"], ["", ""]),
    ([b"a\r", b"\xc3", b"\xa9"], ["a", "\u00e9"]),  # a character cut in two after a CR
    ([b"ab", b"cd", b"e\nf"], ["abcde", "f"]),
    ([b"ab\xc3"], ["ab\ufffd"]),  # a broken sequence at the end
    ([], []),
])
def test_lines_end_only_at_cr_lf_or_crlf(chunks: list[bytes], expected: list[str]) -> None:
    assert list(lines(chunks)) == expected


def test_characters_json_carries_raw_stay_in_their_line() -> None:
    body = f"data: {ODD}\n\n".encode()
    assert list(lines([body])) == [f"data: {ODD}", ""]
    assert ODD.splitlines() != [ODD]  # what str.splitlines (httpx's iter_lines) would do


def test_any_chunking_gives_the_same_lines() -> None:
    rng = random.Random(7)
    stream = "".join(rng.choice(["data: {\"t\": \"\u00e9\u2028x\"}", "\r\n", "\n", "\r",
                                 "event: e", ": c", "\u20ac", "\x85"]) for _ in range(400))
    data = stream.encode()
    expected = re.split(r"\r\n|\r|\n", stream)
    if expected[-1] == "":
        expected.pop()
    for _ in range(200):
        cuts = rng.sample(range(1, len(data)), rng.randint(0, 40))
        assert list(lines(split(data, cuts))) == expected


def test_events_from_lines() -> None:
    body = b"event: a\r\ndata: 1\r\ndata: 2\r\n\r\n: comment\n\ndata: 3"
    assert list(events(lines([body]))) == [("a", "1\n2"), (None, "3")]


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch) -> Iterator[Servers]:
    yield from fake_servers(monkeypatch)


@pytest.mark.parametrize("provider", ["openai", "claude"])
def test_a_raw_line_separator_in_a_streamed_answer_survives(tmp_path: Path, servers: Servers,
                                                           provider: str) -> None:
    server = servers.openai if provider == "openai" else servers.anthropic
    server.ascii = False  # UTF-8 as it is: U+2028 and U+0085 unescaped in the data lines
    server.chunked = True
    server.script(answer(ODD) if provider == "openai" else message(text(ODD)))
    run = run_real_yaml(tmp_path, f"""
        workflow: {{name: t, entry_point: a, runtime: {{provider: {provider}}}}}
        agents:
          - name: a
            model: {"gpt-5-mini" if provider == "openai" else "claude-sonnet-4-6"}
            tools: []
            prompt: say it
    """)
    assert run.exit_code == 0, run.error_text()
    assert run.outputs["a"] == {"result": ODD}
