"""Recorded runs, re-executed and compared: replay, the recording behind fork, and diff."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from podium import exitcodes, jsontext
from podium.errors import UsageError, WorkflowFileError
from podium.replay.recording import Recording, TrajectoryStep

if TYPE_CHECKING:
    from podium.engine.run import Engine, Hooks
    from podium.events.bus import Sink
    from podium.store.base import RunStore


def recording_of(store: RunStore, ref: str) -> Recording:
    """A recording from the store (run id or prefix) or from an exported JSONL file."""
    from podium.replay.recording import load_recording, recording_from_events

    path = Path(ref)
    if not path.is_file() and (path.suffix.lower() in (".jsonl", ".json", ".ndjson")
                               or "/" in ref or "\\" in ref):
        raise WorkflowFileError(f"{ref}: no such file (a run id, or an event log written by "
                                "`podium events RUN_ID > FILE`)")
    if path.is_file():
        events = []
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                try:
                    events.append(jsontext.loads(line, max_depth=jsontext.RECORD_MAX_DEPTH))
                except ValueError as exc:
                    raise UsageError(f"{ref}:{n}: not a JSON event line: {exc}") from None
        try:
            return recording_from_events(events)
        except (ValueError, KeyError) as exc:
            raise UsageError(f"{ref}: not a podium event log: {exc}") from None
    run = store.find_run(ref)
    return load_recording(store, run.id)


def fork_replay(recording: Recording, live_from: tuple[str, int]) -> Hooks:
    """The hooks that make a fork's engine replay `recording` up to execution `live_from` of
    a step and go on live from there with the providers build_providers gave it: given to
    the engine in its LaunchOptions; their `attach` runs once its providers were checked
    (`replay_until`)."""
    from podium.replay.attach import ReplayControl, replay_hooks

    return replay_hooks(recording, ReplayControl(live_from=live_from))


def replay_until(engine: Engine) -> None:
    """Put the fork's recording (its engine's hooks, fork_replay) in front of its providers."""
    attach = engine.config.hooks.attach
    if attach is not None:
        attach(engine)


def replay_recording(recording: Recording, verbosity: int = 0, *,
                     workflow_path: Path | None = None, sink: Sink | None = None) -> dict[str, Any]:
    """Re-execute a recorded run offline and compare it with its recording (against
    `workflow_path` instead of the recorded workflow file, when given; `sink` also receives
    the replay's events)."""
    from podium.app.launch import build_providers
    from podium.app.workflows import load_valid
    from podium.engine.run import Engine, RunConfig
    from podium.events.sinks.console import ConsoleSink
    from podium.events.sinks.jsonl import MemorySink
    from podium.gates.base import ChainAnswerer
    from podium.replay.attach import ReplayControl, replay_hooks
    from podium.steps.base import RunOptions

    base: dict[str, Any] = {"run_id": recording.run_id, "identical": False, "output": None,
                            "steps": 0, "status": None}
    if not recording.recorded:
        return {**base, "why": "the run was made with recording off (--no-record); it cannot "
                "be replayed", "error_code": exitcodes.INVALID}
    path = workflow_path or Path(recording.workflow_path)
    if not path.is_file():
        return {**base, "why": f"its workflow file is gone: {path}",
                "error_code": exitcodes.FILE_ERROR}
    wf, code = load_valid(path)
    if wf is None:
        return {**base, "why": f"its workflow file is now invalid: {path}", "error_code": code}
    from podium.events.redact import MissingSecret, restore_secrets, secret_names

    try:  # secret inputs were recorded as <secret:NAME>: their values come from here again
        inputs = restore_secrets(dict(recording.inputs), secret_names(wf))
    except MissingSecret as exc:
        return {**base, "why": f"the run was given secret inputs: set {exc} in the "
                "environment to replay it", "error_code": exitcodes.INVALID}
    from podium.events.redact import secret_values

    hide = secret_values(wf)  # the values the engine's redactor will hold

    def guidance(step: str, iteration: int) -> list[str]:  # as the run took it in
        texts = recording.guidance_before(step, iteration)
        return [str(t) for t in restore_secrets(texts, set(hide), hide)]

    control = ReplayControl()
    hooks = replay_hooks(recording, control)
    engine = Engine(wf, path, inputs=inputs, providers=build_providers(wf),
                    answerer=ChainAnswerer([]), options=RunOptions(
                        skip_gates=False,
                        workspace_instructions=recording.instructions.get("workspace"),
                        cli_instructions=recording.instructions.get("cli")),
                    config=RunConfig(hooks=hooks, guidance_source=guidance))
    assert hooks.attach is not None
    hooks.attach(engine)
    memory = MemorySink()
    engine.bus.add(memory)
    if sink is not None:
        engine.bus.add(sink)
    base["replay_run_id"] = engine.run_id
    if verbosity >= 2:
        engine.bus.add(ConsoleSink(sys.stderr, 1))
    result = engine.run()
    result.output = engine.bus.redactor.value(result.output)  # compared, and shown, redacted
    final = recording.final
    report = {**base, "steps": len(result.path), "status": result.status,
              "output": result.output, "terminal": result.terminal,
              "recorded_status": final.get("status")}
    div = control.divergence
    if div is not None:
        return {**report, "at_index": (div.index if div.index is not None
                                       else control.replayed_steps) + 1,
                "step": div.step, "kind": div.kind, "why": str(div)}
    mismatches = []
    if result.error is not None:
        mismatches.append(f"the replay stopped with an error: {result.error}")
    if result.status != final.get("status"):
        mismatches.append(f"status {result.status} instead of {final.get('status')}")
    if _canon(result.output) != _canon(final.get("output")):
        mismatches.append("the final output differs:\n"
                          f"  recorded: {_canon(final.get('output'))}\n  now:      "
                          f"{_canon(result.output)}")
    if result.terminal != final.get("terminal"):
        mismatches.append(f"it ended at '{result.terminal}' instead of '{final.get('terminal')}'")
    if len(result.path) != len(recording.trajectory):
        mismatches.append(f"{len(result.path)} steps instead of {len(recording.trajectory)}")
    if mismatches:
        return {**report, "at_index": len(result.path), "step": result.terminal,
                "kind": "final", "why": "; ".join(mismatches)}
    return {**report, "identical": True}


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def parse_from(text: str, recording: Recording) -> tuple[str, int]:
    name, _, num = text.partition(":")
    runs = [t.iteration for t in recording.trajectory if t.step == name]
    if num:
        if not num.isdigit() or int(num) < 1:
            raise UsageError(f"--from {text}: the execution number must be 1 or more")
        n = int(num)
        if n not in runs:
            raise UsageError(f"--from {text}: '{name}' ran {len(runs)} time(s) in run "
                             f"{recording.run_id}")
        return name, n
    if not runs:
        ran = ", ".join(dict.fromkeys(t.step for t in recording.trajectory))
        raise UsageError(f"--from {name}: '{name}' never ran in run {recording.run_id} (it "
                         f"ran: {ran})")
    return name, runs[-1]


def _cell(t: TrajectoryStep | None) -> str:
    if t is None:
        return ""
    it = f"#{t.iteration}" if t.iteration > 1 else ""
    return f"{t.step}{it} → {t.route_to or '-'}"


# `podium diff` compares outputs without these keys, at any depth of an object (inside arrays
# too): two runs that differ only in how long they took are the same run. Only keys with these
# exact names are dropped; free text (a test runner's "in 0.08s") is compared as it is. A
# script's `stdout` that is one JSON object (the object the script step merged into its
# output) is compared as that object, so its timing keys are dropped there too.
TIMING_KEYS = frozenset({"elapsed", "duration", "started_at", "finished_at", "ts"})


def without_timing(value: Any) -> Any:
    """`value` without the TIMING_KEYS of its objects, at any depth."""
    if isinstance(value, dict):
        return {k: _json_stdout(v) if k == "stdout" else without_timing(v)
                for k, v in value.items() if k not in TIMING_KEYS}
    if isinstance(value, list):
        return [without_timing(v) for v in value]
    return value


def _json_stdout(text: Any) -> Any:
    if not isinstance(text, str) or not text.strip().startswith("{"):
        return without_timing(text)
    try:
        parsed = jsontext.loads(text.strip())
    except ValueError:  # not JSON, or past podium's bounds: compared as text
        return text
    return {"json": without_timing(parsed)} if isinstance(parsed, dict) else text


def _timing_differs(a: Any, b: Any) -> bool:
    return _canon(a) != _canon(b) and _canon(without_timing(a)) == _canon(without_timing(b))


def diff_recordings(a: Recording, b: Recording) -> dict[str, Any]:
    """Two runs side by side: each step and its route, the outputs that differ (timing keys
    aside: TIMING_KEYS), tokens and cost per agent, the final outputs."""
    rows = []
    first: int | None = None
    outputs = []
    timing_only: list[int] = []
    for i in range(max(len(a.trajectory), len(b.trajectory))):
        ta = a.trajectory[i] if i < len(a.trajectory) else None
        tb = b.trajectory[i] if i < len(b.trajectory) else None
        same_step = ta is not None and tb is not None and (ta.step, ta.iteration) == (
            tb.step, tb.iteration)
        same_route = same_step and ta is not None and tb is not None and \
            ta.route_to == tb.route_to
        same_output = same_step and ta is not None and tb is not None and \
            _canon(without_timing(ta.output)) == _canon(without_timing(tb.output))
        if same_output and ta is not None and tb is not None and \
                _timing_differs(ta.output, tb.output):
            timing_only.append(i + 1)
        if not (same_route and same_output) and first is None:
            first = i + 1
        if same_step and not same_output and ta is not None and tb is not None:
            outputs.append({"index": i + 1, "step": ta.step, "iteration": ta.iteration,
                            "a": ta.output, "b": tb.output})
        rows.append({"index": i + 1, "a": _cell(ta), "b": _cell(tb),
                     "differs": not (same_route and same_output)})
    agents = sorted(set(a.usage) | set(b.usage))
    cost = []
    for name in agents:
        ua, ub = a.usage.get(name, {}), b.usage.get(name, {})
        cost.append({
            "agent": name,
            "a_tokens": ua.get("input_tokens", 0) + ua.get("output_tokens", 0),
            "b_tokens": ub.get("input_tokens", 0) + ub.get("output_tokens", 0),
            "a_cost": ua.get("cost_usd") if ua.get("priced", True) else None,
            "b_cost": ub.get("cost_usd") if ub.get("priced", True) else None,
        })
    fa, fb = a.final.get("output"), b.final.get("output")
    same = first is None and _canon(without_timing(fa)) == _canon(without_timing(fb))
    return {"a": a.run_id, "b": b.run_id, "same": same, "first_difference": first,
            "steps": rows, "outputs": outputs, "cost": cost,
            "timing_ignored": {"keys": sorted(TIMING_KEYS), "steps": timing_only,
                               "final": _timing_differs(fa, fb)},
            "final": {"a": {"status": a.final.get("status"), "output": a.final.get("output")},
                      "b": {"status": b.final.get("status"), "output": b.final.get("output")}}}
