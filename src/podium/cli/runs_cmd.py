"""`podium runs`, `show`, `events`, `stop` and `gate list`: reading and steering stored runs."""

from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING, Any

from podium import exitcodes
from podium.errors import PodiumError

if TYPE_CHECKING:
    from podium.store.base import RunRecord


def _age(seconds: float) -> str:
    from podium.app.fleet import elapsed_text  # one way to write an age, as the fleet does

    return elapsed_text(seconds)


def _cost(r: RunRecord) -> str:
    if r.cost_partial:
        return f"~${r.cost_usd:.4f}"
    return f"${r.cost_usd:.4f}"


def _guard(fn: Any) -> int:
    try:
        code: int = fn()
        return code
    except PodiumError as exc:
        sys.stderr.write(f"podium: {exc}\n")
        return exc.exit_code


STATUSES = ("running", "waiting", "success", "failed", "error", "limit", "interrupted")


def runs_command(status: str | None, workflow: str | None, limit: int, fmt: str,
                 metadata: list[str] | None = None) -> int:
    from podium.app.home import open_store

    if status is not None and status not in STATUSES:
        sys.stderr.write(f"podium runs: --status {status}: not a run status; one of: "
                         f"{', '.join(STATUSES)}\n")
        return exitcodes.INVALID
    if fmt not in ("text", "json"):
        sys.stderr.write(f"podium runs: --format must be 'text' or 'json' (got '{fmt}')\n")
        return exitcodes.INVALID

    def body() -> int:
        from podium.app.runs import list_runs, run_metadata
        from podium.cli.conductor_cmd import parse_metadata

        wanted = parse_metadata(metadata or [])
        store = open_store(verify=False)
        try:
            found = list_runs(store, status=status, workflow=workflow, limit=limit,
                              metadata=wanted)
        finally:
            store.close()
        rows = [r for r, _ in found]
        shown = {r.id: lv.status for r, lv in found}
        if fmt == "json":
            # run_id as in every JSON output; id kept as its alias
            out = [{"run_id": r.id, "id": r.id, "workflow": r.workflow_name,
                    "workflow_path": r.workflow_path, "status": shown[r.id], "current_step": r.current_step,
                    "created_at": r.created_at, "updated_at": r.updated_at,
                    "finished_at": r.finished_at, "iterations": r.iterations,
                    "input_tokens": r.input_tokens, "output_tokens": r.output_tokens,
                    "cost_usd": round(r.cost_usd, 6), "cost_partial": r.cost_partial,
                    "exit_code": r.exit_code, "terminal": r.terminal,
                    "parent_run_id": r.parent_run_id, "forked_from": r.forked_from,
                    "metadata": run_metadata(r)}
                   for r in rows]
            sys.stdout.write(json.dumps(out, indent=2) + "\n")
            return exitcodes.OK
        if not rows:
            sys.stdout.write("no runs yet\n")
            return exitcodes.OK
        now = time.time()
        tagged = any(run_metadata(r) for r in rows)
        header = ("ID", "WORKFLOW", "STATUS", "STEP", "AGE", "TOKENS", "COST") + (
            ("METADATA",) if tagged else ())
        table = [header]
        for r in rows:
            mark = " ▲" if shown[r.id] == "waiting" else ""
            tags = (" ".join(f"{k}={v}" for k, v in run_metadata(r).items()),) if tagged else ()
            table.append((r.id, r.workflow_name, shown[r.id] + mark, r.current_step or "-",
                          _age(now - r.created_at), str(r.input_tokens + r.output_tokens),
                          _cost(r), *tags))
        widths = [max(len(row[i]) for row in table) for i in range(len(header))]
        for row in table:
            sys.stdout.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True))
                             .rstrip() + "\n")
        stopped = [r.id for r in rows if shown[r.id] == "interrupted"]
        if stopped:
            sys.stdout.write(f"interrupted runs resume with: podium resume {stopped[0]}"
                             + (" (and likewise the others)" if len(stopped) > 1 else "") + "\n")
        return exitcodes.OK

    return _guard(body)


