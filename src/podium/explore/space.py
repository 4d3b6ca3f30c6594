"""The state space of a workflow: every (step, iteration, stored outputs) a run can reach
when each step produces each class of value it can produce, searched breadth first.

States are deduplicated on what a later step can see (the step about to run, the run's
iteration count, the stored outputs, and `context.history` when a routing text reads it), so
the search is exact up to `max_iterations`. Routes are chosen by the engine's own router
(engine/routing.py) on the same scope the engine builds (steps/state.py), and `set` steps are
computed by their real executor: a counter is the number the engine would store.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import field
from pathlib import Path
from typing import Any

from podium.clock import SystemClock
from podium.engine.routing import choose_route
from podium.errors import PodiumError, RouteError
from podium.events.bus import EventBus
from podium.explore.moves import Move, MoveMaker
from podium.gates.base import GateAnswer, GateRequest
from podium.language.load import LoadResult
from podium.language.model import END, ForEachGroup, ParallelGroup, StepBase
from podium.providers.base import ProviderRegistry
from podium.records import record
from podium.steps.base import RunOptions, RunServices
from podium.steps.state import ContextBuilder, RunState, WorkflowInfo
from podium.templating import TemplateEngine

MAX_STATES = 200_000
FAILED, NO_ROUTE, MAX_ITER = "$failed", "$no_route", "$max_iterations"


class _NoAnswer:
    def answer(self, request: GateRequest) -> GateAnswer | None:
        return None


@record
class State:
    """One reachable situation: the node about to run and what the run has stored."""

    id: int
    node: str
    iteration: int
    outputs: dict[str, Any]
    history: list[str]
    depth: int  # steps executed to get here on the shortest trajectory
    parent: int | None = None
    via: Move | None = None  # the value the parent's node produced to get here


@record
class Edge:
    """From a state, one value of its node: to another state or to an outcome."""

    move: Move
    to_state: int | None
    outcome: str | None = None
    steps: int = 1  # steps this edge executes (0 for reaching $end or a limit)
    detail: str | None = None  # why the outcome (a failure's message)
    route: int | None = None  # the route (or gate option) taken


@record
class Space:
    states: list[State]
    edges: dict[int, list[Edge]]
    route_holds: dict[tuple[str, int], set[bool]]
    route_taken: dict[tuple[str, int], int]
    visited_nodes: set[str]
    complete: bool
    truncated: list[str] = field(default_factory=list)  # why not complete
    projected_key: dict[int, str] = field(default_factory=dict)  # the key without the count


class Explorer:
    """Searches one workflow's state space."""

    def __init__(self, result: LoadResult, *, max_states: int = MAX_STATES) -> None:
        assert result.model is not None
        self.wf = result.model
        self.path = result.path.resolve()
        self.max_states = max_states
        self._inputs: dict[int, dict[str, Any]] = {}  # each state's workflow inputs
        wf = self.wf
        self.steps: dict[str, StepBase] = {}
        for s in wf.agents:
            self.steps.setdefault(s.name, s)
        self.parallel = {g.name: g for g in wf.parallel}
        self.for_each = {g.name: g for g in wf.for_each}
        groups = frozenset(self.parallel) | frozenset(self.for_each)
        info = WorkflowInfo(wf.workflow.name, wf.workflow.description, str(self.path.parent),
                            str(self.path))
        templates = TemplateEngine(wf.template_files, self.path.parent)
        self.services = RunServices(wf, self.path, templates, ContextBuilder(info, groups),
                                    RunState(inputs={}), EventBus("explore", SystemClock()),
                                    SystemClock(), ProviderRegistry(), _NoAnswer(),
                                    RunOptions(record=False), "explore")
        self.moves = MoveMaker(self, result)
        self.reads_history = "history" in self.moves.literals.words
        self.reads_iteration = "context" in self.moves.literals.words
        self.max_iterations = wf.workflow.limits.max_iterations

    # ------------------------------------------------------------------ search

    def search(self) -> Space:
        space = self.space = Space([], {}, {}, {}, set(), complete=True)
        self._index: dict[tuple[Any, ...], int] = {}
        self._queue: deque[int] = deque()
        for inputs in self.moves.input_combinations():
            self._add(State(0, self.wf.workflow.entry_point, 0, {}, [], 0), inputs)
        while self._queue:
            sid = self._queue.popleft()
            space.edges[sid] = self._expand(space.states[sid])
        if self.moves.truncated:
            space.complete = False
            space.truncated.extend(self.moves.truncated)
        return space

    def _key(self, node: str, iteration: int, outputs: dict[str, Any], history: list[str],
             inputs: dict[str, Any]) -> tuple[Any, ...]:
        hist: Any = tuple(history) if self.reads_history else (
            len(history) if self.reads_iteration else None)
        return (node, iteration, _canon(outputs), hist, _canon(inputs))

    def _add(self, state: State, inputs: dict[str, Any]) -> int | None:
        space, index = self.space, self._index
        key = self._key(state.node, state.iteration, state.outputs, state.history, inputs)
        found = index.get(key)
        if found is not None:
            return found
        if len(space.states) >= self.max_states:
            if space.complete:
                space.complete = False
                space.truncated.append(f"stopped at {self.max_states:,} states (--max-states)")
            return None
        state.id = len(space.states)
        state.outputs = dict(state.outputs)
        self._inputs[state.id] = inputs
        space.states.append(state)
        space.projected_key[state.id] = repr(key[:1] + key[2:])
        index[key] = state.id
        self._queue.append(state.id)
        return state.id

    def inputs_of(self, sid: int) -> dict[str, Any]:
        return self._inputs[sid]

    def run_state(self, state: State) -> RunState:
        rs = RunState(inputs=self._inputs[state.id], outputs=dict(state.outputs),
                      history=list(state.history), run_iteration=state.iteration,
                      max_iterations=self.max_iterations)
        rs.step_counts = {n: state.history.count(n) for n in set(state.history)}
        return rs

    def _expand(self, state: State) -> list[Edge]:
        space = self.space
        node = state.node
        if node == END:
            return [Edge(Move(None, "$end"), None, END, steps=0)]
        step = self.steps.get(node) or self.parallel.get(node) or self.for_each.get(node)
        if step is None:
            return [Edge(Move(None, "?"), None, FAILED, steps=0,
                         detail=f"no step, parallel group or for-each group named '{node}'")]
        need = len(step.agents) if isinstance(step, ParallelGroup) else 1
        if state.iteration + need > self.max_iterations:
            return [Edge(Move(None, "limit"), None, MAX_ITER, steps=0)]
        space.visited_nodes.add(node)
        rs = self.run_state(state)
        self.services.state = rs
        edges: list[Edge] = []
        for move in self.moves.of(step, rs):
            if move.outcome is not None:
                edges.append(Edge(move, None, move.outcome, detail=move.detail))
                continue
            edges.append(self._follow(state, step, move, need))
        return edges

    def _follow(self, state: State, step: StepBase | ParallelGroup | ForEachGroup, move: Move,
                need: int) -> Edge:
        outputs = {**state.outputs, step.name: move.value}
        history = [*state.history, step.name]
        target, route = move.target, move.option
        if target is None:
            target, route, problem = self._route(step, outputs, history, state, move)
            if problem is not None:
                return Edge(move, None, problem[0], detail=problem[1])
        nxt = State(0, target, state.iteration + need, outputs, history, state.depth + 1,
                    parent=state.id, via=move)
        sid = self._add(nxt, self._inputs[state.id])
        return Edge(move, sid, None, route=route)

    def _route(self, step: StepBase | ParallelGroup | ForEachGroup, outputs: dict[str, Any],
               history: list[str], state: State,
               move: Move) -> tuple[str, int | None, tuple[str, str] | None]:
        space = self.space
        if not step.routes:
            return END, None, None
        rs = RunState(inputs=self._inputs[state.id], outputs=outputs, history=history,
                      run_iteration=state.iteration, max_iterations=self.max_iterations)
        self.services.state = rs
        scope = self.services.full_context()
        scope["output"] = move.value
        try:
            decision = choose_route(self.services.templates, step.name, step.routes, scope)
        except RouteError as exc:
            for i, route in enumerate(step.routes):
                if route.when is not None:
                    space.route_holds.setdefault((step.name, i), set()).add(False)
            kind = NO_ROUTE if str(exc).startswith("no route matched") else FAILED
            return "", None, (kind, str(exc))
        except PodiumError as exc:
            return "", None, (FAILED, str(exc))
        for tried in decision.evaluated:
            space.route_holds.setdefault((step.name, tried["index"]), set()).add(
                bool(tried["holds"]))
        key = (step.name, decision.index)
        space.route_taken[key] = space.route_taken.get(key, 0) + 1
        return decision.target, decision.index, None


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def child_path(parent: Path, ref: str) -> Path | None:
    """A sub-workflow's file, as the engine resolves a local reference (None when it is a
    registry reference explore does not fetch)."""
    for candidate in (parent.parent / ref, parent.parent / f"{ref}.yaml",
                      parent.parent / f"{ref}.yml"):
        if candidate.is_file():
            return candidate
    return None
