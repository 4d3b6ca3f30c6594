"""The SQLite store's live rows: what a running step streams (its model text so far), kept
apart from the run's history.

A live row is overwritten in place and cleared when its step ends; it is never an event, so a
run's stored history does not grow with what streamed. It lets a console or the fleet TUI in
another process show a step while it runs (docs/decisions/0018-live-stream.md). A live write
is an observer's: one that fails raises StoreError for its caller to report, and never marks
the store failed, so the run's own commits go on.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from podium.events.redact import Redactor
from podium.store.base import StoreError


class LiveRows:
    """put_live / clear_live / live for SQLiteStore (it gives the connection and its lock)."""

    db: sqlite3.Connection
    path: Path
    redactor: Redactor
    _lock: threading.RLock

    def put_live(self, run_id: str, key: str, body: dict[str, Any]) -> None:
        """Write (or overwrite) one live row in a transaction of its own: never inside, and
        never committing, a run's pending step (those wait in memory, see sqlite.py)."""
        text = json.dumps(self.redactor.value(body), ensure_ascii=False, default=str,
                          separators=(",", ":"))
        self._live_write("INSERT INTO live (run_id, key, body, updated_at) VALUES (?, ?, ?, ?) "
                         "ON CONFLICT(run_id, key) DO UPDATE SET body = excluded.body, "
                         "updated_at = excluded.updated_at",
                         (run_id, key, text, time.time()), run_id)

    def clear_live(self, run_id: str, key: str | None = None) -> None:
        """Remove one live row of the run, or all of them."""
        if key is None:
            self._live_write("DELETE FROM live WHERE run_id = ?", (run_id,), run_id)
        else:
            self._live_write("DELETE FROM live WHERE run_id = ? AND key = ?", (run_id, key),
                             run_id)

    def live(self, run_id: str) -> dict[str, dict[str, Any]]:
        """The run's live rows by key (empty when none streams)."""
        with self._lock:
            try:
                rows = self.db.execute("SELECT key, body FROM live WHERE run_id = ? ORDER BY key",
                                       (run_id,)).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"cannot read the live rows of run {run_id} from the run "
                                 f"store {self.path}: {exc}") from None
        out: dict[str, dict[str, Any]] = {}
        for key, body in rows:
            try:
                value = json.loads(body)
            except ValueError:
                continue  # a damaged live row is only a missed glimpse, never an error
            if isinstance(value, dict):
                out[str(key)] = value
        return out

    def _live_write(self, sql: str, params: tuple[Any, ...], run_id: str) -> None:
        with self._lock:
            if self.db.in_transaction:  # never join (and so commit) another write
                raise StoreError(f"cannot write the live rows of run {run_id}: the run store "
                                 f"{self.path} is inside a transaction")
            try:
                self.db.execute(sql, params)  # autocommit: its own short transaction
            except sqlite3.Error as exc:
                raise StoreError(f"cannot write the live rows of run {run_id} to the run "
                                 f"store {self.path}: {exc}") from None
