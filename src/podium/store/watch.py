"""Is the store file still the file this process opened? Asked before each write.

A store file deleted (with its write-ahead log and index) or replaced by another file while a
run uses it does not stop SQLite: its descriptors still point at the old inode, so the run
would go on committing into a file nobody can open again. A write-ahead log cut short under
it leaves a malformed store. So before each write the store compares what is at the path now
with what it opened: the device and inode of the database file and of its log (`os.stat` of
the paths: nothing here opens the file, see store/files.py), and the log's size, which only
grows while this process holds a connection (SQLite resets the log by writing over it from the
start, never by cutting it, unless asked to with `journal_size_limit`, which podium is not).
"""

from __future__ import annotations

import os
from pathlib import Path

from podium.records import record


def _stat(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None


@record
class FileWatch:
    """The identity of a store file and of its write-ahead log, as this process opened them."""

    path: Path
    dev: int
    ino: int
    wal_ino: int | None = None  # the log as first seen (None while there is none)
    wal_size: int = 0  # the log's size after this process's last write
    _file: str = ""  # the two paths as strings: asked before every write
    _wal: str = ""

    @classmethod
    def of(cls, path: Path) -> FileWatch | None:
        """The watch of a store file just opened (None when the path shows no file)."""
        st = _stat(str(path))
        if st is None:
            return None
        watch = cls(path, st.st_dev, st.st_ino, _file=str(path), _wal=f"{path}-wal")
        watch.written()
        return watch

    @property
    def wal(self) -> Path:
        return Path(self._wal)

    def problem(self) -> str | None:
        """What happened to the file since it was opened, in words that follow "the run store
        PATH"; None while it is the same file and its log has not gone backwards."""
        st = _stat(self._file)
        if st is None:
            return "was deleted while this process used it"
        if (st.st_dev, st.st_ino) != (self.dev, self.ino):
            return "was replaced by another file while this process used it"
        if self.wal_ino is None:
            return None
        wal = _stat(self._wal)
        if wal is None:
            return (f"lost its write-ahead log ({self.wal.name} was deleted) while this process "
                    "used it")
        if wal.st_ino != self.wal_ino:
            return "had its write-ahead log replaced while this process used it"
        if wal.st_size < self.wal_size:
            return (f"had its write-ahead log truncated while this process used it "
                    f"({wal.st_size} bytes, {self.wal_size} after its last write)")
        return None

    def written(self) -> None:
        """Note the log as this process's last write left it."""
        wal = _stat(self._wal)
        if wal is None:
            return
        if self.wal_ino is None:
            self.wal_ino = wal.st_ino
        if wal.st_ino == self.wal_ino:
            self.wal_size = wal.st_size
