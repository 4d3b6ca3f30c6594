"""Building an engine on the run store and advancing it: shared by start, resume, gate answers
and fork. The store is the run's committer (its failure stops the run); the surface passes its
own observers (the terminal's progress, the console's answerer) in."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from podium.language.model import WorkflowFile
from podium.records import record

if TYPE_CHECKING:
    from podium.engine.run import Engine, Hooks, RunConfig, RunResult
    from podium.events.bus import Sink
    from podium.providers.base import ProviderRegistry
    from podium.providers.scripted import ResponsesFile
    from podium.steps.state import RunState
    from podium.store.base import RunStore
    from podium.telemetry import TelemetrySettings


@record
class LaunchOptions:
    skip_gates: bool = False
    responses: Path | None = None
    verbosity: int = 1
    provider: str | None = None
    events: Path | None = None
    json_out: bool = False
    record: bool = True
    # observers of the run's events that the surface adds (the terminal's progress)
    observers: list[Sink] = field(default_factory=list)
    interactive: bool | None = None  # None: when stdin is a terminal
    # an exhausted max_iterations nobody answers parks the run (exit 5) for `gate answer`;
    # False: it fails with exit 4, Conductor's MaxIterationsError (a `podium run` with
    # nobody to ask: no terminal, no --no-interactive, no console)
    park_limits: bool = True
    # --workspace-instructions / --instructions FILE texts (app/instructions.py)
    workspace_instructions: str | None = None
    cli_instructions: str | None = None
    # what watches the run's loop (a fork's replay: app/replay.py `fork_replay`)
    hooks: Hooks | None = None
    # the run's own JSONL copy in the store's folder (a Temporal worker keeps none: each
    # worker would write its part of it, numbered by its own bus)
    run_log: bool = True


def new_run_id() -> str:
    """A fresh run id (the engine's)."""
    from podium.engine.run import new_run_id as make

    return make()


def file_hash(path: Path) -> str:
    """The digest a run keeps of its workflow file (resume compares it)."""
    from podium.engine.run import file_hash as digest

    return digest(path)


def build_providers(wf: WorkflowFile, *, provider: str | None = None,
                    responses: ResponsesFile | None = None) -> ProviderRegistry:
    """The one wiring of a run's model providers, for run, resume, fork, replay and the
    Temporal workers (which rebuild their engines through make_engine): `--provider` checked
    against the catalog, scripted agents (`--responses` with agents) in place of every
    provider, and each provider configured from the workflow's provider object and the
    environment (providers/settings.py) however it is asked for, a fork's replay included."""
    import functools

    from podium.providers.base import ProviderRegistry
    from podium.providers.settings import resolve_settings

    if provider is not None:
        from podium.errors import UsageError
        from podium.providers.catalog import describe_known, info

        if info(provider) is None:
            raise UsageError(f"--provider {provider}: unknown provider; podium has: "
                             f"{describe_known()}")
    override = None
    if responses is not None and "agents" in responses.model_fields_set:
        from podium.providers.pricing import preload_table
        from podium.providers.scripted import ScriptedProvider

        override = ScriptedProvider(responses)  # a file of only gates scripts only gates
        preload_table()  # its calls are priced as the real providers' are, table loaded once
    return ProviderRegistry(override, settings=functools.partial(
        resolve_settings, runtime=wf.workflow.runtime))


def make_engine(wf: WorkflowFile, path: Path, inputs: dict[str, Any], opts: LaunchOptions,
                store: RunStore, *, run_id: str | None = None, state: RunState | None = None,
                start_seq: int = 0, config: RunConfig | None = None) -> Engine:
    """The engine of a run kept in `store`, its RunConfig made here whole: the store commits
    its steps, a gate nobody answers parks in it, guidance queued in it reaches its agents.
    `config` brings what the caller knows (a resume's carried state, a worker's stepping)."""
    import dataclasses

    from podium.app.guidance import store_source
    from podium.engine.run import Engine, Persistence, RunConfig
    from podium.gates.base import ChainAnswerer, GateAnswerer, ScriptedAnswerer, SkipGatesAnswerer
    from podium.gates.store import StoreAnswerer
    from podium.gates.terminal import TerminalAnswerer
    from podium.steps.base import RunOptions
    from podium.store.base import GateRecord

    answerers: list[GateAnswerer] = []
    scripted: GateAnswerer | None = None
    responses = None
    if opts.responses is not None:
        from podium.providers.scripted import load_responses

        responses = load_responses(opts.responses)
        scripted = ScriptedAnswerer(responses.gate_answers())
    interactive = (sys.stdin.isatty() if opts.interactive is None else opts.interactive) \
        and not opts.skip_gates
    run_id = run_id or new_run_id()

    def park(request: Any) -> None:
        options = [o.model_dump(exclude_none=True) for o in request.options]
        store.open_gate(GateRecord(0, request.run_id, request.step, request.kind,
                                   request.prompt, options, "open", time.time()))

    base = config or RunConfig()
    config = dataclasses.replace(
        base, persistence=Persistence(store, checkpoints=True, parker=park,
                                      park_limits=opts.park_limits),
        hooks=opts.hooks if opts.hooks is not None else base.hooks,
        # guidance `podium guide` queues in the store reaches the next agent step (spec 5.4)
        guidance_source=base.guidance_source or store_source(store, run_id))
    engine = Engine(wf, path, inputs=inputs,
                    providers=build_providers(wf, provider=opts.provider, responses=responses),
                    answerer=ChainAnswerer(answerers),
                    options=RunOptions(skip_gates=opts.skip_gates, interactive=interactive,
                                       provider_override=opts.provider, record=opts.record,
                                       workspace_instructions=opts.workspace_instructions,
                                       cli_instructions=opts.cli_instructions),
                    run_id=run_id, state=state, start_seq=start_seq, config=config)
    answerers.append(StoreAnswerer(store, engine.bus.redactor))
    if scripted is not None:
        answerers.append(scripted)
    if opts.skip_gates:
        answerers.append(SkipGatesAnswerer())
    elif interactive:
        answerers.append(TerminalAnswerer())
    store.redactor = engine.bus.redactor  # the store writes no secret either
    from podium.app.environ import hide_from_proc
    from podium.events.redact import secret_names

    hide_from_proc(secret_names(wf))  # nor can a command read them from podium's /proc
    engine.bus.add_committer(store)
    from podium.events.sinks.live import LiveSink

    # what a step streams, for a console or the fleet TUI in another process (never history)
    engine.bus.add(LiveSink(store, redactor=engine.bus.redactor, window=_context_window))
    for observer in opts.observers:
        engine.bus.add(observer)
    from podium.events.sinks.jsonl import JsonlSink

    # every run also keeps a JSONL log of its own (appended to on resume), plus --events F
    own = store.folder / "runs" / engine.run_id / "events.jsonl" if opts.run_log else None
    for log in (own, opts.events):
        if log is None:
            continue
        try:
            engine.bus.add(JsonlSink(log, append=state is not None))
        except OSError as exc:
            sys.stderr.write(f"podium: warning: cannot write the event log {log}: {exc}\n")
    if wf.workflow.runtime.telemetry is not None or any(k.startswith("OTEL_") for k in os.environ):
        from podium.telemetry import settings as telemetry_settings

        traces = telemetry_settings(wf)
        if traces is not None:  # only then is OpenTelemetry imported
            _add_traces(engine, store, traces, resumed=state is not None)
    return engine


def _context_window(model: str | None, provider: str | None) -> int | None:
    from podium.providers.pricing import context_window

    return context_window(model, provider)


def _add_traces(engine: Engine, store: RunStore, traces: TelemetrySettings, *,
                resumed: bool) -> None:
    """The trace exporter observes the run. A resumed run continues the trace its first
    attempt started: the trace id and root span id are kept in the run's options."""
    try:
        from podium.telemetry.spans import make_sink
    except ImportError as exc:
        sys.stderr.write(f"podium: warning: traces are configured but the OpenTelemetry SDK is "
                         f"missing ({exc.name}): install podium[otel]; the run goes on "
                         f"without traces\n")
        return
    kept: dict[str, Any] = {}
    if resumed:
        try:
            kept = dict((store.get_run(engine.run_id).options or {}).get("trace") or {})
        except Exception:  # a run not in the store yet (a sub-workflow's): a new trace
            kept = {}

    def keep(trace_id: str, span_id: str) -> None:
        try:
            store.change_run_options(engine.run_id, lambda options: {
                **options, "trace": {"trace_id": trace_id, "span_id": span_id}})
        except Exception as exc:
            sys.stderr.write(f"podium: warning: cannot keep the trace id of run "
                             f"{engine.run_id}: {exc}\n")

    engine.bus.add(make_sink(traces, trace_id=kept.get("trace_id"),
                             span_id=kept.get("span_id"), on_root=keep))


def advance(engine: Engine, store: RunStore, start: str | None = None, *,
            once: bool = False) -> RunResult:
    """Run the engine (its run row exists, this process holds its lease) to its end, a gate
    or a limit (`once`: one node, for an outside executor). Raises StoreError when the store cannot commit: the run stops there, and
    what was committed before stays resumable."""
    from podium.app.owners import process_start

    pid = os.getpid()
    start_time = process_start(pid)
    store.update_run(engine.run_id, status="running", pid=pid,
                     pid_start=None if start_time is None else repr(start_time))
    from podium.store.base import StoreError

    try:
        try:
            return engine.run(start, once=once)
        finally:
            if engine.bus.failure is None:
                store.commit()
    except StoreError as exc:  # what was committed before stays resumable
        raise StoreError(f"run {engine.run_id} stopped: {exc}") from None
