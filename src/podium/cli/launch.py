"""Shared by run, resume and gate answer: build an engine on the run store, run it, report."""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from podium.language.model import WorkflowFile

if TYPE_CHECKING:
    from podium.engine.run import Engine, RunResult
    from podium.engine.state import RunState
    from podium.store.sqlite import SQLiteStore


def podium_home() -> Path:
    return Path(os.environ.get("PODIUM_HOME") or Path.home() / ".podium")


def open_store(*, verify: bool = True) -> SQLiteStore:
    """The run store under PODIUM_HOME. `verify` (for commands that write) checks the whole
    file first, so a damaged store is reported before anything is written to it."""
    from podium.store.sqlite import SQLiteStore, default_store_path

    return SQLiteStore(default_store_path(podium_home()), verify=verify)


def process_start(pid: int) -> str | None:
    """The kernel's start time of `pid` (with the pid, a process identity), or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()
    return fields[19] if len(fields) > 19 else None


def ancestors() -> set[int]:
    """This process and its parents, up to init: a stop must never signal one of them."""
    out = set()
    pid = os.getpid()
    while pid > 1:
        out.add(pid)
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
                text = fh.read()
            pid = int(text[text.rfind(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


@dataclass
class LaunchOptions:
    skip_gates: bool = False
    responses: Path | None = None
    verbosity: int = 1
    provider: str | None = None
    events: Path | None = None
    json_out: bool = False
    record: bool = True


def make_engine(wf: WorkflowFile, path: Path, inputs: dict[str, Any], opts: LaunchOptions,
                store: SQLiteStore, *, run_id: str | None = None, state: RunState | None = None,
                start_seq: int = 0, warnings: list[str] | None = None) -> Engine:
    from podium.engine.run import Engine
    from podium.events.sinks.console import ConsoleSink
    from podium.gates.base import ChainAnswerer, GateAnswerer, ScriptedAnswerer, SkipGatesAnswerer
    from podium.gates.store import StoreAnswerer
    from podium.gates.terminal import TerminalAnswerer
    from podium.providers.base import ProviderRegistry
    from podium.steps.base import RunOptions
    from podium.store.base import GateRecord

    if opts.provider is not None:
        from podium.errors import UsageError
        from podium.providers.catalog import describe_known, info

        if info(opts.provider) is None:
            raise UsageError(f"--provider {opts.provider}: unknown provider; podium has: "
                             f"{describe_known()}")
    answerers: list[GateAnswerer] = []
    override = None
    scripted: GateAnswerer | None = None
    if opts.responses is not None:
        from podium.providers.scripted import ScriptedProvider, load_responses

        responses = load_responses(opts.responses)
        if "agents" in responses.model_fields_set:  # a file of only gates scripts only gates
            override = ScriptedProvider(responses)
        scripted = ScriptedAnswerer(responses.gate_answers())
    interactive = sys.stdin.isatty() and not opts.skip_gates
    engine = Engine(wf, path, inputs=inputs, providers=ProviderRegistry(override),
                    answerer=ChainAnswerer(answerers),
                    options=RunOptions(skip_gates=opts.skip_gates, interactive=interactive,
                                       provider_override=opts.provider, record=opts.record),
                    run_id=run_id, state=state, start_seq=start_seq)
    answerers.append(StoreAnswerer(store))
    if scripted is not None:
        answerers.append(scripted)
    if opts.skip_gates:
        answerers.append(SkipGatesAnswerer())
    elif interactive:
        answerers.append(TerminalAnswerer())
    engine.bus.add(store)
    engine.bus.add(ConsoleSink(sys.stderr, opts.verbosity, after_start=warnings))
    from podium.events.sinks.jsonl import JsonlSink

    # every run also keeps a JSONL log of its own (appended to on resume), plus --events F
    for log in (store.path.parent / "runs" / engine.run_id / "events.jsonl", opts.events):
        if log is None:
            continue
        try:
            engine.bus.add(JsonlSink(log, append=state is not None))
        except OSError as exc:
            sys.stderr.write(f"podium: cannot write the event log {log}: {exc}\n")
    engine.checkpointer = store
    engine.store = store

    def park(request: Any) -> None:
        options = [o.model_dump(exclude_none=True) for o in request.options]
        store.open_gate(GateRecord(0, request.run_id, request.step, request.kind,
                                   request.prompt, options, "open", time.time()))

    engine.parker = park
    return engine


def launch(engine: Engine, store: SQLiteStore, opts: LaunchOptions,
           start: str | None = None) -> int:
    """Run the engine (its run row must exist), print the output and the summary."""
    from podium.store.base import StoreError

    pid = os.getpid()
    try:
        store.update_run(engine.run_id, status="running", pid=pid,
                         pid_start=process_start(pid))
        try:
            outcome = engine.run(start)
        finally:
            store.commit()
    except StoreError as exc:  # the store broke mid-run: what was committed stays resumable
        sys.stderr.write(f"podium: run {engine.run_id} stopped: {exc}\n")
        return exc.exit_code
    report(engine, outcome, opts)
    return outcome.exit_code


def report(engine: Engine, outcome: RunResult, opts: LaunchOptions) -> None:
    from podium.cli.summary import print_summary

    if opts.json_out:
        payload = {
            "run_id": outcome.run_id, "status": outcome.status, "exit_code": outcome.exit_code,
            "output": outcome.output, "terminal": outcome.terminal, "reason": outcome.reason,
            "error": str(outcome.error) if outcome.error else None,
            "steps": outcome.path, "iterations": outcome.iterations,
            "elapsed": round(outcome.elapsed, 3),
        }
        sys.stdout.write(json.dumps(payload, ensure_ascii=False) + "\n")
    elif outcome.output is not None:
        sys.stdout.write(json.dumps(outcome.output, indent=2, ensure_ascii=False) + "\n")
    print_summary(engine, outcome, sys.stderr)
