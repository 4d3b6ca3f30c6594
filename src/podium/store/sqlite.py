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
import json
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from podium.events.model import Checkpointed, Event
from podium.events.redact import Redactor
from podium.language.model import END
from podium.store import files
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
from podium.store.live import LiveRows
from podium.store.schema import MIGRATIONS, SCHEMA_VERSION

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SQLiteStore", "default_store_path"]

# Events that complete a step wait for the checkpoint's commit.
_DEFERRED = frozenset({"step_finished", "route_taken", "gate_answered"})
_JSON_COLUMNS = frozenset({"inputs", "output", "options"})
_RUN_COLUMNS = tuple(RunRecord.__dataclass_fields__)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))


_Write = tuple[str, tuple[Any, ...]]
_CHECKPOINT_UPSERT = ("INSERT INTO checkpoints (run_id, seq, step, next_step, created_at) "
                      "VALUES (?, ?, ?, ?, ?) ON CONFLICT(run_id) DO UPDATE SET "
                      "seq = excluded.seq, step = excluded.step, "
                      "next_step = excluded.next_step, created_at = excluded.created_at")


@dataclass
class _Pending:
    """What one run wrote that waits for its commit point (a checkpoint, or its end)."""

    writes: list[_Write | Event] = field(default_factory=list)  # an Event: numbered at commit
    consumed: set[int] = field(default_factory=set)  # gates whose answer the step used
    step: bool = False  # holds a finished step's events
    checkpoint: bool = False  # ... and the checkpoint that commits them


def _completes_step(event: Event) -> bool:
    """Does this event complete a step that its checkpoint must commit? A group member's
    step_finished does not: a member is committed on its own as soon as it finishes, so a
    resume after a kill inside the group reuses it instead of running it again."""
    # the field read from the model's own values: an event type without it (route_taken)
    # would go through pydantic's __getattr__ and an AttributeError, on every event
    return event.type in _DEFERRED and event.__dict__.get("group") is None


def _defers(event: Event) -> bool:
    """Does this event wait with its run's pending writes (for a checkpoint or run_finished)?"""
    if _completes_step(event):
        return True
    if event.type == "step_started" and event.__dict__.get("step_type") in _INSTANT and \
            event.__dict__.get("group") is None:
        return True
    return isinstance(event, Checkpointed) and event.next_step in (None, END)


# Steps that only compute from the run's state (no process, model, person or clock to wait
# for): the start of one commits with its end, one transaction per step instead of two (a
# `set` step's second commit was a fifth of its cost; docs/performance.md). A reader sees
# such a step start when it has finished; one killed half-way is as if it never started.
_INSTANT = frozenset({"set"})


_RUN_UPDATE = ("UPDATE runs SET ", " WHERE id = ?")
_UPDATES: dict[str, tuple[str, frozenset[str]]] = {}  # a few constant statements


def _parsed_update(sql: str) -> tuple[str, frozenset[str]]:
    """A run-row UPDATE's assignments and the columns they set."""
    hit = _UPDATES.get(sql)
    if hit is None:
        assignments = sql[len(_RUN_UPDATE[0]):-len(_RUN_UPDATE[1])]
        hit = _UPDATES[sql] = (assignments, frozenset(
            a.split("=", 1)[0].strip() for a in assignments.split(", ")))
    return hit


def _merged(writes: list[_Write | Event]) -> list[_Write | Event]:
    """The writes of one transaction with a run's row updates joined into one UPDATE, placed
    after the writes between them (nothing else in a transaction reads those columns: events
    and checkpoints refer to the run by id only); an update that sets a column already set
    closes the joined one first, so the later value still wins. A step commits four of them
    (its start, its tokens, its iterations, the last seq)."""
    head, tail = _RUN_UPDATE
    groups: dict[str, tuple[list[str], list[Any], set[str]]] = {}
    out: list[_Write | Event] = []

    def close(run_id: str) -> None:
        parts, params, _ = groups.pop(run_id)
        out.append((head + ", ".join(parts) + tail, (*params, run_id)))

    for w in writes:
        if not (isinstance(w, tuple) and w[0].startswith(head) and w[0].endswith(tail)):
            out.append(w)
            continue
        assignments, columns = _parsed_update(w[0])
        run_id = w[1][-1]
        if run_id in groups and groups[run_id][2] & columns:
            close(run_id)
        parts, params, seen = groups.setdefault(run_id, ([], [], set()))
        parts.append(assignments)
        params.extend(w[1][:-1])
        seen |= columns
    for run_id in list(groups):
        close(run_id)
    return out


