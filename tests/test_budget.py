"""Step budgets and route graphs derived from workflows (podium validate --budget, podium graph)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from podium.check.budget import analyse_budget
from podium.check.validate import validate_file

ROOT = Path(__file__).resolve().parents[1]
ARTICLE = ROOT / "examples" / "dev-review" / "workflow.yaml"


def _budget(path: Path) -> dict[str, Any]:
    result = validate_file(path)
    assert result.model is not None, [d.format() for d in result.sink.items]
    return analyse_budget(result).to_json()


def _outcome(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(o for o in data["outcomes"] if o["node"] == name)


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "podium", *args], cwd=cwd, text=True,
                          capture_output=True, timeout=60, check=False)


def test_article_budget_matches_the_hand_computation() -> None:
    data = _budget(ARTICLE)
    # happy path: nine steps
    assert data["happy_path"]["node"] == "accepted"
    assert data["happy_path"]["shortest"] == 9
    assert data["happy_path"]["shortest_path"] == [
        "validate_ticket", "developer", "run_tests", "collect_diff", "reviewer",
        "review_count", "handoff_summary", "human_acceptance", "accepted"]
    loops = {tuple(lp["nodes"]): lp for lp in data["loops"]}
    # each review round adds five steps and is bounded by the review_count counter
    review = loops[("developer", "run_tests", "collect_diff", "reviewer", "review_count")]
    assert review["steps"] == 5
    assert review["bound"] == "counter"
    assert review["passes"] == 3
    # each test failure adds two, and nothing but max_iterations bounds that loop
    tests = loops[("developer", "run_tests")]
    assert tests["steps"] == 2
    assert tests["bound"] == "none"
    assert "only max_iterations stops it" in tests["detail"]
    # escalation at step 17 at the latest when the tests pass
    escalation = next(g for g in data["gates"] if g["node"] == "escalation")
    assert escalation["longest"] == 17
    assert escalation["shortest"] == 7
    # an oversized diff ends one step after the diff is collected
    too_large = _outcome(data, "change_too_large")
    assert too_large["shortest"] == 5
    assert too_large["shortest_path"][-2:] == ["collect_diff", "change_too_large"]
    assert _outcome(data, "ticket_invalid")["shortest"] == 2
    assert _outcome(data, "blocked")["longest"] == 18
    assert data["max_iterations"] == 30
    assert data["warnings"] == []


def test_article_budget_text_states_the_figures() -> None:
    proc = _cli("validate", "--budget", "examples/dev-review/workflow.yaml")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "happy path: 9 steps to 'accepted'" in out
    assert "+5  developer → run_tests → collect_diff → reviewer → review_count → developer" in out
    assert "+2  developer → run_tests → developer" in out
    assert "escalation: at step 7 at the earliest, 17 at the latest" in out
    assert "ends 1 step after collect_diff" in out
    assert "only max_iterations stops it" in out
    assert "cost forecast" in out


def test_budget_json_is_part_of_validate_json() -> None:
    proc = _cli("validate", "--budget", "--format", "json", "examples/dev-review/workflow.yaml")
    assert proc.returncode == 0
    data = json.loads(proc.stdout)
    budget = data["files"][0]["budget"]
    assert budget["happy_path"]["shortest"] == 9
    assert budget["cost"]["budget_usd"] == 10.0
    assert set(budget["cost"]["per_call_usd"]) == {"developer", "reviewer", "handoff_summary"}
    dev = budget["cost"]["per_call_usd"]["developer"]
    assert dev["min"] < dev["max"]  # gpt-5-mini or gpt-5.5, chosen by a template


COUNTDOWN = """
workflow:
  name: countdown
  entry_point: work
  limits: {max_iterations: LIMIT}
agents:
  - name: work
    type: script
    command: "true"
    routes:
      - to: tries
  - name: tries
    type: set
    value: "{{ (tries.output if tries is defined else 10) - 2 }}"
    output_type: integer
    routes:
      - to: gave_up
        when: "tries_output <= 4"
      - to: work
  - name: gave_up
    type: terminate
    status: failed
    reason: out of tries
