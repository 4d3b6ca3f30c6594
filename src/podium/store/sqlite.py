"""The SQLite run store: one file under PODIUM_HOME, WAL journal, versioned migrations.

Events are written as they happen; the events that complete a step (gate_answered,
step_finished, route_taken, and the consumption of a parked gate's answer) wait for the
checkpoint that follows them, so a step is committed together with the state after it, or not
at all. The last checkpoint of a run (after a terminate step or a route to $end) also waits,
for run_finished: a run is never committed as complete-but-unfinished. What waits is kept per
run, in memory, and written in one short transaction when the run reaches its commit point:
runs in flight at once (the sub-workflows of a group, each in its own thread) commit or drop
their own pending step, never another's. A file that is not a valid database (wrong header,
truncated, unreadable rows) is reported and never overwritten.

The store is the run's committer: a write that fails (disk full, the file size limit, an I/O
error) raises StoreError, which stops the run, and every later write of this handle raises the
same error; nothing is written half. Only SQLite opens the file (store/files.py says why).
"""

from __future__ import annotations

import contextlib
import copy
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from podium.events.model import Checkpointed, Event
from podium.store import files
from podium.store.base import (
    GateRecord,
    Lease,
    Liveness,
    Owner,
    RunNotFound,
    RunRecord,
    StoreError,
)
from podium.store.schema import MIGRATIONS, SCHEMA_VERSION
from podium.store.sqlcore import (
    _RUN_COLUMNS,
    Dialect,
    SQLCore,
    _dumps,
    _owned,
    _Params,
    _Write,
    gone,
)
from podium.store.watch import FileWatch

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SQLiteStore", "default_store_path"]


_RUN_UPDATE = ("UPDATE runs SET ", " WHERE id = ?")
# a run-row assignment, parsed: ("set", n) `col = <expr with n ?>` (a later one replaces it),
# ("add", 1) `col = col + ?` (added up), ("or", 1) `col = col OR ?` (or-ed)
_Assign = tuple[str, str, str, int]  # column, kind, the assignment's text, its ? count
_UPDATES: dict[str, tuple[_Assign, ...]] = {}  # a few constant statements


def _parsed_update(sql: str) -> tuple[_Assign, ...]:
    """A run-row UPDATE's assignments, each with the column it sets and how."""
    hit = _UPDATES.get(sql)
    if hit is None:
        parsed: list[_Assign] = []
        for a in sql[len(_RUN_UPDATE[0]):-len(_RUN_UPDATE[1])].split(", "):
            col, expr = (x.strip() for x in a.split("=", 1))
            kind = ("add" if expr == f"{col} + ?" else "or" if expr == f"{col} OR ?"
                    else "set")
            parsed.append((col, kind, a, expr.count("?")))
        hit = _UPDATES[sql] = tuple(parsed)
    return hit


CHAIN = 64  # sums of floats chained in one statement at most (SQLite's expression depth)


class _RowUpdate:
    """The run-row updates of one transaction joined into one: a column set again takes the
    later value; sums and ORs of a column add up (integers in Python, exactly; floats chained
    in order, `col = col + ? + ?`, up to CHAIN of them, so they round as the separate
    statements did); a sum or OR after a set of the same column, or a chain at its length,
    closes this one first, so the statements still mean what they meant."""

    def __init__(self) -> None:
        self.cols: dict[str, tuple[str, str, list[Any]]] = {}  # column -> kind, text, params

    def joins(self, assigns: tuple[_Assign, ...]) -> bool:
        for col, kind, _, _ in assigns:
            seen = self.cols.get(col)
            if kind != "set" and seen is not None and (seen[0] != kind or
                                                       len(seen[2]) >= CHAIN):
                return False
        return True

    def add(self, assigns: tuple[_Assign, ...], params: tuple[Any, ...]) -> None:
        at = 0
        for col, kind, text, n in assigns:
            given = list(params[at:at + n])
            at += n
            seen = self.cols.get(col)
            if seen is None or kind == "set":
                self.cols[col] = (kind, text, given)
            elif kind == "or":
                seen[2][0] = int(bool(seen[2][0]) or bool(given[0]))
            elif len(seen[2]) == 1 and type(seen[2][0]) is int and type(given[0]) is int:
                seen[2][0] += given[0]  # integers (the token counts) add up exactly
            else:
                seen[2].extend(given)

    def statement(self, run_id: str) -> _Write:
        head, tail = _RUN_UPDATE
        parts = [text if kind != "add" else f"{col} = {col}" + " + ?" * len(params)
                 for col, (kind, text, params) in self.cols.items()]
        return _RowWrite((head + ", ".join(parts) + tail,
                          (*[p for _, _, params in self.cols.values() for p in params], run_id)))


