"""`podium resume` and `podium gate answer`: continue a stored run from its last commit."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from podium.cli import exitcodes
from podium.cli.launch import LaunchOptions, launch, make_engine, open_store, process_start
from podium.errors import PodiumError
from podium.language.diagnostics import did_you_mean
from podium.language.model import END
from podium.store.base import RunRecord
from podium.store.sqlite import SQLiteStore


@dataclass
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


def _fail(message: str, code: int) -> int:
    sys.stderr.write(f"podium: {message}\n")
    return code


def resume_command(req: ResumeRequest) -> int:
    try:
        store = open_store()
    except PodiumError as exc:
        return _fail(str(exc), exc.exit_code)
    try:
        run = root_of(store, store.find_run(req.run_id))
        return resume_run(store, run, req)
    except PodiumError as exc:
        return _fail(str(exc), exc.exit_code)
    finally:
        store.close()


def root_of(store: SQLiteStore, run: RunRecord) -> RunRecord:
    """The top-level run a sub-workflow run belongs to (resuming it resumes its children)."""
    seen = {run.id}
    while run.parent_run_id and run.parent_run_id not in seen:
        run = store.get_run(run.parent_run_id)
        seen.add(run.id)
    return run


def _live(run: RunRecord) -> bool:
    """Whether a process that is still alive is executing the run."""
    return run.status == "running" and run.pid is not None and \
        process_start(run.pid) == run.pid_start


def _family(store: SQLiteStore, run_id: str) -> list[str]:
    """A run and all its sub-workflow runs, parents first."""
    out, todo = [], [run_id]
    while todo:
        rid = todo.pop(0)
        out.append(rid)
        todo.extend(r.id for r in store.list_runs(parent=rid, limit=10_000))
    return out


def resume_run(store: SQLiteStore, run: RunRecord, req: ResumeRequest) -> int:
    from podium.cli.run_cmd import load_valid
    from podium.engine.run import file_hash
    from podium.store.restore import (
        fold_events,
        granted_after,
        last_start_of,
        usage_from_events,
    )

    if _live(run):
        return _fail(f"run {run.id} is still running (pid {run.pid}); stop it first with "
                     f"podium stop {run.id}", exitcodes.INVALID)
    if run.status in ("success", "failed") and req.from_step is None:
        return _fail(f"run {run.id} already finished ({run.status} at '{run.terminal}'); use "
                     f"--from STEP to run again from a step", exitcodes.INVALID)
    path = Path(run.workflow_path)
    if not path.is_file():
        return _fail(f"the workflow file of run {run.id} is gone: {path}", exitcodes.FILE_ERROR)
    if file_hash(path) != run.workflow_hash and not req.allow_changed:
        return _fail(f"the workflow file changed since run {run.id} started ({path}); resuming "
                     "could mix two versions. Pass --allow-changed to resume anyway",
                     exitcodes.INVALID)
    wf, code = load_valid(path)
    if wf is None:
        return code
    events = store.events(run.id)
    last_seq = max((int(e["seq"]) for e in events), default=run.last_seq)
    names = ({s.name for s in wf.agents} | {g.name for g in wf.parallel}
             | {g.name for g in wf.for_each})
    if req.from_step is not None:
        if req.from_step not in names:
            hint = did_you_mean(req.from_step, sorted(names))
            return _fail(f"'{req.from_step}' is not a step of {path.name}"
                         + (f" ({hint})" if hint else ""), exitcodes.INVALID)
        seq = last_start_of(events, req.from_step)
        if seq is None:
            return _fail(f"'{req.from_step}' never ran in run {run.id}; it can only resume from "
                         "a step it reached", exitcodes.INVALID)
        state_seq: int | None = seq - 1
        state = fold_events(events, upto_seq=state_seq,
                            default_max=wf.workflow.limits.max_iterations)
        start: str | None = req.from_step
    else:
        cp = store.latest_checkpoint(run.id)
        state_seq = cp.seq if cp is not None else None
        if cp is not None:
            state = fold_events(events, upto_seq=cp.seq,
                                default_max=wf.workflow.limits.max_iterations)
            granted = granted_after(events, cp.seq)
            if granted is not None:
                state.max_iterations = max(state.max_iterations, granted)
            start = cp.next_step or cp.step
        else:
            # Nothing was committed: start afresh (keeping only the run's start).
            state = fold_events([e for e in events if e["type"] == "run_started"][:1],
                                default_max=wf.workflow.limits.max_iterations)
            state.inputs = dict(run.inputs)
            start = wf.workflow.entry_point
    if start not in names and start != END:
        return _fail(f"run {run.id} would resume at '{start}', which the workflow no longer has",
                     exitcodes.INVALID)
    for gate in store.gates(run_id=run.id, status="open"):
        store.consume_gate(gate.id)
    original = run.options or {}
    responses = req.responses
    if responses is None and original.get("responses"):
        responses = Path(original["responses"])
    skip = req.skip_gates if req.skip_gates is not None else bool(original.get("skip_gates"))
    if req.skip_gates is not None:  # the run keeps the choice for later resumes and answers
        store.update_run(run.id, options={**original, "skip_gates": skip})
    opts = LaunchOptions(skip, responses, req.verbosity, req.provider or original.get("provider"),
                         req.events, req.json_out)
    if req.from_step is not None:
        store.update_run(run.id, status="running", finished_at=None, exit_code=None,
                         output=None, error=None, terminal=None, reason=None)
    try:
        engine = make_engine(wf, path, state.inputs, opts, store, run_id=run.id, state=state,
                             start_seq=last_seq)
    except PodiumError as exc:
        return _fail(str(exc), exc.exit_code)
    engine.restore_usage(usage_from_events(
        [e for e in events if int(e["seq"]) <= (state_seq if state_seq is not None
                                                else last_seq)]))
    return launch(engine, store, opts, start)


def gate_answer_command(run_id: str, value: str, text: str | None, resume: bool,
                        req: ResumeRequest) -> int:
    try:
        store = open_store()
    except PodiumError as exc:
        return _fail(str(exc), exc.exit_code)
    try:
        run = store.find_run(run_id)
        gates = [g for rid in _family(store, run.id) for g in store.gates(run_id=rid,
                                                                         status="open")]
        if not gates:
            return _fail(f"run {run.id} has no gate waiting for an answer (status: "
                         f"{run.status})", exitcodes.INVALID)
        gate = gates[-1]
        extra: dict[str, str] = {}
        if gate.kind == "iteration_limit":
            if not value.strip().isdigit():
                return _fail(f"gate '{gate.step}' asks how many more iterations to grant: "
                             f"give a whole number (0 stops the run), not '{value}'",
                             exitcodes.INVALID)
            answer = str(int(value.strip()))
        else:
            option = _match_option(gate.options, value)
            if option is None:
                allowed = ", ".join(str(o.get("value")) for o in gate.options)
                return _fail(f"'{value}' is not an option of gate '{gate.step}' (options: "
                             f"{allowed})", exitcodes.INVALID)
            answer = str(option["value"])
            if option.get("prompt_for"):
                extra[str(option["prompt_for"])] = text or ""
        store.answer_gate(gate.id, answer, extra, "cli")
        sys.stderr.write(f"podium: gate '{gate.step}' of run {run.id} answered: {answer}\n")
        if not resume:
            return exitcodes.OK
        root = root_of(store, store.get_run(gate.run_id))
        if _live(root):  # e.g. `podium run --web`, polling the store for this answer
            sys.stderr.write(f"podium: run {root.id} is running (pid {root.pid}) and goes on "
                             f"with the answer itself; if it parks instead, `podium resume "
                             f"{root.id}` continues with it\n")
            return exitcodes.OK
        return resume_run(store, root, req)
    except PodiumError as exc:
        return _fail(str(exc), exc.exit_code)
    finally:
        store.close()


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
