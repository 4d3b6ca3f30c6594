"""The store file on disk: every SQLite connection of this process to it, and the checks made
before SQLite first touches it.

POSIX advisory locks belong to a process, not to a descriptor: closing *any* descriptor of the
database file drops every lock SQLite holds on it, and another process then takes the write-ahead
log for abandoned. So nothing but SQLite opens the database file while this process has a
connection to it. Every connection goes through `connect()`, which counts them per file; the
header checks (which read the file's first 100 bytes themselves) run only while that count is
zero, and the clean-close probe reads the shared-memory file's lock table with F_GETLK, never
the database file.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import struct
import threading
from pathlib import Path

_HEADER = b"SQLite format 3\x00"
_lock = threading.RLock()  # held while checking and connecting, and by the registry
_open: dict[str, int] = {}  # realpath -> connections of this process still open

# SQLite's unix VFS keeps a shared lock on this byte of the -shm file while a connection is
# open (its "dead man switch"): 120 is the lock area's offset, 8 the number of WAL locks.
_DMS_OFFSET = 128


def _key(path: Path) -> str:
    return os.path.realpath(path)


class _Tracked(sqlite3.Connection):
    """A connection that tells the registry when it is closed."""

    _podium_key: str | None = None

    def close(self) -> None:
        try:
            super().close()
        finally:
            key, self._podium_key = self._podium_key, None
            if key is not None:
                with _lock:
                    left = _open.get(key, 0) - 1
                    if left > 0:
                        _open[key] = left
                    else:
                        _open.pop(key, None)


def connect(path: Path, *, timeout: float = 10.0, query_only: bool = False,
            read_only: bool = False) -> sqlite3.Connection:
    """A connection to the store file, counted so that no check ever opens the file beside it.

    Autocommit mode (`isolation_level=None`), shareable between threads behind the caller's
    lock. `read_only` opens the file in SQLite's read-only mode (`mode=ro`): nothing done
    through the connection, closing it included, writes to the database file."""
    key = _key(path)
    target = str(path)
    if read_only:
        from urllib.parse import quote

        target = f"file:{quote(os.path.abspath(path))}?mode=ro"
    with _lock:  # never beside a check that reads the file (see opening())
        con = sqlite3.connect(target, isolation_level=None, check_same_thread=False,
                              timeout=timeout, factory=_Tracked, uri=read_only)
        assert isinstance(con, _Tracked)
        _open[key] = _open.get(key, 0) + 1
        con._podium_key = key
    try:
        con.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
        if query_only:
            con.execute("PRAGMA query_only=1")
    except BaseException:
        con.close()
        raise
    return con


def opening() -> threading.RLock:
    """Hold this while checking a file and then connecting to it: no other thread of this
    process connects in between (a check's descriptor would drop that connection's locks)."""
    return _lock


def in_use(path: Path) -> bool:
    """Does this process hold a connection to the file?"""
    with _lock:
        return _open.get(_key(path), 0) > 0


class FileProblem(Exception):
    """What is wrong with the file, in words that follow "the run store PATH"."""


def check_file(path: Path) -> None:
    """Refuse, before SQLite touches it, a file that is not a whole SQLite database: SQLite
    itself reads a cut-off last page as zeros, and would write over the damage. Raises
    FileProblem. Does nothing while this process has a connection to the file."""
    if path.is_dir():
        raise FileProblem("is a directory, not a file")
    if path.exists() and not path.is_file():
        # a device (/dev/null), a pipe or a socket: SQLite would write its -journal beside it
        raise FileProblem("is not a regular file (a device, pipe or socket); give the path of "
                          "a file (it is created when missing)")
    if in_use(path):
        return
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        if _sidecar(path, "-wal") is not None:
            raise FileProblem("is missing but its write-ahead log remains (podium.db-wal); "
                              "the store was deleted while in use") from None
        return
    except OSError as exc:
        raise FileProblem(f"cannot be read: {exc.strerror or exc}") from None
    if size == 0:
        left = [s for s in ("-wal", "-shm") if _sidecar(path, s) is not None]
        if left:
            raise FileProblem(f"is empty but its {' and '.join(path.name + s for s in left)} "
                              "remain: it was a store that lost its contents")
        return  # an empty file holds nothing yet (SQLite starts a database in it)
    head = _read_head(path)
    _check_head(path, head, size)


def _read_head(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise FileProblem(f"cannot be read: {exc.strerror or exc}") from None
    try:
        return os.read(fd, 100)
    finally:
        os.close(fd)


def _check_head(path: Path, head: bytes, size: int) -> None:
    if not (_HEADER.startswith(head) if len(head) < 16 else head[:16] == _HEADER):
        raise FileProblem("is not a SQLite database (corrupted?)")
    if len(head) < 100:
        raise FileProblem(f"is truncated ({size} bytes, shorter than its header)")
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    if page < 512 or page & (page - 1):
        raise FileProblem("is corrupted (its header names an impossible page size)")
    pages = int.from_bytes(head[28:32], "big")
    counted = head[24:28] == head[92:96]  # the header's page count is current
    wal = _sidecar(path, "-wal")
    if wal:
        return  # SQLite recovers from the log; the file may be mid-checkpoint
    if size % page:
        raise FileProblem(f"is truncated ({size} bytes, not a whole number of {page}-byte pages)")
    if counted and size < pages * page:
        raise FileProblem(f"is truncated ({size} bytes; its header says {pages} pages of "
                          f"{page} bytes)")


def _sidecar(path: Path, suffix: str) -> int | None:
    """The size of the store's -wal or -shm file, or None when there is none."""
    try:
        return path.with_name(path.name + suffix).stat().st_size
    except OSError:
        return None


def closed_uncleanly(path: Path) -> bool:
    """Was the store left by a process that did not close it (killed, crashed, power lost)?

    The last connection to close checkpoints the write-ahead log and deletes it. A log that
    holds frames while no process has the store open (nobody holds SQLite's shared lock on
    the -shm file) was left behind. Only asked while this process has no connection."""
    if in_use(path) or not _sidecar(path, "-wal"):
        return False
    shm = path.with_name(path.name + "-shm")
    try:
        fd = os.open(shm, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return True  # a log without its index: nobody has it open
    try:
        import fcntl

        probe = struct.pack("@hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, _DMS_OFFSET, 1, 0)
        with contextlib.suppress(OSError):
            got = fcntl.fcntl(fd, fcntl.F_GETLK, probe)
            return bool(struct.unpack("@hhqqi4x", got)[0] == fcntl.F_UNLCK)
        return False
    finally:
        os.close(fd)
