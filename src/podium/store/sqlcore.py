"""The rules both SQL run stores share (SQLite and PostgreSQL): what commits when, gates, leases,
run records and the run row's summary of events, written once over each backend's dialect.

A backend gives its statements' dialect (`Dialect`: `?` or `%s` placeholders, a few clauses that
differ), reads (`_read`), single writes (`_changed`), the flush of a run's pending writes in one
transaction (`_flush`) and the closing of its connections; what commits when is decided here.
The events that complete a step wait, per run and in memory, for the checkpoint after them and
are written with it in one transaction; a parked gate's answer is consumed only with the step
that used it; the last checkpoint waits for run_finished (store/sqlite.py says why).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import field
from typing import Any, cast

from podium.events.commits import batched, completes_step, defers
from podium.events.model import Checkpointed, Event, event_json
from podium.events.redact import Redactor
from podium.records import record
from podium.store.base import (
    Checkpoint,
    GateRecord,
    Lease,
    Owner,
    RunNotFound,
    RunOwned,
    RunRecord,
    StoreError,
)

_JSON_COLUMNS = frozenset({"inputs", "output", "options"})
_RUN_COLUMNS = tuple(RunRecord.__dataclass_fields__)

_SWAP_TRIES = 50  # change_run_options: writers racing on one run's options

_Write = tuple[str, tuple[Any, ...]]
_Params = tuple[Any, ...] | list[Any]


def typed_event(body: str, run_id: str, seq: int,
                damaged: Callable[[str], Exception]) -> Event:
    """A committed event's JSON text as its typed event; `damaged(what)` is raised, quoting
    the text's first bytes, when it is not one."""
    from podium.events.model import parse_event

    try:
        return parse_event(json.loads(body))
    except (ValueError, TypeError) as exc:  # pydantic's ValidationError is a ValueError
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise damaged(f"holds an unreadable event {seq} of run {run_id} ({first}; it begins "
                      f"{body[:60]!r})") from None


# the event types whose commit also updates their run's row (SQLCore._summarise)
_SUMMARISED = frozenset({"step_started", "model_exchange", "checkpoint", "run_started",
                         "run_finished"})


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))


@record
class _Pending:
    """What one run wrote that waits for its commit point (a checkpoint, or its end)."""

    writes: list[_Write | Event] = field(default_factory=list)  # an Event: numbered at commit
    consumed: set[int] = field(default_factory=set)  # gates whose answer the step used
    # where in `writes` the events that finish a step (events/commits.py completes_step)
    # begin, while no checkpoint follows them; None: no such events wait
    finishing: int | None = None
    # how many of `writes` the last checkpoint among them commits: a batch of held instant
    # steps (engine/run.py) holds several steps, each with its checkpoint
    checkpointed: int = 0


def gone(run_id: str, where: str) -> str:
    """Why a run that was removed cannot go on (a lease or a commit found no run row)."""
    return (f"run {run_id} is no longer in the run store {where} (removed by podium fleet "
            "prune, or the store was replaced): it stops here, nothing more is written")


def _owned(run_id: str, held: Lease) -> RunOwned:
    """The refusal of a run that another live process holds."""
    other = held.owner
    return RunOwned(f"run {run_id} is still running in another process (pid {other.pid} on "
                    f"{other.host}, `podium {other.command}`); wait for it, or stop it with "
                    f"podium stop {run_id}", held)


