"""The regression workflows in examples/review-counter: a set step keeps its value across loop
iterations (workflow.yaml), and a counter that resets ends in its failed terminate
(workflow-reset.yaml)."""

from __future__ import annotations

import json
from pathlib import Path

from helpers_engine import EXAMPLES, run_cli, run_workflow

COUNTER = EXAMPLES / "review-counter" / "workflow.yaml"
RESET = EXAMPLES / "review-counter" / "workflow-reset.yaml"


def test_counter_keeps_its_value_and_succeeds() -> None:
    run = run_workflow(COUNTER)
    assert run.exit_code == 0, run.error_text()
    assert run.output == {"count": 3}
    assert (run.result.terminal, run.result.reason) == \
        ("success", "The counter reached 3 without resetting")
    history = ["previous", "count"] * 3 + ["success"]
    assert run.engine.state.history == history
    assert run.steps() == history
    assert [r.output for r in run.engine.state.records if r.step == "count"] == [1, 2, 3]
    assert [r.output for r in run.engine.state.records if r.step == "previous"] == [0, 1, 2]
    assert run.result.iterations == 7


def test_counter_that_resets_ends_in_counter_reset() -> None:
    run = run_workflow(RESET)
    assert run.exit_code == 1
    assert run.result.status == "failed"
    assert run.result.terminal == "counter_reset"
    assert run.result.reason == "The counter reset: 1 after 1"
    assert run.engine.state.history == ["previous", "count", "previous", "count",
                                        "counter_reset"]
    assert run.output == {"count": 1}


def test_both_through_the_cli(tmp_path: Path) -> None:
    ok = run_cli(tmp_path / "home", "run", COUNTER)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout) == {"count": 3}
    reset = run_cli(tmp_path / "home", "run", RESET, "--json")
    assert reset.returncode == 1, reset.stderr
    result = json.loads(reset.stdout)
    assert (result["status"], result["terminal"]) == ("failed", "counter_reset")
    assert result["steps"] == ["previous", "count", "previous", "count", "counter_reset"]
    assert result["output"] == {"count": 1}
