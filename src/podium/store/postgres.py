"""The PostgreSQL run store: the SQLite store's semantics on a server that many hosts share.

What commits when is SQLite's, written once for both (store/sqlcore.py): the events that
complete a step wait, per run and in memory, for the checkpoint after them, and are written
with it in one transaction; a parked gate's answer is consumed only with the step that used it; the last
checkpoint waits for run_finished. A lease is taken under a transaction-level advisory lock on
its run, so two processes asking at once are serialised as SQLite's write lock serialises them.
The first write that fails raises StoreError and every later write of the handle raises it too.
Connections come from a small psycopg pool, opened on first use; the URL's password is never
shown. Migrations run under an advisory lock, so first opens at once are safe.

A process that dies (SIGKILL) while a statement of its own waits on the server (for a lock)
must not write after its death, as on SQLite: each connection asks the server to check every
second that its client is still there (client_connection_check_interval, PostgreSQL 14+), so
the statement is cancelled and its locks are released, rather than committed (autocommit)
whenever the lock comes free.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from podium.events.model import Checkpointed, Event
from podium.store import pgconn
from podium.store.base import (
    GateRecord,
    Lease,
    Liveness,
    Owner,
    RunNotFound,
    RunRecord,
    StoreError,
)
from podium.store.pg_schema import LEASE_LOCK, MIGRATION_LOCK, MIGRATIONS, SCHEMA_VERSION
from podium.store.sqlcore import _RUN_COLUMNS, Dialect, SQLCore, _dumps, _owned, _Params, gone

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

__all__ = ["PostgresStore"]

_COLUMNS = ", ".join(_RUN_COLUMNS)


def _clean(value: Any) -> Any:
    """PostgreSQL text holds no NUL character: it is written as U+FFFD."""
    return value.replace("\x00", "\ufffd") if isinstance(value, str) else value


class PostgresStore(SQLCore):
    """RunStore on PostgreSQL. Safe to share between threads (one lock serialises access)."""

    SQL = Dialect(mark="%s", runs=f"SELECT {_COLUMNS} FROM runs", like="ILIKE ?",
                  prefix_like="ILIKE", either="GREATEST(cost_partial, ?)")

    def __init__(self, url: str, *, folder: Path | None = None) -> None:
        """Open the store at `url` (creating or migrating its tables). `folder`: where the
        runs' local files go (their JSONL logs), PODIUM_HOME by default."""
        pgconn.require_psycopg()
        self.url = url
        self.where = pgconn.display_url(url)
        self.folder = folder or Path(os.environ.get("PODIUM_HOME") or Path.home() / ".podium")
        self._init_core()
        self._pool: ConnectionPool[Any] | None = None
        con = pgconn.connect(url)
        try:
            self._migrate(con)
        except Exception as exc:
            if isinstance(exc, StoreError):
                raise
            raise StoreError(f"cannot use the run store {self.where}: "
                             f"{pgconn.one_line(exc, url)}") from None
        finally:
            con.close()

    # ------------------------------------------------------------------ opening

    def _version(self, con: psycopg.Connection[Any]) -> int | None:
        # pg_class read as a table (not through the catalog cache, which may not yet know
        # of a table that the process migrating before us just committed)
        names = {r[0] for r in con.execute(
            "SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON "
            "n.oid = c.relnamespace WHERE n.nspname = current_schema() AND "
            "c.relname IN ('podium_schema', 'runs')").fetchall()}
        if "podium_schema" not in names:
            if "runs" in names:
                raise StoreError(f"the run store {self.where} holds a table 'runs' but no "
                                 "podium schema version (another program's database?); it "
                                 "was left untouched: give another database")
            return None
        got = con.execute("SELECT max(version) FROM podium_schema").fetchone()
        version = int(got[0] or 0) if got else 0
        if version > SCHEMA_VERSION:
            raise StoreError(f"the run store {self.where} was written by a newer podium "
                             f"(schema {version}, this podium knows {SCHEMA_VERSION}); it was "
                             "left untouched: upgrade podium, or use another database")
        return version

    def _migrate(self, con: psycopg.Connection[Any]) -> None:
        if self._version(con) == SCHEMA_VERSION:
            return
        with con.transaction():
            con.execute("SELECT pg_advisory_xact_lock(%s, 0)", (MIGRATION_LOCK,))
            version = self._version(con)  # another process may have migrated meanwhile
            if version is None:
                con.execute("CREATE TABLE podium_schema (version INTEGER NOT NULL)")
                con.execute("INSERT INTO podium_schema (version) VALUES (0)")
                version = 0
            for number in range(version, SCHEMA_VERSION):
                for statement in MIGRATIONS[number].split(";"):
                    if statement.strip():
                        con.execute(statement.encode())
            con.execute("UPDATE podium_schema SET version = %s", (SCHEMA_VERSION,))

    def _get_pool(self) -> ConnectionPool[Any]:
        if self._pool is None:
            from psycopg_pool import ConnectionPool

            pool: ConnectionPool[Any] = ConnectionPool(
                self.url, min_size=1, max_size=4, open=False, timeout=15,
                kwargs={"autocommit": True, "connect_timeout": 10}, name="podium-store",
                check=ConnectionPool.check_connection, configure=pgconn.watch_client)
            pool.open(wait=False)
            self._pool = pool
        return self._pool

    @contextlib.contextmanager
    def _connection(self, writing: bool) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection; psycopg's errors become one StoreError line."""
        import psycopg

        if writing and self._failed is not None:
            raise self._failed
        try:
            with self._get_pool().connection() as con:
                yield con
        except psycopg.Error as exc:
            what = "write to" if writing else "read"
            failed = StoreError(f"cannot {what} the run store {self.where}: "
                                f"{pgconn.one_line(exc, self.url)}")
            if writing:
                self._failed = failed  # the run stops here; nothing more is written
            raise failed from None

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[psycopg.Connection[Any]]:
        with self._connection(True) as con, con.transaction():
            yield con

    def _changed(self, sql: str, params: _Params = ()) -> int:
        """One statement in a transaction of its own; the number of rows it changed."""
        with self._connection(True) as con:
            return con.execute(sql.encode(), [_clean(p) for p in params]).rowcount

    def _read(self, sql: str, params: _Params = ()) -> list[dict[str, Any]]:
        with self._lock, self._connection(False) as con:
            cur = con.execute(sql.encode(), list(params))
            cols = [d.name for d in cur.description or ()]
            return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]

    # ------------------------------------------------------------------ transactions

    def _flush(self, run_ids: list[str]) -> None:
        """Write these runs' pending writes in one transaction (all of them, or none)."""
        batches = {rid: p for rid in run_ids if (p := self._pending.pop(rid, None)) is not None}
        writes = [w for p in batches.values() for w in p.writes]
        if not writes:
            return
        with self._transaction() as con:
            for rid in batches:  # a run removed under its owner stops, it never goes on
                if con.execute(b"SELECT 1 FROM runs WHERE id = %s FOR UPDATE",
                               (rid,)).fetchone() is None:  # the lock numbering takes
                    self._failed = StoreError(gone(rid, self.where))
                    raise self._failed
            given: dict[str, int] = {}  # run id -> last seq given in this transaction
            with con.pipeline():
                for w in writes:
                    if isinstance(w, tuple):
                        con.execute(w[0].encode(), [_clean(p) for p in w[1]])
                    else:
                        self._write_numbered(con, w, given)
            for run_id, seq in given.items():
                con.execute(self.SQL.last_seq.encode(), (seq, time.time(), run_id))

    def _write_numbered(self, con: psycopg.Connection[Any], event: Event,
                        given: dict[str, int]) -> None:
        """Write an event with the next seq of its run, inside the flush's transaction; the
        run's row stays locked until it commits, so another process numbers after it."""
        run_id = event.run_id
        if run_id not in given:
            row = con.execute(b"SELECT last_seq FROM runs WHERE id = %s FOR UPDATE",
                              (run_id,)).fetchone()
            given[run_id] = int(row[0]) if row is not None else 0
        seq = given[run_id] = given[run_id] + 1
        numbered = event.model_copy(update={"seq": seq})
        con.execute(self.SQL.event_insert.encode(), (run_id, seq, event.type, event.ts,
                                                     _clean(numbered.model_dump_json())))
        if isinstance(event, Checkpointed):
            con.execute(self.SQL.checkpoint_upsert.encode(),
                        (run_id, seq, event.step, event.next_step, event.ts))

    # ------------------------------------------------------------------ runs

    def create_run(self, record: RunRecord, owner: Owner | None = None) -> None:
        """Record a new run; with `owner`, leased to it in the same transaction."""
        now = time.time()
        record.created_at = record.created_at or now
        record.updated_at = now
        values = [_clean(self._column(c, getattr(record, c))) for c in _RUN_COLUMNS]
        with self._lock, self._transaction() as con:
            con.execute(f"INSERT INTO runs ({_COLUMNS}) VALUES "
                        f"({', '.join(['%s'] * len(_RUN_COLUMNS))})".encode(), values)
            if owner is not None:
                self._insert_lease(con, record.id, owner, now)

    def delete_runs(self, run_ids: list[str], *, unless_owned: Liveness | None = None,
                    statuses: tuple[str, ...] = (),
                    still: Callable[[RunRecord], bool] | None = None) -> int:
        """Remove these runs and everything kept with them in one transaction (all or none);
        how many runs were removed. With `unless_owned`, under the advisory lock a resume's
        lease takes on the run (store/base.py says what is checked)."""
        if not run_ids:
            return 0
        removed = 0
        with self._lock, self._transaction() as con:
            if unless_owned is not None and not self._removable(con, run_ids[0], unless_owned,
                                                                statuses, still):
                return 0
            for table in ("events", "checkpoints", "gates", "leases", "live"):
                con.execute(f"DELETE FROM {table} WHERE run_id = ANY(%s)".encode(), (run_ids,))
            removed = con.execute(b"DELETE FROM runs WHERE id = ANY(%s)", (run_ids,)).rowcount
            for rid in run_ids:
                self._pending.pop(rid, None)
        return removed

    def _removable(self, con: psycopg.Connection[Any], run_id: str, alive: Liveness,
                   statuses: tuple[str, ...], still: Callable[[RunRecord], bool] | None) -> bool:
        """Inside the removal's transaction, holding the run's lease lock: no live owner
        holds the run, its status is still one of `statuses`, and `still` holds for its
        row as it is now."""
        con.execute(b"SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (LEASE_LOCK, run_id))
        found = con.execute(f"{self.SQL.runs} WHERE id = %s FOR UPDATE".encode(), (run_id,))
        names = [d.name for d in found.description or ()]
        row = found.fetchone()
        if row is None:
            return False
        record = dict(zip(names, row, strict=True))
        if statuses and record["status"] not in statuses:
            return False
        if still is not None and not still(self._record(record)):
            return False
        cur = con.execute(b"SELECT * FROM leases WHERE run_id = %s", (run_id,))
        cols = [d.name for d in cur.description or ()]
        held = [Lease.from_row(dict(zip(cols, r, strict=True))) for r in cur.fetchall()]
        return not (held and alive(held[0]))

    # ------------------------------------------------------------------ gates

    def open_gate(self, gate: GateRecord) -> int:
        with self._lock, self._connection(True) as con:
            row = con.execute(
                b"INSERT INTO gates (run_id, step, kind, prompt, options, status, created_at) "
                b"VALUES (%s, %s, %s, %s, %s, 'open', %s) RETURNING id",
                [_clean(v) for v in (gate.run_id, gate.step, gate.kind,
                                     self.redactor.text(gate.prompt),
                                     _dumps(self.redactor.value(gate.options)),
                                     gate.created_at or time.time())]).fetchone()
            return int(row[0]) if row else 0

    def withdraw_gates(self, run_id: str) -> list[int]:
        """Close, at once and atomically, the gates of `run_id` still open."""
        with self._lock, self._connection(True) as con:
            rows = con.execute(b"UPDATE gates SET status = 'withdrawn' WHERE run_id = %s AND "
                               b"status = 'open' RETURNING id", (run_id,)).fetchall()
        return sorted(int(r[0]) for r in rows)

    # ------------------------------------------------------------------ live rows

    def _live_write(self, sql: str, params: tuple[Any, ...], run_id: str) -> None:
        """On a pooled connection of its own, so it never waits for a run's pending step."""
        import psycopg

        try:
            with self._get_pool().connection() as con:
                con.execute(sql.encode(), [_clean(p) for p in params])
        except psycopg.Error as exc:
            raise StoreError(f"cannot write the live rows of run {run_id} to the run store "
                             f"{self.where}: {pgconn.one_line(exc, self.url)}") from None

    # ------------------------------------------------------------------ leases

    def acquire_lease(self, run_id: str, owner: Owner, alive: Liveness) -> Lease:
        """Take the run for `owner` in one transaction, under an advisory lock on the run:
        two processes asking at once are serialised, so one finds the other's lease."""
        now = time.time()
        with self._lock, self._transaction() as con:
            con.execute(b"SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (LEASE_LOCK, run_id))
            if con.execute(b"SELECT 1 FROM runs WHERE id = %s FOR KEY SHARE",
                           (run_id,)).fetchone() is None:
                raise RunNotFound(gone(run_id, self.where))
            cur = con.execute(b"SELECT * FROM leases WHERE run_id = %s", (run_id,))
            cols = [d.name for d in cur.description or ()]
            held = [Lease.from_row(dict(zip(cols, r, strict=True))) for r in cur.fetchall()]
            if held and held[0].owner != owner and alive(held[0]):
                raise _owned(run_id, held[0])
            self._insert_lease(con, run_id, owner, now)
        return Lease(run_id, owner, now, now)

    @staticmethod
    def _insert_lease(con: psycopg.Connection[Any], run_id: str, owner: Owner,
                      now: float) -> None:
        con.execute(b"INSERT INTO leases (run_id, pid, pid_start, host, command, acquired_at, "
                    b"heartbeat_at) VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (run_id) "
                    b"DO UPDATE SET pid = excluded.pid, pid_start = excluded.pid_start, "
                    b"host = excluded.host, command = excluded.command, "
                    b"acquired_at = excluded.acquired_at, heartbeat_at = excluded.heartbeat_at",
                    [_clean(v) for v in (run_id, owner.pid, owner.pid_start, owner.host,
                                         owner.command, now, now)])

    # ------------------------------------------------------------------ closing

    def schema_version(self) -> int:
        """The schema version the database holds (podium doctor shows it)."""
        rows = self._read("SELECT max(version) AS v FROM podium_schema")
        return int(rows[0]["v"] or 0) if rows else 0

    def _disconnect(self) -> None:
        if self._pool is not None:
            self._pool.close()