class _RowWrite(tuple):  # type: ignore[type-arg]
    """A joined run-row UPDATE, as `_merged` gives it: the flush knows it by its type."""

    __slots__ = ()

    @property
    def run_id(self) -> str:
        return str(self[1][-1])  # the UPDATE's last parameter: `WHERE id = ?`


# statement -> whether it updates a run's row: asked of every write of a transaction (a
# fan-out's batch holds thousands), of a few texts (kept up to a bound: merged updates vary
# with their columns)
_ROW_UPDATES: dict[str, bool] = {}


def _is_row_update(sql: str) -> bool:
    """Whether a statement updates a run's row (remembered per text)."""
    is_row = _ROW_UPDATES.get(sql)
    if is_row is None:
        head, tail = _RUN_UPDATE
        is_row = sql.startswith(head) and sql.endswith(tail)
        if len(_ROW_UPDATES) < 1024:
            _ROW_UPDATES[sql] = is_row
    return is_row


def _merged(writes: list[_Write | Event]) -> list[_Write | Event]:
    """The writes of one transaction with a run's row updates joined into one UPDATE, placed
    after the writes between them (nothing else in a transaction reads those columns: events
    and checkpoints refer to the run by id only). A step commits four of them (its start, its
    tokens, its iterations, the last seq); a batch of a group's members, four per member."""
    groups: dict[str, _RowUpdate] = {}
    out: list[_Write | Event] = []
    known = _ROW_UPDATES.get  # asked of every write: the remembered answer first
    for w in writes:
        if type(w) is not tuple:  # an event numbered as it commits
            out.append(w)
            continue
        is_row = known(w[0])
        if not (_is_row_update(w[0]) if is_row is None else is_row):
            out.append(w)
            continue
        run_id = str(w[1][-1])  # its last parameter: `WHERE id = ?`
        assigns = _parsed_update(w[0])
        row = groups.get(run_id)
        if row is not None and not row.joins(assigns):
            out.append(groups.pop(run_id).statement(run_id))
            row = None
        if row is None:
            row = groups[run_id] = _RowUpdate()
        row.add(assigns, tuple(w[1][:-1]))
    out.extend(row.statement(run_id) for run_id, row in groups.items())
    return out


