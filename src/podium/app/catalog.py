"""The runs as the console shows them: the list with its filters and counts, one run with its
family and open gates, what its running steps stream. Read through the store's catalog
(store/catalog.py); whether a run lives is app/owners.py's one rule, the same that
`podium runs`, the fleet TUI and the MCP server read.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from podium.app.family import family, open_gates_by_root, root_of
from podium.app.owners import HELD, Liveness, held, liveness
from podium.store.base import GateRecord, RunRecord, RunStore
from podium.store.catalog import Catalog, RunQuery, StoreVersion

__all__ = ["Catalog", "StoreVersion", "detail", "family", "open_catalog", "root_of", "runs_page",
           "source_of", "streaming"]

# Filters of the runs page: name -> the stored statuses it covers.
STATUS_FILTERS: dict[str, tuple[str, ...]] = {
    "active": ("running", "waiting"),
    "waiting": ("waiting", "running"),  # running: a live run may wait at a console gate
    "running": ("running",),
    "success": ("success",),
    "failed": ("failed", "error", "limit"),
    "interrupted": ("interrupted", "running"),  # running: runs whose process is gone
}

ATTENTION_SHOWN = 50  # the runs page lists at most this many runs that need a person


def source_of(store: RunStore) -> Path | str:
    """What a Catalog or a StoreVersion opens for this store: its file, or its server's URL."""
    from podium.store.postgres import PostgresStore

    return store.url if isinstance(store, PostgresStore) else Path(store.where)


def open_catalog(source: Path | str) -> Catalog:
    """The store's read-only catalog, on a connection of its own."""
    return Catalog(source)


def state_of(lv: Liveness, gates: list[GateRecord]) -> str:
    """What a person needs at a glance: waiting (held by an open gate: app/owners.py `held`),
    running, interrupted (marked running but nothing advances it: resumable), or the final
    status."""
    return held(lv, gates).status


def gate_json(g: GateRecord) -> dict[str, Any]:
    return {"id": g.id, "run_id": g.run_id, "step": g.step, "kind": g.kind,
            "prompt": g.prompt, "options": g.options, "status": g.status,
            "created_at": g.created_at}


def summary(run: RunRecord, gates: list[GateRecord], now: float,
            lv: Liveness) -> dict[str, Any]:
    """One run as the pages show it (`state`: state_of; `live`: a live process or its
    Temporal workflow advances it)."""
    end = run.finished_at or (run.updated_at if run.status != "running" else now)
    return {
        "run_id": run.id, "id": run.id,  # run_id: the key every JSON output names it by
        "workflow": run.workflow_name, "workflow_path": run.workflow_path,
        "status": run.status, "state": state_of(lv, gates), "live": lv.live,
        "current_step": run.current_step, "created_at": run.created_at,
        "updated_at": run.updated_at, "finished_at": run.finished_at,
        "elapsed": max(0.0, (end or now) - run.created_at), "iterations": run.iterations,
        "input_tokens": run.input_tokens, "output_tokens": run.output_tokens,
        "cost_usd": round(run.cost_usd or 0.0, 6), "cost_partial": bool(run.cost_partial),
        "exit_code": run.exit_code, "terminal": run.terminal, "reason": run.reason,
        "parent_run_id": run.parent_run_id, "forked_from": run.forked_from,
        "last_seq": run.last_seq,
        "gate": ({"id": gates[-1].id, "step": gates[-1].step, "kind": gates[-1].kind,
                  "run_id": gates[-1].run_id} if gates else None),
    }


def runs_page(cat: Catalog, *, status: str | None = None, workflow: str | None = None,
              search: str | None = None, limit: int = 200,
              include_children: bool = False) -> dict[str, Any]:
    """The runs page: newest first, with the open gates and liveness folded in."""
    gates = open_gates_by_root(cat)
    statuses: tuple[str, ...] | None = None
    held: tuple[str, ...] = ()
    if status == "waiting":  # parked, or held by an open gate (however old)
        statuses, held = ("waiting",), tuple(gates)
    elif status and status in STATUS_FILTERS:
        statuses = STATUS_FILTERS[status]
    rows = cat.runs(RunQuery(statuses, held, workflow, search, include_children, limit))
    now = time.time()
    out = [summary(r, gates.get(r.id, []), now, liveness(cat, r)) for r in rows]
    if status in ("waiting", "interrupted", "running"):
        out = [r for r in out if r["state"] == status]
    counts, attention = counts_and_attention(cat, gates, now)
    return {"runs": out, "counts": counts, "attention": attention,
            "workflows": cat.workflows(), "now": now}


