"""Where runs are kept: PODIUM_HOME (default ~/.podium) and the run store, which PODIUM_STORE
(or `--store`, which sets it) names: a file path or sqlite:///PATH for SQLite (default
podium.db in the home), postgresql://... for PostgreSQL. Every command opens it here."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from podium.errors import UsageError

if TYPE_CHECKING:
    from podium.store.base import RunStore


def podium_home() -> Path:
    return Path(os.environ.get("PODIUM_HOME") or Path.home() / ".podium")


def store_url() -> str | None:
    """The PostgreSQL URL that PODIUM_STORE names, or None for a SQLite store."""
    named = os.environ.get("PODIUM_STORE", "").strip()
    if not named:  # the default SQLite store (no URL to read)
        return None
    from podium.store.pgconn import is_postgres_url

    return named if is_postgres_url(named) else None


def store_path(home: Path | None = None) -> Path:
    """The SQLite store file: PODIUM_STORE (a path or sqlite:///path), else podium.db in
    `home` (default: PODIUM_HOME). Only for a SQLite store (store_url() is None)."""
    named = os.environ.get("PODIUM_STORE", "").strip()
    if not named:
        return (home or podium_home()) / "podium.db"
    if named.startswith("sqlite:///"):
        return Path(named[len("sqlite:///") - 1:])
    if "://" in named:
        from podium.store.pgconn import display_url

        scheme = named.split("://", 1)[0]
        raise UsageError(f"PODIUM_STORE={display_url(named)!r}: podium does not know "
                         f"'{scheme}' stores; give a file path, sqlite:///PATH or "
                         "postgresql://USER@HOST/DATABASE")
    return Path(named).expanduser()


def open_store(*, verify: bool | None = None, home: Path | None = None) -> RunStore:
    """The run store. SQLite: every page is checked when `verify` is True, or when it is
    None and the last process to use the file did not close it. PostgreSQL: `verify` is
    the server's business; the runs' local files go in `home` (default: PODIUM_HOME)."""
    url = store_url()
    if url is not None:
        from podium.store.postgres import PostgresStore

        return PostgresStore(url, folder=home or podium_home())
    from podium.store.sqlite import SQLiteStore

    return SQLiteStore(store_path(home), verify=verify)
