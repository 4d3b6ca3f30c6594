"""`podium explore`: the article's workflow, workflows built to have each finding, counters,
groups and sub-workflows, and generated workflows checked against the engine itself."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers_engine import EXAMPLES, Scenario, run_cli, run_workflow, write
from podium.check.validate import validate_file
from podium.explore import Exploration, explore
from podium.explore.report import PropertyError
from podium.explore.space import FAILED, MAX_ITER, NO_ROUTE, Space
from podium.language.model import END

DEV_REVIEW = EXAMPLES / "dev-review" / "workflow.yaml"


def _explore(path: Path, requires: list[str] | None = None) -> Exploration:
    result = validate_file(path)
    assert not result.sink.errors, [d.format() for d in result.sink.errors]
    return explore(result, requires)


def _outcome(found: Exploration, name: str) -> Any:
    return next(o for o in found.outcomes if o.name == name)


def _codes(found: Exploration) -> list[str]:
    return [d.code for d in found.findings]


# ---------------------------------------------------------------------- the article


def test_dev_review_outcomes_happy_path_and_escalation() -> None:
    found = _explore(DEV_REVIEW, ["human_acceptance before accepted"])
    assert found.complete
    reach = {o.name: o.reachable for o in found.outcomes}
    for name in ("accepted", "rejected", "blocked", "ticket_invalid", "change_too_large"):
        assert reach[name], name
    assert not reach[END]
    assert not reach[NO_ROUTE]
    assert not reach[FAILED]
    accepted = _outcome(found, "accepted")
    assert accepted.min_steps == 9  # the article's happy path
    assert [w["step"] for w in accepted.witness] == [
        "validate_ticket", "developer", "run_tests", "collect_diff", "reviewer",
        "review_count", "handoff_summary", "human_acceptance", "accepted"]
    assert accepted.unbounded  # a failing test loops developer -> run_tests
    invalid = _outcome(found, "ticket_invalid")
    assert (invalid.min_steps, invalid.max_steps, invalid.unbounded) == (2, 2, False)
    assert found.properties[0].holds
    assert not [d for d in found.findings if d.severity == "error"]


def test_dev_review_escalation_comes_after_three_reviews_without_test_failures(
        tmp_path: Path) -> None:
    # With tests that always pass (no developer -> run_tests loop), the review loop is
    # bounded by the counter: escalation after at most three reviews, step 17 at the latest.
    wf = tmp_path / "dev-review"
    shutil.copytree(DEV_REVIEW.parent, wf, ignore=shutil.ignore_patterns("sample-repo"))
    text = (wf / "workflow.yaml").read_text(encoding="utf-8")
    text = text.replace("        when: \"{{ run_tests.output.exit_code == 0 }}\"\n"
                        "      - to: developer\n", "")
    (wf / "workflow.yaml").write_text(text, encoding="utf-8")
    found = _explore(wf / "workflow.yaml", ["escalation at most 2", "reviewer at most 5"])
    blocked = _outcome(found, "blocked")
    assert blocked.min_steps == 8
    # the longest way to 'blocked' without a retry is 3 reviews and the gate, then stop;
    # each retry adds a review round, so it is bounded only by max_iterations
    assert blocked.unbounded
    at_most = {p.text: p for p in found.properties}
    assert not at_most["escalation at most 2"].holds
    trail = [w["step"] for w in at_most["escalation at most 2"].counterexample]
    assert trail.count("escalation") > 2  # the most the data allows, within max_iterations


def test_dev_review_cli_text_json_and_exit_codes(tmp_path: Path) -> None:
    ok = run_cli(tmp_path, "explore", DEV_REVIEW, "--require",
                        "human_acceptance before accepted")
    assert ok.returncode == 0, ok.stderr
    assert "accepted" in ok.stdout
    assert "9 steps at least" in ok.stdout
    assert "holds: human_acceptance before accepted" in ok.stdout
    bad = run_cli(tmp_path, "explore", DEV_REVIEW, "--require", "never blocked",
                         "--format", "json")
    assert bad.returncode == 1
    data = json.loads(bad.stdout)
    assert set(data) >= {"outcomes", "findings", "properties", "states", "complete"}
    prop = data["properties"][0]
    assert prop == {"text": "never blocked", "holds": False,
                    "counterexample": prop["counterexample"]}
    assert prop["counterexample"][-1]["step"] == "blocked"
    assert {"step", "value"} <= set(prop["counterexample"][0])
    accepted = next(o for o in data["outcomes"] if o["name"] == "accepted")
    assert accepted["max_steps"] is None
    assert accepted["min_steps"] == 9
    typo = run_cli(tmp_path, "explore", DEV_REVIEW, "--require", "never acepted")
    assert typo.returncode == 2
    assert "did you mean 'accepted'" in typo.stderr
    usage = run_cli(tmp_path, "explore", DEV_REVIEW, "--require", "sometimes x")
    assert usage.returncode == 2
    assert "STEP before OUTCOME" in usage.stderr


def test_emitted_tests_pass_with_full_route_coverage(tmp_path: Path) -> None:
    wf = tmp_path / "dev-review"
    shutil.copytree(DEV_REVIEW.parent, wf, ignore=shutil.ignore_patterns("sample-repo"))
    out = tmp_path / "emitted"
    done = run_cli(tmp_path, "explore", wf / "workflow.yaml", "--emit-tests", out)
    assert done.returncode == 0, done.stderr
    files = list(out.glob("*.test.yaml"))
    assert len(files) == 1
    tested = run_cli(tmp_path, "test", out, cwd=wf)
    assert tested.returncode == 0, tested.stdout[-3000:]
    assert "route coverage: 17/17 routes and options taken (100%)" in tested.stdout


def test_graph_overlay_greys_untaken_routes_and_gives_step_ranges(tmp_path: Path) -> None:
    flow = EXAMPLES / "review-counter" / "workflow.yaml"
    mermaid = run_cli(tmp_path, "graph", flow, "--explore")
    assert mermaid.returncode == 0, mermaid.stderr
    assert "success: success · 7 steps" in mermaid.stdout
    assert "counter_reset: failed · unreachable" in mermaid.stdout
    grey = [line for line in mermaid.stdout.splitlines() if line.strip().startswith("linkStyle")]
    assert len(grey) == 1
    assert "stroke-dasharray" in grey[0]
    dot = run_cli(tmp_path, "graph", flow, "--explore", "--format", "dot")
    dashed = [line for line in dot.stdout.splitlines() if "style=dashed" in line]
    assert [line.split("->")[1].split("[")[0].strip() for line in dashed] == ['"counter_reset"']
    plain = run_cli(tmp_path, "graph", flow)
    assert "linkStyle" not in plain.stdout
    assert "7 steps" not in plain.stdout


# ---------------------------------------------------------------------- findings

FINDINGS = """
workflow:
  name: findings
  entry_point: judge
  limits: {max_iterations: 10}