def counts_and_attention(cat: Catalog, gates: dict[str, list[GateRecord]], now: float,
                         shown: int = ATTENTION_SHOWN
                         ) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """The chips' counts by state, as the list's filters select them, over every top-level
    run; and the runs that need a person (waiting or interrupted), oldest first, however
    many runs came after them. Only running and held rows are read one by one."""
    by_status = cat.count_by_status()
    running = cat.runs(RunQuery(("running",), limit=5000))
    lives = {r.id: liveness(cat, r) for r in running}
    states = {r.id: state_of(lives[r.id], gates.get(r.id, [])) for r in running}
    held = [rid for rid in gates if rid not in states]
    held_runs = [r for r in cat.runs_by_id(held) if r.parent_run_id is None
                 and r.status in HELD]
    for r in held_runs:  # a run held by an open gate counts as waiting
        by_status[r.status] = by_status.get(r.status, 0) - 1
        by_status["waiting"] = by_status.get("waiting", 0) + 1
    by_status.pop("running", None)
    counts = {k: v for k, v in by_status.items() if v > 0}
    for state in states.values():
        counts[state] = counts.get(state, 0) + 1
    counts["total"] = sum(by_status.values()) + len(running)
    counts["failed_all"] = sum(counts.get(k, 0) for k in ("failed", "error", "limit"))
    counts["active"] = sum(counts.get(k, 0) for k in ("running", "waiting", "interrupted"))
    counts["gates"] = counts.get("waiting", 0)
    candidates = {r.id: r for r in cat.runs(RunQuery(("waiting",), limit=5000))}
    candidates.update({r.id: r for r in running if states[r.id] in ("waiting",
                                                                     "interrupted")})
    candidates.update({r.id: r for r in held_runs})
    attention = [summary(r, gates.get(r.id, []), now, lives.get(r.id) or liveness(cat, r))
                 for r in candidates.values()]
    attention = [a for a in attention if a["state"] in ("waiting", "interrupted")]
    attention.sort(key=lambda a: (a["state"] != "waiting", a["created_at"]))
    counts["attention"] = len(attention)
    return counts, attention[:shown]


def detail(cat: Catalog, run_id: str) -> dict[str, Any] | None:
    """One run for its page: summary, output, open gates of its family, children and the
    chain of parents."""
    run = cat.run(run_id)
    if run is None:
        return None
    gates = cat.open_gates(family(cat, run_id))
    now = time.time()
    data = summary(run, gates, now, liveness(cat, run))
    data["error"] = run.error
    data["output"] = run.output
    data["inputs"] = run.inputs
    trace = run.options.get("trace")
    if isinstance(trace, dict) and trace.get("trace_id"):  # it exported OpenTelemetry traces
        from podium.telemetry import trace_link

        data["trace_id"] = str(trace["trace_id"])
        data["trace_url"] = trace_link(data["trace_id"])  # PODIUM_TRACE_URL's template
    chain: list[dict[str, Any]] = []
    cur = run
    while cur.parent_run_id:
        parent = cat.run(cur.parent_run_id)
        if parent is None or any(c["id"] == parent.id for c in chain):
            break
        chain.insert(0, {"id": parent.id, "workflow": parent.workflow_name})
        cur = parent
    children = [dict(summary(c, [], now, liveness(cat, c)), **_slot(c))
                for c in cat.children(run_id)]
    return {"run": data, "gates": [gate_json(g) for g in gates], "parents": chain,
            "children": children}


def _slot(run: RunRecord) -> dict[str, Any]:
    opts = run.options
    return {"parent_step": opts.get("parent_step"), "slot": opts.get("slot"),
            "parent_iteration": opts.get("parent_iteration")}


def streaming(cat: Catalog, run_id: str) -> dict[str, dict[str, Any]]:
    """What the run's running steps streamed so far, by `step#iteration` (the store's live
    rows): empty unless it runs now (a crashed run's rows stay until it is resumed)."""
    run = cat.run(run_id)
    if run is None or liveness(cat, run).status != "running":
        return {}
    return cat.live(run_id)
