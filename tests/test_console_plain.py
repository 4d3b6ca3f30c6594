"""The console sink without colour writes its lines itself (events/sinks/console.py): each must
be exactly what rich's Console.print writes for the same text, tabs, control codes, wide
characters, long lines and trailing whitespace included."""

from __future__ import annotations

import io
import itertools
import os
import random

import pytest
from rich.console import Console
from rich.text import Text

from podium.events.sinks.console import _STRIP_CONTROL, ConsoleSink, plain_without_rich

PIECES = ["a", "b", " ", "\t", "\n", "\r", "\x07", "\x08", "\x0b", "\x0c", "\x1b", "[31m", "é",
          "漢", "😀", "…", "→", "\u200b", "  ", "x" * 30, "\x00", " \n", "\t\n", "│"]


def _rich(parts: list[tuple[str, str | None]]) -> str:
    out = io.StringIO()
    console = Console(file=out, markup=False, highlight=False, emoji=False, soft_wrap=True)
    text = Text()
    for content, style in parts:
        text.append(content, style=style)
    console.print(text)
    return out.getvalue()


def test_plain_lines_are_what_rich_writes() -> None:
    rng = random.Random(7)
    for _ in range(3000):
        parts = [("".join(rng.choice(PIECES) for _ in range(rng.randint(0, 14))),
                  rng.choice([None, "dim", "bold cyan"])) for _ in range(rng.randint(1, 4))]
        out = io.StringIO()
        sink = ConsoleSink(out, verbosity=0)
        sink._line(*parts)
        assert out.getvalue() == _rich(parts), parts


def test_a_nested_line_keeps_its_prefix() -> None:
    out = io.StringIO()
    sink = ConsoleSink(out, verbosity=0)
    sink._nested = True
    sink._line(("    → ", "cyan"), ("next", "cyan"), (" (when x)", "dim"))
    assert out.getvalue() == _rich([("  │ ", "dim"), ("    → ", "cyan"), ("next", "cyan"),
                                    (" (when x)", "dim")])


def _rich_is_plain(stream: io.TextIOBase, color: bool | None) -> bool:
    console = Console(file=stream, markup=False, highlight=False, emoji=False,
                      force_terminal=color, no_color=color is False, soft_wrap=True)
    return console.color_system is None and not console.is_jupyter


def test_plain_is_decided_as_rich_decides_it_without_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    """plain_without_rich answers for rich (a pipe or a file at -q never imports rich): every
    answer it gives is rich's, over the environment variables rich reads, a pipe, a closed
    stream and a real pseudo-terminal; it leaves only terminals and forced colour to rich."""
    master, slave = os.openpty()
    tty = open(slave, "w", encoding="utf-8")  # noqa: SIM115  # closed below
    closed = io.StringIO()
    closed.close()
    answered = 0
    try:
        for tty_compatible, force_color, term in itertools.product(
                (None, "", "0", "1"), (None, "", "1"), (None, "dumb", "xterm-256color")):
            for name, value in (("TTY_COMPATIBLE", tty_compatible),
                                ("FORCE_COLOR", force_color), ("TERM", term)):
                if value is None:
                    monkeypatch.delenv(name, raising=False)
                else:
                    monkeypatch.setenv(name, value)
            for stream in (io.StringIO(), closed, tty):
                for color in (None, True, False):
                    ours = plain_without_rich(stream, color)
                    if ours is not None:
                        answered += 1
                        assert ours == _rich_is_plain(stream, color), (
                            tty_compatible, force_color, term, stream, color)
        monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
        monkeypatch.delenv("FORCE_COLOR", raising=False)
        assert plain_without_rich(io.StringIO(), None) is True  # a pipe: no rich needed
        assert plain_without_rich(tty, None) is None  # a terminal: rich decides
    finally:
        tty.close()
        os.close(master)
    assert answered > 100


def test_the_control_codes_stripped_are_richs() -> None:
    from rich.control import _CONTROL_STRIP_TRANSLATE

    assert _STRIP_CONTROL == _CONTROL_STRIP_TRANSLATE


def test_a_sink_on_a_terminal_still_colours(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    master, slave = os.openpty()
    with open(slave, "w", encoding="utf-8") as tty:
        sink = ConsoleSink(tty, verbosity=0)
        assert sink._plain is False
        assert sink.console.color_system is not None
    os.close(master)
