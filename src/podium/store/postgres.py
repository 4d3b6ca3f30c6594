"""The PostgreSQL run store: the SQLite store's semantics on a server that many hosts share.

What commits when is SQLite's (store/sqlite.py says it): the events that complete a step wait,
per run and in memory, for the checkpoint after them, and are written with it in one
transaction; a parked gate's answer is consumed only with the step that used it; the last
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
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from podium.events.model import Checkpointed, Event
from podium.events.redact import Redactor
from podium.store import pgconn
from podium.store.base import (
    Checkpoint,
    GateRecord,
    Lease,
    Liveness,
    Owner,
    RunNotFound,
    RunOwned,
    RunRecord,
    StoreError,
)
from podium.store.pg_schema import LEASE_LOCK, MIGRATION_LOCK, MIGRATIONS, SCHEMA_VERSION
from podium.store.sqlite import (
    _JSON_COLUMNS,
    _RUN_COLUMNS,
    _completes_step,
    _defers,
    _dumps,
    _Pending,
)

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

__all__ = ["PostgresStore"]

_Write = tuple[str, tuple[Any, ...]]
_COLUMNS = ", ".join(_RUN_COLUMNS)
_EVENT_INSERT = ("INSERT INTO events (run_id, seq, type, ts, body) "
                 "VALUES (%s, %s, %s, %s, %s)")
_CHECKPOINT_UPSERT = ("INSERT INTO checkpoints (run_id, seq, step, next_step, created_at) "
                      "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (run_id) DO UPDATE SET "
                      "seq = excluded.seq, step = excluded.step, "
                      "next_step = excluded.next_step, created_at = excluded.created_at")


def _clean(value: Any) -> Any:
    """PostgreSQL text holds no NUL character: it is written as U+FFFD."""
    return value.replace("\x00", "\ufffd") if isinstance(value, str) else value


class PostgresStore:
    """RunStore on PostgreSQL. Safe to share between threads (one lock serialises access)."""

    def __init__(self, url: str, *, folder: Path | None = None) -> None:
        """Open the store at `url` (creating or migrating its tables). `folder`: where the
        runs' local files go (their JSONL logs), PODIUM_HOME by default."""
        pgconn.require_psycopg()
        self.url = url
        self.where = pgconn.display_url(url)
        self.folder = folder or Path(os.environ.get("PODIUM_HOME") or Path.home() / ".podium")
        self._lock = threading.RLock()
        self._pending: dict[str, _Pending] = {}
        self._closed = False
        self._failed: StoreError | None = None
        self._numbering = False  # number_at_commit(): this handle gives events their seq
        self._pool: ConnectionPool[Any] | None = None
        self.redactor = Redactor()
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

    def _write(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> int:
        """One statement in a transaction of its own; the number of rows it changed."""
        with self._connection(True) as con:
            return con.execute(sql.encode(), [_clean(p) for p in params]).rowcount

    def _read(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> list[dict[str, Any]]:
        with self._lock, self._connection(False) as con:
            cur = con.execute(sql.encode(), list(params))
            cols = [d.name for d in cur.description or ()]
            return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]

    # ------------------------------------------------------------------ transactions

    def _pending_of(self, run_id: str) -> _Pending:
        pending = self._pending.get(run_id)
        if pending is None:
            pending = self._pending[run_id] = _Pending()
        return pending

    def _flush(self, run_ids: list[str]) -> None:
        """Write these runs' pending writes in one transaction (all of them, or none)."""
        batches = [p for rid in run_ids if (p := self._pending.pop(rid, None)) is not None]
        writes = [w for p in batches for w in p.writes]
        if not writes:
            return
        with self._transaction() as con:
            given: dict[str, int] = {}  # run id -> last seq given in this transaction
            with con.pipeline():
                for w in writes:
                    if isinstance(w, tuple):
                        con.execute(w[0].encode(), [_clean(p) for p in w[1]])
                    else:
                        self._write_numbered(con, w, given)
            for run_id, seq in given.items():
                con.execute(b"UPDATE runs SET last_seq = %s, updated_at = %s WHERE id = %s",
                            (seq, time.time(), run_id))

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
        con.execute(_EVENT_INSERT.encode(), (run_id, seq, event.type, event.ts,
                                            _clean(numbered.model_dump_json())))
        if isinstance(event, Checkpointed):
            con.execute(_CHECKPOINT_UPSERT.encode(), (run_id, seq, event.step, event.next_step,
                                                      event.ts))

    def number_at_commit(self) -> None:
        """This handle numbers the events it commits (store/base.py RunStore says how)."""
        self._numbering = True

    def commit(self) -> None:
        """Write whatever any run left pending."""
        with self._lock:
            self._flush(list(self._pending))

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

    def _column(self, column: str, value: Any) -> Any:
        """A run column's value as written: JSON for JSON columns, secrets redacted."""
        if column in _JSON_COLUMNS:
            return None if value is None and column == "output" else \
                _dumps(self.redactor.value(value))
        if isinstance(value, bool):
            return int(value)
        return self.redactor.text(value) if isinstance(value, str) else value

    def _loads(self, text: str, what: str) -> Any:
        try:
            return json.loads(text)
        except (TypeError, ValueError) as exc:
            raise StoreError(f"the run store {self.where} is corrupted ({what} is not "
                             f"readable JSON: {exc})") from None

    def _record(self, row: dict[str, Any]) -> RunRecord:
        data = {c: row[c] for c in _RUN_COLUMNS}
        for c in _JSON_COLUMNS:
            if data.get(c) is not None:
                data[c] = self._loads(data[c], f"run {data.get('id')} {c}")
        data["cost_partial"] = bool(data["cost_partial"])
        return RunRecord(**data)

    def get_run(self, run_id: str) -> RunRecord:
        rows = self._read(f"SELECT {_COLUMNS} FROM runs WHERE id = %s", (run_id,))
        if not rows:
            raise RunNotFound(f"no run '{run_id}' in the store ({self.where})")
        return self._record(rows[0])

    def find_run(self, prefix: str) -> RunRecord:
        rows = self._read(f"SELECT {_COLUMNS} FROM runs WHERE id = %s OR id ILIKE %s "
                          "ORDER BY created_at DESC", (prefix, prefix.replace("%", "") + "%"))
        exact = [r for r in rows if r["id"] == prefix]
        if exact:
            return self._record(exact[0])
        if not rows:
            raise RunNotFound(f"no run '{prefix}' in the store ({self.where}); "
                              "`podium runs` lists them")
        if len(rows) > 1:
            ids = ", ".join(r["id"] for r in rows[:5])
            raise RunNotFound(f"'{prefix}' matches several runs ({ids}); give more of the id")
        return self._record(rows[0])

    def list_runs(self, *, status: str | tuple[str, ...] | None = None,
                  workflow: str | None = None,
                  limit: int = 50, parent: str | None = None) -> list[RunRecord]:
        where: list[str] = []
        params: list[Any] = []
        if isinstance(status, tuple):
            where.append("status = ANY(%s)")
            params.append(list(status))
        elif status:
            where.append("status = %s")
            params.append(status)
        if workflow:  # any part of its name or of its file's path (as SQLite: any case)
            like = "%" + workflow.replace("\\", "\\\\").replace("%", "\\%").replace(
                "_", "\\_") + "%"
            where.append("(workflow_name ILIKE %s OR workflow_path ILIKE %s)")
            params += [like, like]
        if parent:
            where.append("parent_run_id = %s")
            params.append(parent)
        sql = f"SELECT {_COLUMNS} FROM runs" + (f" WHERE {' AND '.join(where)}" if where else "")
        sql += " ORDER BY created_at DESC, rowid DESC LIMIT %s"
        params.append(limit)
        return [self._record(r) for r in self._read(sql, params)]

    def update_run(self, run_id: str, **fields: Any) -> None:
        if not fields:
            return
        fields["updated_at"] = time.time()
        cols = [c for c in fields if c in _RUN_COLUMNS]
        values = [self._column(c, fields[c]) for c in cols]
        with self._lock:
            self._write(f"UPDATE runs SET {', '.join(f'{c} = %s' for c in cols)} WHERE id = %s",
                        [*values, run_id])

    def delete_runs(self, run_ids: list[str]) -> int:
        """Remove these runs and everything kept with them in one transaction (all or none);
        how many runs were removed."""
        if not run_ids:
            return 0
        removed = 0
        with self._lock, self._transaction() as con:
            for table in ("events", "checkpoints", "gates", "leases", "live"):
                con.execute(f"DELETE FROM {table} WHERE run_id = ANY(%s)".encode(), (run_ids,))
            removed = con.execute(b"DELETE FROM runs WHERE id = ANY(%s)", (run_ids,)).rowcount
            for rid in run_ids:
                self._pending.pop(rid, None)
        return removed

    # ------------------------------------------------------------------ events (a Sink)

    def append_event(self, event: Event) -> None:
        with self._lock:
            pending = self._pending.get(event.run_id)
            if event.type == "run_finished" and pending is not None and pending.step and \
                    not pending.checkpoint:
                # a step finished but the run ended before its checkpoint: not committed
                del self._pending[event.run_id]
            pending = self._pending_of(event.run_id)
            if _completes_step(event):
                pending.step = True
            elif event.type == "checkpoint":
                pending.checkpoint = True
            if self._numbering:  # its seq is given when it commits (_write_numbered)
                pending.writes.append(event)
            else:
                pending.writes.append((_EVENT_INSERT, (event.run_id, event.seq, event.type,
                                                       event.ts, event.model_dump_json())))
            pending.writes.extend(self._summarise(event))
            if isinstance(event, Checkpointed) and not self._numbering:
                # the commit point of the step before it
                pending.writes.append((_CHECKPOINT_UPSERT, (event.run_id, event.seq,
                                                            event.step, event.next_step,
                                                            event.ts)))
            if not _defers(event):
                if not self._numbering:
                    pending.writes.append(("UPDATE runs SET last_seq = %s, updated_at = %s "
                                           "WHERE id = %s", (event.seq, event.ts, event.run_id)))
                self._flush([event.run_id])

    @staticmethod
    def _summarise(event: Event) -> list[_Write]:
        """The run row's updates an event implies (SQLite's, in PostgreSQL's dialect)."""
        t = event.type
        d: Any = event
        if t == "step_started":
            return [("UPDATE runs SET current_step = %s, status = 'running' WHERE id = %s",
                     (d.step, event.run_id))]
        if t in ("step_finished", "step_failed") and d.group is None:
            return [("UPDATE runs SET "
                     "input_tokens = input_tokens + %s, output_tokens = output_tokens + %s, "
                     "cost_usd = cost_usd + %s, cost_partial = GREATEST(cost_partial, %s) "
                     "WHERE id = %s",
                     (d.input_tokens, d.output_tokens, d.cost_usd or 0.0,
                      int(not d.priced), event.run_id))]
        if t == "checkpoint":
            return [("UPDATE runs SET iterations = %s WHERE id = %s",
                     (d.run_iteration, event.run_id))]
        if t == "run_started":
            return [("UPDATE runs SET status = 'running' WHERE id = %s", (event.run_id,))]
        if t == "run_finished":
            return [("UPDATE runs SET status = %s, exit_code = %s, output = %s, error = %s, "
                     "terminal = %s, reason = %s, finished_at = %s, current_step = %s, "
                     "iterations = %s WHERE id = %s",
                     (d.status, d.exit_code, _dumps(d.output) if d.output is not None
                      else None, d.message, d.terminal, d.reason,
                      None if d.status == "waiting" else event.ts,
                      d.step if d.status in ("waiting", "error", "limit", "interrupted")
                      else d.terminal, d.iterations, event.run_id))]
        return []

    def handle(self, event: Event) -> None:
        self.append_event(event)

    def events(self, run_id: str, after_seq: int = 0) -> list[dict[str, Any]]:
        rows = self._read("SELECT seq, body FROM events WHERE run_id = %s AND seq > %s "
                          "ORDER BY seq", (run_id, after_seq))
        return [self._loads(r["body"], f"event {r['seq']} of run {run_id}") for r in rows]

    def latest_checkpoint(self, run_id: str) -> Checkpoint | None:
        rows = self._read("SELECT * FROM checkpoints WHERE run_id = %s", (run_id,))
        if not rows:
            return None
        r = rows[0]
        return Checkpoint(r["run_id"], r["seq"], r["step"], r["next_step"], r["created_at"])

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

    def answer_gate(self, gate_id: int, answer: str, additional_input: dict[str, str],
                    answered_by: str) -> None:
        with self._lock:
            changed = self._write("UPDATE gates SET status = 'answered', answer = %s, "
                                  "additional_input = %s, answered_by = %s, answered_at = %s "
                                  "WHERE id = %s AND status = 'open'",
                                  (answer, _dumps(additional_input), answered_by, time.time(),
                                   gate_id))
            if changed != 1:
                raise StoreError(f"gate {gate_id} is not open (already answered?)")

    def consume_gate(self, gate_id: int) -> None:
        """Mark a gate used, together with its run's pending step (store/sqlite.py)."""
        with self._lock:
            rows = self._read("SELECT run_id FROM gates WHERE id = %s", (gate_id,))
            if not rows:
                return
            pending = self._pending_of(str(rows[0]["run_id"]))
            pending.consumed.add(gate_id)
            pending.writes.append(("UPDATE gates SET status = 'consumed' WHERE id = %s",
                                   (gate_id,)))

    def withdraw_gates(self, run_id: str) -> list[int]:
        """Close, at once and atomically, the gates of `run_id` still open."""
        with self._lock, self._connection(True) as con:
            rows = con.execute(b"UPDATE gates SET status = 'withdrawn' WHERE run_id = %s AND "
                               b"status = 'open' RETURNING id", (run_id,)).fetchall()
        return sorted(int(r[0]) for r in rows)

    def gates(self, *, run_id: str | None = None, status: str | None = None) -> list[GateRecord]:
        with self._lock:
            consumed = {g for p in self._pending.values() for g in p.consumed}
            where: list[str] = []
            params: list[Any] = []
            if run_id:
                where.append("run_id = %s")
                params.append(run_id)
            if status and not consumed:
                where.append("status = %s")
                params.append(status)
            sql = "SELECT * FROM gates" + (f" WHERE {' AND '.join(where)}" if where else "")
            rows = self._read(sql + " ORDER BY created_at, id", params)
        out = []
        for r in rows:
            if r["id"] in consumed:  # its consumption waits for its step's commit
                r["status"] = "consumed"
            if status and r["status"] != status:
                continue
            r["options"] = self._loads(r["options"], f"gate {r['id']} options")
            r["additional_input"] = self._loads(r["additional_input"] or "{}",
                                                f"gate {r['id']} additional input")
            out.append(GateRecord(**r))
        return out

    # ------------------------------------------------------------------ live rows

    def put_live(self, run_id: str, key: str, body: dict[str, Any]) -> None:
        """Write (or overwrite) one live row in a transaction of its own, on a connection of
        its own: it never commits, nor waits for, a run's pending step."""
        text = _dumps(self.redactor.value(body))
        self._live_write("INSERT INTO live (run_id, key, body, updated_at) "
                         "VALUES (%s, %s, %s, %s) ON CONFLICT (run_id, key) DO UPDATE SET "
                         "body = excluded.body, updated_at = excluded.updated_at",
                         (run_id, key, text, time.time()), run_id)

    def clear_live(self, run_id: str, key: str | None = None) -> None:
        """Remove one live row of the run, or all of them."""
        if key is None:
            self._live_write("DELETE FROM live WHERE run_id = %s", (run_id,), run_id)
        else:
            self._live_write("DELETE FROM live WHERE run_id = %s AND key = %s", (run_id, key),
                             run_id)

    def live(self, run_id: str) -> dict[str, dict[str, Any]]:
        """The run's live rows by key (empty when none streams)."""
        rows = self._read("SELECT key, body FROM live WHERE run_id = %s ORDER BY key",
                          (run_id,))
        out: dict[str, dict[str, Any]] = {}
        for r in rows:
            with contextlib.suppress(ValueError):  # a damaged row: only a missed glimpse
                value = json.loads(r["body"])
                if isinstance(value, dict):
                    out[str(r["key"])] = value
        return out

    def _live_write(self, sql: str, params: tuple[Any, ...], run_id: str) -> None:
        """An observer's write: a failure is reported, and never stops the run's writes."""
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
            cur = con.execute(b"SELECT * FROM leases WHERE run_id = %s", (run_id,))
            cols = [d.name for d in cur.description or ()]
            held = [Lease.from_row(dict(zip(cols, r, strict=True))) for r in cur.fetchall()]
            if held and held[0].owner != owner and alive(held[0]):
                other = held[0].owner
                raise RunOwned(f"run {run_id} is still running in another process (pid "
                               f"{other.pid} on {other.host}, `podium {other.command}`); "
                               f"wait for it, or stop it with podium stop {run_id}", held[0])
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

    def heartbeat(self, run_id: str, owner: Owner) -> bool:
        with self._lock:
            return self._write("UPDATE leases SET heartbeat_at = %s WHERE run_id = %s AND "
                               "pid = %s AND pid_start = %s AND host = %s",
                               (time.time(), run_id, owner.pid, owner.pid_start,
                                owner.host)) == 1

    def release_lease(self, run_id: str, owner: Owner) -> None:
        with self._lock:
            self._write("DELETE FROM leases WHERE run_id = %s AND pid = %s AND pid_start = %s "
                        "AND host = %s", (run_id, owner.pid, owner.pid_start, owner.host))

    def lease(self, run_id: str) -> Lease | None:
        rows = self._read("SELECT * FROM leases WHERE run_id = %s", (run_id,))
        return Lease.from_row(rows[0]) if rows else None

    def leases(self) -> list[Lease]:
        return [Lease.from_row(r) for r in self._read("SELECT * FROM leases ORDER BY "
                                                      "acquired_at")]

    # ------------------------------------------------------------------ closing

    def schema_version(self) -> int:
        """The schema version the database holds (podium doctor shows it)."""
        rows = self._read("SELECT max(version) AS v FROM podium_schema")
        return int(rows[0]["v"] or 0) if rows else 0

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                if self._failed is None:
                    self._flush(list(self._pending))
            finally:
                if self._pool is not None:
                    self._pool.close()
