"""`podium resume` and `podium gate answer`: parse, call the application layer, render."""

from __future__ import annotations

import sys

from podium import exitcodes
from podium.app.runs import ResumeRequest
from podium.cli.run_cmd import RunHooks, fail, report
from podium.errors import PodiumError

__all__ = ["ResumeRequest", "gate_answer_command", "resume_command"]


def _observers(req: ResumeRequest) -> list[object]:
    from podium.events.sinks.console import ConsoleSink

    if req.verbosity < 0:  # podium --silent
        return []
    return [ConsoleSink(sys.stderr, req.verbosity)]


def resume_command(req: ResumeRequest, metadata: list[str] | None = None,
                   log_file: str | None = None, hooks: RunHooks | None = None) -> int:
    """`hooks`: the console of `resume --web` (started once the run is owned again)."""
    from podium.app.home import open_store
    from podium.app.launch import LaunchOptions
    from podium.app.runs import resume_run
    from podium.cli.conductor_cmd import log_sink, parse_metadata

    try:
        req.metadata = parse_metadata(metadata or [])
        observers = _observers(req)
        if log_file:
            observers.append(log_sink(log_file, req.run_id))
        store = open_store()
    except PodiumError as exc:
        return fail("", exc)
    try:
        def prepare(engine: object) -> None:  # the run exists already: show it at once
            assert hooks is not None
            hooks.started(engine, store)
            hooks.recorded(engine)

        prepare_hook = prepare if hooks is not None else None
        done = resume_run(store, req.run_id, req, observers, prepare=prepare_hook)
        if hooks is not None:
            hooks.finished(done.engine)
        return report(done, LaunchOptions(verbosity=req.verbosity, json_out=req.json_out))
    except PodiumError as exc:
        return fail("", exc)
    finally:
        if hooks is not None:
            hooks.close()
        store.close()


def gate_answer_command(run_id: str, value: str, text: str | None, resume: bool,
                        req: ResumeRequest) -> int:
    from podium.app.home import open_store
    from podium.app.launch import LaunchOptions
    from podium.app.runs import answer_gate, owner_takes, refuse_changed, resume_answered

    try:
        store = open_store()
    except PodiumError as exc:
        return fail("", exc)
    try:
        if resume and not req.allow_changed:
            refuse_changed(store, run_id)
        answered = answer_gate(store, run_id, value, text, by="cli")
        gate, root = answered.gate, answered.root
        sys.stderr.write(f"podium: gate '{gate.step}' of run {gate.run_id} answered: "
                         f"{answered.answer}\n")
        if not resume:
            return exitcodes.OK
        live = (f"podium: run {root.id} is running and goes on with the answer itself; if "
                f"it parks instead, `podium resume {root.id}` continues with it\n")
        if owner_takes(store, answered):  # e.g. `podium run --web`, polling for this answer
            sys.stderr.write(live)
            return exitcodes.OK
        # another process may hold the run meanwhile: resume_answered waits for it to let go
        done = resume_answered(store, root.id, req, _observers(req))
        if done is None:  # that process ended the run, or goes on with the answer itself
            sys.stderr.write(live)
            return exitcodes.OK
        return report(done, LaunchOptions(json_out=req.json_out))
    except PodiumError as exc:
        return fail("", exc)
    finally:
        store.close()
