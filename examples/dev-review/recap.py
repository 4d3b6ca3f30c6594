"""What a dev-review run did, from its event log (`podium run --events FILE`): each test run's
result, each review's verdict, how often the loop went round, the gate's answer; then what to
try next. Used by demo.sh; the standard library only."""

from __future__ import annotations

import json
import sys
from pathlib import Path

SCENARIOS = ("happy", "tests-fail-once", "changes-then-approve", "three-reviews-stop",
             "malformed-then-corrected")


def main() -> None:
    log, scenario = Path(sys.argv[1]), sys.argv[2]
    events = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    run_id = events[0]["run_id"]
    out = sys.stderr.write
    out("\nwhat happened:\n")
    rounds = 0
    for e in events:
        if e["type"] != "step_finished" or e.get("group"):
            if e["type"] == "gate_answered":
                out(f"  gate {e['step']}: {e['selected']} (by {e['answered_by']})\n")
            continue
        o = e.get("output") or {}
        if e["step"] == "developer":
            rounds += 1
        elif e["step"] == "run_tests":
            last = [ln for ln in str(o.get("stdout", "")).splitlines() if ln.strip()][-1:]
            result = "passed" if o.get("exit_code") == 0 else "FAILED"
            out(f"  tests #{e['iteration']}: {result} (exit {o.get('exit_code')})"
                f"{': ' + last[0].strip() if last else ''}\n")
        elif e["step"] == "reviewer":
            findings = o.get("findings") or []
            first = f": {findings[0]}" if findings else ""
            out(f"  review #{e['iteration']}: {o.get('verdict')} "
                f"({len(findings)} finding(s)){first}\n")
    out(f"  the developer ran {rounds} time(s): the loop developer → tests → review"
        f"{' went round once more' if rounds > 1 else ' ran once'}\n")
    others = " | ".join(s for s in SCENARIOS if s != scenario)
    out("\ntry next:\n"
        f"  podium show {run_id}          the path, each step's output, cost per agent\n"
        "  podium serve                      the console: every run, its graph, steps, gates\n"
        f"  examples/dev-review/demo.sh SCENARIO   ({others})\n")


if __name__ == "__main__":
    main()
