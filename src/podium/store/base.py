"""The RunStore port: runs, their events, checkpoints and gates, whatever the database.

A store is the run's committer, fed by its events: the events of a step in flight are written
in one transaction with the `checkpoint` event that completes the step, so the store never says
a step completed unless the run's position after it is committed too. A write that fails raises
StoreError and stops the run; the store is never a best-effort sink.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import field
from pathlib import Path
from typing import Any, Protocol

from podium.errors import PodiumError
from podium.events.model import Event
from podium.events.redact import Redactor
from podium.records import record


class StoreError(PodiumError):
    """The run store cannot be used (corrupt, unreadable, newer schema), or a write to it
    failed (disk full, file size limit, I/O error): the run stops, exit code 3."""

    exit_code = 3


class RunNotFound(PodiumError):
    exit_code = 2


@record
class RunRecord:
    """One run as the store keeps it."""

    id: str
    workflow_name: str
    workflow_path: str
    workflow_hash: str
    inputs: dict[str, Any]
    status: str = "running"
    current_step: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    finished_at: float | None = None
    iterations: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    cost_partial: bool = False
    exit_code: int | None = None
    output: dict[str, Any] | None = None
    error: str | None = None
    terminal: str | None = None
    reason: str | None = None
    parent_run_id: str | None = None
    forked_from: str | None = None
    pid: int | None = None
    pid_start: str | None = None
    last_seq: int = 0
    options: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@record
class Checkpoint:
    """Where a run stands after its last committed step: the events up to `seq` hold its
    state (resume folds them), `next_step` is where it goes on."""

    run_id: str
    seq: int
    step: str | None
    next_step: str | None
    created_at: float


@record(frozen=True)
class Owner:
    """A process that advances runs: its pid with the kernel's start time of that pid (a pid
    alone may be reused), the host it runs on, and what it was asked to do."""

    pid: int
    pid_start: float
    host: str
    command: str


@record(frozen=True)
class Lease:
    """Which process advances a run, and when it last said it was alive."""

    run_id: str
    owner: Owner
    acquired_at: float
    heartbeat_at: float

    @classmethod
    def from_row(cls, r: Mapping[str, Any], run_id: str | None = None) -> Lease:
        """A lease from a row of the leases table (`run_id` when the row names it otherwise)."""
        return cls(str(run_id or r["run_id"]),
                   Owner(int(r["pid"]), float(r["pid_start"]), str(r["host"]), str(r["command"])),
                   float(r["acquired_at"]), float(r["heartbeat_at"]))


class RunOwned(PodiumError):
    """Another live process advances this run."""

    exit_code = 2

    def __init__(self, message: str, lease: Lease) -> None:
        super().__init__(message)
        self.lease = lease


# Tells whether a lease's owner is still alive (the application layer's one rule for it).
Liveness = Callable[[Lease], bool]


@record
class GateRecord:
    id: int
    run_id: str
    step: str
    kind: str
    prompt: str
    options: list[dict[str, Any]]
    status: str  # open | answered | consumed | withdrawn (asked again on resume)
    created_at: float
    answer: str | None = None
    additional_input: dict[str, str] = field(default_factory=dict)
    answered_by: str | None = None
    answered_at: float | None = None


class RunLog(Protocol):
    """Committing a run: its row, its events (a step's events wait for the checkpoint that
    completes it, and commit with it), its options, what its steps stream live."""

    # the secrets of the runs this process advances: never written (make_engine shares the
    # run's redactor with its store)
    redactor: Redactor

    def create_run(self, record: RunRecord, owner: Owner | None = None) -> None:
        """Record a new run; with `owner`, leased to it in the same transaction."""
        ...

    def update_run(self, run_id: str, **fields: Any) -> None: ...

    def change_run_options(self, run_id: str,
                           change: Callable[[dict[str, Any]], dict[str, Any]]
                           ) -> dict[str, Any]:
        """Set the run's options to `change(options)` without losing a concurrent write
        (`change` may be called more than once); the options as written."""
        ...

    def append_event(self, event: Event) -> None: ...

    def handle(self, event: Event) -> None:
        """The store as an event sink (same as append_event)."""
        ...

    def number_at_commit(self) -> None:
        """From now on this handle numbers the events it writes itself, for runs that several
        processes advance at once (a run on Temporal workers: group members commit from
        different workers). Each event's emitted `seq` is ignored: inside the write
        transaction that commits it, the event gets the run's `last_seq + 1` (then +2, ... in
        the order the handle received them), its stored body carries that seq, a checkpoint
        row takes its checkpoint event's new seq, and `last_seq` becomes the last one given.
        Events still wait for their commit point as before (a pending step is numbered when
        its checkpoint commits it), so a run's seqs stay 1..n without gaps and increase in
        commit order: a reader that tails `events(run_id, after_seq)` never misses one."""
        ...

    def put_live(self, run_id: str, key: str, body: dict[str, Any]) -> None:
        """Write or overwrite one live row: what a running step streams (its model text so
        far), for surfaces in other processes. In a short transaction of its own: it never
        commits, nor waits for, a run's pending step. Never history: no event, no seq. A
        failure raises StoreError and leaves the store usable for the run's own writes."""
        ...

    def clear_live(self, run_id: str, key: str | None = None) -> None:
        """Remove the run's live row `key`, or all of its live rows."""
        ...

    def commit(self) -> None: ...


