"""The child runs of sub-workflow steps behind one small port (`ChildRuns`): the run a
step's execution started before (reused when it succeeded, gone on with from its own last
commit otherwise), a new child run recorded, a child run resumed. `StoredChildRuns` is its
one implementation, over the run store."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from podium.records import record
from podium.store.base import GateBook, RunCatalog, RunLog

if TYPE_CHECKING:
    from podium.engine.history import Restart
    from podium.events.spend import RunSpend
    from podium.store.base import RunRecord


@record(frozen=True)
class ChildSlot:
    """Which child run: the parent's step, its execution, and the member slot in a group
    (`step[key]`, `step[index]`; the step's name outside one)."""

    step: str
    iteration: int
    slot: str


@record
class ChildRun:
    """A child run a step's execution started before."""

    run_id: str
    status: str
    output: dict[str, Any] | None
    restart: Restart | None  # where it goes on (None: it succeeded, it is reused)
    start_seq: int  # its last event's seq: its bus numbers on from there
    spent: RunSpend  # what it spent (events/spend.py), sub-workflows of its own included


class ChildRuns(Protocol):
    """What a sub-workflow step needs of its child runs (engine/subflow.py)."""

    def find(self, parent_run_id: str, slot: ChildSlot, entry_point: str) -> ChildRun | None:
        """The child run `slot` started before, or None."""
        ...

    def start(self, record: RunRecord) -> None:
        """Record a new child run."""
        ...

    def resume(self, run_id: str) -> None:
        """A child run goes on: the gate it parked at and nobody answered is asked again."""
        ...


class ChildStore(RunCatalog, RunLog, GateBook, Protocol):
    """The store roles child runs use: the catalog finds and reads them, the log records
    a new one, the gate book withdraws a resumed one's open gate."""


class StoredChildRuns:
    """ChildRuns over the run store: the catalog finds them, the engine's one resume fold
    (engine/history.py `restart_of`) says where they go on."""

    def __init__(self, store: ChildStore) -> None:
        self.store = store

    def find(self, parent_run_id: str, slot: ChildSlot, entry_point: str) -> ChildRun | None:
        from podium.engine.history import restart_of, stored_spend

        store = self.store
        for run in store.list_runs(parent=parent_run_id, limit=10_000):
            opts = run.options or {}
            if (opts.get("parent_step"), opts.get("parent_iteration"), opts.get("slot")) != \
                    (slot.step, slot.iteration, slot.slot):
                continue
            events = store.history(run.id)  # typed: the engine's resume fold reads them
            spent = stored_spend(store, run.id, events)
            last = max((e.seq for e in events), default=0)
            if run.status == "success":
                return ChildRun(run.id, run.status, run.output, None, last, spent)
            restart = restart_of(events, store.latest_checkpoint(run.id), inputs=run.inputs,
                                 entry_point=entry_point)
            return ChildRun(run.id, run.status, None, restart, last, spent)
        return None

    def start(self, record: RunRecord) -> None:
        self.store.create_run(record)

    def resume(self, run_id: str) -> None:
        self.store.withdraw_gates(run_id)