@record(frozen=True)
class Dialect:
    """The statements both stores run, in one backend's dialect (written with `?` here)."""

    mark: str  # the placeholder: "?" or "%s"
    runs: str  # how the run rows are selected
    like: str  # a case-insensitive LIKE with backslash escapes, on one placeholder
    prefix_like: str  # a case-insensitive LIKE, for an id's prefix
    either: str  # `cost_partial` or a 0/1 placeholder
    event_insert: str = field(init=False)
    checkpoint_upsert: str = field(init=False)
    last_seq: str = field(init=False)
    gate_consume: str = field(init=False)

    def __post_init__(self) -> None:
        put = object.__setattr__
        put(self, "event_insert", self.sql("INSERT INTO events (run_id, seq, type, ts, body) "
                                           "VALUES (?, ?, ?, ?, ?)"))
        put(self, "checkpoint_upsert", self.sql(
            "INSERT INTO checkpoints (run_id, seq, step, next_step, created_at) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET "
            "seq = excluded.seq, step = excluded.step, "
            "next_step = excluded.next_step, created_at = excluded.created_at"))
        put(self, "last_seq", self.sql("UPDATE runs SET last_seq = ?, updated_at = ? "
                                       "WHERE id = ?"))
        put(self, "gate_consume", self.sql("UPDATE gates SET status = 'consumed' WHERE id = ?"))

    def sql(self, text: str) -> str:
        """A statement written with `?` placeholders, in this dialect."""
        return text if self.mark == "?" else text.replace("?", self.mark)


