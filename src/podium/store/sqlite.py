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
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from podium.events.model import Checkpointed, Event
from podium.language.model import END
from podium.store.base import (
    Checkpoint,
    GateRecord,
    RunNotFound,
    RunRecord,
    StoreError,
)

SCHEMA_VERSION = 1

MIGRATIONS: list[str] = [
    # 1: runs, events, checkpoints, gates
    """
    CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        workflow_name TEXT NOT NULL,
        workflow_path TEXT NOT NULL,
        workflow_hash TEXT NOT NULL,
        inputs TEXT NOT NULL,
        status TEXT NOT NULL,
        current_step TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        finished_at REAL,
        iterations INTEGER NOT NULL DEFAULT 0,
        input_tokens INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        cost_usd REAL NOT NULL DEFAULT 0,
        cost_partial INTEGER NOT NULL DEFAULT 0,
        exit_code INTEGER,
        output TEXT,
        error TEXT,
        terminal TEXT,
        reason TEXT,
        parent_run_id TEXT,
        forked_from TEXT,
        pid INTEGER,
        pid_start TEXT,
        last_seq INTEGER NOT NULL DEFAULT 0,
        options TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX runs_by_created ON runs(created_at);
    CREATE INDEX runs_by_parent ON runs(parent_run_id);
    CREATE TABLE events (
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        type TEXT NOT NULL,
        ts REAL NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    ) WITHOUT ROWID;
    CREATE TABLE checkpoints (
        run_id TEXT PRIMARY KEY,
        seq INTEGER NOT NULL,
        step TEXT,
        next_step TEXT,
        state TEXT NOT NULL,
        created_at REAL NOT NULL
    );
    CREATE TABLE gates (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL,
        step TEXT NOT NULL,
        kind TEXT NOT NULL,
        prompt TEXT NOT NULL,
        options TEXT NOT NULL,
        status TEXT NOT NULL,
        created_at REAL NOT NULL,
        answer TEXT,
        additional_input TEXT NOT NULL DEFAULT '{}',
        answered_by TEXT,
        answered_at REAL
    );
    CREATE INDEX gates_by_status ON gates(status, run_id);
    """,
]

# Events that complete a step wait for the checkpoint's commit.
_DEFERRED = frozenset({"step_finished", "route_taken", "gate_answered"})
_HEADER = b"SQLite format 3\x00"
_JSON_COLUMNS = frozenset({"inputs", "output", "options"})
_RUN_COLUMNS = tuple(RunRecord.__dataclass_fields__)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))


_Write = tuple[str, tuple[Any, ...]]


@dataclass
class _Pending:
    """What one run wrote that waits for its commit point (a checkpoint, or its end)."""

    writes: list[_Write] = field(default_factory=list)
    consumed: set[int] = field(default_factory=set)  # gates whose answer the step used
    step: bool = False  # holds a finished step's events
    checkpoint: bool = False  # ... and the checkpoint that commits them


def _defers(event: Event) -> bool:
    """Does this event wait with its run's pending writes (for a checkpoint or run_finished)?"""
    if event.type in _DEFERRED:
        return True
    return isinstance(event, Checkpointed) and event.next_step in (None, END)


