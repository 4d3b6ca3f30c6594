"""The human_gate step: --skip-gates, scripted answers, prompt_for text and the gate's stored
output (spec 3.4; section-15 cases 41, 42, 67)."""

from __future__ import annotations

from pathlib import Path

from helpers_engine import diagnostics, run_workflow, write
from podium.events.model import GateAnswered, GateOpened, RouteTaken
from podium.gates.base import GateAnswer

GATE_WF = """
workflow:
  name: gate
  entry_point: draft
agents:
  - {name: draft, type: set, value: "v1", routes: [{to: review}]}
  - name: review
    type: human_gate
    prompt: "Accept draft {{ draft.output }}?"
    options:
      - {label: Accept, value: accept, route: accepted}
      - {label: Revise, value: revise, route: revised, prompt_for: feedback}
      - {label: Abandon, value: abandon, route: $end}
  - name: accepted
    type: terminate
    status: success
    reason: "accepted"
  - name: revised
    type: set
    value: "revised with {{ review.output.additional_input.feedback }}"
output:
  gate: "{{ review.output | tojson }}"
"""


def test_skip_gates_takes_the_first_option(tmp_path: Path) -> None:
    # case 41
    run = run_workflow(write(tmp_path, GATE_WF), skip_gates=True)
    assert run.exit_code == 0
    assert run.steps() == ["draft", "review", "accepted"]
    assert run.outputs["review"] == {"selected": "accept", "additional_input": {}}
    (opened,) = run.of(GateOpened)
    assert opened.prompt == "Accept draft v1?"
    assert [o["value"] for o in opened.options] == ["accept", "revise", "abandon"]
    (answered,) = run.of(GateAnswered)
    assert (answered.selected, answered.route, answered.answered_by) == \
        ("accept", "accepted", "skip-gates")
    route = next(e for e in run.of(RouteTaken) if e.from_step == "review")
    assert (route.to_step, route.kind, route.route_index) == ("accepted", "option", 0)


def test_scripted_answer_with_prompt_for_text(tmp_path: Path) -> None:
    # case 42
    answer = GateAnswer("revise", {"feedback": "shorter, please"}, "responses")
    run = run_workflow(write(tmp_path, GATE_WF), answers={"review": [answer]})
    assert run.exit_code == 0
    assert run.steps() == ["draft", "review", "revised"]
    assert run.outputs["review"] == {"selected": "revise",
                                     "additional_input": {"feedback": "shorter, please"}}
    assert run.outputs["revised"] == "revised with shorter, please"
    (answered,) = run.of(GateAnswered)
    assert answered.additional_input == {"feedback": "shorter, please"}


def test_responses_file_gate_answers_with_text(tmp_path: Path) -> None:
    responses = write(tmp_path, """
        gates:
          review:
            - value: revise
              text: {feedback: "from the file"}
    """, name="responses.yaml")
    run = run_workflow(write(tmp_path, GATE_WF), responses=responses)
    assert run.outputs["revised"] == "revised with from the file"


def test_option_routing_to_end(tmp_path: Path) -> None:
    run = run_workflow(write(tmp_path, GATE_WF), answers={"review": [GateAnswer("abandon")]})
    assert run.exit_code == 0
    assert run.result.terminal == "$end"
    assert run.output == {"gate": {"selected": "abandon", "additional_input": {}}}


def test_unknown_answer_fails_the_step(tmp_path: Path) -> None:
    run = run_workflow(write(tmp_path, GATE_WF), answers={"review": [GateAnswer("maybe")]})
    assert run.exit_code == 3
    assert "answer 'maybe' is not one of the options (accept, revise, abandon)" in \
        run.error_text()


def test_nobody_to_answer_is_a_runtime_error(tmp_path: Path) -> None:
    run = run_workflow(write(tmp_path, GATE_WF))
    assert run.exit_code == 3
    assert "use --skip-gates" in run.error_text()
    assert "step 'review'" in run.error_text()


def test_gate_routes_are_ignored_in_favour_of_the_option(tmp_path: Path) -> None:
    # case 67: `routes:` on a gate is accepted with a warning and ignored at run time
    path = write(tmp_path, """
        workflow: {name: gate, entry_point: g}
        agents:
          - name: g
            type: human_gate
            prompt: "Pick"
            routes: [{to: x}]
            options:
              - {label: One, value: one, route: y}
              - {label: Two, value: two, route: x}
          - {name: x, type: terminate, status: failed, reason: "went to x"}
          - {name: y, type: terminate, status: success, reason: "went to y"}
        output:
          g: "{{ g.output | tojson }}"
    """)
    assert any("'human_gate' steps ignore 'routes'" in d for d in diagnostics(path))
    run = run_workflow(path, skip_gates=True)
    assert run.exit_code == 0
    assert run.result.terminal == "y"
    assert run.output == {"g": {"selected": "one", "additional_input": {}}}
    assert run.result.iterations == 2


def test_gate_prompt_sees_the_full_context_in_explicit_mode(tmp_path: Path) -> None:
    run = run_workflow(write(tmp_path, """
        workflow:
          name: gate
          entry_point: s
          context: {mode: explicit}
        agents:
          - {name: s, type: set, value: "hidden", routes: [{to: g}]}
          - name: g
            type: human_gate
            prompt: "s was {{ s.output }}"
            options:
              - {label: Ok, value: ok, route: $end}
    """), skip_gates=True)
    assert run.of(GateOpened)[0].prompt == "s was hidden"


def test_numeric_option_values_in_workflow_and_responses_file(tmp_path: Path) -> None:
    responses = write(tmp_path, "gates:\n  pick: [2]\n", name="responses.yaml")
    run = run_workflow(write(tmp_path, """
        workflow: {name: gate, entry_point: pick}
        agents:
          - name: pick
            type: human_gate
            prompt: "Which?"
            options:
              - {label: One, value: 1, route: $end}
              - {label: Two, value: 2, route: two}
          - {name: two, type: set, value: "{{ pick.output.selected }}"}
    """), responses=responses)
    assert run.exit_code == 0, run.error_text()
    assert run.outputs["pick"] == {"selected": "2", "additional_input": {}}
    assert run.steps() == ["pick", "two"]
