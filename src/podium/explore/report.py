"""What a searched state space says: each outcome's reach, step range and witness, the
findings (with file:line) and the properties given with `--require`."""

from __future__ import annotations

import itertools
import re
from collections import deque
from dataclasses import field
from typing import Any

from podium.check.graph import RouteGraph
from podium.explore.space import FAILED, MAX_ITER, NO_ROUTE, Edge, Explorer, Space
from podium.language.diagnostics import Diagnostic, KeyPath, did_you_mean, format_path
from podium.language.load import LoadResult
from podium.language.model import END, TerminateStep
from podium.records import record

SPECIAL = {END: "$end", MAX_ITER: "max_iterations exhausted", NO_ROUTE: "no matching route",
           FAILED: "a step failed"}
ALIASES = {"end": END, "$end": END, "max_iterations": MAX_ITER, "$max_iterations": MAX_ITER,
           "no_route": NO_ROUTE, "$no_route": NO_ROUTE, "failed": FAILED, "$failed": FAILED}


@record
class Outcome:
    name: str
    reachable: bool
    success: bool
    min_steps: int | None = None
    max_steps: int | None = None
    unbounded: bool = False
    witness: list[dict[str, Any]] = field(default_factory=list)
    detail: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "reachable": self.reachable, "success": self.success,
                "min_steps": self.min_steps,
                "max_steps": None if self.unbounded else self.max_steps,
                "unbounded": self.unbounded, "witness": self.witness, "detail": self.detail}


@record
class Property:
    text: str
    holds: bool
    counterexample: list[dict[str, Any]] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "holds": self.holds, "counterexample": self.counterexample}


class PropertyError(ValueError):
    """A `--require` text explore cannot read."""


# ---------------------------------------------------------------------- trajectories


def path_to(space: Space, sid: int) -> list[dict[str, Any]]:
    """The shortest trajectory to a state: each step with the value it produced."""
    steps: list[dict[str, Any]] = []
    state = space.states[sid]
    while state.parent is not None:
        parent = space.states[state.parent]
        assert state.via is not None
        steps.append({"step": parent.node, "value": state.via.value, "label": state.via.label})
        state = parent
    steps.reverse()
    return steps


def _with_edge(space: Space, sid: int, edge: Edge) -> list[dict[str, Any]]:
    steps = path_to(space, sid)
    if edge.steps:
        steps.append({"step": space.states[sid].node, "value": edge.move.value,
                      "label": edge.move.label})
    return steps


def _order(space: Space) -> list[int]:
    """States in an order where every edge goes forward (the iteration count grows)."""
    return sorted(range(len(space.states)), key=lambda s: space.states[s].iteration)


def _longest(space: Space, weight: str | None = None) -> tuple[dict[int, int], dict[int, int]]:
    """The most steps (or, with `weight`, the most executions of that step) on any
    trajectory to each state, and the predecessor that gives it."""
    best: dict[int, int] = {}
    pred: dict[int, int] = {}
    for sid in _order(space):
        here = best.setdefault(sid, 0)
        node = space.states[sid].node
        gain = 1 if weight is None or node == weight else 0
        for edge in space.edges.get(sid, []):
            t = edge.to_state
            if t is not None and here + gain > best.get(t, -1):
                best[t] = here + gain
                pred[t] = sid
    return best, pred


def _path_by_pred(space: Space, sid: int, pred: dict[int, int]) -> list[dict[str, Any]]:
    chain = [sid]
    while chain[-1] in pred:
        chain.append(pred[chain[-1]])
    chain.reverse()
    steps = []
    for a, b in itertools.pairwise(chain):
        move = next(e.move for e in space.edges[a] if e.to_state == b)
        steps.append({"step": space.states[a].node, "value": move.value, "label": move.label})
    return steps


def _cyclic(space: Space) -> tuple[set[str], dict[str, set[str]]]:
    """The projected states (iteration count left out) that lie on a cycle, and the
    projected graph: a loop a run can go round until only max_iterations stops it."""
    succ: dict[str, set[str]] = {}
    for sid, edges in space.edges.items():
        a = space.projected_key[sid]
        succ.setdefault(a, set())
        for e in edges:
            if e.to_state is not None:
                succ[a].add(space.projected_key[e.to_state])
    return _in_cycles(succ), succ


def _in_cycles(succ: dict[str, set[str]]) -> set[str]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    out: set[str] = set()
    counter = 0
    for root in succ:
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(succ.get(root, ())))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, todo = work[-1]
            if todo:
                w = todo.pop()
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, sorted(succ.get(w, ()))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1 or v in succ.get(v, ()):
                    out.update(comp)
    return out


def _reaching(succ: dict[str, set[str]], targets: set[str]) -> set[str]:
    pred: dict[str, set[str]] = {}
    for a, bs in succ.items():
        for b in bs:
            pred.setdefault(b, set()).add(a)
    seen = set(targets)
    todo = deque(targets)
    while todo:
        for p in pred.get(todo.popleft(), ()):
            if p not in seen:
                seen.add(p)
                todo.append(p)
    return seen