def show_command(run_id: str, fmt: str) -> int:
    from podium.app.home import open_store

    def body() -> int:
        from podium.app.history import event_json, run_view
        from podium.app.spend import spend_json
        from podium.events.sinks.console import parsed_first

        store = open_store(verify=False)
        try:
            view = run_view(store, run_id)  # the one model of a run every surface reads
        finally:
            store.close()
        run, live, gates, state, spent = (view.run, view.status, view.gates, view.state,
                                          view.spend)
        failed = None if view.failed_step is None else event_json(view.failed_step)
        # what it spent, per agent: every model call it and its sub-workflows made
        per_step = {name: s.as_json() for name, s in spent.by_agent.items()}
        if fmt == "json":
            sys.stdout.write(json.dumps({
                "run": dict(run.to_json(), run_id=run.id, status=live.status, live=live.live,
                            owner=None if live.lease is None else live.lease.owner.__dict__),
                "steps": [{"step": r.step, "type": r.step_type, "iteration": r.iteration,
                           "output": r.output, "route_to": r.route_to, "elapsed": r.elapsed}
                          for r in state.records],
                "cost_per_agent": per_step,
                "spend": spend_json(spent),
                "open_gates": [g.__dict__ for g in gates],
                "failed_step": failed,
            }, indent=2, default=str) + "\n")
            return exitcodes.OK
        w = sys.stdout.write
        w(f"run {run.id} · {run.workflow_name} · {live.status}\n")
        if live.interrupted:
            w(f"its process is gone (killed or crashed); continue it with: podium resume "
              f"{run.id}\n")
        elif live.live and live.lease is not None:
            w(f"advanced by pid {live.lease.owner.pid} on {live.lease.owner.host}\n")
        w(f"workflow: {run.workflow_path}\n")
        origin = (run.options or {}).get("origin") or {}
        if origin:  # podium run NAME@REGISTRY#REF
            from podium.app.registries import describe_origin

            w(f"from registry: {describe_origin(origin)}\n")
        w(f"inputs: {json.dumps(run.inputs, ensure_ascii=False)}\n")
        tags = (run.options or {}).get("metadata") or {}
        if tags:  # --metadata KEY=VALUE
            w("metadata: " + " ".join(f"{k}={v}" for k, v in tags.items()) + "\n")
        guidance = (run.options or {}).get("guidance") or []
        for text in guidance:  # podium guide / resume --guidance
            w(f"guidance: {text}\n")
        trace = (run.options or {}).get("trace") or {}
        if trace.get("trace_id"):  # kept when the run exported OpenTelemetry traces
            w(f"trace: {trace['trace_id']}\n")
        if run.parent_run_id:
            w(f"parent run: {run.parent_run_id}\n")
        if run.forked_from:
            w(f"forked from: {run.forked_from}\n")
        w(f"steps ({len(state.records)}):\n")
        for i, r in enumerate(state.records, 1):
            out = json.dumps(parsed_first(r.step_type, r.output), ensure_ascii=False,
                             default=str)
            if len(out) > 300:
                out = out[:297] + "..."
            w(f"  {i:>3}. {r.step} ({r.step_type}, #{r.iteration}, {r.elapsed:.2f}s)"
              f" → {r.route_to or '-'}\n       {out}\n")
        if per_step:
            w("cost per agent:\n")
            for step, row in per_step.items():
                cost = f"${row['cost_usd']:.4f}" if row["priced"] else "unpriced"
                w(f"  {step}: {cost} · {row['model']} · {row['input_tokens']} in / "
                  f"{row['output_tokens']} out\n")
            t = spent.total
            w(f"total: {'' if t.priced else '~'}${t.cost_usd:.4f}"
              + ("" if t.priced else " (partial: some models are unpriced)") + "\n")
        for g in gates:
            w(f"waiting at gate '{g.step}' ({g.kind}): podium gate answer {run.id} VALUE\n")
        if run.output is not None:
            w("output: " + json.dumps(run.output, indent=2, ensure_ascii=False) + "\n")
        if failed is not None:
            w(f"failed at: step '{failed['step']}' ({failed['step_type']}, iteration "
              f"{failed['iteration']}, {failed.get('error_type', 'error')})\n")
            for label in ("exit_code", "stderr", "stdout", "answer"):
                if (failed.get("details") or {}).get(label) not in (None, ""):
                    w(f"  {label}: {_tail(failed['details'][label])}\n")
        if run.error:
            w(f"error: {run.error}\n")
        return exitcodes.OK

    return _guard(body)


def _tail(value: Any, lines: int = 5) -> str:
    """The last lines of a recorded stream, on one line each, indented under their label."""
    if not isinstance(value, str):
        return json.dumps(value, default=str)
    kept = [line for line in value.rstrip().splitlines() if line.strip()][-lines:]
    return "\n    ".join(line[:200] for line in kept)


def events_command(run_id: str, after: int) -> int:
    from podium.app.home import open_store

    def body() -> int:
        from podium.app.history import event_json, history

        store = open_store(verify=False)
        try:
            for e in history(store, run_id, after):
                sys.stdout.write(json.dumps(event_json(e), ensure_ascii=False,
                                            separators=(",", ":")) + "\n")
        finally:
            store.close()
        return exitcodes.OK

    return _guard(body)




def stop_command(run_id: str, wait: float) -> int:
    from podium.app.home import open_store
    from podium.app.runs import stop_run

    def body() -> int:
        store = open_store(verify=False)
        try:
            stopped = stop_run(store, run_id, wait=wait)
        finally:
            store.close()
        sys.stdout.write(stopped.message + "\n")
        return exitcodes.RUNTIME_ERROR if stopped.status == "running" else exitcodes.OK

    return _guard(body)


def gate_list_command(fmt: str) -> int:
    from podium.app.home import open_store

    def body() -> int:
        store = open_store(verify=False)
        try:
            gates = store.gates(status="open")
            runs = {g.run_id: store.get_run(g.run_id) for g in gates}
        finally:
            store.close()
        if fmt == "json":
            sys.stdout.write(json.dumps([dict(g.__dict__, workflow=runs[g.run_id].workflow_name)
                                         for g in gates], indent=2, default=str) + "\n")
            return exitcodes.OK
        if not gates:
            sys.stdout.write("no gates are waiting\n")
            return exitcodes.OK
        now = time.time()
        for g in gates:
            values = ", ".join(str(o.get("value")) for o in g.options) or "a number of iterations"
            prompt = "\n".join(f"    {line}" for line in g.prompt.strip().splitlines())
            sys.stdout.write(f"{g.run_id}  {runs[g.run_id].workflow_name}  {g.step}  "
                             f"({g.kind}, waiting {_age(now - g.created_at)})\n"
                             + (f"{prompt}\n" if prompt else "")
                             + f"    answer with: podium gate answer {g.run_id} <{values}>\n")
        return exitcodes.OK

    return _guard(body)
