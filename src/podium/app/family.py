"""A run's family: the top-level run a sub-workflow run belongs to, a run and every
sub-workflow run below it, and the open gates that hold a family up. The one home of these
rules for every reader: the store (CLI, fleet TUI, MCP server, resume, Temporal activities)
and the console's read-only catalog (store/catalog.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from podium.store.base import GateRecord, RunNotFound, RunRecord

if TYPE_CHECKING:
    from podium.store.base import RunStore

FAMILY_LIMIT = 10_000  # runs of one family read at most (a guard against a looping parent chain)


class Parents(Protocol):
    """What finding a run's root reads: a RunStore, or the console's catalog."""

    def get_run(self, run_id: str) -> RunRecord: ...


@runtime_checkable
class FamilyReads(Protocol):
    """What the family rules read; the console's catalog has it, a RunStore is read
    through _OfStore."""

    def get_run(self, run_id: str) -> RunRecord: ...

    def child_ids(self, run_id: str) -> list[str]: ...

    def open_gates(self, run_ids: list[str] | None = None) -> list[GateRecord]: ...


class _OfStore:
    """A RunStore read as FamilyReads."""

    def __init__(self, store: RunStore) -> None:
        self.store = store

    def get_run(self, run_id: str) -> RunRecord:
        return self.store.get_run(run_id)

    def child_ids(self, run_id: str) -> list[str]:
        return [r.id for r in self.store.list_runs(parent=run_id, limit=FAMILY_LIMIT)]

    def open_gates(self, run_ids: list[str] | None = None) -> list[GateRecord]:
        if run_ids is None:
            found = self.store.gates(status="open")
        else:
            found = [g for rid in run_ids for g in self.store.gates(run_id=rid, status="open")]
        return sorted(found, key=lambda g: (g.created_at, g.id))


def _reads(src: RunStore | FamilyReads) -> FamilyReads:
    return src if isinstance(src, FamilyReads) else _OfStore(src)


def root_of(src: Parents, run: RunRecord) -> RunRecord:
    """The top-level run a sub-workflow run belongs to (itself for a top-level run; the
    highest run still stored when a parent was removed)."""
    seen = {run.id}
    while run.parent_run_id and run.parent_run_id not in seen:
        try:
            run = src.get_run(run.parent_run_id)
        except RunNotFound:
            break
        seen.add(run.id)
    return run


def family(src: RunStore | FamilyReads, run_id: str) -> list[str]:
    """A run and every sub-workflow run below it, parents first."""
    reads = _reads(src)
    out: list[str] = []
    seen = {run_id}
    todo = [run_id]
    while todo and len(out) < FAMILY_LIMIT:
        rid = todo.pop(0)
        out.append(rid)
        for child in reads.child_ids(rid):
            if child not in seen:
                seen.add(child)
                todo.append(child)
    return out


def open_gates(src: RunStore | FamilyReads, run_id: str) -> list[GateRecord]:
    """The open gates of a run and its sub-workflow runs, oldest first."""
    reads = _reads(src)
    return reads.open_gates(family(reads, run_id))


def open_gates_by_root(src: RunStore | FamilyReads) -> dict[str, list[GateRecord]]:
    """Every open gate, keyed by the top-level run it holds up (a gate of a run removed
    meanwhile is left out)."""
    reads = _reads(src)
    out: dict[str, list[GateRecord]] = {}
    for g in reads.open_gates():
        try:
            run = reads.get_run(g.run_id)
        except RunNotFound:
            continue
        out.setdefault(root_of(reads, run).id, []).append(g)
    return out
