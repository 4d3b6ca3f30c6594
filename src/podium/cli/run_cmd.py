"""`podium run`: validate, start the run through the application layer, report."""

from __future__ import annotations

import json
import sys
from dataclasses import field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from podium.app.inputs import coerce_cli_value, parse_inputs, resolve_inputs
from podium.app.workflows import load_valid
from podium.errors import PodiumError
from podium.records import record

if TYPE_CHECKING:
    from podium.app.launch import LaunchOptions
    from podium.app.runs import Advanced

__all__ = ["RunHooks", "RunRequest", "coerce_cli_value", "fail", "load_valid", "parse_inputs",
           "report", "resolve_inputs", "run_command"]


@record
class RunRequest:
    """Everything `podium run` was asked to do."""

    file: Path
    inputs: list[str] = field(default_factory=list)
    input_file: Path | None = None
    skip_gates: bool = False
    responses: Path | None = None
    json_out: bool = False
    verbosity: int = 1
    provider: str | None = None
    events: Path | None = None
    record: bool = True
    # Conductor's run flags (spec 11)
    input_json: list[str] = field(default_factory=list)  # NAME=JSON
    metadata: list[str] = field(default_factory=list)  # KEY=VALUE, kept with the run
    dry_run: bool = False
    log_file: str | None = None  # PATH or auto
    interactive: bool | None = None  # --no-interactive: False
    web_port: int = 0
    web_bg: bool = False
    workspace_instructions: bool = False
    instructions: list[Path] = field(default_factory=list)
    print_loaded_instructions: bool = False
    silent: bool = False  # podium --silent: only the result on stdout
    temporal: str | None = None  # --temporal HOST:PORT (or PODIUM_TEMPORAL_ADDRESS)
    task_queue: str = "podium"


class RunHooks(Protocol):
    """Extra behaviour around a run (the console of `podium run --web`)."""

    def started(self, engine: Any, store: Any) -> dict[str, Any]:
        """Called once the engine exists, before the run is recorded; returns extra options
        to record with the run. Raise PodiumError to refuse to run."""
        ...

    def recorded(self, engine: Any) -> None:
        """Called once the run is in the store (its console may send people to it now)."""
        ...

    def finished(self, engine: Any) -> None: ...

    def close(self) -> None: ...


def fail(command: str, exc: PodiumError) -> int:
    """One line for a refused or failed operation (nothing when it was already explained)."""
    message = str(exc)
    if message:
        sys.stderr.write(f"podium{' ' + command if command else ''}: {message}\n")
    return exc.exit_code


