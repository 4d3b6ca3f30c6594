"""The catalog of runs: typed, read-only reads of the store (runs, their family, open gates,
leases, events, live rows) on a connection of its own, for the surfaces that only look (the
console). SQLite file or PostgreSQL URL: the same SQL, PgReader takes its `?` markers.

No rule about runs lives here (which run is alive, what a person should see): app/owners.py
and app/catalog.py hold them and read through this.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

from podium.events.model import Event
from podium.records import record
from podium.store import files
from podium.store.base import GateRecord, Lease, RunNotFound, RunRecord, StoreError
from podium.store.pgconn import PgReader
from podium.store.sqlcore import typed_event

_RUN_COLUMNS = ("id, workflow_name, workflow_path, workflow_hash, inputs, status, current_step, "
                "created_at, updated_at, finished_at, iterations, input_tokens, output_tokens, "
                "cost_usd, cost_partial, exit_code, output, error, terminal, reason, "
                "parent_run_id, forked_from, pid, pid_start, last_seq, options")
_JSON = ("inputs", "output", "options")
_MAX_IDS = 500  # ids per `IN (...)` list


@record(frozen=True)
class RunQuery:
    """Which runs a list shows: top-level only unless `children`; `statuses` (stored), or
    those or `or_ids` (runs held by an open gate); `workflow` by name; `search` any part of
    the id, workflow name or current step, literally."""

    statuses: tuple[str, ...] | None = None
    or_ids: tuple[str, ...] = ()
    workflow: str | None = None
    search: str | None = None
    children: bool = False
    limit: int = 200


def like_escape(text: str) -> str:
    """`text` matched literally by LIKE ... ESCAPE '\\' (its `%` and `_` are not wildcards)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _record(row: dict[str, Any]) -> RunRecord:
    data = dict(row)
    for c in _JSON:
        try:
            data[c] = json.loads(data[c]) if data.get(c) is not None else None
        except ValueError:
            data[c] = None  # an unreadable column is shown as missing, never an error here
    data["inputs"] = data["inputs"] if isinstance(data["inputs"], dict) else {}
    data["options"] = data["options"] if isinstance(data["options"], dict) else {}
    data["cost_partial"] = bool(data["cost_partial"])
    return RunRecord(**data)


def _gate(r: dict[str, Any]) -> GateRecord:
    def loads(text: Any, empty: Any) -> Any:
        try:
            return json.loads(text) if text else empty
        except ValueError:
            return empty

    return GateRecord(int(r["id"]), str(r["run_id"]), str(r["step"]), str(r["kind"]),
                      str(r["prompt"] or ""), loads(r.get("options"), []), str(r["status"]),
                      float(r["created_at"]), r.get("answer"),
                      loads(r.get("additional_input"), {}), r.get("answered_by"),
                      r.get("answered_at"))


