"""Keeping podium's own secrets out of /proc: a command a model runs as the same user (root
included) could otherwise read every key from /proc/<podium pid>/environ.

That file shows the environment block the kernel gave the process at exec, wherever the
process later moved its variables. So the values of secret variables are overwritten in that
block, and set again with putenv (which stores them elsewhere), so that podium, its SDKs and
the children that inherit its environment still see them. The process is also made
non-dumpable, which puts /proc/<pid>/environ and /proc/<pid>/mem out of reach of other users'
processes. Linux only; elsewhere nothing changes.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterable

_PR_SET_DUMPABLE = 4


def _block() -> tuple[int, int] | None:
    """The start and end addresses of this process's initial environment block."""
    try:
        with open("/proc/self/stat", encoding="ascii", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()  # fields[0] is field 3 (state)
    try:
        return int(fields[47]), int(fields[48])  # env_start, env_end (fields 50 and 51)
    except (IndexError, ValueError):
        return None


def hide_from_proc(names: Iterable[str]) -> int:
    """Overwrite the values of `names` in /proc/self/environ; returns how many were hidden."""
    if not sys.platform.startswith("linux"):
        return 0
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    with contextlib.suppress(AttributeError, OSError):
        libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    wanted = {n for n in names if os.environ.get(n)}
    where = _block()
    if not wanted or where is None:
        return 0
    start, end = where
    if not 0 < start < end or end - start > 1 << 24:
        return 0
    block = ctypes.string_at(start, end - start)
    hidden = 0
    offset = 0
    for entry in block.split(b"\0"):
        key, eq, value = entry.partition(b"=")
        if eq and value and key.decode("utf-8", "replace") in wanted:
            at = start + offset + len(key) + 1
            ctypes.memmove(at, b"*" * len(value), len(value))
            hidden += 1
        offset += len(entry) + 1
    for var in wanted:  # set again, outside the block: podium and its children keep them
        os.putenv(var, os.environ[var])
    return hidden
