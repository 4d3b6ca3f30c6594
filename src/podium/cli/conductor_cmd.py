"""Conductor's command line, whole (spec 11): run's --dry-run, --log-file, --input-json,
--metadata and --web-bg; `podium status`, `stop --all/--force`, `checkpoint list` and
`podium guide`."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from podium import exitcodes
from podium.cli.runs_cmd import _guard
from podium.errors import UsageError

if TYPE_CHECKING:
    from podium.cli.run_cmd import RunRequest
    from podium.events.bus import Sink
    from podium.language.model import WorkflowFile

WEB_BG_TIMEOUT = 30.0  # seconds; PODIUM_WEB_BG_START_TIMEOUT overrides


def parse_metadata(pairs: list[str]) -> dict[str, str]:
    """--metadata KEY=VALUE pairs (values stay text, as in Conductor)."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key.strip():
            raise UsageError(f"--metadata {pair!r}: expected KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


def parse_input_json(pairs: list[str]) -> dict[str, Any]:
    """--input-json NAME=JSON pairs: the value is JSON, whatever it looks like."""
    from podium import jsontext

    out: dict[str, Any] = {}
    for pair in pairs:
        name, eq, text = pair.partition("=")
        if not eq or not name.strip():
            raise UsageError(f"--input-json {pair!r}: expected NAME=JSON")
        try:
            out[name.strip()] = jsontext.loads(text)
        except ValueError as exc:
            raise UsageError(f"--input-json {name.strip()}: not JSON: {exc}") from None
    return out


def expand_dotted_inputs(args: list[str]) -> list[str]:
    """Conductor's `--input.NAME=VALUE`, `--input.NAME VALUE` and bare `--input.NAME` (true),
    as `--input NAME=VALUE` for the parser."""
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            out.extend(args[i:])
            break
        if arg.startswith("--input.") and len(arg) > len("--input."):
            name, eq, value = arg[len("--input."):].partition("=")
            if not eq:
                if i + 1 < len(args) and not args[i + 1].startswith("-"):
                    value = args[i + 1]
                    i += 1
                else:
                    value = "true"
            out += ["--input", f"{name}={value}"]
        else:
            out.append(arg)
        i += 1
    return out


# ----------------------------------------------------------------------------- --dry-run


def dry_run(path: Path, wf: WorkflowFile) -> int:
    """The route plan from the entry point and the step budgets; nothing runs."""
    from podium.check.budget import analyse_budget, format_budget
    from podium.check.validate import validate_file
    from podium.events.redact import Redactor, secret_values

    hide = Redactor(secret_values(wf))  # loaded with ${VAR} expanded: no secret's value shown

    def w(text: str) -> None:
        sys.stdout.write(hide.text(text))

    meta = wf.workflow
    w(f"Dry run: {meta.name} ({path})\n")
    w(f"entry point: {meta.entry_point} · max_iterations: {meta.limits.max_iterations} · "
      f"timeout: {f'{meta.limits.timeout_seconds}s' if meta.limits.timeout_seconds else 'none'}"
      "\n\nroute plan (steps reachable from the entry point):\n")
    nodes: dict[str, Any] = {s.name: s for s in wf.agents}
    nodes.update({g.name: g for g in wf.parallel})
    nodes.update({g.name: g for g in wf.for_each})
    order, seen, todo = [], set(), [meta.entry_point]
    while todo:
        name = todo.pop(0)
        if name in seen or name not in nodes:
            continue
        seen.add(name)
        order.append(name)
        node = nodes[name]
        targets = [r.to for r in getattr(node, "routes", None) or []]
        targets += [o.route for o in getattr(node, "options", None) or [] if hasattr(o, "route")]
        targets += list(getattr(node, "agents", None) or []) if node.type == "parallel" else []
        todo.extend(t for t in targets if t not in seen)
    for n, name in enumerate(order, 1):
        node = nodes[name]
        kind = node.type or "agent"
        extra = f" [{', '.join(node.agents)}]" if kind == "parallel" else ""
        w(f"  {n:>3}. {name} ({kind}){extra}\n")
        for r in getattr(node, "routes", None) or []:
            loop = " (loop)" if r.to in order[:n] else ""
            w(f"         → {r.to}{loop}" + (f"  when {r.when}" if r.when else "") + "\n")
        for o in getattr(node, "options", None) or []:
            if hasattr(o, "route"):
                w(f"         → {o.route}  on '{getattr(o, 'value', '')}'\n")
    unreached = [s for s in nodes if s not in seen]
    if unreached:
        w(f"  not reachable: {', '.join(unreached)}\n")
    result = validate_file(path)
    if result.model is not None and not result.sink.errors:
        w("\n" + format_budget(analyse_budget(result).to_json()))
    w("\nnothing ran (--dry-run)\n")
    return exitcodes.OK


# ----------------------------------------------------------------------------- --log-file


def log_sink(spec: str, workflow: str) -> Sink:
    """--log-file PATH|auto: the run's progress in full (verbose) detail, in a file."""
    from podium.events.sinks.console import ConsoleSink

    if spec == "auto":
        from podium.app.home import podium_home

        safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in workflow)
        path = podium_home() / "logs" / f"podium-{safe}-{time.strftime('%Y%m%d-%H%M%S')}.log"
    else:
        path = Path(spec)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        stream = path.open("a", encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--log-file {spec}: cannot write it: {exc}") from None
    sys.stderr.write(f"podium: logging to {path}\n")
    return ConsoleSink(stream, 2, color=False)


# ----------------------------------------------------------------------------- --web-bg


def start_in_background(req: RunRequest | Any, what: str = "run") -> int:
    """--web-bg: the same `podium run` (or `resume`) in a detached process with its console
    (--web); wait until it serves, print the URL (stdout) and return."""
    from podium.app.home import podium_home
    from podium.app.spawn import spawn_podium

    if req.web_port < 0:
        raise UsageError("--web-port must be 0 (a free port) or a port number")
    home = podium_home()
    stamp = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    url_file = home / "logs" / f"web-bg-{stamp}.json"
    url_file.parent.mkdir(parents=True, exist_ok=True)
    args = [a for a in sys.argv[1:] if a != "--web-bg"] + ["--web", "--no-interactive"]
    os.environ["PODIUM_WEB_URL_FILE"] = str(url_file)
    try:
        spawned = spawn_podium(args, home=home, log_name=f"web-bg-{stamp}",
                               why=f"podium {what} --web-bg: {getattr(req, 'file', '')}",
                               cwd=Path.cwd())
    finally:
        os.environ.pop("PODIUM_WEB_URL_FILE", None)
    limit = float(os.environ.get("PODIUM_WEB_BG_START_TIMEOUT") or WEB_BG_TIMEOUT)
    deadline = time.monotonic() + limit
    import psutil

    while time.monotonic() < deadline:
        if url_file.is_file():
            try:
                started = json.loads(url_file.read_text(encoding="utf-8"))
            except ValueError:
                started = None
            if started:
                url_file.unlink(missing_ok=True)
                sys.stdout.write(f"{started['url']}\n")
                sys.stderr.write(f"podium: run {started['run_id']} goes on in the background "
                                 f"(pid {spawned.pid}, log {spawned.log}); stop it with "
                                 f"podium stop {started['run_id']}\n")
                return exitcodes.OK
        try:
            gone = psutil.Process(spawned.pid).status() == psutil.STATUS_ZOMBIE
        except psutil.Error:
            gone = True
        if gone:
            break
        time.sleep(0.05)
    sys.stderr.write(f"podium {what} --web-bg: the run did not start its console within "
                     f"{limit:g}s; see {spawned.log}\n")
    with contextlib.suppress(OSError):
        sys.stderr.write(spawned.log.read_text(encoding="utf-8", errors="replace")[-2000:])
    return exitcodes.RUNTIME_ERROR


# ----------------------------------------------------------------------------- status, stop


def status_command(json_out: bool) -> int:
    """The runs advancing now: a live process's on this machine, or Temporal workers'."""
    from podium.app.home import open_store
    from podium.app.runs import live_runs, run_metadata

    def body() -> int:
        store = open_store(verify=False)
        try:
            rows = live_runs(store)
        finally:
            store.close()
        now = time.time()
        out = [{"run_id": r.id, "id": r.id, "workflow": r.workflow_name,
                "workflow_path": r.workflow_path, "current_step": r.current_step, "pid": lv.lease.owner.pid if lv.lease else None,
                "command": lv.lease.owner.command if lv.lease else None,
                "started_at": r.created_at, "web": bool((r.options or {}).get("web")),
                "temporal": (r.options or {}).get("temporal"), "status": lv.status,
                "metadata": run_metadata(r)} for r, lv in rows]
        if json_out:
            sys.stdout.write(json.dumps(out, indent=2) + "\n")
            return exitcodes.OK
        if not out:
            sys.stdout.write("no runs are running on this machine\n")
            return exitcodes.OK
        for row in out:
            age = int(now - float(str(row["started_at"])))
            temporal = row["temporal"]
            where = (f"on Temporal {temporal.get('address')} ({row['status']})"
                     if isinstance(temporal, dict) else f"pid {row['pid']}")
            sys.stdout.write(f"{row['id']}  {row['workflow']}  step {row['current_step'] or '-'}"
                             f"  {where}  {age}s" + ("  (console)" if row["web"] else "")
                             + "\n")
        return exitcodes.OK

    return _guard(body)


def stop_command(run_id: str | None, stop_all: bool, *, force: bool, yes: bool,
                 json_out: bool, wait: float) -> int:
    """Stop one run, or with --all every run a live process on this machine advances."""
    from podium.app.home import open_store
    from podium.app.runs import Stopped, live_runs, stop_run

    if stop_all == (run_id is not None):
        sys.stderr.write("podium stop: give a RUN_ID (or --run-id RUN_ID), or --all\n")
        return exitcodes.INVALID

    def body() -> int:
        store = open_store(verify=False)
        try:
            ids = [r.id for r, _ in live_runs(store)] if stop_all else [str(run_id)]
            if stop_all and ids and not yes:
                if not sys.stdin.isatty():
                    sys.stderr.write(f"podium stop --all: {len(ids)} run(s) would stop; pass "
                                     "--yes to confirm\n")
                    return exitcodes.INVALID
                answer = input(f"stop {len(ids)} run(s): {', '.join(ids)}? [y/N] ")
                if answer.strip().lower() not in ("y", "yes"):
                    return exitcodes.OK
            done: list[Stopped] = []
            for rid in ids:
                done.append(stop_run(store, rid, wait=wait, force=force))
        finally:
            store.close()
        if json_out:
            sys.stdout.write(json.dumps([s.__dict__ for s in done], indent=2) + "\n")
        else:
            for s in done:
                sys.stdout.write(s.message + "\n")
            if stop_all and not done:
                sys.stdout.write("no runs are running on this machine\n")
        survivors = [s for s in done if s.status == "running"]
        return exitcodes.RUNTIME_ERROR if survivors else exitcodes.OK

    return _guard(body)


# ----------------------------------------------------------------------------- checkpoints


def checkpoint_list_command(run_id: str | None, json_out: bool, limit: int) -> int:
    """A run's checkpoints (its committed steps), or every run's latest, newest first."""
    from podium.app.home import open_store

    def body() -> int:
        store = open_store(verify=False)
        rows: list[dict[str, Any]] = []
        try:
            from podium.app.owners import seen

            if run_id is not None:
                run = store.find_run(run_id)
                status = seen(store, run).status  # as every surface reads it
                for e in reversed(store.events(run.id)):
                    if e["type"] == "checkpoint":
                        rows.append({"run_id": run.id, "workflow": run.workflow_name,
                                     "seq": e["seq"], "created_at": e["ts"],
                                     "step": e.get("step"), "next_step": e.get("next_step"),
                                     "status": status})
            else:
                for run in store.list_runs(limit=limit):
                    cp = store.latest_checkpoint(run.id)
                    if cp is not None:
                        rows.append({"run_id": run.id, "workflow": run.workflow_name,
                                     "seq": cp.seq, "created_at": cp.created_at,
                                     "step": cp.step, "next_step": cp.next_step,
                                     "status": seen(store, run).status})
        finally:
            store.close()
        if json_out:
            sys.stdout.write(json.dumps(rows[:limit], indent=2) + "\n")
            return exitcodes.OK
        if not rows:
            sys.stdout.write("no checkpoints\n")
            return exitcodes.OK
        for row in rows[:limit]:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(row["created_at"])))
            sys.stdout.write(f"{row['run_id']}  {row['workflow']}  {stamp}  after "
                             f"{row['step'] or '-'} → {row['next_step'] or '-'}  "
                             f"({row['status']}, seq {row['seq']})\n")
        return exitcodes.OK

    return _guard(body)


# ----------------------------------------------------------------------------- guide


def guide_command(run_id: str, texts: list[str], json_out: bool) -> int:
    """Queue guidance for a run: its next agent step (now, or once resumed) takes it in."""
    from podium.app.guidance import add_guidance
    from podium.app.home import open_store

    def body() -> int:
        store = open_store(verify=False)
        try:
            guided = add_guidance(store, run_id, texts)
        finally:
            store.close()
        rid = guided.run.id
        if json_out:
            sys.stdout.write(json.dumps({"run_id": rid, "queued": guided.queued,
                                         "live": guided.live}) + "\n")
        elif guided.live:
            sys.stderr.write(f"podium: guidance for run {rid} queued; its next agent step "
                             "takes it in\n")
        else:
            sys.stderr.write(f"podium: guidance for run {rid} queued; the run takes it in when "
                             f"it goes on (podium resume {rid}, or answer its gate)\n")
        return exitcodes.OK

    return _guard(body)
