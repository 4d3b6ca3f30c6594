"""Diagnostics: one problem in a workflow file, with its position, key path and a hint."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import field
from typing import Literal

from podium.records import record

Severity = Literal["error", "warning"]
PathPart = str | int
KeyPath = tuple[PathPart, ...]


_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def printable(text: str) -> str:
    """`text` on one line, with control characters (newlines, escape codes) written as
    escapes: a diagnostic quotes values from the file, and must neither break lines nor
    drive the terminal."""
    return _UNPRINTABLE.sub(lambda m: repr(m.group())[1:-1], text)


def format_path(path: KeyPath) -> str:
    """`("agents", 3, "routes", 1, "when")` -> `agents[3].routes[1].when`."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part
    return out or "<root>"


def closest(word: str, candidates: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The candidate `word` is most likely a misspelling of, or None when nothing is close."""
    pool = [c for c in candidates if c]
    match = difflib.get_close_matches(word, pool, n=1, cutoff=cutoff)
    if match:
        return match[0]
    low = {c.lower(): c for c in pool}
    return low.get(word.lower()) if word else None


def did_you_mean(word: str, candidates: Iterable[str], cutoff: float = 0.6) -> str | None:
    """A hint naming the closest candidate, or None when nothing is close."""
    match = closest(word, candidates, cutoff)
    return f"did you mean '{match}'?" if match else None


@record(frozen=True, order=True)
class Diagnostic:
    """A located problem. Ordered by file, line, column, so sorting gives reading order."""

    file: str
    line: int
    col: int
    path: str
    message: str
    severity: Severity = "error"
    hint: str | None = None
    code: str = field(default="invalid", compare=False)

    def format(self) -> str:
        """The one-line, compiler-style text form: `file:line:col: path: message (hint)`."""
        label = "" if self.severity == "error" else "warning: "
        hint = f" ({self.hint})" if self.hint else ""
        return printable(f"{self.file}:{self.line}:{self.col}: {self.path}: "
                         f"{label}{self.message}{hint}")

    def to_json(self) -> dict[str, object]:
        return {
            "file": self.file,
            "line": self.line,
            "col": self.col,
            "path": self.path,
            "severity": self.severity,
            "code": self.code,
            "message": self.message,
            "hint": self.hint,
        }


class DiagnosticSink:
    """Collects diagnostics for one workflow; positions come from its source map."""

    def __init__(self) -> None:
        self.items: list[Diagnostic] = []
        self._seen: set[tuple[str, int, int, str, str]] = set()

    def add(self, diagnostic: Diagnostic) -> None:
        key = (diagnostic.file, diagnostic.line, diagnostic.col, diagnostic.path, diagnostic.message)
        if key not in self._seen:
            self._seen.add(key)
            self.items.append(diagnostic)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.items if d.severity == "error"]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.items if d.severity == "warning"]

    def sorted(self) -> list[Diagnostic]:
        return sorted(self.items)