class SQLCore:
    """The RunStore methods whose rules do not depend on the backend."""

    SQL: Dialect
    where: str
    redactor: Redactor
    _lock: threading.RLock
    _pending: dict[str, _Pending]
    _closed: bool
    _failed: StoreError | None
    _numbering: bool

    def _init_core(self) -> None:
        self._lock = threading.RLock()
        self._pending = {}  # by run id: writes waiting for a commit
        self._closed = False
        self._failed = None  # set by the first write that failed
        self._numbering = False  # number_at_commit(): this handle gives events their seq
        # runs whose group members' writes are held for one transaction per batch (hold()):
        # run id -> [the batch's wake-up, whether writes wait now]
        self._held: dict[str, list[Any]] = {}
        # secrets of the runs this process advances: never written (make_engine shares the
        # run's redactor with its store)
        self.redactor = Redactor()

    # ------------------------------------------------------------------ the backend's part

    def _read(self, sql: str, params: _Params = ()) -> list[dict[str, Any]]:
        raise NotImplementedError

    def _changed(self, sql: str, params: _Params) -> int:
        """One statement in a transaction of its own; the number of rows it changed."""
        raise NotImplementedError

    def _flush(self, run_ids: list[str]) -> None:
        """Write these runs' pending writes in one transaction (all of them, or none)."""
        raise NotImplementedError

    def _damaged(self, what: str) -> StoreError:
        """The store's data is not as written (`what` follows the store's name)."""
        return StoreError(f"the run store {self.where} {what}")

    def _disconnect(self) -> None:
        raise NotImplementedError

    def _live_write(self, sql: str, params: tuple[Any, ...], run_id: str) -> None:
        """One live-row statement in a short transaction of its own, which never joins (and
        so never commits) a run's pending step; StoreError when it fails, and the store is
        not marked failed: a live write is an observer's."""
        raise NotImplementedError

    # ------------------------------------------------------------------ transactions

    def _pending_of(self, run_id: str) -> _Pending:
        pending = self._pending.get(run_id)
        if pending is None:
            pending = self._pending[run_id] = _Pending()
        return pending

    def hold(self, run_id: str, wake: Callable[[], None]) -> None:
        """While a group of `run_id` runs: the writes of its members' events that would
        commit at once wait instead, and `wake()` is called (from the emitting thread) when
        the first one waits; the group then commits them all in one transaction
        (`commit_held`), at the latest before its own checkpoint (`release`)."""
        with self._lock:
            self._held[run_id] = [wake, False]

    def commit_held(self, run_id: str) -> None:
        """Commit the held writes of `run_id` (one transaction)."""
        with self._lock:
            held = self._held.get(run_id)
            if held is None or not held[1]:
                return
            held[1] = False
            self._flush([run_id])

    def commit_waiting(self, run_id: str) -> None:
        """Commit what `run_id` left waiting for its next commit point (the bus's
        commit_waiting: a script step's start, while the script runs)."""
        with self._lock:
            self._flush([run_id])

    def release(self, run_id: str) -> None:
        """The group ended: its held writes commit now, later writes commit as they come."""
        with self._lock:
            held = self._held.pop(run_id, None)
            if held is not None and held[1]:
                self._flush([run_id])

    def number_at_commit(self) -> None:
        """This handle numbers the events it commits (store/base.py RunStore says how)."""
        self._numbering = True

    def commit(self) -> None:
        """Write whatever any run left pending."""
        with self._lock:
            self._flush(list(self._pending))

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                if self._failed is None:
                    self._flush(list(self._pending))
            finally:
                self._disconnect()

    # ------------------------------------------------------------------ runs

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
            raise self._damaged(f"is corrupted ({what} is not readable JSON: {exc})") from None

    def _record(self, row: dict[str, Any]) -> RunRecord:
        data = dict(row)
        for c in _JSON_COLUMNS:
            if data.get(c) is not None:
                data[c] = self._loads(data[c], f"run {data.get('id')} {c}")
        data["cost_partial"] = bool(data["cost_partial"])
        try:
            return RunRecord(**data)
        except TypeError as exc:
            raise self._damaged(f"is corrupted (run row: {exc})") from None

    def get_run(self, run_id: str) -> RunRecord:
        rows = self._read(self.SQL.sql(f"{self.SQL.runs} WHERE id = ?"), (run_id,))
        if not rows:
            raise RunNotFound(f"no run '{run_id}' in the store ({self.where})")
        return self._record(rows[0])

    def find_run(self, prefix: str) -> RunRecord:
        q = self.SQL
        rows = self._read(q.sql(f"{q.runs} WHERE id = ? OR id {q.prefix_like} ? "
                                "ORDER BY created_at DESC"),
                          (prefix, prefix.replace("%", "") + "%"))
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
        q = self.SQL
        where: list[str] = []
        params: list[Any] = []
        if isinstance(status, tuple):
            # none asked for: no row (PostgreSQL has no empty `IN ()`)
            where.append(f"status IN ({', '.join('?' * len(status))})" if status else "1 = 0")
            params += list(status)
        elif status:
            where.append("status = ?")
            params.append(status)
        if workflow:  # any part of its name or of its file's path, in any case
            like = "%" + workflow.replace("\\", "\\\\").replace("%", "\\%").replace(
                "_", "\\_") + "%"
            where.append(f"(workflow_name {q.like} OR workflow_path {q.like})")
            params += [like, like]
        if parent:
            where.append("parent_run_id = ?")
            params.append(parent)
        sql = q.runs + (f" WHERE {' AND '.join(where)}" if where else "")
        sql += " ORDER BY created_at DESC, rowid DESC LIMIT ?"
        params.append(limit)
        return [self._record(r) for r in self._read(q.sql(sql), params)]

    def update_run(self, run_id: str, **fields: Any) -> None:
        if not fields:
            return
        fields["updated_at"] = time.time()
        cols = [c for c in fields if c in _RUN_COLUMNS]
        values = [self._column(c, fields[c]) for c in cols]
        with self._lock:
            self._changed(self.SQL.sql(f"UPDATE runs SET {', '.join(f'{c} = ?' for c in cols)} "
                                       "WHERE id = ?"), [*values, run_id])

    def run_options(self, run_id: str) -> dict[str, Any]:
        """A run's options alone (get_run also parses its inputs, which may be large)."""
        rows = self._read(self.SQL.sql("SELECT options FROM runs WHERE id = ?"), (run_id,))
        if not rows:
            raise RunNotFound(f"no run '{run_id}' in the store ({self.where})")
        return dict(self._loads(rows[0]["options"], f"run {run_id}'s options") or {})

    def change_run_options(self, run_id: str,
                           change: Callable[[dict[str, Any]], dict[str, Any]]
                           ) -> dict[str, Any]:
        """Set a run's options to `change(options)` as one step: what another process wrote
        meanwhile (a second `podium guide`, the run's own trace id) is never overwritten. A
        compare-and-swap on the stored text, asked again with the new options when it moved;
        `change` may be called more than once. The options as written."""
        q = self.SQL
        select = q.sql("SELECT options FROM runs WHERE id = ?")
        swap = q.sql("UPDATE runs SET options = ?, updated_at = ? WHERE id = ? AND options = ?")
        for _ in range(_SWAP_TRIES):
            rows = self._read(select, (run_id,))
            if not rows:
                raise RunNotFound(f"no run '{run_id}' in the store ({self.where})")
            text = rows[0]["options"]
            new = change(dict(self._loads(text, f"run {run_id}'s options") or {}))
            with self._lock:
                if self._changed(swap, [self._column("options", new), time.time(), run_id,
                                        text]):
                    return new
        raise StoreError(f"the run store {self.where}: run {run_id}'s options kept changing "
                         f"under {_SWAP_TRIES} attempts to update them")

    # ------------------------------------------------------------------ events (a Sink)

    def append_event(self, event: Event) -> None:
        q = self.SQL
        run_id, kind = event.run_id, event.type
        with self._lock:
            pending = self._pending.get(run_id)
            if kind == "run_finished" and pending is not None and pending.finishing is not None:
                event = self._unfinished(pending, event)
                pending = self._pending.get(run_id)  # gone when nothing was left in it
            if pending is None:
                pending = self._pending[run_id] = _Pending()
            writes = pending.writes
            if pending.finishing is None and completes_step(event):
                pending.finishing = len(writes)
            if self._numbering:  # its seq is given when it commits (_write_numbered)
                writes.append(event)
            else:
                writes.append((q.event_insert, (run_id, event.seq, kind, event.ts,
                                                event_json(event))))
            if kind in _SUMMARISED:
                writes.extend(self._summarise(event))
            if kind == "checkpoint":
                # the commit point of the step before it
                if not self._numbering:
                    point = cast(Checkpointed, event)
                    pending.writes.append((q.checkpoint_upsert, (point.run_id, point.seq,
                                                                 point.step, point.next_step,
                                                                 point.ts)))
                pending.finishing = None
                pending.checkpointed = len(pending.writes)
            if not defers(event):
                if not self._numbering:
                    pending.writes.append((q.last_seq, (event.seq, event.ts, event.run_id)))
                held = self._held.get(event.run_id)
                if held is not None and batched(event):
                    if not held[1]:  # the batch's first: the group commits it soon
                        held[1] = True
                        held[0]()
                    return
                if held is not None:
                    held[1] = False  # committed with this one
                self._flush([event.run_id])

    def _unfinished(self, pending: _Pending, end: Event) -> Event:
        """The run ended after a step finished but before its checkpoint (an interrupt, a
        routing error): the step was not committed, so the events that finish it are not
        either, nor the gate answers it used (asked again on resume). What happened before
        them stays: the step's start, a script's output, and what earlier checkpoints of a
        batch commit. The run's end takes the seq of the first event dropped, so the events
        stay numbered 1..n and a resume numbers on from the end."""
        q = self.SQL
        start, cut = pending.checkpointed, cast(int, pending.finishing)
        kept = [w for w in pending.writes[start:cut]
                if not (isinstance(w, tuple) and w[0] == q.gate_consume)]
        dropped = [w[1][1] for w in pending.writes[cut:]
                   if isinstance(w, tuple) and w[0] == q.event_insert]
        pending.writes[start:] = kept
        pending.consumed = {g for w in pending.writes[:start]
                            if isinstance(w, tuple) and w[0] == q.gate_consume
                            for g in w[1]}
        pending.finishing = None
        if not pending.writes:
            del self._pending[end.run_id]
        return end.model_copy(update={"seq": min(dropped)}) if dropped else end

    def _summarise(self, event: Event) -> list[_Write]:  # of the types in _SUMMARISED
        """The run row's updates an event implies."""
        t = event.type
        d: Any = event
        q = self.SQL
        if t == "step_started":
            return [(q.sql("UPDATE runs SET current_step = ?, status = 'running' WHERE id = ?"),
                     (d.step, event.run_id))]
        if t == "model_exchange":
            return [self._spent(d)]
        if t == "checkpoint":
            return [(q.sql("UPDATE runs SET iterations = ? WHERE id = ?"),
                     (d.run_iteration, event.run_id))]
        if t == "run_started":
            return [(q.sql("UPDATE runs SET status = 'running' WHERE id = ?"), (event.run_id,))]
        if t == "run_finished":
            return [(q.sql("UPDATE runs SET status = ?, exit_code = ?, output = ?, error = ?, "
                           "terminal = ?, reason = ?, finished_at = ?, current_step = ?, "
                           "iterations = ? WHERE id = ?"),
                     (d.status, d.exit_code, _dumps(d.output) if d.output is not None
                      else None, d.message, d.terminal, d.reason,
                      None if d.status == "waiting" else event.ts,
                      d.step if d.status in ("waiting", "error", "limit", "interrupted")
                      else d.terminal, d.iterations, event.run_id))]
        return []

    def _spent(self, d: Any) -> _Write:
        """A run's tokens and cost are the sum of its model calls (events/spend.py), each
        also counted in the runs above it (a sub-workflow's calls are its parents' spend)."""
        q = self.SQL
        unpriced = int(d.cost_usd is None and bool(d.input_tokens or d.output_tokens))
        add = ("UPDATE runs SET input_tokens = input_tokens + ?, output_tokens = "
               f"output_tokens + ?, cost_usd = cost_usd + ?, cost_partial = {q.either} ")
        figures = (d.input_tokens, d.output_tokens, d.cost_usd or 0.0, unpriced)
        if d.parent_run_id is None:
            return q.sql(add + "WHERE id = ?"), (*figures, d.run_id)
        return (q.sql(add + "WHERE id IN (WITH RECURSIVE up(id) AS (SELECT ? UNION "
                      "SELECT r.parent_run_id FROM runs r JOIN up ON r.id = up.id "
                      "WHERE r.parent_run_id IS NOT NULL) SELECT id FROM up)"),
                (*figures, d.run_id))

    def handle(self, event: Event) -> None:
        self.append_event(event)

    def events(self, run_id: str, after_seq: int = 0) -> list[dict[str, Any]]:
        rows = self._read(self.SQL.sql("SELECT seq, body FROM events WHERE run_id = ? AND "
                                       "seq > ? ORDER BY seq"), (run_id, after_seq))
        return [self._loads(r["body"], f"event {r['seq']} of run {run_id}") for r in rows]

    def history(self, run_id: str, after_seq: int = 0) -> list[Event]:
        rows = self._read(self.SQL.sql("SELECT seq, body FROM events WHERE run_id = ? AND "
                                       "seq > ? ORDER BY seq"), (run_id, after_seq))
        return [typed_event(str(r["body"]), run_id, int(r["seq"]), self._damaged)
                for r in rows]

    def latest_checkpoint(self, run_id: str) -> Checkpoint | None:
        rows = self._read(self.SQL.sql("SELECT * FROM checkpoints WHERE run_id = ?"), (run_id,))
        if not rows:
            return None
        r = rows[0]
        return Checkpoint(r["run_id"], r["seq"], r["step"], r["next_step"], r["created_at"])

    # ------------------------------------------------------------------ gates

    def answer_gate(self, gate_id: int, answer: str, additional_input: dict[str, str],
                    answered_by: str) -> None:
        with self._lock:
            changed = self._changed(self.SQL.sql(
                "UPDATE gates SET status = 'answered', answer = ?, additional_input = ?, "
                "answered_by = ?, answered_at = ? WHERE id = ? AND status = 'open'"),
                (answer, _dumps(additional_input), answered_by, time.time(), gate_id))
            if changed != 1:
                raise StoreError(f"gate {gate_id} is not open (already answered?)")

    def consume_gate(self, gate_id: int) -> None:
        """Mark a gate used. This waits with its run's pending step: an answer is consumed
        only together with the completion of the step that used it (or with the run's next
        commit, or `commit()`). This handle reads the gate as consumed at once."""
        q = self.SQL
        with self._lock:
            rows = self._read(q.sql("SELECT run_id FROM gates WHERE id = ?"), (gate_id,))
            if not rows:
                return
            pending = self._pending_of(str(rows[0]["run_id"]))
            pending.consumed.add(gate_id)
            pending.writes.append((q.gate_consume, (gate_id,)))

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
            rows = self._read(self.SQL.sql(sql + " ORDER BY created_at, id"), params)
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
    # What a running step streams (its model text so far), kept apart from the run's history:
    # a live row is overwritten in place and cleared when its step ends, never an event, so
    # the history does not grow with what streamed; a console or the fleet TUI in another
    # process shows the step with it (docs/decisions/0018-live-stream.md).

    def put_live(self, run_id: str, key: str, body: dict[str, Any]) -> None:
        """Write (or overwrite) one live row of the run."""
        self._live_write(self.SQL.sql(
            "INSERT INTO live (run_id, key, body, updated_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (run_id, key) DO UPDATE SET body = excluded.body, "
            "updated_at = excluded.updated_at"),
            (run_id, key, _dumps(self.redactor.value(body)), time.time()), run_id)

    def clear_live(self, run_id: str, key: str | None = None) -> None:
        """Remove one live row of the run, or all of them."""
        if key is None:
            self._live_write(self.SQL.sql("DELETE FROM live WHERE run_id = ?"), (run_id,),
                             run_id)
        else:
            self._live_write(self.SQL.sql("DELETE FROM live WHERE run_id = ? AND key = ?"),
                             (run_id, key), run_id)

    def live(self, run_id: str) -> dict[str, dict[str, Any]]:
        """The run's live rows by key (empty when none streams)."""
        rows = self._read(self.SQL.sql("SELECT key, body FROM live WHERE run_id = ? "
                                       "ORDER BY key"), (run_id,))
        out: dict[str, dict[str, Any]] = {}
        for r in rows:
            try:
                value = json.loads(r["body"])
            except ValueError:
                continue  # a damaged live row is only a missed glimpse, never an error
            if isinstance(value, dict):
                out[str(r["key"])] = value
        return out

    # ------------------------------------------------------------------ leases

    def heartbeat(self, run_id: str, owner: Owner) -> bool:
        with self._lock:
            return self._changed(self.SQL.sql(
                "UPDATE leases SET heartbeat_at = ? WHERE run_id = ? AND pid = ? "
                "AND pid_start = ? AND host = ?"),
                (time.time(), run_id, owner.pid, owner.pid_start, owner.host)) == 1

    def release_lease(self, run_id: str, owner: Owner) -> None:
        with self._lock:
            self._changed(self.SQL.sql("DELETE FROM leases WHERE run_id = ? AND pid = ? AND "
                                       "pid_start = ? AND host = ?"),
                          (run_id, owner.pid, owner.pid_start, owner.host))

    def lease(self, run_id: str) -> Lease | None:
        found = self._lease_rows("WHERE run_id = ?", (run_id,))
        return found[0] if found else None

    def leases(self) -> list[Lease]:
        return self._lease_rows("ORDER BY acquired_at", ())

    def _lease_rows(self, where: str, params: tuple[Any, ...]) -> list[Lease]:
        rows = self._read(self.SQL.sql(f"SELECT * FROM leases {where}"), params)
        return [Lease.from_row(r) for r in rows]
