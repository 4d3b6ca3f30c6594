"""Where runs are kept: PODIUM_HOME (default ~/.podium) and the store file in it, or the file
PODIUM_STORE names."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from podium.errors import UsageError

if TYPE_CHECKING:
    from podium.store.sqlite import SQLiteStore


def podium_home() -> Path:
    return Path(os.environ.get("PODIUM_HOME") or Path.home() / ".podium")


def store_path(home: Path | None = None) -> Path:
    """The SQLite store file: PODIUM_STORE (a path or sqlite:///path), else podium.db in
    `home` (default: PODIUM_HOME)."""
    named = os.environ.get("PODIUM_STORE", "").strip()
    if not named:
        return (home or podium_home()) / "podium.db"
    if named.startswith("sqlite:///"):
        return Path(named[len("sqlite:///") - 1:])
    if "://" in named:
        scheme = named.split("://", 1)[0]
        raise UsageError(f"PODIUM_STORE={named.split('@')[-1]!r}: podium does not support "
                         f"'{scheme}' stores yet; give a file path or sqlite:///PATH")
    return Path(named).expanduser()


def open_store(*, verify: bool | None = None, home: Path | None = None) -> SQLiteStore:
    """The run store. Every page is checked when `verify` is True, or when it is None and
    the last process to use the file did not close it."""
    from podium.store.sqlite import SQLiteStore

    return SQLiteStore(store_path(home), verify=verify)
