"""`podium explore --emit-tests DIR`: workflow tests (the `*.test.yaml` format of `podium
test`) that drive one witness trajectory per route still uncovered, with the scripted
answers, gate answers and script stubs that make a run take exactly that trajectory."""

from __future__ import annotations

import os
from collections import deque
from io import StringIO
from pathlib import Path
from typing import Any

from podium.explore.space import FAILED, MAX_ITER, Edge, Space
from podium.language.load import LoadResult
from podium.language.model import AgentStep, HumanGateStep, ScriptStep, TerminateStep


def _suffix(space: Space, sid: int) -> tuple[list[tuple[int, Edge]], Edge] | None:
    """The shortest way from a state to an outcome a test can expect (not a limit or a
    failure), as (state, edge) pairs and the final edge."""
    parent: dict[int, tuple[int, Edge] | None] = {sid: None}
    todo = deque([sid])
    while todo:
        s = todo.popleft()
        for e in space.edges.get(s, []):
            if e.outcome is not None and e.outcome not in (MAX_ITER, FAILED):
                chain: list[tuple[int, Edge]] = []
                cur = s
                while parent[cur] is not None:
                    prev, pe = parent[cur]  # type: ignore[misc]
                    chain.append((prev, pe))
                    cur = prev
                chain.reverse()
                return [*chain, (s, e)], e
            t = e.to_state
            if t is not None and t not in parent:
                parent[t] = (s, e)
                todo.append(t)
    return None


def _prefix(space: Space, sid: int) -> list[tuple[int, Edge]]:
    out: list[tuple[int, Edge]] = []
    state = space.states[sid]
    while state.parent is not None:
        parent = state.parent
        edge = next(e for e in space.edges[parent] if e.to_state == state.id)
        out.append((parent, edge))
        state = space.states[parent]
    out.reverse()
    return out


def trajectories(space: Space) -> list[list[tuple[int, Edge]]]:
    """Trajectories (each ending at an outcome) that together take every route and gate
    option the exploration took, shortest first."""
    wanted: dict[tuple[str, int], tuple[int, Edge]] = {}
    for sid in range(len(space.states)):
        for e in space.edges.get(sid, []):
            if e.route is not None:
                wanted.setdefault((space.states[sid].node, e.route), (sid, e))
    covered: set[tuple[str, int]] = set()
    chosen: list[list[tuple[int, Edge]]] = []
    for key, (sid, edge) in wanted.items():
        if key in covered or edge.to_state is None:
            continue
        rest = _suffix(space, edge.to_state)
        if rest is None:
            continue
        trail = [*_prefix(space, sid), (sid, edge), *rest[0]]
        covered.update((space.states[s].node, e.route) for s, e in trail if e.route is not None)
        chosen.append(trail)
    return chosen


def _answers(space: Space, result: LoadResult, trail: list[tuple[int, Edge]],
             inputs: dict[str, Any]) -> dict[str, Any]:
    wf = result.model
    assert wf is not None
    steps = {s.name: s for s in wf.agents}
    agents: dict[str, list[Any]] = {}
    scripts: dict[str, list[Any]] = {}
    gates: dict[str, list[Any]] = {}
    path: list[str] = []
    terminal = None
    status = "success"
    for sid, edge in trail:
        node = space.states[sid].node
        if edge.steps:
            path.append(node)
        step = steps.get(node)
        value = edge.move.value
        if isinstance(step, AgentStep):
            raw = step.output_mode == "raw" or not step.output
            agents.setdefault(node, []).append({"text": value.get("result", "")} if raw
                                               else {"output": value})
        elif isinstance(step, ScriptStep):
            stub: dict[str, Any] = {"exit_code": value.get("exit_code", 0)}
            fields = {k: v for k, v in value.items() if k not in ("stdout", "stderr",
                                                                   "exit_code")}
            if step.output or fields:  # a JSON object on stdout (merged into the output)
                stub["output"] = fields
            else:
                stub["stdout"] = value.get("stdout", "")
            scripts.setdefault(node, []).append(stub)
        elif isinstance(step, HumanGateStep):
            gates.setdefault(node, []).append(value["selected"])
        elif isinstance(step, TerminateStep):
            terminal, status = node, step.status
    expect: dict[str, Any] = {"steps": path, "status": status}
    if terminal is not None:
        expect["terminal"] = terminal
    test: dict[str, Any] = {"inputs": inputs}
    for key, val in (("agents", agents), ("scripts", scripts), ("gates", gates)):
        if val:
            test[key] = val
    test["expect"] = expect
    return test


def emit_tests(found: Any, result: LoadResult, folder: Path) -> list[Path]:
    """Write the tests into `folder`; return the files written."""
    from ruamel.yaml import YAML

    space: Space = found.space
    explorer = found.explorer
    folder.mkdir(parents=True, exist_ok=True)
    wf_path = result.path.resolve()
    tests = []
    for n, trail in enumerate(trajectories(space), start=1):
        start = trail[0][0]
        case = _answers(space, result, trail, explorer.inputs_of(start))
        end = case["expect"].get("terminal") or "$end"
        tests.append({"name": f"explore witness {n}: ends at {end}", **case})
    doc = {"workflow": os.path.relpath(wf_path, folder.resolve()), "tests": tests}
    target = folder / f"{wf_path.stem}.explore.test.yaml"
    yaml = YAML()
    yaml.default_flow_style = None
    buf = StringIO()
    buf.write(f"# Written by `podium explore {result.shown} --emit-tests {folder}`: one test "
              "per witness\n# trajectory needed to take every route and gate option.\n")
    yaml.dump(doc, buf)
    target.write_text(buf.getvalue(), encoding="utf-8")
    return [target] if tests else []