class SQLiteStore(SQLCore):
    """RunStore on SQLite. Safe to share between threads (one lock serialises access)."""

    SQL = Dialect(mark="?", runs="SELECT * FROM runs", like="LIKE ? ESCAPE '\\'",
                  prefix_like="LIKE", either="cost_partial OR ?")

    def __init__(self, path: Path, *, verify: bool | None = None) -> None:
        """Open (or create) the store. `verify`: True checks every page first (podium
        doctor), None checks them only when the last process to use the file did not close
        it (killed, crashed), False never."""
        self.path = path
        self.where = str(path)  # the store as messages name it: its file
        self._watch: FileWatch | None = None  # set once open: is the file still this one?
        self._init_core()
        # run id -> ((data_version, total_changes) when read, the options): run_options
        self._options_seen: dict[str, tuple[tuple[int, int], dict[str, Any]]] = {}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the run store folder {path.parent}: "
                             f"{exc.strerror or exc}") from None
        with files.opening():  # no other thread of this process connects in between
            try:
                files.check_file(path)
            except files.FileProblem as exc:
                raise self._untouched(str(exc)) from None
            unclean = verify is None and files.closed_uncleanly(path)
            try:
                self.db = files.connect(path)
            except sqlite3.Error as exc:
                raise self._corrupt(exc) from None
        try:
            self._check_version()
            if verify or unclean:
                self._verify()
            mode = self.db.execute("PRAGMA journal_mode=WAL").fetchone()
            if mode is None:
                raise sqlite3.DatabaseError("cannot set the journal mode")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.execute("PRAGMA foreign_keys=ON")
            # check each b-tree page as it is read: a damaged page is refused before a
            # write lands on it (the whole-file check is `podium doctor`'s)
            self.db.execute("PRAGMA cell_size_check=ON")
            self._migrate()
            self._watch = FileWatch.of(path)
        except BaseException as exc:
            self.db.close()
            if isinstance(exc, sqlite3.Error):
                raise self._corrupt(exc) from None
            raise

    @property
    def folder(self) -> Path:
        """The folder of the store file: the runs' own files go beside it."""
        return self.path.parent

    # ------------------------------------------------------------------ opening

    def _untouched(self, what: str) -> StoreError:
        return StoreError(f"the run store {self.path} {what}. It was left untouched: move it "
                          "aside to start a new store, or set PODIUM_HOME to another folder")

    def _corrupt(self, exc: Exception) -> StoreError:
        if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
            return StoreError(f"the run store {self.path} is busy: another podium process "
                              "held it for more than 10 s; try again")
        return self._untouched(f"cannot be used: {exc}")

    def _check_version(self) -> None:
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreError(f"the run store {self.path} was written by a newer podium "
                             f"(schema {version}, this podium knows {SCHEMA_VERSION}); it was "
                             "left untouched: upgrade podium, or set PODIUM_HOME to another "
                             "folder")
        if version == 0:
            tables = self.db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            if tables:
                raise self._untouched("is a SQLite database of another program (it has tables "
                                      "but no podium schema version)")

    def _verify(self) -> None:
        """SQLite's quick check of every page (fast: one pass, no index comparison)."""
        problems = [str(r[0]) for r in self.db.execute("PRAGMA quick_check(3)").fetchall()]
        if problems != ["ok"]:
            first = " ".join(" ".join(problems).split())
            raise self._untouched(f"is corrupted (SQLite's check: {first[:200]})")

    def _migrate(self) -> None:
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        if version == SCHEMA_VERSION:
            self.db.execute("SELECT 1 FROM runs LIMIT 1").fetchone()  # not count(*): O(1)
            return
        for number in range(version, SCHEMA_VERSION):
            self.db.execute("BEGIN IMMEDIATE")
            # another process may have migrated while we waited for the write lock
            if self.db.execute("PRAGMA user_version").fetchone()[0] > number:
                self.db.execute("COMMIT")
                continue
            try:
                for statement in MIGRATIONS[number].split(";"):
                    if statement.strip():
                        self.db.execute(statement)
                self.db.execute(f"PRAGMA user_version={number + 1}")
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise

    # ------------------------------------------------------------------ transactions

    def _flush(self, run_ids: list[str]) -> None:
        """Write these runs' pending writes in one transaction (all of them, or none)."""
        batches = {rid: p for rid in run_ids if (p := self._pending.pop(rid, None)) is not None}
        writes = _merged([w for p in batches.values() for w in p.writes])
        if not writes:
            return
        self._write("BEGIN IMMEDIATE", ())
        try:
            # a run removed under its owner stops, it never goes on: a run whose row this
            # transaction updates is checked by that UPDATE (no row changed: rolled back),
            # any other by a read first
            updated = {w.run_id for w in writes if type(w) is _RowWrite}
            for rid in batches:
                if rid not in updated and self._write("SELECT 1 FROM runs WHERE id = ?",
                                                      (rid,)).fetchone() is None:
                    self._gone(rid)
            given: dict[str, int] = {}  # run id -> last seq given in this transaction
            same: list[Any] = []  # a run of one statement's parameters (events, mostly)
            for i, w in enumerate(writes):
                if not isinstance(w, tuple):
                    self._write_numbered(w, given)
                    continue
                if type(w) is _RowWrite:  # every run-row UPDATE, joined by _merged
                    if self._write(w[0], w[1]).rowcount == 0:
                        self._gone(w.run_id)
                    continue
                same.append(w[1])
                after = writes[i + 1] if i + 1 < len(writes) else None
                if not (isinstance(after, tuple) and after[0] == w[0]):
                    self._write_many(w[0], same)
                    same = []
            for run_id, seq in given.items():
                self._write(self.SQL.last_seq, (seq, time.time(), run_id))
            self._write("COMMIT", ())
        except BaseException:
            self._rollback()
            raise

    def _gone(self, run_id: str) -> NoReturn:
        self._failed = StoreError(gone(run_id, self.where))
        raise self._failed

    def _write_numbered(self, event: Event, given: dict[str, int]) -> None:
        """Write an event with the next seq of its run (inside the flush's transaction)."""
        run_id = event.run_id
        if run_id not in given:
            row = self._write("SELECT last_seq FROM runs WHERE id = ?", (run_id,)).fetchone()
            given[run_id] = int(row[0]) if row is not None else 0
        seq = given[run_id] = given[run_id] + 1
        numbered = event.model_copy(update={"seq": seq})
        self._write(self.SQL.event_insert,
                    (run_id, seq, event.type, event.ts, numbered.model_dump_json()))
        if isinstance(event, Checkpointed):
            self._write(self.SQL.checkpoint_upsert, (run_id, seq, event.step, event.next_step,
                                                     event.ts))

    def _rollback(self) -> None:
        if self.db.in_transaction:
            # SQLite may have rolled back itself (a full disk, an I/O error)
            with contextlib.suppress(sqlite3.Error):
                self.db.execute("ROLLBACK")

    def _write(self, sql: str, params: tuple[Any, ...] | list[Any]) -> sqlite3.Cursor:
        if self._failed is not None:
            raise self._failed
        fresh = not self.db.in_transaction
        if fresh and self._watch is not None and (moved := self._watch.problem()):
            # a write now would go into a file nobody can open again, or a broken log
            self._failed = StoreError(f"the run store {self.path} {moved}: nothing more "
                                      "is written to it")
            raise self._failed
        try:
            cur = self.db.execute(sql, params)
        except sqlite3.Error as exc:
            raise self._stopped(exc) from None
        if not self.db.in_transaction and self._watch is not None:
            self._watch.written()
        return cur

    def _write_many(self, sql: str, rows: list[Any]) -> None:
        """One statement for each of `rows`, inside the flush's transaction."""
        if len(rows) == 1:
            self._write(sql, rows[0])
            return
        if self._failed is not None:
            raise self._failed
        try:
            self.db.executemany(sql, rows)
        except sqlite3.Error as exc:
            raise self._stopped(exc) from None

    def _stopped(self, exc: sqlite3.Error) -> StoreError:
        """The error of a failed write; unless the file was only locked, the run stops here
        and nothing more is written."""
        failed = self._write_failed(exc)
        if not (isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)):
            self._failed = failed
        return failed

    def _write_failed(self, exc: sqlite3.Error) -> StoreError:
        """A failed write: a damaged file is left alone; anything else (disk full, the file
        size limit, an I/O error) is named with its reason."""
        text = str(exc)
        if isinstance(exc, sqlite3.DatabaseError) and any(
                w in text for w in ("malformed", "not a database", "locked")):
            return self._corrupt(exc)
        name = str(getattr(exc, "sqlite_errorname", ""))
        if name.startswith(("SQLITE_FULL", "SQLITE_IOERR_WRITE", "SQLITE_IOERR_FSYNC",
                            "SQLITE_IOERR_TRUNCATE")):
            text += f" ({name}: is the disk full, or the file at its size limit?)"
        elif name:
            text += f" ({name})"
        return StoreError(f"cannot write to the run store {self.path}: {text}")

    def _changed(self, sql: str, params: _Params) -> int:
        return self._write(sql, params).rowcount

    def _damaged(self, what: str) -> StoreError:
        return self._untouched(what)

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

    def _disconnect(self) -> None:
        self.db.close()

    def _read(self, sql: str, params: _Params = ()) -> list[dict[str, Any]]:
        with self._lock:
            try:
                cur = self.db.execute(sql, params)
                cols = [d[0] for d in cur.description]
                return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]
            except sqlite3.Error as exc:
                raise self._corrupt(exc) from None

    # ------------------------------------------------------------------ runs

    def run_options(self, run_id: str) -> dict[str, Any]:
        """A run's options, read again only when the file changed since the last read: another
        connection committed (`PRAGMA data_version`, a counter SQLite keeps in shared memory)
        or this one changed a row (`total_changes`)."""
        with self._lock:
            try:
                (version,) = self.db.execute("PRAGMA data_version").fetchone()
            except sqlite3.Error as exc:
                raise self._corrupt(exc) from None
            stamp = (version, self.db.total_changes)
            seen = self._options_seen.get(run_id)
            if seen is None or seen[0] != stamp:
                seen = self._options_seen[run_id] = (stamp, super().run_options(run_id))
            return copy.deepcopy(seen[1])

    def create_run(self, record: RunRecord, owner: Owner | None = None) -> None:
        """Record a new run; with `owner`, leased to it in the same transaction (a run is
        never seen without the process that advances it)."""
        now = time.time()
        record.created_at = record.created_at or now
        record.updated_at = now
        values = [self._column(c, getattr(record, c)) for c in _RUN_COLUMNS]
        with self._lock:
            self._write("BEGIN IMMEDIATE", ())
            try:
                self._write(f"INSERT INTO runs ({', '.join(_RUN_COLUMNS)}) VALUES "
                            f"({', '.join('?' * len(_RUN_COLUMNS))})", values)
                if owner is not None:
                    self._insert_lease(record.id, owner, now)
                self._write("COMMIT", ())
            except BaseException:
                self._rollback()
                raise

    # ------------------------------------------------------------------ gates

    def open_gate(self, gate: GateRecord) -> int:
        with self._lock:
            cur = self._write(
                "INSERT INTO gates (run_id, step, kind, prompt, options, status, created_at) "
                "VALUES (?, ?, ?, ?, ?, 'open', ?)",
                (gate.run_id, gate.step, gate.kind, self.redactor.text(gate.prompt),
                 _dumps(self.redactor.value(gate.options)), gate.created_at or time.time()))
            return int(cur.lastrowid or 0)

    def withdraw_gates(self, run_id: str) -> list[int]:
        """Close, at once and atomically, the gates of `run_id` still open (nobody answered
        them): the run, resumed by the caller, asks them again. A gate answered a moment
        before keeps its answer; an answer given a moment after finds no open gate."""
        with self._lock:
            self._write("BEGIN IMMEDIATE", ())
            try:
                ids = [int(r[0]) for r in self._write(
                    "SELECT id FROM gates WHERE run_id = ? AND status = 'open'",
                    (run_id,)).fetchall()]
                self._write("UPDATE gates SET status = 'withdrawn' WHERE run_id = ? AND "
                            "status = 'open'", (run_id,))
                self._write("COMMIT", ())
            except BaseException:
                self._rollback()
                raise
            return ids

    def delete_runs(self, run_ids: list[str], *, unless_owned: Liveness | None = None,
                    statuses: tuple[str, ...] = (),
                    still: Callable[[RunRecord], bool] | None = None) -> int:
        """Remove these runs and everything kept with them (events, checkpoints, gates,
        leases, live rows) in one transaction: all of them, or none. Returns how many runs were
        removed. The caller decides which runs may go (`podium fleet prune`); with
        `unless_owned` the decision is made again under the write lock that a resume's
        lease also takes (store/base.py says how)."""
        if not run_ids:
            return 0
        removed = 0
        with self._lock:
            self._write("BEGIN IMMEDIATE", ())
            try:
                if unless_owned is not None and not self._removable(run_ids[0], unless_owned,
                                                                    statuses, still):
                    self._rollback()
                    return 0
                for rid in run_ids:
                    for table in ("events", "checkpoints", "gates", "leases", "live"):
                        self._write(f"DELETE FROM {table} WHERE run_id = ?", (rid,))
                    removed += self._write("DELETE FROM runs WHERE id = ?", (rid,)).rowcount
                    self._pending.pop(rid, None)
                self._write("COMMIT", ())
            except BaseException:
                self._rollback()
                raise
        return removed

    def _removable(self, run_id: str, alive: Liveness, statuses: tuple[str, ...],
                   still: Callable[[RunRecord], bool] | None) -> bool:
        """Inside the removal's transaction: no live owner holds the run, its status is
        still one of `statuses`, and `still` holds for its row as it is now."""
        rows = self._read(self.SQL.sql(f"{self.SQL.runs} WHERE id = ?"), (run_id,))
        if not rows or (statuses and rows[0]["status"] not in statuses):
            return False
        if still is not None and not still(self._record(rows[0])):
            return False
        held = self._lease_rows("WHERE run_id = ?", (run_id,))
        return not (held and alive(held[0]))

    # ------------------------------------------------------------------ leases

    def acquire_lease(self, run_id: str, owner: Owner, alive: Liveness) -> Lease:
        """Take the run for `owner` in one write transaction: two processes asking at once
        are serialised by SQLite's write lock, so one of them finds the other's lease."""
        now = time.time()
        with self._lock:
            self._write("BEGIN IMMEDIATE", ())
            try:
                if self._write("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
                    self._rollback()
                    raise RunNotFound(gone(run_id, self.where))
                held = self._lease_rows("WHERE run_id = ?", (run_id,))
                if held and held[0].owner != owner and alive(held[0]):
                    self._rollback()
                    raise _owned(run_id, held[0])
                self._insert_lease(run_id, owner, now)
                self._write("COMMIT", ())
            except BaseException:
                self._rollback()
                raise
        return Lease(run_id, owner, now, now)

    def _insert_lease(self, run_id: str, owner: Owner, now: float) -> None:
        self._write("INSERT INTO leases (run_id, pid, pid_start, host, command, acquired_at, "
                    "heartbeat_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(run_id) DO UPDATE "
                    "SET pid = excluded.pid, pid_start = excluded.pid_start, "
                    "host = excluded.host, command = excluded.command, "
                    "acquired_at = excluded.acquired_at, heartbeat_at = excluded.heartbeat_at",
                    (run_id, owner.pid, owner.pid_start, owner.host, owner.command, now, now))


def default_store_path(home: Path) -> Path:
    return home / "podium.db"