# ---------------------------------------------------------------------- outcomes


def outcome_names(explorer: Explorer) -> list[str]:
    terms = [s.name for s in explorer.wf.agents if isinstance(s, TerminateStep)]
    return [*terms, END, MAX_ITER, NO_ROUTE, FAILED]


def outcomes_of(explorer: Explorer, space: Space) -> list[Outcome]:
    terms = {s.name: s for s in explorer.wf.agents if isinstance(s, TerminateStep)}
    longest, _ = _longest(space)
    cyclic, succ = _cyclic(space)
    found: dict[str, Outcome] = {}
    sources: dict[str, set[str]] = {}
    for name in outcome_names(explorer):
        ok = name == END or (name in terms and terms[name].status == "success")
        found[name] = Outcome(name, False, ok)
    for sid in range(len(space.states)):
        for edge in space.edges.get(sid, []):
            if edge.outcome is None:
                continue
            o = found.setdefault(edge.outcome, Outcome(edge.outcome, False, False))
            steps = space.states[sid].depth + edge.steps
            if not o.reachable or steps < (o.min_steps or 0):
                o.witness = _with_edge(space, sid, edge)
                o.detail = edge.detail
            o.min_steps = steps if not o.reachable else min(o.min_steps or steps, steps)
            o.max_steps = max(o.max_steps or 0, longest.get(sid, 0) + edge.steps)
            o.reachable = True
            sources.setdefault(edge.outcome, set()).add(space.projected_key[sid])
    for name, o in found.items():
        if o.reachable and name != MAX_ITER:
            # a loop can go round before it (the count left out, the same state comes back),
            # or its longest trajectory takes every iteration there is (a counter that only
            # max_iterations stops)
            o.unbounded = bool(cyclic & _reaching(succ, sources[name])) or (
                (o.max_steps or 0) >= explorer.max_iterations)
    return list(found.values())


# ---------------------------------------------------------------------- findings


class Findings:
    """Diagnostics about what the data can and cannot do, located in the workflow file."""

    def __init__(self, explorer: Explorer, result: LoadResult, space: Space,
                 outcomes: list[Outcome]) -> None:
        self.explorer = explorer
        self.result = result
        self.space = space
        self.outcomes = {o.name: o for o in outcomes}
        self.items: list[Diagnostic] = []
        self.paths: dict[str, KeyPath] = {}
        wf = explorer.wf
        for i, s in enumerate(wf.agents):
            self.paths.setdefault(s.name, ("agents", i))
        for i, g in enumerate(wf.parallel):
            self.paths.setdefault(g.name, ("parallel", i))
        for i, fe in enumerate(wf.for_each):
            self.paths.setdefault(fe.name, ("for_each", i))

    def add(self, node: str | None, rest: KeyPath, message: str, severity: str = "warning",
            code: str = "explore") -> None:
        path: KeyPath = (*self.paths.get(node or "", ()), *rest)
        pos = self.result.smap.key(path)
        self.items.append(Diagnostic(pos.file, pos.line, pos.col, format_path(path), message,
                                     "error" if severity == "error" else "warning",
                                     None, code))

    def collect(self) -> list[Diagnostic]:
        self._unreached()
        self._routes()
        self._loops()
        self._ends()
        return sorted(self.items)

    def _unreached(self) -> None:
        graph = RouteGraph.build(self.explorer.wf)
        for node in graph.reachable():
            if node != END and node not in self.space.visited_nodes and self.space.complete:
                self.add(node, (), f"'{node}' is on the route graph, but no value the steps "
                                   "can produce leads to it", code="explore-unreachable")

    def _routes(self) -> None:
        nodes: list[Any] = [*self.explorer.wf.agents, *self.explorer.wf.parallel,
                            *self.explorer.wf.for_each]
        for node in nodes:
            if node.name not in self.space.visited_nodes or not self.space.complete:
                continue
            for i, route in enumerate(node.routes):
                holds = self.space.route_holds.get((node.name, i))
                taken = self.space.route_taken.get((node.name, i), 0)
                where: KeyPath = ("routes", i)
                if route.when is not None and holds == {False}:
                    self.add(node.name, (*where, "when"), f"the condition {route.when!r} can "
                             "never hold given the values the steps can produce",
                             code="explore-never")
                elif route.when is not None and holds == {True} and i < len(node.routes) - 1:
                    self.add(node.name, (*where, "when"), f"the condition {route.when!r} "
                             "always holds given the declared values: the routes after it "
                             "are never taken", code="explore-always")
                elif holds is None and not taken:
                    self.add(node.name, where, f"route {i} (to '{route.to}') is shadowed on "
                             "every value: an earlier route always wins", code="explore-shadowed")

    def _loops(self) -> None:
        cyclic, succ = _cyclic(self.space)
        exits: set[str] = set()
        for sid, edges in self.space.edges.items():
            if any(e.outcome not in (None, MAX_ITER) for e in edges):
                exits.add(self.space.projected_key[sid])
        escape = _reaching(succ, exits)
        trapped = cyclic - escape
        if not trapped:
            return
        nodes = sorted({self.space.states[sid].node for sid, key in
                        self.space.projected_key.items() if key in trapped})
        self.add(nodes[0], (), "a loop through " + ", ".join(f"'{n}'" for n in nodes) +
                 " has no way out: every trajectory that enters it ends at max_iterations",
                 severity="error", code="explore-trapped")

    def _ends(self) -> None:
        o = self.outcomes
        if o[NO_ROUTE].reachable:
            last = o[NO_ROUTE].witness[-1]["step"] if o[NO_ROUTE].witness else None
            self.add(last, ("routes",), "no route matches on some values "
                     f"({_trail(o[NO_ROUTE].witness)}); add a last route without 'when'",
                     severity="error", code="explore-no-route")
        for sid, edges in self.space.edges.items():
            for e in edges:
                if e.outcome == FAILED and e.move.outcome is None and e.detail:
                    self.add(self.space.states[sid].node, ("routes",),
                             f"routing fails on some values: {e.detail}", severity="error",
                             code="explore-route-error")
                    return
        ends = [n for n, x in o.items() if x.reachable]
        if ends == [MAX_ITER]:
            self.add(None, ("workflow", "limits"), "every trajectory ends by exhausting "
                     "max_iterations: no outcome is reachable otherwise", severity="error",
                     code="explore-limit-only")