class SQLiteStore:
    """RunStore on SQLite. Safe to share between threads (one lock serialises access)."""

    def __init__(self, path: Path, *, verify: bool = False) -> None:
        self.path = path
        self._lock = threading.RLock()
        self._pending: dict[str, _Pending] = {}  # by run id: writes waiting for a commit
        self._closed = False
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the run store folder {path.parent}: {exc}") from None
        self._check_header()
        try:
            self.db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False,
                                      timeout=10.0)
        except sqlite3.Error as exc:
            raise self._corrupt(exc) from None
        try:
            self.db.execute("PRAGMA busy_timeout=10000")
            self._check_version()
            if verify:
                self._verify()
            mode = self.db.execute("PRAGMA journal_mode=WAL").fetchone()
            if mode is None:
                raise sqlite3.DatabaseError("cannot set the journal mode")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except BaseException as exc:
            self.db.close()
            if isinstance(exc, sqlite3.Error):
                raise self._corrupt(exc) from None
            raise

    # ------------------------------------------------------------------ opening

    def _check_header(self) -> None:
        """Refuse, before SQLite touches it, a file that is not a whole SQLite database: SQLite
        itself reads a cut-off last page as zeros, and would write over the damage."""
        if not self.path.exists():
            return
        try:
            with self.path.open("rb") as fh:
                head = fh.read(100)
                size = fh.seek(0, 2)
        except OSError as exc:
            raise StoreError(f"cannot read the run store {self.path}: {exc}") from None
        if not head:
            return  # an empty file holds nothing yet (SQLite starts a database in it)
        if not (_HEADER.startswith(head) if len(head) < 16 else head[:16] == _HEADER):
            raise self._untouched("is not a SQLite database (corrupted?)")
        if len(head) < 100:
            raise self._untouched(f"is truncated ({size} bytes, shorter than its header)")
        page = int.from_bytes(head[16:18], "big")
        page = 65536 if page == 1 else page
        if page < 512 or page & (page - 1):
            raise self._untouched("is corrupted (its header names an impossible page size)")
        pages = int.from_bytes(head[28:32], "big")
        counted = head[24:28] == head[92:96]  # the header's page count is current
        if self._wal_pending():
            return  # SQLite recovers from the log; the file may be mid-checkpoint
        if size % page:
            raise self._untouched(f"is truncated ({size} bytes, not a whole number of "
                                  f"{page}-byte pages)")
        if counted and size < pages * page:
            raise self._untouched(f"is truncated ({size} bytes; its header says {pages} pages "
                                  f"of {page} bytes)")

    def _wal_pending(self) -> bool:
        """A non-empty write-ahead log may hold pages a crashed checkpoint had not copied."""
        wal = self.path.with_name(self.path.name + "-wal")
        try:
            return wal.stat().st_size > 0
        except OSError:
            return False

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
            self.db.execute("SELECT count(*) FROM runs").fetchone()
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
        writes = [w for p in batches for w in p.writes]
        if not writes:
            return
        self._write("BEGIN", ())
        try:
            for sql, params in writes:
                self._write(sql, params)
            self._write("COMMIT", ())
        except BaseException:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            raise

    def commit(self) -> None:
        """Write whatever any run left pending."""
        with self._lock:
            self._flush(list(self._pending))

    def _write(self, sql: str, params: tuple[Any, ...] | list[Any]) -> sqlite3.Cursor:
        try:
            return self.db.execute(sql, params)
        except sqlite3.Error as exc:
            raise self._corrupt(exc) from None

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        with self._lock:
            try:
                cur = self.db.execute(sql, params)
                cols = [d[0] for d in cur.description]
                return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]
            except sqlite3.Error as exc:
                raise self._corrupt(exc) from None

    # ------------------------------------------------------------------ runs

    def create_run(self, record: RunRecord) -> None:
        now = time.time()
        record.created_at = record.created_at or now
        record.updated_at = now
        values = [(_dumps(getattr(record, c)) if c in _JSON_COLUMNS else getattr(record, c))
                  for c in _RUN_COLUMNS]
        with self._lock:
            self._write(f"INSERT INTO runs ({', '.join(_RUN_COLUMNS)}) VALUES "
                        f"({', '.join('?' * len(_RUN_COLUMNS))})", values)

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

    def list_runs(self, *, status: str | None = None, workflow: str | None = None,
                  limit: int = 50, parent: str | None = None) -> list[RunRecord]:
        where: list[str] = []
        params: list[Any] = []
        if status:
            where.append("status = ?")
            params.append(status)
        if workflow:
            where.append("(workflow_name = ? OR workflow_path LIKE ?)")
            params += [workflow, f"%{workflow}%"]
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
        values = [(_dumps(fields[c]) if c in _JSON_COLUMNS and fields[c] is not None
                   else (int(fields[c]) if isinstance(fields[c], bool) else fields[c]))
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
            if event.type in _DEFERRED:
                pending.step = True
            elif event.type == "checkpoint":
                pending.checkpoint = True
            pending.writes.append(
                ("INSERT INTO events (run_id, seq, type, ts, body) VALUES (?, ?, ?, ?, ?)",
                 (event.run_id, event.seq, event.type, event.ts, event.model_dump_json())))
            pending.writes.extend(self._summarise(event))
            if not _defers(event):
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

    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        with self._lock:
            pending = self._pending_of(checkpoint.run_id)
            pending.checkpoint = True
            pending.writes.append((
                "INSERT INTO checkpoints (run_id, seq, step, next_step, state, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(run_id) DO UPDATE SET "
                "seq = excluded.seq, step = excluded.step, next_step = excluded.next_step, "
                "state = excluded.state, created_at = excluded.created_at",
                (checkpoint.run_id, checkpoint.seq, checkpoint.step,
                 checkpoint.next_step, _dumps(checkpoint.state), checkpoint.created_at)))

    def latest_checkpoint(self, run_id: str) -> Checkpoint | None:
        rows = self._read("SELECT * FROM checkpoints WHERE run_id = ?", (run_id,))
        if not rows:
            return None
        r = rows[0]
        return Checkpoint(r["run_id"], r["seq"], r["step"], r["next_step"],
                          self._loads(r["state"], f"the checkpoint of run {run_id}"),
                          r["created_at"])

    def committed(self, engine: Any, next_node: str | None) -> None:
        """The engine's Checkpointer hook: commit the state after a completed step."""
        state = engine.state.to_json()
        state.pop("records", None)
        if engine.bus.redact:  # secrets are never stored, in checkpoints either
            state = json.loads(engine.bus.redact_json(_dumps(state)))
        last = engine.state.records[-1].step if engine.state.records else None
        self.save_checkpoint(Checkpoint(engine.run_id, engine.bus.seq + 1, last, next_node,
                                        state, time.time()))
        engine.bus.emit(Checkpointed(step=last, next_step=next_node,
                                     run_iteration=engine.state.run_iteration))

    # ------------------------------------------------------------------ gates

    def open_gate(self, gate: GateRecord) -> int:
        with self._lock:
            cur = self._write(
                "INSERT INTO gates (run_id, step, kind, prompt, options, status, created_at) "
                "VALUES (?, ?, ?, ?, ?, 'open', ?)",
                (gate.run_id, gate.step, gate.kind, gate.prompt, _dumps(gate.options),
                 gate.created_at or time.time()))
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

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._flush(list(self._pending))
            finally:
                self.db.close()


def default_store_path(home: Path) -> Path:
    return home / "podium.db"