class Catalog:
    """Read-only typed reads of one store; safe to share between threads."""

    def __init__(self, source: Path | str) -> None:
        self.source = source
        self._lock = threading.Lock()
        self.db: sqlite3.Connection | PgReader = (
            PgReader(source) if isinstance(source, str) else
            files.connect(source, timeout=5.0, query_only=True))

    def close(self) -> None:
        with self._lock:
            self.db.close()

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        with self._lock:
            cur = self.db.execute(sql, params)
            cols = [d[0] for d in cur.description or ()]
            return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]

    # ------------------------------------------------------------------ runs

    def runs(self, query: RunQuery) -> list[RunRecord]:
        """The runs `query` selects, newest first."""
        where: list[str] = []
        params: list[Any] = []
        if not query.children:
            where.append("parent_run_id IS NULL")
        if query.statuses is not None:
            marks = ", ".join("?" * len(query.statuses)) or "NULL"
            held = (f" OR id IN ({', '.join('?' * len(query.or_ids))})" if query.or_ids
                    else "")
            where.append(f"(status IN ({marks}){held})")
            params += [*query.statuses, *query.or_ids]
        if query.workflow:
            where.append("workflow_name = ?")
            params.append(query.workflow)
        if query.search:
            where.append("(id LIKE ? ESCAPE '\\' OR workflow_name LIKE ? ESCAPE '\\' "
                         "OR current_step LIKE ? ESCAPE '\\')")
            like = "%" + like_escape(query.search) + "%"
            params += [like, like, like]
        sql = f"SELECT {_RUN_COLUMNS} FROM runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at DESC, rowid DESC LIMIT ?"
        params.append(max(1, min(query.limit, 5000)))
        return [_record(r) for r in self._rows(sql, tuple(params))]

    def count_by_status(self) -> dict[str, int]:
        """How many top-level runs have each stored status."""
        return {str(r["status"]): int(r["n"]) for r in self._rows(
            "SELECT status, count(*) AS n FROM runs WHERE parent_run_id IS NULL "
            "GROUP BY status")}

    def runs_by_id(self, ids: list[str]) -> list[RunRecord]:
        out: list[RunRecord] = []
        for k in range(0, len(ids), _MAX_IDS):
            part = ids[k:k + _MAX_IDS]
            out += [_record(r) for r in self._rows(
                f"SELECT {_RUN_COLUMNS} FROM runs WHERE id IN ({', '.join('?' * len(part))})",
                tuple(part))]
        return out

    def workflows(self) -> list[str]:
        """The names of the workflows top-level runs ran, sorted."""
        return [str(r["w"]) for r in self._rows(
            "SELECT DISTINCT workflow_name AS w FROM runs WHERE parent_run_id IS NULL "
            "ORDER BY 1")]

    def run(self, run_id: str) -> RunRecord | None:
        rows = self._rows(f"SELECT {_RUN_COLUMNS} FROM runs WHERE id = ?", (run_id,))
        return _record(rows[0]) if rows else None

    def get_run(self, run_id: str) -> RunRecord:
        """The run (RunNotFound when there is none): what app/owners.py's liveness reads."""
        run = self.run(run_id)
        if run is None:
            raise RunNotFound(f"no run '{run_id}' in the store")
        return run

    def find(self, prefix: str) -> RunRecord | None:
        """The run with this id, or the only one whose id starts with it."""
        run = self.run(prefix)
        if run is not None:
            return run
        rows = self._rows(f"SELECT {_RUN_COLUMNS} FROM runs WHERE id LIKE ? ESCAPE '\\' "
                          "LIMIT 2", (like_escape(prefix) + "%",))
        return _record(rows[0]) if len(rows) == 1 else None

    def children(self, run_id: str) -> list[RunRecord]:
        """The sub-workflow runs a run started, oldest first."""
        return [_record(r) for r in self._rows(
            f"SELECT {_RUN_COLUMNS} FROM runs WHERE parent_run_id = ? ORDER BY created_at",
            (run_id,))]

    def child_ids(self, run_id: str) -> list[str]:
        return [str(r["id"]) for r in self._rows(
            "SELECT id FROM runs WHERE parent_run_id = ? ORDER BY created_at", (run_id,))]

    # ------------------------------------------------------------------ leases, gates

    def lease(self, run_id: str) -> Lease | None:
        rows = self._rows("SELECT * FROM leases WHERE run_id = ?", (run_id,))
        return Lease.from_row(rows[0]) if rows else None

    def open_gates(self, run_ids: list[str] | None = None) -> list[GateRecord]:
        """The open gates (of these runs, when given), oldest first."""
        if run_ids is None:
            rows = self._rows("SELECT * FROM gates WHERE status = 'open' "
                              "ORDER BY created_at, id")
            return [_gate(r) for r in rows]
        out: list[GateRecord] = []
        for k in range(0, len(run_ids), _MAX_IDS):
            part = run_ids[k:k + _MAX_IDS]
            out += [_gate(r) for r in self._rows(
                f"SELECT * FROM gates WHERE status = 'open' AND run_id IN "
                f"({', '.join('?' * len(part))}) ORDER BY created_at, id", tuple(part))]
        return sorted(out, key=lambda g: (g.created_at, g.id))

    def gate(self, gate_id: int) -> GateRecord | None:
        rows = self._rows("SELECT * FROM gates WHERE id = ?", (gate_id,))
        return _gate(rows[0]) if rows else None

    # ------------------------------------------------------------------ events, live rows

    def event_texts(self, run_id: str, after: int = 0,
                    limit: int = 100_000) -> list[tuple[int, str]]:
        """(seq, JSON text) of the run's events after `after`, as committed."""
        with self._lock:
            cur = self.db.execute("SELECT seq, body FROM events WHERE run_id = ? AND seq > ? "
                                  "ORDER BY seq LIMIT ?", (run_id, after, limit))
            rows = cur.fetchall()
        return [(int(s), str(b)) for s, b in rows]

    def history(self, run_id: str, after: int = 0) -> list[Event]:
        """The run's committed events after `after`, typed (StoreError naming the event
        when one cannot be read back)."""
        return [typed_event(body, run_id, seq, lambda what: StoreError(
            f"the run store {self.source} {what}")) for seq, body in
            self.event_texts(run_id, after)]

    def live(self, run_id: str) -> dict[str, dict[str, Any]]:
        """What the run's running steps streamed so far, by `step#iteration`."""
        try:
            rows = self._rows("SELECT key, body FROM live WHERE run_id = ? ORDER BY key",
                              (run_id,))
        except sqlite3.OperationalError:  # a store no podium opened since before live rows
            return {}
        out: dict[str, dict[str, Any]] = {}
        for r in rows:
            try:
                body = json.loads(r["body"])
            except ValueError:
                continue
            if isinstance(body, dict):
                out[str(r["key"])] = body
        return out


class StoreVersion:
    """A value that changes whenever another connection commits to the store: SQLite's
    `PRAGMA data_version` (a counter in shared memory: no table is read), or PostgreSQL's
    current snapshot (it changes whenever a writing transaction starts or ends). None when
    it cannot be read now."""

    def __init__(self, source: Path | str) -> None:
        self.source = source
        self._db: sqlite3.Connection | PgReader = (
            PgReader(source) if isinstance(source, str) else
            files.connect(source, query_only=True))

    @property
    def blocking(self) -> bool:
        """Does a read wait on a server (to be read off the event loop)?"""
        return isinstance(self.source, str)

    def read(self) -> object:
        try:
            if isinstance(self._db, PgReader):
                row = self._db.execute("SELECT pg_current_snapshot()::text").fetchone()
            else:
                row = self._db.execute("PRAGMA data_version").fetchone()
        except (sqlite3.Error, StoreError):
            return None
        return row[0] if row else None

    def close(self) -> None:
        self._db.close()