class SQLiteStore(LiveRows):
    """RunStore on SQLite. Safe to share between threads (one lock serialises access)."""

    def __init__(self, path: Path, *, verify: bool | None = None) -> None:
        """Open (or create) the store. `verify`: True checks every page first (podium
        doctor), None checks them only when the last process to use the file did not close
        it (killed, crashed), False never."""
        self.path = path
        self._lock = threading.RLock()
        self._pending: dict[str, _Pending] = {}  # by run id: writes waiting for a commit
        self._closed = False
        self._failed: StoreError | None = None  # set by the first write that failed
        self._numbering = False  # number_at_commit(): this handle gives events their seq
        # secrets of the runs this process advances: never written (make_engine shares the
        # run's redactor with its store)
        self.redactor = Redactor()
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
        except BaseException as exc:
            self.db.close()
            if isinstance(exc, sqlite3.Error):
                raise self._corrupt(exc) from None
            raise

    @property
    def where(self) -> str:
        """The store as messages name it: its file."""
        return str(self.path)

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

    def _pending_of(self, run_id: str) -> _Pending:
        pending = self._pending.get(run_id)
        if pending is None:
            pending = self._pending[run_id] = _Pending()
        return pending

    def _flush(self, run_ids: list[str]) -> None:
        """Write these runs' pending writes in one transaction (all of them, or none)."""
        batches = [p for rid in run_ids if (p := self._pending.pop(rid, None)) is not None]
        writes = _merged([w for p in batches for w in p.writes])
        if not writes:
            return
        self._write("BEGIN IMMEDIATE", ())
        try:
            given: dict[str, int] = {}  # run id -> last seq given in this transaction
            for w in writes:
                if isinstance(w, tuple):
                    self._write(*w)
                else:
                    self._write_numbered(w, given)
            for run_id, seq in given.items():
                self._write("UPDATE runs SET last_seq = ?, updated_at = ? WHERE id = ?",
                            (seq, time.time(), run_id))
            self._write("COMMIT", ())
        except BaseException:
            self._rollback()
            raise

    def _write_numbered(self, event: Event, given: dict[str, int]) -> None:
        """Write an event with the next seq of its run (inside the flush's transaction)."""
        run_id = event.run_id
        if run_id not in given:
            row = self._write("SELECT last_seq FROM runs WHERE id = ?", (run_id,)).fetchone()
            given[run_id] = int(row[0]) if row is not None else 0
        seq = given[run_id] = given[run_id] + 1
        numbered = event.model_copy(update={"seq": seq})
        self._write("INSERT INTO events (run_id, seq, type, ts, body) VALUES (?, ?, ?, ?, ?)",
                    (run_id, seq, event.type, event.ts, numbered.model_dump_json()))
        if isinstance(event, Checkpointed):
            self._write(_CHECKPOINT_UPSERT, (run_id, seq, event.step, event.next_step,
                                             event.ts))

    def number_at_commit(self) -> None:
        """This handle numbers the events it commits (store/base.py RunStore says how)."""
        self._numbering = True

    def _rollback(self) -> None:
        if self.db.in_transaction:
            # SQLite may have rolled back itself (a full disk, an I/O error)
            with contextlib.suppress(sqlite3.Error):
                self.db.execute("ROLLBACK")

    def commit(self) -> None:
        """Write whatever any run left pending."""
        with self._lock:
            self._flush(list(self._pending))

    def _write(self, sql: str, params: tuple[Any, ...] | list[Any]) -> sqlite3.Cursor:
        if self._failed is not None:
            raise self._failed
        try:
            return self.db.execute(sql, params)
        except sqlite3.Error as exc:
            failed = self._write_failed(exc)
            if not (isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)):
                self._failed = failed  # the run stops here; nothing more is written
            raise failed from None

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

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        with self._lock:
            try:
                cur = self.db.execute(sql, params)
                cols = [d[0] for d in cur.description]
                return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]
            except sqlite3.Error as exc:
                raise self._corrupt(exc) from None

    # ------------------------------------------------------------------ runs

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

    def _column(self, column: str, value: Any) -> Any:
        """A run column's value as written: JSON for JSON columns, secrets redacted."""
        if column in _JSON_COLUMNS:
            return None if value is None and column == "output" else \
                _dumps(self.redactor.value(value))
        return self.redactor.text(value) if isinstance(value, str) else value

    def _loads(self, text: str, what: str) -> Any:
        try:
            return json.loads(text)
        except (TypeError, ValueError) as exc:
            raise self._untouched(f"is corrupted ({what} is not readable JSON: {exc})") from None

    def _record(self, row: dict[str, Any]) -> RunRecord:
        data = dict(row)
        for c in _JSON_COLUMNS:
            if data.get(c) is not None:
                data[c] = self._loads(data[c], f"run {data.get('id')} {c}")
        data["cost_partial"] = bool(data["cost_partial"])
        try:
            return RunRecord(**data)
        except TypeError as exc:
            raise self._untouched(f"is corrupted (run row: {exc})") from None

    def get_run(self, run_id: str) -> RunRecord:
        rows = self._read("SELECT * FROM runs WHERE id = ?", (run_id,))
        if not rows:
            raise RunNotFound(f"no run '{run_id}' in the store ({self.path})")
        return self._record(rows[0])

    def find_run(self, prefix: str) -> RunRecord:
        rows = self._read("SELECT * FROM runs WHERE id = ? OR id LIKE ? ORDER BY created_at DESC",
                          (prefix, prefix.replace("%", "") + "%"))
        exact = [r for r in rows if r["id"] == prefix]
        if exact:
            return self._record(exact[0])
        if not rows:
            raise RunNotFound(f"no run '{prefix}' in the store ({self.path}); "
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
            where.append(f"status IN ({', '.join('?' * len(status))})")
            params += list(status)
        elif status:
            where.append("status = ?")
            params.append(status)
        if workflow:  # any part of its name or of its file's path
            like = "%" + workflow.replace("\\", "\\\\").replace("%", "\\%").replace(
                "_", "\\_") + "%"
            where.append("(workflow_name LIKE ? ESCAPE '\\' OR workflow_path LIKE ? ESCAPE '\\')")
            params += [like, like]
        if parent:
            where.append("parent_run_id = ?")
            params.append(parent)
        sql = "SELECT * FROM runs" + (f" WHERE {' AND '.join(where)}" if where else "")
        sql += " ORDER BY created_at DESC, rowid DESC LIMIT ?"
        params.append(limit)
        return [self._record(r) for r in self._read(sql, tuple(params))]

    def update_run(self, run_id: str, **fields: Any) -> None:
        if not fields:
            return
        fields["updated_at"] = time.time()
        cols = [c for c in fields if c in _RUN_COLUMNS]
        values = [int(fields[c]) if isinstance(fields[c], bool) else self._column(c, fields[c])
                  for c in cols]
        with self._lock:
            self._write(f"UPDATE runs SET {', '.join(f'{c} = ?' for c in cols)} WHERE id = ?",
                        [*values, run_id])

    # ------------------------------------------------------------------ events (a Sink)

    def append_event(self, event: Event) -> None:
        with self._lock:
            pending = self._pending.get(event.run_id)
            if event.type == "run_finished" and pending is not None and pending.step and \
                    not pending.checkpoint:
                # a step finished but the run ended before its checkpoint (an interrupt, a
                # routing error): the step was not committed, so its events are not either
                del self._pending[event.run_id]
            pending = self._pending_of(event.run_id)
            if _completes_step(event):
                pending.step = True
            elif event.type == "checkpoint":
                pending.checkpoint = True
            if self._numbering:  # its seq is given when it commits (_write_numbered)
                pending.writes.append(event)
            else:
                pending.writes.append(
                    ("INSERT INTO events (run_id, seq, type, ts, body) VALUES (?, ?, ?, ?, ?)",
                     (event.run_id, event.seq, event.type, event.ts, event.model_dump_json())))
            pending.writes.extend(self._summarise(event))
            if isinstance(event, Checkpointed) and not self._numbering:
                # the commit point of the step before it
                pending.writes.append((_CHECKPOINT_UPSERT, (event.run_id, event.seq,
                                                            event.step, event.next_step,
                                                            event.ts)))
            if not _defers(event):
                if not self._numbering:
                    pending.writes.append(("UPDATE runs SET last_seq = ?, updated_at = ? "
                                           "WHERE id = ?", (event.seq, event.ts, event.run_id)))
                self._flush([event.run_id])

    @staticmethod
    def _summarise(event: Event) -> list[_Write]:
        """The run row's updates an event implies."""
        t = event.type
        d: Any = event
        if t == "step_started":
            return [("UPDATE runs SET current_step = ?, status = 'running' WHERE id = ?",
                     (d.step, event.run_id))]
        if t in ("step_finished", "step_failed") and d.group is None:
            # A group member's usage is in its group's own step_finished: counted once there.
            return [("UPDATE runs SET "
                     "input_tokens = input_tokens + ?, output_tokens = output_tokens + ?, "
                     "cost_usd = cost_usd + ?, cost_partial = cost_partial OR ? WHERE id = ?",
                     (d.input_tokens, d.output_tokens, d.cost_usd or 0.0,
                      int(not d.priced), event.run_id))]
        if t == "checkpoint":
            return [("UPDATE runs SET iterations = ? WHERE id = ?",
                     (d.run_iteration, event.run_id))]
        if t == "run_started":
            return [("UPDATE runs SET status = 'running' WHERE id = ?", (event.run_id,))]
        if t == "run_finished":
            return [("UPDATE runs SET status = ?, exit_code = ?, output = ?, error = ?, "
                     "terminal = ?, reason = ?, finished_at = ?, current_step = ?, "
                     "iterations = ? WHERE id = ?",
                     (d.status, d.exit_code, _dumps(d.output) if d.output is not None
                      else None, d.message, d.terminal, d.reason,
                      None if d.status == "waiting" else event.ts,
                      d.step if d.status in ("waiting", "error", "limit", "interrupted")
                      else d.terminal, d.iterations, event.run_id))]
        return []

    def handle(self, event: Event) -> None:
        self.append_event(event)

    def events(self, run_id: str, after_seq: int = 0) -> list[dict[str, Any]]:
        rows = self._read("SELECT seq, body FROM events WHERE run_id = ? AND seq > ? "
                          "ORDER BY seq", (run_id, after_seq))
        return [self._loads(r["body"], f"event {r['seq']} of run {run_id}") for r in rows]

    # ------------------------------------------------------------------ checkpoints

    def latest_checkpoint(self, run_id: str) -> Checkpoint | None:
        rows = self._read("SELECT * FROM checkpoints WHERE run_id = ?", (run_id,))
        if not rows:
            return None
        r = rows[0]
        return Checkpoint(r["run_id"], r["seq"], r["step"], r["next_step"], r["created_at"])

    # ------------------------------------------------------------------ gates

    def open_gate(self, gate: GateRecord) -> int:
        with self._lock:
            cur = self._write(
                "INSERT INTO gates (run_id, step, kind, prompt, options, status, created_at) "
                "VALUES (?, ?, ?, ?, ?, 'open', ?)",
                (gate.run_id, gate.step, gate.kind, self.redactor.text(gate.prompt),
                 _dumps(self.redactor.value(gate.options)), gate.created_at or time.time()))
            return int(cur.lastrowid or 0)

    def answer_gate(self, gate_id: int, answer: str, additional_input: dict[str, str],
                    answered_by: str) -> None:
        with self._lock:
            cur = self._write("UPDATE gates SET status = 'answered', answer = ?, "
                              "additional_input = ?, answered_by = ?, answered_at = ? "
                              "WHERE id = ? AND status = 'open'",
                              (answer, _dumps(additional_input), answered_by, time.time(),
                               gate_id))
            if cur.rowcount != 1:
                raise StoreError(f"gate {gate_id} is not open (already answered?)")

    def consume_gate(self, gate_id: int) -> None:
        """Mark a gate used. This waits with its run's pending step: an answer is consumed
        only together with the completion of the step that used it (or with the run's next
        commit, or `commit()`). This handle reads the gate as consumed at once."""
        with self._lock:
            rows = self._read("SELECT run_id FROM gates WHERE id = ?", (gate_id,))
            if not rows:
                return
            pending = self._pending_of(str(rows[0]["run_id"]))
            pending.consumed.add(gate_id)
            pending.writes.append(("UPDATE gates SET status = 'consumed' WHERE id = ?",
                                   (gate_id,)))

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

    def gates(self, *, run_id: str | None = None, status: str | None = None) -> list[GateRecord]:
        with self._lock:
            consumed = {g for p in self._pending.values() for g in p.consumed}
            where: list[str] = []
            params: list[Any] = []
            if run_id:
                where.append("run_id = ?")
                params.append(run_id)
            if status and not consumed:
                where.append("status = ?")
                params.append(status)
            sql = "SELECT * FROM gates" + (f" WHERE {' AND '.join(where)}" if where else "")
            rows = self._read(sql + " ORDER BY created_at, id", tuple(params))
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

    def delete_runs(self, run_ids: list[str]) -> int:
        """Remove these runs and everything kept with them (events, checkpoints, gates,
        leases, live rows) in one transaction: all of them, or none. Returns how many runs were
        removed. The caller decides which runs may go (`podium fleet prune`)."""
        if not run_ids:
            return 0
        removed = 0
        with self._lock:
            self._write("BEGIN IMMEDIATE", ())
            try:
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

    # ------------------------------------------------------------------ leases

    def acquire_lease(self, run_id: str, owner: Owner, alive: Liveness) -> Lease:
        """Take the run for `owner` in one write transaction: two processes asking at once
        are serialised by SQLite's write lock, so one of them finds the other's lease."""
        now = time.time()
        with self._lock:
            self._write("BEGIN IMMEDIATE", ())
            try:
                held = self._lease_rows("WHERE run_id = ?", (run_id,))
                if held and held[0].owner != owner and alive(held[0]):
                    self._rollback()
                    other = held[0].owner
                    raise RunOwned(f"run {run_id} is still running in another process (pid "
                                   f"{other.pid} on {other.host}, `podium {other.command}`); "
                                   f"wait for it, or stop it with podium stop {run_id}",
                                   held[0])
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

    def heartbeat(self, run_id: str, owner: Owner) -> bool:
        with self._lock:
            cur = self._write("UPDATE leases SET heartbeat_at = ? WHERE run_id = ? AND pid = ? "
                              "AND pid_start = ? AND host = ?",
                              (time.time(), run_id, owner.pid, owner.pid_start, owner.host))
            return cur.rowcount == 1

    def release_lease(self, run_id: str, owner: Owner) -> None:
        with self._lock:
            self._write("DELETE FROM leases WHERE run_id = ? AND pid = ? AND pid_start = ? "
                        "AND host = ?", (run_id, owner.pid, owner.pid_start, owner.host))

    def lease(self, run_id: str) -> Lease | None:
        found = self._lease_rows("WHERE run_id = ?", (run_id,))
        return found[0] if found else None

    def leases(self) -> list[Lease]:
        return self._lease_rows("ORDER BY acquired_at", ())

    def _lease_rows(self, where: str, params: tuple[Any, ...]) -> list[Lease]:
        rows = self._read(f"SELECT * FROM leases {where}", params)
        return [Lease.from_row(r) for r in rows]

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                if self._failed is None:
                    self._flush(list(self._pending))
            finally:
                self.db.close()


def default_store_path(home: Path) -> Path:
    return home / "podium.db"