class RunCatalog(Protocol):
    """The catalog of runs: finding, listing and reading them, their typed history, their
    last checkpoint; removing them."""

    @property
    def where(self) -> str:
        """The store as messages name it: its file, or its URL without the password."""
        ...

    @property
    def folder(self) -> Path:
        """The local folder kept beside the store: the runs' own files (their JSONL logs)."""
        ...

    def get_run(self, run_id: str) -> RunRecord: ...

    def find_run(self, prefix: str) -> RunRecord: ...

    def list_runs(self, *, status: str | tuple[str, ...] | None = None,
                  workflow: str | None = None,
                  limit: int = 50, parent: str | None = None) -> list[RunRecord]: ...

    def run_options(self, run_id: str) -> dict[str, Any]:
        """The run's options alone, without parsing the rest of its row."""
        ...

    def events(self, run_id: str, after_seq: int = 0) -> list[dict[str, Any]]: ...

    def history(self, run_id: str, after_seq: int = 0) -> list[Event]:
        """The run's committed events after `after_seq`, typed (events/model.py's union);
        StoreError naming the event when one cannot be read back."""
        ...

    def latest_checkpoint(self, run_id: str) -> Checkpoint | None: ...

    def live(self, run_id: str) -> dict[str, dict[str, Any]]:
        """The run's live rows by key; empty when nothing streams."""
        ...

    def delete_runs(self, run_ids: list[str], *, unless_owned: Liveness | None = None,
                    statuses: tuple[str, ...] = (),
                    still: Callable[[RunRecord], bool] | None = None) -> int:
        """Remove these runs and everything kept with them in one transaction (all of them,
        or none); how many runs were removed. With `unless_owned`, `run_ids` is one run and
        its sub-workflow runs, the run first: nothing is removed when, inside the
        transaction, a lease on it that `unless_owned` says is alive is held (a resume has
        it), or, with `statuses`, its status is not one of them, or, with `still`, `still`
        is false for its row as it is now (a resume took it and finished it since the
        caller looked); a lease taken after the removal finds no run (RunNotFound)."""
        ...


class GateBook(Protocol):
    """The gates runs park at: opened by the run, answered by a person, consumed by the step
    that used the answer, withdrawn when the run is resumed (asked again)."""

    def open_gate(self, gate: GateRecord) -> int: ...

    def answer_gate(self, gate_id: int, answer: str, additional_input: dict[str, str],
                    answered_by: str) -> None: ...

    def gates(self, *, run_id: str | None = None, status: str | None = None) -> list[GateRecord]:
        ...

    def withdraw_gates(self, run_id: str) -> list[int]:
        """Close the run's open gates at once (it is resumed and asks them again)."""
        ...

    def consume_gate(self, gate_id: int) -> None:
        """Mark a gate used; inside a run, only together with the step that used it."""
        ...


class Leases(Protocol):
    """Which process advances a run, and whether it is still alive (app/owners.py)."""

    def acquire_lease(self, run_id: str, owner: Owner, alive: Liveness) -> Lease:
        """Take the run for `owner`, atomically; raise RunOwned when another owner that
        `alive` says is alive holds it (a lease of a dead owner is taken over), RunNotFound
        when the run is not (or no longer) in the store."""
        ...

    def heartbeat(self, run_id: str, owner: Owner) -> bool:
        """Say the owner is alive; False when it no longer holds the lease."""
        ...

    def release_lease(self, run_id: str, owner: Owner) -> None: ...

    def lease(self, run_id: str) -> Lease | None: ...

    def leases(self) -> list[Lease]: ...


class RunStore(RunLog, RunCatalog, GateBook, Leases, Protocol):
    """What podium needs from a run store, the composition of its roles (each consumer is
    typed against the role it uses where it uses one); tests/store_conformance.py pins the
    behaviour. SQLite (store/sqlite.py) and PostgreSQL (store/postgres.py) implement it;
    app/home.py's open_store() picks one."""

    def close(self) -> None: ...