def _trail(witness: list[dict[str, Any]]) -> str:
    return " -> ".join(f"{w['step']}({w['label']})" for w in witness)


# ---------------------------------------------------------------------- properties


def check_property(text: str, explorer: Explorer, space: Space) -> Property:
    words = text.split()
    steps = set(explorer.steps) | set(explorer.parallel) | set(explorer.for_each)
    outcomes = set(outcome_names(explorer))
    if len(words) == 2 and words[0] == "never":
        name = _outcome(words[1], outcomes)
        return _never(text, space, name)
    if len(words) == 3 and words[1] == "before":
        return _before(text, space, _step(words[0], steps), _outcome(words[2], outcomes))
    m = re.fullmatch(r"(\S+)\s+at\s+most\s+(\d+)", text.strip())
    if m:
        return _at_most(text, space, _step(m.group(1), steps), int(m.group(2)))
    raise PropertyError(f"cannot read the property {text!r}: write 'STEP before OUTCOME', "
                        "'never OUTCOME' or 'STEP at most N'")


def _outcome(word: str, known: set[str]) -> str:
    name = ALIASES.get(word, word)
    if name not in known:
        hint = did_you_mean(word, sorted(known))
        raise PropertyError(f"'{word}' is not an outcome of this workflow"
                            f"{f' ({hint})' if hint else ''} (outcomes: "
                            f"{', '.join(sorted(known))})")
    return name


def _step(word: str, known: set[str]) -> str:
    if word not in known:
        hint = did_you_mean(word, sorted(known))
        raise PropertyError(f"'{word}' is not a step of this workflow"
                            f"{f' ({hint})' if hint else ''}")
    return word


def _never(text: str, space: Space, name: str) -> Property:
    for sid in range(len(space.states)):  # BFS order: the first is the shortest
        for e in space.edges.get(sid, []):
            if e.outcome == name:
                return Property(text, False, _with_edge(space, sid, e))
    return Property(text, True)


def _before(text: str, space: Space, step: str, name: str) -> Property:
    starts = [s.id for s in space.states if s.parent is None and s.node != step]
    parent: dict[int, tuple[int, Edge] | None] = dict.fromkeys(starts)
    todo = deque(starts)
    while todo:
        sid = todo.popleft()
        for e in space.edges.get(sid, []):
            if e.outcome == name:
                return Property(text, False, _trace(space, parent, sid) +
                                _tail(space, sid, e))
            t = e.to_state
            if t is not None and t not in parent and space.states[t].node != step:
                parent[t] = (sid, e)
                todo.append(t)
    return Property(text, True)


def _trace(space: Space, parent: dict[int, tuple[int, Edge] | None],
           sid: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    link = parent.get(sid)
    while link is not None:
        prev, e = link
        out.append({"step": space.states[prev].node, "value": e.move.value,
                    "label": e.move.label})
        link = parent.get(prev)
    out.reverse()
    return out


def _tail(space: Space, sid: int, e: Edge) -> list[dict[str, Any]]:
    if not e.steps:
        return []
    return [{"step": space.states[sid].node, "value": e.move.value, "label": e.move.label}]


def _at_most(text: str, space: Space, step: str, limit: int) -> Property:
    best, pred = _longest(space, weight=step)
    top, where = -1, None
    for sid, count in best.items():
        total = count + (1 if space.states[sid].node == step and space.edges.get(sid) and any(
            e.steps for e in space.edges[sid]) else 0)
        if total > top:
            top, where = total, sid
    if top <= limit or where is None:
        return Property(text, True)
    trail = _path_by_pred(space, where, pred)
    edge = next((e for e in space.edges.get(where, []) if e.steps), None)
    if edge is not None and space.states[where].node == step:
        trail.append({"step": step, "value": edge.move.value, "label": edge.move.label})
    return Property(text, False, trail)
