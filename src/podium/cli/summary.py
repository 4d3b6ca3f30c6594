"""The end-of-run summary on stderr: outcome, path, time, tokens and cost per agent."""

from __future__ import annotations

from typing import Any, TextIO


def _path(steps: list[str], limit: int = 14) -> str:
    if len(steps) <= limit:
        return " → ".join(steps)
    head, tail = steps[: limit // 2], steps[-(limit // 2):]
    return " → ".join(head) + f" → … ({len(steps) - limit} more) … → " + " → ".join(tail)


def next_command(outcome: Any) -> str | None:
    """What to type to go on from how a run ended (nothing when it is done)."""
    rid = outcome.run_id
    if outcome.status == "interrupted":
        return f"podium resume {rid}"
    if outcome.status == "waiting":
        return f"podium gate list, then podium gate answer {rid} VALUE"
    if outcome.status == "limit":
        return (f"podium resume {rid} (a raised limit in the workflow needs --allow-changed)")
    if outcome.status == "error":
        return (f"fix the cause, then podium resume {rid} (or podium resume {rid} --from STEP "
                "to run a step again)")
    return None


def print_summary(engine: Any, outcome: Any, out: TextIO) -> None:
    w = out.write
    # an interruption: the console said it in one line; the summary says how to go on
    if outcome.status != "interrupted":
        _outcome(outcome, engine, out)
    hint = next_command(outcome)
    if hint:
        w(f"next: {hint}\n")
    if outcome.path:
        w(f"path: {_path(outcome.path)}\n")
    _usage(outcome, out)


def _outcome(outcome: Any, engine: Any, out: TextIO) -> None:
    w = out.write
    w(f"\nrun {outcome.run_id}: {outcome.status} in {outcome.elapsed:.2f}s · "
      f"{outcome.iterations} step{'s' if outcome.iterations != 1 else ''}")
    if outcome.terminal and outcome.terminal != "$end":
        w(f" · ended at '{outcome.terminal}'")
    w("\n")
    if outcome.error is not None:
        err = outcome.error
        located = err.located() if hasattr(err, "located") else str(err)
        w(f"error: {engine.bus.redactor.text(located)}\n")


def _usage(outcome: Any, out: TextIO) -> None:
    w = out.write
    usage = outcome.usage_by_step
    if usage:
        total = 0.0
        unpriced = []
        tin = tout = 0
        for step, u in usage.items():
            tin += u.input_tokens
            tout += u.output_tokens
            if u.cost_usd is None or not u.priced:
                unpriced.append(f"{step} ({u.model or 'unknown model'})")
            if u.cost_usd is not None:
                total += u.cost_usd
        w(f"tokens: {tin} in / {tout} out\n")
        for step, u in usage.items():
            cost = "unpriced" if u.cost_usd is None else f"${u.cost_usd:.4f}"
            w(f"  {step}: {cost} · {u.model or '?'} · {u.input_tokens} in / "
              f"{u.output_tokens} out\n")
        if unpriced:
            w(f"cost: ~${total:.4f} (partial: {len(unpriced)} agent(s) unpriced: "
              f"{', '.join(unpriced)})\n")
        else:
            w(f"cost: ${total:.4f}\n")
    _budget(getattr(outcome, "budget", None), w)


def _budget(report: Any, w: Any) -> None:
    """Spent against `limits.budget_usd`, and by how much a call took the run past it (the
    call that cost most beyond its worst case: steps/budget.py)."""
    if report is None:
        return
    line = f"budget: ${report.spent_usd:.4f} spent of ${report.budget_usd:.2f} ({report.mode})"
    if report.overshoot_usd > 0:
        line += f", over by ${report.overshoot_usd:.4f}"
    if report.refused:
        line += f"; {report.refused} call(s) refused, their worst case did not fit"
    w(line + "\n")
    if report.overshoot_usd > 0 and report.over_worst_case:
        w(f"  overshoot: {report.over_worst_case}\n")