def run_command(req: RunRequest, hooks: RunHooks | None = None) -> int:
    from podium.app.home import open_store
    from podium.app.instructions import describe, gather
    from podium.app.launch import LaunchOptions
    from podium.app.runs import StartRequest, start_run
    from podium.cli.conductor_cmd import (
        dry_run,
        log_sink,
        parse_input_json,
        parse_metadata,
        start_in_background,
    )
    from podium.events.sinks.console import ConsoleSink

    warnings: list[str] = []
    origin: dict[str, Any] | None = None
    if not req.file.exists():  # NAME[@REGISTRY][#REF]: a workflow from a registry
        from podium.app import registries

        if registries.looks_like_reference(str(req.file)):
            try:
                resolved = registries.resolve(str(req.file))
            except PodiumError as exc:
                return fail("run", exc)
            if resolved.warning and not req.silent:
                sys.stderr.write(f"podium run: {resolved.warning}\n")
            req = replace(req, file=resolved.path)
            origin = resolved.origin
    wf, code = load_valid(req.file, warnings)
    if wf is None:
        return code
    if req.dry_run:
        return dry_run(req.file, wf)
    try:
        metadata = parse_metadata(req.metadata)
        inputs = parse_inputs(wf, req.inputs, req.input_file,
                              parse_input_json(req.input_json))
        if req.web_bg:
            return start_in_background(req)
        given = gather(req.workspace_instructions, req.instructions)
    except PodiumError as exc:
        return fail("run", exc)
    if req.print_loaded_instructions and req.workspace_instructions:
        sys.stderr.write(describe(given.found))
    observers: list[Any] = [] if req.silent else [
        ConsoleSink(sys.stderr, req.verbosity, after_start=warnings)]
    if req.log_file:
        observers.append(log_sink(req.log_file, wf.workflow.name))
    opts = LaunchOptions(req.skip_gates, req.responses, -1 if req.silent else req.verbosity,
                         req.provider, req.events, req.json_out, req.record,
                         observers=observers, interactive=req.interactive,
                         workspace_instructions=given.workspace, cli_instructions=given.cli,
                         park_limits=_someone_to_ask(req, hooks))
    try:
        store = open_store()
    except PodiumError as exc:
        return fail("run", exc)
    try:
        start = StartRequest(wf, req.file, inputs, options={
            "responses": str(req.responses.resolve()) if req.responses else None,
            "skip_gates": req.skip_gates, "provider": req.provider,
            **({"metadata": metadata} if metadata else {}),
            **({"origin": origin} if origin else {})})
        where = _temporal(req)
        if where is not None:  # its workers advance it; this process follows it
            from podium.temporal.follow import run_on_temporal

            try:
                code, outcome = run_on_temporal(store, start, opts, where)
            except PodiumError as exc:
                return fail("run", exc)
            return code if outcome is None else _report_followed(outcome, wf, opts)
        prepare = (lambda engine: hooks.started(engine, store)) if hooks is not None else None
        try:
            done = start_run(store, start, opts, prepare=prepare,
                             recorded=hooks.recorded if hooks is not None else None)
        except PodiumError as exc:
            return fail("run", exc)
        if hooks is not None:
            hooks.finished(done.engine)
        return report(done, opts)
    finally:
        if hooks is not None:
            hooks.close()
        store.close()


def _someone_to_ask(req: RunRequest, hooks: RunHooks | None) -> bool:
    """Whether an exhausted max_iterations parks the run for a person (a terminal, a
    console, or --no-interactive: asked to park) or fails it, as Conductor's
    MaxIterationsError does when nobody can be asked (exit 4)."""
    return req.interactive is not None or hooks is not None or sys.stdin.isatty()


def _temporal(req: RunRequest) -> Any:
    """Where the run goes when it runs on Temporal workers, or None (here)."""
    from podium.app.remote import address

    found = address(req.temporal)
    if found is None:
        return None
    from podium.temporal.follow import Where

    return Where(found, req.task_queue)


def _report_followed(outcome: Any, wf: Any, opts: LaunchOptions) -> int:
    """report() for a run its Temporal workers advanced (read back from the store)."""
    from types import SimpleNamespace

    from podium.events.redact import Redactor, secret_values

    hide = Redactor()
    hide.add(secret_values(wf))
    engine = SimpleNamespace(bus=SimpleNamespace(redactor=hide))  # what report() reads of it
    return report(SimpleNamespace(engine=engine, result=outcome), opts)  # type: ignore[arg-type]


def report(done: Advanced, opts: LaunchOptions) -> int:
    """The final output on stdout (JSON), the summary on stderr; returns the exit code."""
    from podium.cli.summary import print_summary

    outcome = done.result
    hide = done.engine.bus.redactor  # podium prints no secret either
    output = hide.value(outcome.output)
    if opts.json_out:
        payload = {
            "run_id": outcome.run_id, "status": outcome.status, "exit_code": outcome.exit_code,
            "output": output, "terminal": outcome.terminal,
            "reason": hide.value(outcome.reason),
            "error": hide.text(str(outcome.error)) if outcome.error else None,
            "steps": outcome.path, "iterations": outcome.iterations,
            "elapsed": round(outcome.elapsed, 3),
        }
        sys.stdout.write(json.dumps(payload, ensure_ascii=False) + "\n")
    elif output is not None:
        sys.stdout.write(json.dumps(output, indent=2, ensure_ascii=False) + "\n")
    if opts.verbosity >= 0:  # podium --silent: the result only
        print_summary(done.engine, outcome, sys.stderr)
    return outcome.exit_code
