"""The console sink without colour writes its lines itself (events/sinks/console.py): each must
be exactly what rich's Console.print writes for the same text, tabs, control codes, wide
characters, long lines and trailing whitespace included."""

from __future__ import annotations

import io
import random

from rich.console import Console
from rich.text import Text

from podium.events.sinks.console import ConsoleSink

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