"""


def test_counter_bound_is_detected_from_template_and_condition(tmp_path: Path) -> None:
    wf = tmp_path / "countdown.yaml"
    wf.write_text(COUNTDOWN.replace("LIMIT", "20"), encoding="utf-8")
    data = _budget(wf)
    (loop,) = data["loops"]
    assert loop["nodes"] == ["work", "tries"]
    assert loop["bound"] == "counter"
    assert loop["passes"] == 3  # 8, 6, 4 -> leaves at 4
    assert _outcome(data, "gave_up")["longest"] == 7
    assert data["warnings"] == []


def test_limit_that_cuts_off_an_outcome_is_reported(tmp_path: Path) -> None:
    wf = tmp_path / "countdown.yaml"
    wf.write_text(COUNTDOWN.replace("LIMIT", "6"), encoding="utf-8")
    data = _budget(wf)
    assert any("cuts off outcome 'gave_up': it needs at least 7 steps" in w
               for w in data["warnings"])


def test_unbounded_loop_and_no_room_for_retry(tmp_path: Path) -> None:
    wf = tmp_path / "retry.yaml"
    wf.write_text("""
workflow:
  name: retry
  entry_point: try_it
  limits: {max_iterations: 3}
agents:
  - name: try_it
    type: script
    command: "true"
    routes:
      - to: done
        when: "exit_code == 0"
      - to: fix
  - name: fix
    type: set
    value: "again"
    routes:
      - to: try_it
  - name: done
    type: terminate
    status: success
    reason: ok
""", encoding="utf-8")
    data = _budget(wf)
    (loop,) = data["loops"]
    assert loop["bound"] == "none"
    assert _outcome(data, "done")["shortest"] == 2
    assert any("no room for one more pass of a 2-step loop" in w for w in data["warnings"])


def test_graph_mermaid_and_dot() -> None:
    mermaid = _cli("graph", "examples/dev-review/workflow.yaml")
    assert mermaid.returncode == 0
    text = mermaid.stdout
    assert text.startswith("flowchart TD")
    assert '|"validate_ticket.output.valid"| n_developer' in text
    assert '|"option: stop"| n_blocked' in text
    assert 'n_accepted(["accepted: success"])' in text
    assert '{{"escalation (gate)"}}' in text
    dot = _cli("graph", "examples/dev-review/workflow.yaml", "--format", "dot")
    assert dot.returncode == 0
    assert dot.stdout.startswith('digraph "dev-review" {')
    assert '"escalation" -> "blocked" [label="option: stop"];' in dot.stdout
    assert 'label="change_too_large\\nfailed"' in dot.stdout
    assert dot.stdout.rstrip().endswith("}")
    bad = _cli("graph", "examples/dev-review/workflow.yaml", "--format", "png")
    assert bad.returncode == 2
    missing = _cli("graph", "nope.yaml")
    assert missing.returncode == 3


SUBFLOW = Path(__file__).resolve().parents[1] / "examples" / "dev-review-subworkflow"


def test_a_sub_workflows_agents_count_in_the_parents_cost_forecast() -> None:
    child = analyse_budget(validate_file(SUBFLOW / "dev-loop.yaml")).cost
    parent = analyse_budget(validate_file(SUBFLOW / "workflow.yaml")).cost
    loop = parent["per_execution"]["dev_loop"]
    assert loop["kind"] == "sub-workflow"
    child_ranges = [v for v in child["outcomes"].values() if v["min_usd"] is not None]
    assert loop["max_usd"] == max(v["max_usd"] for v in child_ranges)
    assert loop["min_usd"] == min(v["min_usd"] for v in child_ranges)
    assert loop["max_usd"] > 0
    # an outcome reached through the sub-workflow costs at least what one run of it costs
    accepted = parent["outcomes"]["accepted"]
    assert accepted["max_usd"] >= loop["max_usd"]
    assert accepted["min_usd"] >= loop["min_usd"]


def test_a_counter_no_route_reads_does_not_make_the_analysis_endless() -> None:
    """dev-loop.yaml counts its reviews in a `set` step whose bound lives in a bare
    condition: the path search must still end (it did not)."""
    proc = subprocess.run([sys.executable, "-m", "podium", "validate", "--budget",
                           str(SUBFLOW / "dev-loop.yaml")], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "cost forecast" in proc.stdout
