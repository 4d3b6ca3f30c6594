"""Operations on runs: start, resume (and `--from`), answer a gate, stop, list.

Each operation that advances a run holds the run's lease while it does (app/owners.py): two
processes never advance one run at once. Refusals raise PodiumError with the documented exit
code and a message a person can act on; surfaces render them.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import field
from pathlib import Path
from shlex import quote
from typing import TYPE_CHECKING, Any

from podium import exitcodes
from podium.app.family import family, open_gates, open_gates_by_root, root_of
from podium.app.launch import LaunchOptions, advance, make_engine
from podium.app.owners import (
    Liveness,
    Ownership,
    ancestors,
    held,
    kept,
    liveness,
    owning,
    runs_on_temporal,
    this_host,
)
from podium.app.plugin_fetch import fetch_plugin_sources
from podium.app.preflight import check_providers
from podium.errors import PodiumError, WorkflowFileError
from podium.language.diagnostics import did_you_mean
from podium.language.model import END, WorkflowFile
from podium.records import record
from podium.store.base import GateRecord, RunRecord, RunStore

if TYPE_CHECKING:
    from podium.engine.history import Restart
    from podium.engine.run import Engine, RunConfig, RunResult
    from podium.events.model import Event
    from podium.store.base import RunStore


class Refused(PodiumError):
    """An operation that cannot be done, with its exit code and why: `invalid` (a value the
    operation cannot take), `missing` (no such gate), `conflict` (not in that state now),
    `too_large`."""

    def __init__(self, message: str, exit_code: int = exitcodes.INVALID,
                 kind: str = "invalid") -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.kind = kind


class Reported(PodiumError):
    """Refused, and already explained on the surface's stream (a workflow's diagnostics)."""

    def __init__(self, exit_code: int) -> None:
        super().__init__("")
        self.exit_code = exit_code


@record
class Advanced:
    """A run advanced by this process: the engine (for its totals) and how it ended."""

    engine: Engine
    result: RunResult


# ----------------------------------------------------------------------------- start


@record
class StartRequest:
    workflow: WorkflowFile
    path: Path
    inputs: dict[str, Any]
    options: dict[str, Any] = field(default_factory=dict)  # kept with the run
    forked_from: str | None = None
    command: str = "run"


def start_run(store: RunStore, req: StartRequest, opts: LaunchOptions, *,
              prepare: Callable[[Engine], dict[str, Any]] | None = None,
              recorded: Callable[[Engine], object] | None = None) -> Advanced:
    """Create a run, owned by this process from its first moment, and advance it.
    `prepare(engine)` runs before the run is recorded and returns more options to keep;
    `recorded(engine)` runs once it is in the store (a console can show it from then on)."""
    from podium.engine.run import file_hash, new_run_id

    run_id = new_run_id()
    engine = make_engine(req.workflow, req.path, req.inputs, opts, store, run_id=run_id)
    # a missing key stops the run before anything is recorded (checked before `prepare`,
    # which may put a fork's replay in front of the live providers)
    check_providers(engine)
    extra = prepare(engine) if prepare is not None else {}
    fetch_plugin_sources(engine)
    ownership = Ownership(store, run_id, req.command)
    store.create_run(RunRecord(
        run_id, req.workflow.workflow.name, str(req.path.resolve()), file_hash(req.path),
        req.inputs, forked_from=req.forked_from, options={**req.options, **extra}),
        ownership.owner)
    with kept(ownership):
        if recorded is not None:
            recorded(engine)
        return Advanced(engine, advance(engine, store))


# ----------------------------------------------------------------------------- resume


@record
class ResumeRequest:
    run_id: str
    from_step: str | None = None
    allow_changed: bool = False
    skip_gates: bool | None = None
    responses: Path | None = None
    verbosity: int = 1
    json_out: bool = False
    provider: str | None = None
    events: Path | None = None
    guidance: list[str] = field(default_factory=list)  # --guidance TEXT (spec 5.4)
    metadata: dict[str, str] = field(default_factory=dict)  # --metadata K=V, added
    interactive: bool | None = None  # --no-interactive: False


# how long an answer waits for the process that holds its run to let it go
OWNER_WAIT = 60.0


def resume_answered(store: RunStore, run_id: str, req: ResumeRequest,
                    observers: list[Any] | None = None) -> Advanced | None:
    """Resume a run whose gate was just answered. When another process holds the run (a
    resume racing the answer), wait for it to let go: if it parked meanwhile (at the gate it
    asked again, which the answer may have reached), resume it here, so an accepted answer is
    never left unused; None when that process ended the run or still holds it after
    OWNER_WAIT seconds (it goes on with the answer itself)."""
    from podium.store.base import RunOwned

    deadline = time.monotonic() + OWNER_WAIT
    while True:
        try:
            return resume_run(store, run_id, req, observers)
        except RunOwned:
            if time.monotonic() >= deadline:
                return None
        time.sleep(0.1)
        root = root_of(store, store.find_run(run_id))
        if root.status not in ("running", "waiting"):
            return None  # the owner finished the run: it used the answer


def resume_run(store: RunStore, run_id: str, req: ResumeRequest,
               observers: list[Any] | None = None, *,
               prepare: Callable[[Engine], object] | None = None) -> Advanced:
    """Continue a run (its top-level run, for a sub-workflow's id) from its last commit, or
    from `req.from_step`. RunOwned (exit 2) when a live process advances it."""
    root = root_of(store, store.find_run(run_id))
    if runs_on_temporal(root) and root.status in ("running", "waiting"):
        raise Refused(f"run {root.id} runs on Temporal workers, whose workflow goes on by "
                      f"itself: answer its gate with podium gate answer {root.id} VALUE, stop "
                      f"it with podium stop {root.id}", kind="conflict")
    if req.guidance:  # queued before the run goes on: its first agent step takes it in
        from podium.app.guidance import redacted_guidance

        texts = redacted_guidance(root, req.guidance)
    with owning(store, root.id, "resume"):
        if req.guidance or req.metadata:
            from podium.app.guidance import queued

            def added(options: dict[str, Any]) -> dict[str, Any]:
                if req.guidance:
                    options["guidance"] = [*queued(options), *texts]
                if req.metadata:
                    options["metadata"] = {**dict(options.get("metadata") or {}),
                                           **req.metadata}
                return options

            store.change_run_options(root.id, added)
        run = store.get_run(root.id)  # as it is now that this process owns it
        return _resume_owned(store, run, req, observers or [], prepare)


def _resume_owned(store: RunStore, run: RunRecord, req: ResumeRequest,
                  observers: list[Any],
                  prepare: Callable[[Engine], object] | None = None) -> Advanced:
    if run.status in ("success", "failed") and req.from_step is None:
        raise Refused(f"run {run.id} already finished ({run.status} at '{run.terminal}'); use "
                      "--from STEP to run again from a step")
    engine, start = rebuild_engine(store, run, req, observers)
    if prepare is not None:  # e.g. the console of `resume --web`, before the run goes on
        prepare(engine)
    return Advanced(engine, advance(engine, store, start))


def rebuild_engine(store: RunStore, run: RunRecord, req: ResumeRequest,
                   observers: list[Any], *, withdraw: bool = True,
                   loaded: dict[str, WorkflowFile] | None = None,
                   config: RunConfig | None = None, jsonl: bool = True
                   ) -> tuple[Engine, str | None]:
    """The engine of a stored run as its last commit left it (or as it stood before
    `req.from_step`), and the node it goes on at: what resume runs, and what a Temporal
    worker advances one node at a time. `withdraw`: a gate nobody answered is asked again.
    `loaded`: workflows already loaded and checked, by path and hash (a worker's).
    `config`: how the caller advances it (a worker's stepping and deadline); `jsonl`: the
    run's own JSONL copy is appended to (a worker keeps none)."""
    import dataclasses

    from podium.engine.run import RunConfig
    from podium.events.model import GuidanceAdded, RunStarted

    path, wf = _workflow_of(run, req, loaded)
    events = store.history(run.id)  # typed: the engine's resume fold reads them
    last_seq = max((e.seq for e in events), default=run.last_seq)
    restart = _restart_point(store, run, wf, events, req.from_step)
    state, start = restart.state, restart.start
    # the store holds `<secret:NAME>` where a secret was: the run goes on with the values
    state.inputs = with_secrets(state.inputs, wf, f"resume run {run.id}")
    state.outputs = with_secrets(state.outputs, wf, f"resume run {run.id}")
    original = run.options or {}
    responses = req.responses
    if responses is None and original.get("responses"):
        responses = Path(original["responses"])
    skip = req.skip_gates if req.skip_gates is not None else bool(original.get("skip_gates"))
    if req.skip_gates is not None:  # the run keeps the choice for later resumes and answers
        store.change_run_options(run.id, lambda options: {**options, "skip_gates": skip})
    first = next((e for e in events if isinstance(e, RunStarted)), None)
    # the run's first prompts had these: so do the next
    kept = (first.instructions if first is not None else None) or {}
    opts = LaunchOptions(skip, responses, req.verbosity, req.provider or original.get("provider"),
                         req.events, req.json_out, observers=observers,
                         interactive=req.interactive,
                         workspace_instructions=kept.get("workspace"),
                         cli_instructions=kept.get("cli"), run_log=jsonl)
    if req.from_step is not None:
        store.update_run(run.id, status="running", finished_at=None, exit_code=None,
                         output=None, error=None, terminal=None, reason=None)
    from podium.engine.history import stored_spend
    from podium.events.redact import restore_secrets, secret_values

    if withdraw:
        store.withdraw_gates(run.id)  # a gate nobody answered is asked again, as it goes on

    values = secret_values(wf)
    dialogs: dict[tuple[str, int], dict[str, Any]] = {}
    dialog = restart.dialog
    if start is not None and dialog is not None:  # it goes on in the dialog it parked in
        dialog = {**dialog, "output": with_secrets({"o": dialog.get("output")}, wf,
                                                   f"resume run {run.id}")["o"]}
        dialogs[(start, int(dialog["iteration"]))] = dialog
    config = dataclasses.replace(
        config or RunConfig(), carried=restart.carried, carried_dialogs=dialogs,
        guidance=tuple(str(t) for t in restore_secrets(  # as the run took them in
            [e.text for e in events if isinstance(e, GuidanceAdded)],
            set(values), values)),
        # every model call the run made counts, those of a step it runs again too: paid
        spent=stored_spend(store, run.id, events))
    engine = make_engine(wf, path, state.inputs, opts, store, run_id=run.id, state=state,
                         start_seq=last_seq, config=config)
    check_providers(engine)
    fetch_plugin_sources(engine)
    return engine, start


def _workflow_of(run: RunRecord, req: ResumeRequest, loaded: dict[str, WorkflowFile] | None
                 ) -> tuple[Path, WorkflowFile]:
    """The run's workflow file, loaded and checked, unless it changed since the run started
    (Refused, but with --allow-changed) or is gone."""
    from podium.app.workflows import load_valid
    from podium.engine.run import file_hash

    path = Path(run.workflow_path)
    if not path.is_file():
        raise WorkflowFileError(f"the workflow file of run {run.id} is gone: {path}")
    digest = file_hash(path)
    if digest != run.workflow_hash and not req.allow_changed:
        raise Refused(f"the workflow file changed since run {run.id} started ({path}); "
                      "resuming could mix two versions. Pass --allow-changed to resume anyway")
    key = f"{path}\n{digest}"
    wf = (loaded or {}).get(key)
    if wf is None:
        wf, code = load_valid(path)
        if wf is None:
            raise Reported(code)
        if loaded is not None:
            loaded[key] = wf
    return path, wf


def _restart_point(store: RunStore, run: RunRecord, wf: WorkflowFile,
                   events: list[Event], from_step: str | None) -> Restart:
    """Where the run goes on (the engine's fold of its committed events, engine/history.py),
    refused when the workflow has no such step (any more) or the step never ran."""
    from podium.engine.history import last_start_of, restart_of

    names = ({s.name for s in wf.agents} | {g.name for g in wf.parallel}
             | {g.name for g in wf.for_each})
    before = None
    if from_step is not None:
        if from_step not in names:
            hint = did_you_mean(from_step, sorted(names))
            raise Refused(f"'{from_step}' is not a step of {Path(run.workflow_path).name}"
                          + (f" ({hint})" if hint else ""))
        seq = last_start_of(events, from_step)
        if seq is None:
            raise Refused(f"'{from_step}' never ran in run {run.id}; it can only resume from a "
                          "step it reached")
        before = (from_step, seq)
    cp = store.latest_checkpoint(run.id) if from_step is None else None
    restart = restart_of(events, cp, inputs=run.inputs, entry_point=wf.workflow.entry_point,
                         default_max=wf.workflow.limits.max_iterations, before=before)
    if restart.start is None:
        restart.start = wf.workflow.entry_point
    elif restart.start not in names and restart.start != END:
        raise Refused(f"run {run.id} would resume at '{restart.start}', which the workflow no "
                      "longer has")
    return restart


def with_secrets(inputs: dict[str, Any], wf: WorkflowFile, what: str) -> dict[str, Any]:
    """A stored run's inputs (or outputs) with the secret values its store holds as
    `<secret:NAME>` taken from the environment again; Refused, naming the variables, when
    they are not set."""
    from podium.events.redact import MissingSecret, restore_secrets, secret_names

    try:
        restored: dict[str, Any] = restore_secrets(inputs, secret_names(wf))
    except MissingSecret as exc:
        raise Refused(f"to {what}, set {exc} in the environment: the run holds secret "
                      "values, and the store keeps none") from None
    return restored


# ----------------------------------------------------------------------------- gates


@record
class Answered:
    gate: GateRecord
    answer: str
    root: RunRecord
    live: bool  # a live process advances the run: it goes on with the answer by itself


def refuse_changed(store: RunStore, run_id: str) -> None:
    """Refused when the workflow file of a run's root changed since it started: answering a
    gate and resuming would mix two versions (checked before the answer is recorded, so the
    same command with --allow-changed still finds the gate open)."""
    from podium.engine.run import file_hash

    run = root_of(store, store.find_run(run_id))
    path = Path(run.workflow_path)
    if path.is_file() and file_hash(path) != run.workflow_hash:
        raise Refused(f"the workflow file changed since run {run.id} started ({path}); "
                      "resuming could mix two versions. Pass --allow-changed to answer and "
                      "resume anyway, or --no-resume to only record the answer")


def answer_gate(store: RunStore, run_id: str, value: str, text: str | None = None, *,
                by: str = "cli", gate_id: int | None = None) -> Answered:
    """Record the answer to the open gate of a run (or of one of its sub-workflow runs; the
    newest, or `gate_id`). The caller resumes the run when `live` is False."""
    run = store.find_run(run_id)
    gates = open_gates(store, run.id)
    if gate_id is not None:
        gates = [g for g in gates if g.id == gate_id]
        if not gates:
            known = [g for rid in family(store, run.id) for g in store.gates(run_id=rid)
                     if g.id == gate_id]
            if known:
                raise Refused(f"gate '{known[0].step}' was already answered", kind="conflict")
            raise Refused(f"run {run.id} has no gate {gate_id}", kind="missing")
    if not gates:
        unsent = _answered_unsent(store, run)
        if unsent is not None:  # its workflow never heard of the answer: tell it again
            root, gate = unsent
            _signal_answer(root, gate, str(gate.answer))
            return Answered(gate, str(gate.answer), root, True)
        raise Refused(f"run {run.id} has no gate waiting for an answer (status: "
                      f"{liveness(store, run).status})", kind="conflict")
    gate = gates[-1]
    answer, extra = _answer_value(gate, value, text)
    if extra:  # what a person typed may hold a secret: the store keeps none (app/secrets.py)
        from podium.app.secrets import run_redactor

        hide = run_redactor(root_of(store, store.get_run(gate.run_id)))
        extra = {k: hide.text(v) for k, v in extra.items()} if hide else extra
    try:
        store.answer_gate(gate.id, answer, extra, by)
    except PodiumError:
        now = _as_now(store, gate)
        if now is not None and now.status == "withdrawn":  # a resume asks it again
            raise Refused(f"run {run.id} has no gate waiting for an answer: a resume withdrew "
                          f"gate '{gate.step}' to ask it again; answer it once it is asked",
                          kind="conflict") from None
        raise Refused(f"gate '{gate.step}' of run {run.id} was already answered",
                      kind="conflict") from None
    root = root_of(store, store.get_run(gate.run_id))
    if runs_on_temporal(root):  # its workflow goes on with it
        _signal_answer(root, gate, value)
        return Answered(gate, answer, root, True)
    return Answered(gate, answer, root, liveness(store, root).live)


def _as_now(store: RunStore, gate: GateRecord) -> GateRecord | None:
    """The gate as the store holds it now (None when its run was removed)."""
    return next((g for g in store.gates(run_id=gate.run_id) if g.id == gate.id), None)


def owner_takes(store: RunStore, answered: Answered, wait: float = OWNER_WAIT) -> bool:
    """Whether the live process that advances an answered gate's run goes on with the answer
    itself. A console that waits at the gate does (it consumes the gate within its poll); a
    process that parks at the gate does not: a resume asks its gate again, and an answer that
    comes between the gate's opening and the process letting go of the run would be left
    unused. So this waits until the gate is consumed (True) or the owner let go of the run
    with the gate still unused (False: the caller resumes the run, as for one that nobody
    advances). True on Temporal, whose workflow takes the answer, and when the owner still
    holds the run after `wait` seconds; False when no live process advanced the run."""
    if not answered.live:
        return False
    if runs_on_temporal(answered.root):
        return True
    deadline = time.monotonic() + wait
    while True:
        gone = not liveness(store, store.get_run(answered.root.id)).live
        # read after the lease: an owner that consumed the gate committed it before letting go
        now = _as_now(store, answered.gate)
        if now is None or now.status == "consumed":
            return True
        if gone:
            return False
        if time.monotonic() >= deadline:
            return True
        time.sleep(0.05)


def _answered_unsent(store: RunStore, run: RunRecord) -> tuple[RunRecord, GateRecord] | None:
    """A run on Temporal still waiting at a gate that was answered (the answer is in the store
    but the signal to its workflow failed): its root and that gate."""
    root = root_of(store, run)
    if not runs_on_temporal(root) or root.status != "waiting":
        return None
    answered = [g for rid in family(store, root.id) for g in store.gates(run_id=rid,
                                                                          status="answered")]
    return (root, answered[-1]) if answered else None


def _signal_answer(root: RunRecord, gate: GateRecord, value: str) -> None:
    from podium.app.remote import TemporalUnreachable, signal_answer

    try:
        signal_answer(root, gate.id)
    except TemporalUnreachable as exc:
        raise TemporalUnreachable(f"{exc}; the answer is recorded: once the server answers, "
                                  f"`podium gate answer {root.id} {quote(value)}` sends it "
                                  "again") from None


def _answer_value(gate: GateRecord, value: str, text: str | None
                  ) -> tuple[str, dict[str, str]]:
    if gate.kind == "dialog" and _match_option(gate.options, value) is None:
        if len(value) > 100_000:  # what the person writes to the agent, as they wrote it
            raise Refused("the text is too long (100,000 characters at most)", kind="too_large")
        return "discuss", {"message": value}
    if gate.kind == "iteration_limit":
        raw = value.strip()
        if not raw.isdigit() or int(raw) > 100_000:
            raise Refused(f"gate '{gate.step}' asks how many more iterations to grant: give a "
                          f"whole number (0 stops the run), not '{value}'")
        return str(int(raw)), {}
    option = _match_option(gate.options, value)
    if option is None:
        allowed = ", ".join(str(o.get("value")) for o in gate.options)
        raise Refused(f"'{value}' is not an option of gate '{gate.step}' (options: {allowed})")
    extra: dict[str, str] = {}
    if option.get("prompt_for"):
        if len(text or "") > 100_000:
            raise Refused("the text is too long (100,000 characters at most)", kind="too_large")
        extra[str(option["prompt_for"])] = text or ""
    return str(option["value"]), extra


def _match_option(options: list[dict[str, object]], value: str) -> dict[str, object] | None:
    for o in options:
        if str(o.get("value")) == value:
            return o
    low = value.strip().lower()
    for o in options:
        if str(o.get("label", "")).strip().lower() == low or str(o.get("value")).lower() == low:
            return o
    if value.strip().isdigit() and 1 <= int(value) <= len(options):
        return options[int(value) - 1]
    return None


# ----------------------------------------------------------------------------- stop


@record
class Stopped:
    run_id: str
    status: str
    signalled: int | None  # the pid asked to stop, or None when nothing was running it
    message: str
    marked: bool = False  # its process was gone: this call marked it interrupted


def stop_run(store: RunStore, run_id: str, *, wait: float = 10.0,
             force: bool = False) -> Stopped:
    """Ask the process that advances a run to stop (SIGTERM: it keeps its checkpoint), after
    checking that the lease's owner is still that process. A run whose owner is gone is
    marked interrupted. With `wait`, waits up to that long for the run to stop."""
    run = root_of(store, store.find_run(run_id))
    if runs_on_temporal(run):
        return _stop_on_temporal(store, run, wait)
    live = liveness(store, run)
    if run.status != "running":
        return Stopped(run.id, run.status, None, f"run {run.id} is not running (status: "
                                                 f"{run.status})")
    if not live.live or live.lease is None:
        store.update_run(run.id, status="interrupted")
        return Stopped(run.id, "interrupted", None,
                       f"run {run.id} has no live process (it was killed?); it stays "
                       f"resumable: podium resume {run.id}", marked=True)
    owner = live.lease.owner
    if owner.host != this_host():
        raise Refused(f"run {run.id} runs on {owner.host} (pid {owner.pid}); stop it there",
                      kind="conflict")
    # a parent of this process: a script of that very run asking to stop it would kill its
    # own caller (the console of `podium run --web` stops the run in its own process: fine)
    if owner.pid != os.getpid() and owner.pid in ancestors():
        raise Refused(f"run {run.id} is run by this very process or one of its parents (pid "
                      f"{owner.pid}); not stopping it", kind="conflict")
    os.kill(owner.pid, signal.SIGTERM)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if liveness(store, store.get_run(run.id)).status != "running":  # ended or died
            break
        time.sleep(0.05)
    final = liveness(store, store.get_run(run.id)).status
    if final == "running" and force:  # --force: it did not stop in time; kill it
        from podium.app.owners import owner_state

        if owner_state(live.lease) != "gone":  # still the process that took the lease
            os.kill(owner.pid, signal.SIGKILL)
            time.sleep(0.2)
        store.update_run(run.id, status="interrupted")
        return Stopped(run.id, "interrupted", owner.pid,
                       f"run {run.id} did not stop within {wait:g}s and was killed (pid "
                       f"{owner.pid}); it resumes from its last checkpoint: podium resume "
                       f"{run.id}")
    return Stopped(run.id, final, owner.pid,
                   f"run {run.id} stopped (status: {final}); resume it with "
                   f"podium resume {run.id}" if final != "running" else
                   f"run {run.id} was asked to stop (pid {owner.pid}) and is still running")


def mark_workflow_closed(store: RunStore, run_id: str) -> str:
    """A run on Temporal whose workflow closed without recording the run's end (terminated
    outside podium, say): marked interrupted when the store still has it running or waiting.
    Its status now."""
    now = store.get_run(run_id).status
    if now not in ("running", "waiting"):  # its end was recorded after all
        return now
    store.update_run(run_id, status="interrupted")
    return "interrupted"


def _stop_on_temporal(store: RunStore, run: RunRecord, wait: float) -> Stopped:
    """Cancel the run's Temporal workflow; it ends `interrupted` (its workflow records it). A
    workflow that already closed (terminated outside podium) is not cancelled: the run is
    marked interrupted here."""
    from podium.app.remote import cancel

    if run.status not in ("running", "waiting"):
        return Stopped(run.id, run.status, None, f"run {run.id} is not running (status: "
                                                 f"{run.status})")
    closed = cancel(run)  # cancels only a workflow that still runs
    if closed != "running":
        now = mark_workflow_closed(store, run.id)
        if now != "interrupted":  # it just ended by itself
            return Stopped(run.id, now, None, f"run {run.id} ended (status: {now})")
        return Stopped(run.id, "interrupted", None, f"run {run.id}: its Temporal workflow "
                       f"had already ended ({closed or 'unknown to the server'}); marked "
                       "interrupted", marked=True)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and store.get_run(run.id).status in ("running",
                                                                           "waiting"):
        time.sleep(0.05)
    final = store.get_run(run.id).status
    return Stopped(run.id, final, None, f"run {run.id}: its Temporal workflow was cancelled "
                   f"(status: {final})")


# ----------------------------------------------------------------------------- list


def list_runs(store: RunStore, *, status: str | None = None, workflow: str | None = None,
              limit: int = 50, metadata: dict[str, str] | None = None
              ) -> list[tuple[RunRecord, Liveness]]:
    """Runs newest first, each with its liveness as people read it (app/owners.py `held`: a
    `running` run whose process died is `interrupted`, one an open gate holds is `waiting`);
    `status` filters on that; `metadata` keeps the runs whose --metadata has every KEY=VALUE
    given."""
    stored: str | tuple[str, ...] | None = status
    seen_as = ("interrupted", "running", "waiting")
    if status in seen_as:  # a stored `running` run may read as any of these
        stored = (str(status), "running") if status != "running" else "running"
    wide = status in seen_as or bool(metadata)
    rows = store.list_runs(status=stored, workflow=workflow, limit=10_000 if wide else limit)
    if metadata:
        rows = [r for r in rows if all(str(run_metadata(r).get(k)) == v and k in run_metadata(r)
                                       for k, v in metadata.items())]
    gates = open_gates_by_root(store)
    out = [(r, held(liveness(store, r), _gates_of(store, r, gates))) for r in rows]
    if status in seen_as:
        out = [(r, lv) for r, lv in out if lv.status == status]
    return out[:limit]


def _gates_of(store: RunStore, run: RunRecord,
              by_root: dict[str, list[GateRecord]]) -> list[GateRecord]:
    """The open gates that hold `run` up: its family's (a sub-workflow run's, read below it)."""
    if run.parent_run_id is None:
        return by_root.get(run.id, [])
    return open_gates(store, run.id) if by_root.get(root_of(store, run).id) else []


def run_metadata(run: RunRecord) -> dict[str, str]:
    """The KEY=VALUE pairs the run was started (or resumed) with by --metadata."""
    raw = (run.options or {}).get("metadata")
    return {str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else {}


def live_runs(store: RunStore) -> list[tuple[RunRecord, Liveness]]:
    """The top-level runs that are advancing now and can be stopped from here, newest first:
    those a live process on this machine advances, and those on Temporal workers (running, or
    waiting for a person in their workflow), which `stop` cancels wherever they run."""
    host = this_host()
    gates = open_gates_by_root(store)
    out = []
    for r in store.list_runs(status=("running", "waiting"), limit=10_000):
        if r.parent_run_id is not None:
            continue
        lv = liveness(store, r)
        if not lv.live:
            continue
        if runs_on_temporal(r) or (
                r.status == "running" and lv.lease is not None
                and lv.lease.owner.host == host):
            out.append((r, held(lv, gates.get(r.id, []))))  # waiting, at an open gate
    return out
