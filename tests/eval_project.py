"""A small eval project for the eval tests: a triage workflow whose answers differ by row and
by variant, priced from the answers' tokens (tests/test_eval.py, tests/web/test_browser_eval.py)."""

from __future__ import annotations

from pathlib import Path

from helpers_engine import write

WORKFLOW = """
workflow:
  name: triage
  entry_point: classify
  input:
    text: {type: string, required: true}
agents:
  - name: classify
    provider: openai
    model: gpt-5-mini
    prompt: "Classify: {{ workflow.input.text }}"
    output:
      label: {type: string, enum: [bug, feature]}
    routes:
      - to: bug
        when: "{{ output.label == 'bug' }}"
      - to: feature
  - name: bug
    type: terminate
    status: success
    reason: a bug
  - name: feature
    type: terminate
    status: success
    reason: a feature
"""

ANSWER = "agents:\n  classify:\n    - output: {{label: {label}}}\n      usage: {{input_tokens: 1000, output_tokens: 100}}\n"
ROWS = [("r1", "crash on save", "bug"), ("r2", "add dark mode", "feature"),
        ("r3", "null pointer", "bug"), ("r4", "export to csv", "feature")]
# priced from genai-prices: gpt-5-mini $0.25/$2 per M tokens, gpt-5.5 $5/$30
GOOD_COST = 1000 * 0.25e-6 + 100 * 2e-6
BAD_COST = 1000 * 5e-6 + 100 * 30e-6


def eval_project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    write(root, WORKFLOW, "triage.yaml")
    for label in ("bug", "feature"):
        write(root, ANSWER.format(label=label), f"answers/{label}.yaml")
    lines = []
    for rid, text, label in ROWS:
        wrong = "feature" if label == "bug" else "bug"
        lines.append(f"- id: {rid}\n  inputs: {{text: {text}}}\n  expect: {label}\n"
                     f"  responses: {{good: answers/{label}.yaml, bad: answers/{wrong}.yaml}}\n")
    write(root, "".join(lines), "rows.yaml")
    write(root, """
        workflow: triage.yaml
        dataset: rows.yaml
        concurrency: 2
        variants:
          good: classify.model=gpt-5-mini
          bad: classify.model=gpt-5.5
        assertions:
          - steps_at_most: 2
          - cost_at_most: 0.005
        """, "triage.eval.yaml")
    return root
