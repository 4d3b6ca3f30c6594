"""Diagnostics: one problem in a workflow file, with its position, key path and a hint."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

Severity = Literal["error", "warning"]
PathPart = str | int
KeyPath = tuple[PathPart, ...]


def format_path(path: KeyPath) -> str:
    """`("agents", 3, "routes", 1, "when")` -> `agents[3].routes[1].when`."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part
    return out or "<root>"


def did_you_mean(word: str, candidates: Iterable[str]) -> str | None:
    """A hint naming the closest candidate, or None when nothing is close."""
    pool = [c for c in candidates if c]
    match = difflib.get_close_matches(word, pool, n=1, cutoff=0.6)
    if not match and word:
        low = {c.lower(): c for c in pool}
        if word.lower() in low:
            match = [low[word.lower()]]
    return f"did you mean '{match[0]}'?" if match else None


@dataclass(frozen=True, order=True)
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
        label = "" if self.severity == "error" else "warning: "
        hint = f" ({self.hint})" if self.hint else ""
        return f"{self.file}:{self.line}:{self.col}: {self.path}: {label}{self.message}{hint}"

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
