"""Property: whatever the workflow (set, script and scripted-agent steps, groups, a loop, agents
that need corrections or break their contract inside a group), what a run spent is the sum of
the calls it made: the oracle counts the scripted answers' tokens, independently of podium, and
the budget, the run result, the step events and the fold of the events all equal it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers_engine import run_workflow, write
from podium.events.model import ModelExchange, StepFailed, StepFinished
from podium.events.spend import fold_spend


@dataclass(frozen=True)
class Agent:
    tokens: int  # input tokens of each answer (output: a tenth)
    corrections: int  # bad answers before the good one
    breaks: bool = False  # only bad answers: it fails its contract (in a group only)

    def answers(self) -> int:
        return 3 if self.breaks else self.corrections + 1


agents = st.builds(Agent, st.integers(1, 5_000), st.integers(0, 2))
member = st.builds(Agent, st.integers(1, 5_000), st.integers(0, 2), st.booleans())
node = st.one_of(
    st.tuples(st.just("set")), st.tuples(st.just("script")), st.tuples(st.just("agent"), agents),
    # (a group whose members all break fails the run: the corpus of test_spend_truth.py
    # has those; here one member of a parallel group may break)
    st.tuples(st.just("parallel"), member, agents),
    st.tuples(st.just("for_each"), agents, st.integers(1, 3)))


def _answer(a: Agent) -> dict[str, Any]:
    usage = {"input_tokens": a.tokens, "output_tokens": a.tokens // 10}
    bad = [{"text": "not json", "usage": usage}] * (3 if a.breaks else a.corrections)
    good = [] if a.breaks else [{"output": {"v": "ok"}, "usage": usage}]
    return {"every": {"attempts": bad + good}}


def _build(nodes: list[tuple[Any, ...]], loops: int) -> tuple[str, dict[str, Any], int]:
    """The workflow, its scripted answers, and the input tokens its calls must add up to."""
    steps: list[str] = []
    groups: list[str] = []
    responses: dict[str, Any] = {}
    names = [f"n{i}" for i in range(len(nodes))] + ["count"]
    agent = '{{name: {n}, prompt: "say {n}", output: {{v: {{type: string}}}}}}'
    for i, spec in enumerate(nodes):
        name, nxt, kind = names[i], names[i + 1], spec[0]
        if kind == "set":
            steps.append(f'  - {{name: {name}, type: set, value: 1, routes: [{{to: {nxt}}}]}}')
        elif kind == "script":
            steps.append(f'  - {{name: {name}, type: script, command: python, '
                         f'args: ["-c", "print(1)"], routes: [{{to: {nxt}}}]}}')
        elif kind == "agent":
            steps.append("  - " + agent.format(n=name)[:-1] + f", routes: [{{to: {nxt}}}]}}")
            responses[name] = _answer(spec[1])
        elif kind == "parallel":
            for j, m in enumerate(spec[1:]):
                steps.append("  - " + agent.format(n=f"{name}m{j}"))
                responses[f"{name}m{j}"] = _answer(m)
            groups.append(f"parallel:\n  - {{name: {name}, agents: [{name}m0, {name}m1], "
                          f"failure_mode: continue_on_error, routes: [{{to: {nxt}}}]}}")
        else:
            m = spec[1]
            groups.append(
                f"for_each:\n  - {{name: {name}, type: for_each, source: workflow.input.items, "
                f"as: item, failure_mode: continue_on_error, max_concurrent: 2, "
                f"routes: [{{to: {nxt}}}], agent: " + agent.format(n=f"{name}a") + "}")
            responses[f"{name}a"] = _answer(m)
    steps.append('  - name: count\n    type: set\n    output_type: integer\n'
                 '    value: "{{ count.output + 1 if count is defined and count.output is not '
                 'none else 1 }}"\n'
                 f'    routes: [{{to: n0, when: "{{{{ count.output < {loops} }}}}"}}, '
                 '{to: $end}]')
    items = max([s[2] for s in nodes if s[0] == "for_each"], default=1)
    text = f"""
workflow:
  name: prop
  entry_point: n0
  runtime: {{provider: copilot, default_model: team-model}}
  limits: {{budget_usd: 1000, budget_mode: audit, max_iterations: 200}}
  cost: {{pricing: {{team-model: {{input_per_mtok: 1.0, output_per_mtok: 0}}}}}}
  input: {{items: {{type: array, default: {list(range(items))}}}}}
agents:
""" + "\n".join(steps) + "\n" + "\n".join(groups) + "\n"
    # each for-each has `items` items here: one shared input list, sized by the largest
    expected = 0
    for spec in nodes:
        if spec[0] == "agent":
            expected += spec[1].answers() * spec[1].tokens
        elif spec[0] == "parallel":
            expected += sum(m.answers() * m.tokens for m in spec[1:])
        elif spec[0] == "for_each":
            expected += spec[1].answers() * spec[1].tokens * items
    return text, {"agents": responses}, expected * loops


@settings(max_examples=8, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(nodes=st.lists(node, min_size=1, max_size=4).filter(
           lambda ns: sum(1 for n in ns if n[0] == "script") <= 1),
       loops=st.integers(1, 2))
def test_spend_is_the_sum_of_the_calls(tmp_path: Path, nodes: list[tuple[Any, ...]],
                                       loops: int) -> None:
    text, responses, expected = _build(nodes, loops)
    run = run_workflow(write(tmp_path, text), responses=responses)
    assert run.exit_code == 0, (run.error_text(), text)
    calls = run.of(ModelExchange)
    assert sum(e.input_tokens for e in calls) == expected
    total = run.engine.meter.total()
    assert total.input_tokens == expected
    assert total.cost_usd == pytest.approx(expected / 1e6)
    assert run.result.budget is not None
    assert run.result.budget.spent_usd == pytest.approx(expected / 1e6, abs=1e-6)
    assert sum(u.input_tokens for u in run.result.usage_by_step.values()) == expected
    folded = fold_spend(e.model_dump() for e in run.events)
    assert folded.total == total
    assert sum(s.input_tokens for s in folded.by_step.values()) == expected
    # the top-level step events say what each step spent: they add up to it too
    ends = [e for e in run.events if isinstance(e, (StepFinished, StepFailed))
            and e.group is None]
    assert sum(e.input_tokens for e in ends) == expected