agents:
  - name: judge
    output:
      verdict: {type: string, enum: [yes, no]}
      score: {type: number}
    routes:
      - to: never_here
        when: "{{ output.score > 10 and output.score < 5 }}"
      - to: ok
        when: "{{ output.verdict == 'yes' or output.verdict == 'no' }}"
      - to: shadowed
  - name: never_here
    type: terminate
    status: failed
    reason: impossible
  - name: shadowed
    type: terminate
    status: failed
    reason: never
  - name: ok
    type: terminate
    status: success
    reason: fine
"""


def test_findings_never_always_shadowed_unreachable(tmp_path: Path) -> None:
    found = _explore(write(tmp_path, FINDINGS))
    codes = _codes(found)
    assert "explore-never" in codes
    assert "explore-always" in codes
    assert "explore-shadowed" in codes
    unreached = [d for d in found.findings if d.code == "explore-unreachable"]
    assert {d.message.split("'")[1] for d in unreached} == {"never_here", "shadowed"}
    assert all(d.line > 1 for d in found.findings)  # located in the file
    never = next(d for d in found.findings if d.code == "explore-never")
    assert "routes[0].when" in never.path
    assert found.ok  # warnings only


def test_no_matching_route_is_an_error_with_a_witness(tmp_path: Path) -> None:
    path = write(tmp_path, """
        workflow: {name: nr, entry_point: pick}
        agents:
          - name: pick
            output:
              color: {type: string, enum: [red, green, blue]}
            routes:
              - to: done
                when: "{{ output.color == 'red' }}"
              - to: done
                when: "{{ output.color == 'green' }}"
          - name: done
            type: terminate
            status: success
            reason: ok
        """)
    found = _explore(path)
    nr = _outcome(found, NO_ROUTE)
    assert nr.reachable
    assert nr.witness[0]["value"]["color"] == "blue"
    assert "explore-no-route" in _codes(found)
    assert not found.ok


def test_loop_with_no_way_out_and_limit_only_outcome(tmp_path: Path) -> None:
    # The route graph has a way out (validate passes), but no value takes it.
    path = write(tmp_path, """
        workflow:
          name: trapped
          entry_point: a
          limits: {max_iterations: 6}
        agents:
          - name: a
            tools: []
            output:
              flag: {type: boolean}
            routes: [{to: b}]
          - name: b
            tools: []
            routes:
              - to: done
                when: "{{ a.output.flag and not a.output.flag }}"
              - to: a
          - {name: done, type: terminate, status: success, reason: out}
        """)
    found = _explore(path)
    assert [o.name for o in found.outcomes if o.reachable] == [MAX_ITER]
    assert "explore-trapped" in _codes(found)
    assert "explore-limit-only" in _codes(found)
    assert "explore-never" in _codes(found)
    assert not found.ok


def test_counter_bounds_the_loop_exactly(tmp_path: Path) -> None:
    path = write(tmp_path, """
        workflow:
          name: counter
          entry_point: work
          limits: {max_iterations: 50}
        agents:
          - name: work
            output:
              good: {type: boolean}
            routes: [{to: count}]
          - name: count
            type: set
            value: "{{ (count.output if count is defined else 0) + 1 }}"
            output_type: integer
            routes:
              - to: done
                when: "{{ work.output.good }}"
              - to: gave_up
                when: "{{ count.output >= 3 }}"
              - to: work
          - name: done
            type: terminate
            status: success
            reason: ok
          - name: gave_up
            type: terminate
            status: failed
            reason: three tries
        """)
    found = _explore(path, ["work at most 3"])
    gave_up = _outcome(found, "gave_up")
    assert (gave_up.min_steps, gave_up.max_steps, gave_up.unbounded) == (7, 7, False)
    done = _outcome(found, "done")
    assert (done.min_steps, done.max_steps) == (3, 7)
    assert not _outcome(found, MAX_ITER).reachable
    assert found.properties[0].holds


def test_numbers_split_by_the_conditions_literals(tmp_path: Path) -> None:
    path = write(tmp_path, """
        workflow: {name: score, entry_point: rate}
        agents:
          - name: rate
            output:
              score: {type: number}
            routes:
              - to: high
                when: score > 7
              - to: low
          - name: high
            type: terminate
            status: success
            reason: high
          - name: low
            type: terminate
            status: success
            reason: low
        """)
    found = _explore(path)
    moves = [e.move.value["score"] for e in found.space.edges[0]]
    assert len(moves) == 2  # `score > 7` gives two classes
    assert _outcome(found, "high").reachable
    assert _outcome(found, "low").reachable


def test_groups_and_sub_workflows(tmp_path: Path) -> None:
    write(tmp_path, """
        workflow: {name: child, entry_point: check}
        agents:
          - name: check
            output:
              ok: {type: boolean}
            routes:
              - to: $end
                when: "{{ output.ok }}"
              - to: child_failed
          - name: child_failed
            type: terminate
            status: failed
            reason: no
        output:
          answer: "{{ check.output.ok }}"
        """, "child.yaml")
    path = write(tmp_path, """
        workflow: {name: parent, entry_point: fan}
        agents:
          - name: a
            output: {v: {type: string}}
          - name: b
            output: {v: {type: string}}
          - name: sub
            type: workflow
            workflow: child.yaml
            routes: [{to: $end}]
          - name: partial
            type: terminate
            status: failed
            reason: partial
        parallel:
          - name: fan
            agents: [a, b]
            failure_mode: continue_on_error
            routes:
              - to: partial
                when: "{{ output.errors | length > 0 }}"
              - to: sub
        """, "parent.yaml")
    found = _explore(path)
    assert _outcome(found, "partial").reachable  # continue_on_error: a member failed
    assert _outcome(found, FAILED).reachable  # every member failed, or the child failed
    assert _outcome(found, END).reachable
    labels = {e.move.label for edges in found.space.edges.values() for e in edges}
    assert any("child_failed" in label for label in labels)


def test_a_lenient_scripts_json_keys_are_branched_on_and_the_tests_drive_them(
        tmp_path: Path) -> None:
    # No output schema: Conductor merges the keys of the JSON object the script prints, and
    # the routes read `status` bare.
    path = write(tmp_path, """
        workflow: {name: poll, entry_point: check, limits: {max_iterations: 6}}
        agents:
          - name: check
            type: script
            command: python
            args: ["-c", "print('{\\"status\\": \\"ready\\"}')"]
            routes:
              - to: done
                when: "status == 'ready'"
              - to: check
          - name: done
            type: terminate
            status: success
            reason: ready
        """)
    found = _explore(path)
    assert [e.move.value["status"] for e in found.space.edges[0]] == ["ready", "other"]
    assert _outcome(found, "done").reachable
    assert _outcome(found, MAX_ITER).reachable
    out = tmp_path / "emitted"
    assert run_cli(tmp_path, "explore", path, "--emit-tests", out).returncode == 0
    tested = run_cli(tmp_path, "test", out, cwd=tmp_path)
    assert tested.returncode == 0, tested.stdout[-2000:]
    assert "(100%)" in tested.stdout


def test_unreadable_property_is_refused_before_the_search(tmp_path: Path) -> None:
    result = validate_file(DEV_REVIEW)
    with pytest.raises(PropertyError, match="is not a step"):
        explore(result, ["developr at most 2"])


# ---------------------------------------------------------------------- against the engine


def _generated(rng: random.Random) -> str:
    n = rng.randint(2, 4)
    names = [f"a{i}" for i in range(n)]
    targets = [*names, "count", "ok", "bad"]
    lines = ["workflow:", "  name: gen", "  entry_point: a0", "  limits: {max_iterations: 8}",
             "agents:"]
    for name in names:
        lines += [f"  - name: {name}", "    output:",
                  "      verdict: {type: string, enum: [x, y, z]}",
                  "      flag: {type: boolean}", "    routes:"]
        for value in rng.sample(["x", "y", "z"], rng.randint(0, 2)):
            lines += [f"      - to: {rng.choice(targets)}",
                      f"        when: \"{{{{ output.verdict == '{value}' }}}}\""]
        if rng.random() < 0.5:
            lines += [f"      - to: {rng.choice(targets)}", "        when: flag"]
        lines += [f"      - to: {rng.choice(targets)}"]
    lines += ["  - name: count", "    type: set",
              "    value: \"{{ (count.output if count is defined else 0) + 1 }}\"",
              "    output_type: integer", "    routes:",
              "      - to: bad", "        when: \"{{ count.output >= 2 }}\"",
              f"      - to: {rng.choice(names)}",
              "  - name: ok", "    type: terminate", "    status: success", "    reason: ok",
              "  - name: bad", "    type: terminate", "    status: failed", "    reason: bad"]
    return "\n".join(lines) + "\n"


def _realisable(space: Space, steps: list[str], outcome: str) -> bool:
    """Whether the state graph holds a trajectory running `steps` and ending at `outcome`."""
    frontier = {s.id for s in space.states if s.parent is None and s.node == steps[0]}
    for nxt in steps[1:]:
        frontier = {e.to_state for s in frontier for e in space.edges.get(s, [])
                    if e.to_state is not None and space.states[e.to_state].node == nxt}
        if not frontier:
            return False

    def ends(sid: int) -> set[str]:
        return {e.outcome for e in space.edges.get(sid, []) if e.outcome is not None}

    if any(outcome in ends(s) for s in frontier):  # the last step ended it
        return True
    return any(outcome in ends(e.to_state) for s in frontier for e in space.edges.get(s, [])
               if e.to_state is not None)  # the next node: $end, or the limit before it


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6))
def test_every_scripted_trajectory_is_one_explore_reported(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    path = write(tmp_path, _generated(rng), f"gen-{seed}.yaml")
    result = validate_file(path)
    if result.sink.errors:
        return  # a generated workflow validate refuses (an unreachable step) says nothing
    found = explore(result)
    answers = {f"a{i}": [{"output": {"verdict": rng.choice("xyz"),
                                     "flag": rng.random() < 0.5}} for _ in range(8)]
               for i in range(4)}
    run = run_workflow(path, Scenario(responses={"agents": {
        k: v for k, v in answers.items() if f"- name: {k}\n" in path.read_text()}}))
    status = run.result.status
    outcome = {"limit": MAX_ITER, "error": FAILED}.get(status) or run.result.terminal or END
    steps = run.steps()
    assert _realisable(found.space, steps, outcome), (seed, steps, outcome, status)
    reached = {o.name for o in found.outcomes if o.reachable}
    assert outcome in reached or outcome == FAILED


def test_generated_witnesses_drive_the_engine_exactly(tmp_path: Path) -> None:
    for seed in range(12):
        rng = random.Random(seed)
        path = write(tmp_path, _generated(rng), f"gen-{seed}.yaml")
        result = validate_file(path)
        if result.sink.errors:
            continue
        found = explore(result)
        for o in found.outcomes:
            if not o.reachable or o.name in (MAX_ITER, FAILED, NO_ROUTE):
                continue
            agents: dict[str, list[Any]] = {}
            for w in o.witness:
                if w["step"].startswith("a"):
                    agents.setdefault(w["step"], []).append({"output": w["value"]})
            run = run_workflow(path, Scenario(responses={"agents": agents}))
            assert run.steps() == [w["step"] for w in o.witness], (seed, o.name)
            assert (run.result.terminal or END) == o.name
