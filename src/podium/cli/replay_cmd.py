"""`podium replay`, `podium fork` and `podium diff`: recorded runs, re-executed and compared."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from podium import exitcodes
from podium.app.replay import (
    _canon,
    diff_recordings,
    parse_from,
    recording_of,
    replay_recording,
)
from podium.cli.run_cmd import fail
from podium.errors import PodiumError, UsageError

__all__ = ["diff_command", "diff_recordings", "fork_command", "format_diff", "replay_command",
           "replay_recording"]


def _fail(message: str, code: int) -> int:
    sys.stderr.write(f"podium: {message}\n")
    return code


def replay_command(ref: str, verbosity: int, json_out: bool) -> int:
    from podium.app.home import open_store

    try:
        store = open_store()
        try:
            recording = recording_of(store, ref)
        finally:
            store.close()
    except PodiumError as exc:
        return _fail(str(exc), exc.exit_code)
    report = replay_recording(recording, verbosity)
    if json_out:
        sys.stdout.write(json.dumps(report, ensure_ascii=False, default=str) + "\n")
    elif report["identical"] and report["output"] is not None:
        sys.stdout.write(json.dumps(report["output"], indent=2, ensure_ascii=False) + "\n")
    if report["identical"]:
        sys.stderr.write(f"replay of run {recording.run_id}: identical trajectory ({report['steps']}"
                         f" steps; same routes, outputs, final output and status: "
                         f"{report['status']})\n")
        return exitcodes.OK
    if report.get("error_code") is not None:
        sys.stderr.write(f"replay of run {recording.run_id}: {report['why']}\n")
        return int(report["error_code"])
    sys.stderr.write(f"replay of run {recording.run_id} DIVERGED at step {report['at_index']} "
                     f"('{report['step']}'): {report['why']}\n")
    return exitcodes.REPLAY_DIVERGED


def fork_command(ref: str, from_step: str, pairs: list[str], *, responses: Path | None,
                 skip_gates: bool, verbosity: int, json_out: bool,
                 interactive: bool | None = None) -> int:
    from podium.app.home import open_store
    from podium.app.inputs import coerce_cli_value
    from podium.app.launch import LaunchOptions
    from podium.app.replay import fork_replay, replay_until
    from podium.app.runs import Reported, StartRequest, start_run, with_secrets
    from podium.app.workflows import load_valid
    from podium.cli.run_cmd import report
    from podium.events.sinks.console import ConsoleSink

    try:
        store = open_store()
    except PodiumError as exc:
        return fail("", exc)
    try:
        parent = store.find_run(ref)
        recording = recording_of(store, parent.id)
        if not recording.recorded:
            return _fail(f"run {parent.id} was made with recording off; it cannot be forked",
                         exitcodes.INVALID)
        step, n = parse_from(from_step, recording)
        path = Path(parent.workflow_path)
        wf, code = load_valid(path)
        if wf is None:
            raise Reported(code)
        inputs = with_secrets(dict(parent.inputs), wf, f"fork run {parent.id}")
        for pair in pairs:
            if "=" not in pair:
                raise UsageError(f"--input {pair!r}: expected NAME=VALUE")
            name, _, text = pair.partition("=")
            name = name.strip()
            decl = wf.workflow.input.get(name)
            if wf.workflow.input and decl is None:
                raise UsageError(f"unknown input '{name}'")
            inputs[name] = text.strip() if decl is not None and decl.type == "string" \
                else coerce_cli_value(text)
        if responses is None and (parent.options or {}).get("responses"):
            responses = Path(parent.options["responses"])  # the parent's scripted answers
        provider = (parent.options or {}).get("provider")  # the parent's --provider, as resume
        opts = LaunchOptions(skip_gates, responses, verbosity, provider, None, json_out,
                             observers=[ConsoleSink(sys.stderr, verbosity)],
                             interactive=interactive, hooks=fork_replay(recording, (step, n)))
        start = StartRequest(wf, path, inputs, forked_from=parent.id, command="fork",
                             options={"responses": str(responses.resolve()) if responses
                                      else None, "skip_gates": skip_gates, "provider": provider,
                                      "forked_at": f"{step}:{n}"})

        def prepare(engine: Any) -> dict[str, Any]:
            replay_until(engine)
            sys.stderr.write(f"podium: forking run {parent.id} at '{step}' (execution {n}): "
                             f"replaying the recording up to it, live from there\n")
            return {}

        return report(start_run(store, start, opts, prepare=prepare), opts)
    except PodiumError as exc:
        return fail("", exc)
    finally:
        store.close()


def diff_command(a: str, b: str, output_format: str) -> int:
    from podium.app.home import open_store

    try:
        store = open_store()
        try:
            ra, rb = recording_of(store, a), recording_of(store, b)
        finally:
            store.close()
    except PodiumError as exc:
        return _fail(str(exc), exc.exit_code)
    data = diff_recordings(ra, rb)
    if output_format == "json":
        sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")
    else:
        sys.stdout.write(format_diff(data))
    return exitcodes.OK if data["same"] else 1


def format_diff(d: dict[str, Any]) -> str:
    out = [f"run A {d['a']}  ·  run B {d['b']}"]
    if d["same"]:
        out.append("same path, same outputs, same final output")
    else:
        out.append(f"first difference at step {d['first_difference']}")
    width = max([len(r["a"]) for r in d["steps"]] + [12])
    out.append(f"     {'A'.ljust(width)}   B")
    for r in d["steps"]:
        mark = "≠" if r["differs"] else " "
        out.append(f"{r['index']:>3} {mark} {r['a'].ljust(width)}   {r['b']}")
    for o in d["outputs"]:
        out.append(f"output of {o['step']} (execution {o['iteration']}) differs:")
        out.append(f"  A: {_canon(o['a'])[:300]}")
        out.append(f"  B: {_canon(o['b'])[:300]}")
    timing = d.get("timing_ignored") or {}
    if timing.get("steps") or timing.get("final"):
        where = [f"step {i}" for i in timing.get("steps", [])]
        where += ["the final output"] if timing.get("final") else []
        out.append(f"timing fields ignored ({', '.join(timing['keys'])}): they differ at "
                   f"{', '.join(where)}")
    if d["cost"]:
        out.append("tokens and cost per agent (A → B):")
        for c in d["cost"]:
            def money(v: float | None) -> str:
                return "unpriced" if v is None else f"${v:.4f}"

            delta = ""
            if c["a_cost"] is not None and c["b_cost"] is not None:
                delta = f" (Δ {c['b_cost'] - c['a_cost']:+.4f})"
            out.append(f"  {c['agent']}: {c['a_tokens']} → {c['b_tokens']} tokens · "
                       f"{money(c['a_cost'])} → {money(c['b_cost'])}{delta}")
    fa, fb = d["final"]["a"], d["final"]["b"]
    out.append(f"final: A {fa['status']} {_canon(fa['output'])[:200]}")
    out.append(f"       B {fb['status']} {_canon(fb['output'])[:200]}")
    return "\n".join(out) + "\n"
