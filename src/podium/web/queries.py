"""What the console reads from the run store: run lists with filters, one run with its family
and open gates, events after a sequence number, what its running steps stream. Read-only, on a
connection of its own."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from podium.app.owners import owner_alive
from podium.store import files
from podium.store.base import Lease, RunStore
from podium.store.pgconn import PgReader
from podium.web.markdown import render as render_markdown
from podium.web.markdown import with_prompt_html

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

_RUN_COLUMNS = ("id, workflow_name, workflow_path, workflow_hash, status, current_step, "
                "created_at, updated_at, finished_at, iterations, input_tokens, output_tokens, "
                "cost_usd, cost_partial, exit_code, terminal, reason, error, parent_run_id, "
                "forked_from, pid, pid_start, last_seq, options")


class Reader:
    """Read-only queries on the store (a SQLite file, or a PostgreSQL URL: the same SQL, its
    `?` markers taken by store/pgconn.py's PgReader); safe to share between threads."""

    def __init__(self, path: Path | str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self.db: sqlite3.Connection | PgReader = (
            PgReader(path) if isinstance(path, str) else
            files.connect(path, timeout=5.0, query_only=True))

    def close(self) -> None:
        with self._lock:
            self.db.close()

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        with self._lock:
            cur = self.db.execute(sql, params)
            cols = [d[0] for d in cur.description or ()]
            return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]

    # ------------------------------------------------------------------ runs

    def runs(self, *, status: str | None = None, workflow: str | None = None,
             search: str | None = None, limit: int = 200,
             include_children: bool = False) -> dict[str, Any]:
        """The runs page: newest first, with the open gates and liveness folded in."""
        where: list[str] = []
        params: list[Any] = []
        if not include_children:
            where.append("parent_run_id IS NULL")
        gates = self.open_gates_by_root()
        if status == "waiting":  # parked, or held by an open gate (however old)
            marks = ", ".join("?" * len(gates))
            where.append(f"(status = 'waiting' OR id IN ({marks}))" if gates
                         else "status = 'waiting'")
            params += list(gates)
        elif status and status in STATUS_FILTERS:
            statuses = STATUS_FILTERS[status]
            where.append(f"status IN ({', '.join('?' * len(statuses))})")
            params += statuses
        if workflow:
            where.append("workflow_name = ?")
            params.append(workflow)
        if search:
            where.append("(id LIKE ? ESCAPE '\\' OR workflow_name LIKE ? ESCAPE '\\' "
                         "OR current_step LIKE ? ESCAPE '\\')")
            like = "%" + like_escape(search) + "%"
            params += [like, like, like]
        sql = f"SELECT {_RUN_COLUMNS} FROM runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at DESC, rowid DESC LIMIT ?"
        params.append(max(1, min(limit, 5000)))
        rows = self._rows(sql, tuple(params))
        now = time.time()
        out = [summary(r, gates.get(r["id"], []), now, self.live(r)) for r in rows]
        if status in ("waiting", "interrupted"):
            out = [r for r in out if r["state"] == status]
        elif status == "running":
            out = [r for r in out if r["state"] == "running"]
        counts, attention = self.counts_and_attention(gates, now)
        return {"runs": out, "counts": counts, "attention": attention,
                "workflows": self.workflows(), "now": now}

    def counts_and_attention(self, gates: dict[str, list[dict[str, Any]]], now: float,
                             shown: int = ATTENTION_SHOWN
                             ) -> tuple[dict[str, int], list[dict[str, Any]]]:
        """The chips' counts by state, as the list's filters select them, over every top-level
        run; and the runs that need a person (waiting or interrupted), oldest first, however
        many runs came after them. Only running rows are read one by one (their leases)."""
        by_status = {r["status"]: int(r["n"]) for r in self._rows(
            "SELECT status, count(*) AS n FROM runs WHERE parent_run_id IS NULL GROUP BY status")}
        running = self._rows(
            "SELECT r.id, r.status, l.pid, l.pid_start, l.host, l.command, l.acquired_at, "
            "l.heartbeat_at FROM runs r LEFT JOIN leases l ON l.run_id = r.id "
            "WHERE r.parent_run_id IS NULL AND r.status = 'running'")
        live = {r["id"] for r in running
                if r["pid"] is not None and owner_alive(Lease.from_row(r, r["id"]))}
        waiting_ids = set(gates)
        states: dict[str, str] = {}  # id -> state, for the runs whose state is not their status
        for r in running:
            states[r["id"]] = ("waiting" if r["id"] in waiting_ids else
                               "running" if r["id"] in live else "interrupted")
        held = [g for g in waiting_ids if g not in states]
        if held:
            marks = ", ".join("?" * len(held))
            for r in self._rows(f"SELECT id, status FROM runs WHERE id IN ({marks}) "
                                "AND parent_run_id IS NULL", tuple(held)):
                states[r["id"]] = "waiting"
                by_status[r["status"]] = by_status.get(r["status"], 0) - 1
                by_status["waiting"] = by_status.get("waiting", 0) + 1
        by_status.pop("running", None)
        counts = {k: v for k, v in by_status.items() if v > 0}
        for r in running:
            counts[states[r["id"]]] = counts.get(states[r["id"]], 0) + 1
        counts["total"] = sum(by_status.values()) + len(running)
        counts["failed_all"] = sum(counts.get(k, 0) for k in ("failed", "error", "limit"))
        counts["active"] = sum(counts.get(k, 0) for k in ("running", "waiting", "interrupted"))
        counts["gates"] = counts.get("waiting", 0)
        need = [rid for rid, st in states.items() if st in ("waiting", "interrupted")]
        rows = self._rows(f"SELECT {_RUN_COLUMNS} FROM runs WHERE parent_run_id IS NULL AND "
                          "status = 'waiting'")
        rows += self._rows_by_id([rid for rid in need if rid not in {r["id"] for r in rows}])
        attention = [summary(r, gates.get(r["id"], []), now, r["id"] in live) for r in rows]
        attention = [a for a in attention if a["state"] in ("waiting", "interrupted")]
        attention.sort(key=lambda a: (a["state"] != "waiting", a["created_at"]))
        counts["attention"] = len(attention)
        return counts, attention[:shown]

    def _rows_by_id(self, ids: list[str]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for k in range(0, len(ids), 500):
            part = ids[k:k + 500]
            out += self._rows(f"SELECT {_RUN_COLUMNS} FROM runs WHERE id IN "
                              f"({', '.join('?' * len(part))})", tuple(part))
        return out

    def workflows(self) -> list[str]:
        return [r["w"] for r in self._rows("SELECT DISTINCT workflow_name AS w FROM runs "
                                           "WHERE parent_run_id IS NULL ORDER BY 1")]

    def run_row(self, run_id: str) -> dict[str, Any] | None:
        rows = self._rows(f"SELECT {_RUN_COLUMNS} FROM runs WHERE id = ?", (run_id,))
        return rows[0] if rows else None

    def find(self, prefix: str) -> dict[str, Any] | None:
        row = self.run_row(prefix)
        if row is not None:
            return row
        rows = self._rows(f"SELECT {_RUN_COLUMNS} FROM runs WHERE id LIKE ? ESCAPE '\\' "
                          "LIMIT 2",
                          (like_escape(prefix) + "%",))
        return rows[0] if len(rows) == 1 else None

    def root_of(self, row: dict[str, Any]) -> dict[str, Any]:
        seen = {row["id"]}
        while row.get("parent_run_id") and row["parent_run_id"] not in seen:
            parent = self.run_row(row["parent_run_id"])
            if parent is None:
                break
            row = parent
            seen.add(row["id"])
        return row

    def family(self, run_id: str) -> list[str]:
        """A run and every sub-workflow run below it, parents first."""
        out: list[str] = []
        todo = [run_id]
        while todo and len(out) < 10_000:
            rid = todo.pop(0)
            out.append(rid)
            todo += [r["id"] for r in self._rows(
                "SELECT id FROM runs WHERE parent_run_id = ? ORDER BY created_at", (rid,))]
        return out

    def detail(self, run_id: str) -> dict[str, Any] | None:
        """One run for its page: summary, output, open gates of its family, children and the
        chain of parents."""
        row = self.run_row(run_id)
        if row is None:
            return None
        gates = self.gates_of(self.family(run_id))
        now = time.time()
        data = summary(row, gates, now, self.live(row))
        data["error"] = row["error"]
        data["output"] = self._json_column(run_id, "output")
        data["inputs"] = self._json_column(run_id, "inputs")
        options = self._json_column(run_id, "options")
        trace = options.get("trace") if isinstance(options, dict) else None
        if isinstance(trace, dict) and trace.get("trace_id"):  # the run exported OpenTelemetry traces
            from podium.telemetry import trace_link

            data["trace_id"] = str(trace["trace_id"])
            data["trace_url"] = trace_link(data["trace_id"])  # PODIUM_TRACE_URL's template
        children = self._rows(f"SELECT {_RUN_COLUMNS} FROM runs WHERE parent_run_id = ? "
                              "ORDER BY created_at", (run_id,))
        chain: list[dict[str, Any]] = []
        cur = row
        while cur.get("parent_run_id"):
            parent = self.run_row(cur["parent_run_id"])
            if parent is None or any(c["id"] == parent["id"] for c in chain):
                break
            chain.insert(0, {"id": parent["id"], "workflow": parent["workflow_name"]})
            cur = parent
        return {"run": data, "gates": gates, "parents": chain,
                "children": [dict(summary(c, [], now, self.live(c)), **_slot(c))
                             for c in children]}

    def _json_column(self, run_id: str, column: str) -> Any:
        rows = self._rows(f"SELECT {column} AS v FROM runs WHERE id = ?", (run_id,))
        if not rows or rows[0]["v"] is None:
            return None
        try:
            return json.loads(rows[0]["v"])
        except ValueError:
            return None

    def lease(self, run_id: str) -> Lease | None:
        rows = self._rows("SELECT * FROM leases WHERE run_id = ?", (run_id,))
        if not rows:
            return None
        return Lease.from_row(rows[0])

    def live(self, row: dict[str, Any]) -> bool:
        """Does a live process advance this run (its top-level run's lease owner)?"""
        if row["status"] != "running":
            return False
        lease = self.lease(self.root_of(row)["id"])
        return lease is not None and owner_alive(lease)

    def streaming(self, run_id: str) -> dict[str, dict[str, Any]]:
        """What the run's running steps streamed so far, by `step#iteration` (the store's
        live rows; store/sqlcore.py): empty unless a live process runs it (a crashed run's rows
        stay until it is resumed)."""
        row = self.run_row(run_id)
        if row is None or not self.live(row):
            return {}
        try:
            rows = self._rows("SELECT key, body FROM live WHERE run_id = ? ORDER BY key",
                              (run_id,))
        except sqlite3.OperationalError:  # a store no podium opened since before live rows
            return {}
        out: dict[str, dict[str, Any]] = {}
        for r in rows:
            try:
                body = json.loads(r["body"])
            except ValueError:
                continue
            if isinstance(body, dict):
                out[str(r["key"])] = body
        return out

    # ------------------------------------------------------------------ gates

    def gates_of(self, run_ids: list[str]) -> list[dict[str, Any]]:
        if not run_ids:
            return []
        marks = ", ".join("?" * len(run_ids))
        rows = self._rows(f"SELECT * FROM gates WHERE status = 'open' AND run_id IN ({marks}) "
                          "ORDER BY created_at, id", tuple(run_ids))
        return [_gate(r) for r in rows]

    def gate(self, gate_id: int) -> dict[str, Any] | None:
        rows = self._rows("SELECT * FROM gates WHERE id = ?", (gate_id,))
        return _gate(rows[0]) if rows else None

    def open_gates_by_root(self) -> dict[str, list[dict[str, Any]]]:
        """Open gates keyed by the top-level run they hold up."""
        out: dict[str, list[dict[str, Any]]] = {}
        for r in self._rows("SELECT * FROM gates WHERE status = 'open' ORDER BY created_at, id"):
            run = self.run_row(r["run_id"])
            root = self.root_of(run)["id"] if run else r["run_id"]
            out.setdefault(root, []).append(_gate(r))
        return out

    # ------------------------------------------------------------------ events

    def events(self, run_id: str, after: int = 0, limit: int = 100_000) -> list[dict[str, Any]]:
        rows = self._rows("SELECT body FROM events WHERE run_id = ? AND seq > ? ORDER BY seq "
                          "LIMIT ?", (run_id, after, limit))
        out = []
        for r in rows:
            try:
                out.append(json.loads(r["body"]))
            except ValueError:
                continue
        return out

    def events_text(self, run_id: str, after: int = 0,
                    limit: int = 100_000) -> list[tuple[int, str]]:
        """(seq, JSON text) of the events after `after`: what the stream sends as is, but for
        a gate_opened event, which gains `prompt_html` (web/markdown.py)."""
        with self._lock:
            cur = self.db.execute("SELECT seq, body FROM events WHERE run_id = ? AND seq > ? "
                                  "ORDER BY seq LIMIT ?", (run_id, after, limit))
            rows = cur.fetchall()
        return [(int(s), with_prompt_html(str(b))) for s, b in rows]


def store_source(store: RunStore) -> Path | str:
    """What a Reader or a ChangeFeed opens for this store: its file, or its server's URL."""
    from podium.store.postgres import PostgresStore

    return store.url if isinstance(store, PostgresStore) else Path(store.where)


def like_escape(text: str) -> str:
    """`text` matched literally by LIKE ... ESCAPE '\\' (its `%` and `_` are not wildcards)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _gate(r: dict[str, Any]) -> dict[str, Any]:
    try:
        options = json.loads(r["options"] or "[]")
    except ValueError:
        options = []
    return {"id": r["id"], "run_id": r["run_id"], "step": r["step"], "kind": r["kind"],
            "prompt": r["prompt"], "prompt_html": render_markdown(str(r["prompt"] or "")),
            "options": options, "status": r["status"],
            "created_at": r["created_at"]}


def _slot(row: dict[str, Any]) -> dict[str, Any]:
    try:
        opts = json.loads(row.get("options") or "{}")
    except ValueError:
        opts = {}
    return {"parent_step": opts.get("parent_step"), "slot": opts.get("slot"),
            "parent_iteration": opts.get("parent_iteration")}


def summary(row: dict[str, Any], gates: list[dict[str, Any]], now: float,
            live: bool) -> dict[str, Any]:
    """One run as the pages show it. `state` is what a person needs at a glance: waiting (a
    gate is open), running, interrupted (marked running but its process is gone: resumable),
    or the final status. `live`: a live process advances it (app/owners.py decides)."""
    status = row["status"]
    state = status
    if gates:
        state = "waiting"
    elif status == "running" and not live:
        state = "interrupted"
    end = row["finished_at"] or (row["updated_at"] if status not in ("running",) else now)
    return {
        "id": row["id"], "workflow": row["workflow_name"], "workflow_path": row["workflow_path"],
        "status": status, "state": state, "live": live, "current_step": row["current_step"],
        "created_at": row["created_at"], "updated_at": row["updated_at"],
        "finished_at": row["finished_at"], "elapsed": max(0.0, (end or now) - row["created_at"]),
        "iterations": row["iterations"], "input_tokens": row["input_tokens"],
        "output_tokens": row["output_tokens"], "cost_usd": round(row["cost_usd"] or 0.0, 6),
        "cost_partial": bool(row["cost_partial"]), "exit_code": row["exit_code"],
        "terminal": row["terminal"], "reason": row["reason"],
        "parent_run_id": row["parent_run_id"], "forked_from": row.get("forked_from"),
        "last_seq": row["last_seq"],
        "gate": ({"id": gates[-1]["id"], "step": gates[-1]["step"], "kind": gates[-1]["kind"],
                  "run_id": gates[-1]["run_id"]} if gates else None),
    }
