"""A workflow source file: reading it as text, positions in it, and the failures of loading it.

This is the layer under the YAML composer in language/source.py: the file:line:col positions
(Pos) and the source map that holds them by key path, the two ways loading stops
(FileUnreadable for a file that cannot be read at all, LoadFailure with located diagnostics for
bad content), and reading a file as UTF-8 text under a size limit. The names are re-exported
from language/source.py, where the rest of podium imports them.
"""

from __future__ import annotations

from dataclasses import field
from pathlib import Path

from podium.language.diagnostics import Diagnostic, KeyPath, format_path
from podium.records import record

MAX_FILE_BYTES = 5 * 1024 * 1024


@record(frozen=True)
class Pos:
    """A 1-based position in a file."""

    file: str
    line: int
    col: int


# A position as the source map keeps it: (file, line, col), 1-based. A load records one for
# every key and value (tens of thousands in a large workflow) and is asked for a few, so the
# map holds plain tuples and makes a Pos of the ones asked for.
At = tuple[str, int, int]


@record
class SourceMap:
    """Positions of keys and values by key path; lookups fall back to the nearest ancestor."""

    file: str
    keys: dict[KeyPath, At] = field(default_factory=dict)
    values: dict[KeyPath, At] = field(default_factory=dict)
    styles: dict[KeyPath, str | None] = field(default_factory=dict)
    # values read as text from a `!file` include: the file, and where its `!file` tag is
    files: dict[KeyPath, Path] = field(default_factory=dict)
    tags: dict[KeyPath, Pos] = field(default_factory=dict)

    def key(self, path: KeyPath) -> Pos:
        """Where the key of `path` is written (or the closest enclosing thing)."""
        p = tuple(path)
        keys, values = self.keys, self.values
        while p:
            at = keys.get(p) or values.get(p)
            if at is not None:
                return Pos(*at)
            p = p[:-1]
        at = values.get(())
        return Pos(self.file, 1, 1) if at is None else Pos(*at)

    def value(self, path: KeyPath) -> Pos:
        """Where the value at `path` starts (or the closest enclosing thing)."""
        p = tuple(path)
        at = self.values.get(p)
        return self.key(p) if at is None else Pos(*at)

    def style(self, path: KeyPath) -> str | None:
        return self.styles.get(tuple(path))


class LoadFailure(Exception):
    """Raised inside the loader with the diagnostics that stop loading.

    `fatal` failures (limits, broken `!file` includes, unreadable bytes) stop loading even
    inside an included file; the others only mean "this included file is not YAML", and the
    file is then included as raw text.
    """

    def __init__(self, diagnostics: list[Diagnostic], *, fatal: bool = False) -> None:
        super().__init__(diagnostics[0].format() if diagnostics else "load failed")
        self.diagnostics = diagnostics
        self.fatal = fatal


class FileUnreadable(Exception):
    """The top-level file is missing or unreadable (a different exit code than invalid)."""

    def __init__(self, shown: str, reason: str) -> None:
        super().__init__(f"{shown}: {reason}")
        self.shown = shown
        self.reason = reason


def _diag(pos: Pos, path: KeyPath, message: str, hint: str | None = None,
          code: str = "yaml") -> Diagnostic:
    return Diagnostic(pos.file, pos.line, pos.col, format_path(path), message, "error", hint, code)


def display_path(path: Path) -> str:
    """A path as shown in diagnostics: relative to the working directory when below it."""
    if not path.is_absolute():
        return str(path)
    try:
        rel = path.relative_to(Path.cwd())
    except ValueError:
        return str(path)
    return str(rel)


def read_text(path: Path, shown: str) -> str:
    """Read a workflow or included file as UTF-8 text, with one clear error per failure."""
    try:
        if path.is_dir():
            raise FileUnreadable(shown, "is a directory, not a file")
        size = path.stat().st_size
        if not path.is_file():
            raise FileUnreadable(shown, "is not a regular file")
        if size > MAX_FILE_BYTES:
            raise LoadFailure([_diag(Pos(shown, 1, 1), (),
                                     f"file is too large ({size / 1024 / 1024:.1f} MiB; "
                                     f"the limit is {MAX_FILE_BYTES // (1024 * 1024)} MiB)")],
                              fatal=True)
        data = path.read_bytes()
    except FileNotFoundError as exc:
        raise FileUnreadable(shown, "file not found") from exc
    except PermissionError as exc:
        raise FileUnreadable(shown, "permission denied") from exc
    except OSError as exc:
        raise FileUnreadable(shown, f"cannot read: {exc.strerror or exc}") from exc
    return decode_text(data, shown)


def decode_text(data: bytes, shown: str) -> str:
    """Decode bytes as UTF-8 (BOM allowed); binary or non-UTF-8 input gets a located error."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    nul = data.find(b"\x00")
    if nul >= 0:
        line, col = _line_col(data, nul)
        raise LoadFailure([_diag(Pos(shown, line, col), (),
                                 "binary data (NUL byte) in a YAML file", code="encoding")],
                          fatal=True)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, col = _line_col(data, exc.start)
        raise LoadFailure([_diag(Pos(shown, line, col), (),
                                 f"not valid UTF-8 (byte 0x{data[exc.start]:02x})",
                                 "save the file as UTF-8", code="encoding")],
                          fatal=True) from None


def _line_col(data: bytes, offset: int) -> tuple[int, int]:
    line = data.count(b"\n", 0, offset) + 1
    start = data.rfind(b"\n", 0, offset) + 1
    return line, offset - start + 1
