"""How far into a run each step is reached: the shortest and longest paths over (step, counter
values), and the loops of the route graph with what bounds them.

A path may come back to a step only when a counter moved, so only counter-bounded loops are
unrolled; loops with no bound of their own are reported as such. The counters and thresholds
themselves are found in check/loops.py.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import field
from typing import Any

from podium.check.graph import RouteGraph
from podium.check.loops import Counter, Loop, Threshold, find_counter, find_threshold, passes_until
from podium.language.model import END, HumanGateStep, ParallelGroup, SetStep, WorkflowFile
from podium.records import record
from podium.templating.trees import TemplateParser

MAX_EXPANSIONS = 300_000


@record
class Reach:
    """Earliest and latest step number at which a node is reached."""

    node: str
    kind: str
    status: str | None
    shortest: int | None
    longest: int | None
    shortest_path: list[str] = field(default_factory=list)
    longest_path: list[str] = field(default_factory=list)


class _Analysis:
    """One workflow's route graph with its counters and thresholds: the path searches
    (shortest, longest) and the loops a budget reports, shared with the cost forecast."""

    def __init__(self, wf: WorkflowFile) -> None:
        self.wf = wf
        self.parser = TemplateParser()
        self.graph = RouteGraph.build(wf)
        self.steps = {s.name: s for s in reversed(wf.agents)}
        self.groups: dict[str, ParallelGroup] = {g.name: g for g in wf.parallel}
        self.children: dict[str, dict[str, Any]] = {}  # sub-workflow steps: their cost
        self.counters: dict[str, Counter] = {}
        for s in wf.agents:
            if isinstance(s, SetStep):
                c = find_counter(s, self.parser)
                if c is not None:
                    self.counters[s.name] = c
        self.thresholds: dict[tuple[str, int], Threshold] = {}
        for name in self.graph.succ:
            step = self.steps.get(name)
            routes = step.routes if step is not None else (
                self.groups[name].routes if name in self.groups else [])
            for i, r in enumerate(routes):
                t = find_threshold(r, name, self.counters, self.parser)
                if t is not None:
                    self.thresholds[(name, i)] = t
        # Values past every threshold behave alike, so a counter is capped there: a loop that
        # only pushes a counter further past its limit is not counted as bounded by it.
        self.caps: dict[str, float] = {}
        for t in self.thresholds.values():
            c = self.counters[t.counter]
            cap = t.limit if t.op in ("gteq", "lteq") else t.limit + c.increment
            self.caps[t.counter] = max(self.caps.get(t.counter, -math.inf), abs(cap))

    def weight(self, node: str) -> int:
        if node in self.groups:
            return len(self.groups[node].agents)
        return 1

    def successors(self, node: str, values: dict[str, float | None],
                   visited: dict[str, int] | None = None) -> list[str]:
        """Where `node` can go next given the counters; with `visited` (the nodes on the
        current path), a gate option that sends the run back is left out: a person deciding to
        loop is not a modelled bound."""
        edges = self.graph.succ.get(node, [])
        out: list[str] = []
        for e in edges:
            if e.kind in ("default", "implicit"):
                out.append(e.dst)
                break
            if e.kind == "option":
                if visited is None or not visited.get(e.dst):
                    out.append(e.dst)
                continue
            t = self.thresholds.get((node, e.index))
            if t is not None:
                if t.holds(values.get(t.counter)):
                    out.append(e.dst)
                    break
                continue
            out.append(e.dst)  # an ordinary condition may or may not hold
        return out

    def execute(self, node: str, values: dict[str, float | None]) -> dict[str, float | None]:
        c = self.counters.get(node)
        if c is None or node not in self.caps:
            # a counter no route threshold reads does not steer the run: tracking its value
            # would only make the path search endless
            return values
        new = dict(values)
        prev = values.get(node)
        v = (c.start if prev is None else prev) + c.increment
        cap = self.caps.get(node)
        if cap is not None:
            v = min(v, cap) if c.increment > 0 else max(v, -cap)
        new[node] = v
        return new

    def shortest(self) -> dict[str, tuple[int, list[str]]]:
        entry = self.wf.workflow.entry_point
        best: dict[str, tuple[int, list[str]]] = {}
        if entry not in self.graph.succ:
            return best
        start_vals = self.execute(entry, {})
        todo = deque([(entry, start_vals, self.weight(entry), [entry])])
        seen: set[tuple[str, tuple[tuple[str, float | None], ...]]] = set()
        while todo:
            node, vals, depth, path = todo.popleft()
            key = (node, tuple(sorted(vals.items())))
            if key in seen:
                continue
            seen.add(key)
            if node not in best or depth < best[node][0]:
                best[node] = (depth, path)
            for nxt in self.successors(node, vals):
                if nxt == END:
                    if END not in best or depth < best[END][0]:
                        best[END] = (depth, [*path, END])
                    continue
                if nxt in self.graph.succ:
                    todo.append((nxt, self.execute(nxt, vals), depth + self.weight(nxt),
                                 [*path, nxt]))
        return best

    def longest(self) -> tuple[dict[str, tuple[int, list[str]]], bool]:
        entry = self.wf.workflow.entry_point
        best: dict[str, tuple[int, list[str]]] = {}
        if entry not in self.graph.succ:
            return best, True
        expansions = 0
        complete = True
        on_path: set[tuple[str, tuple[tuple[str, float | None], ...]]] = set()
        path: list[str] = []
        visited: dict[str, int] = {}

        def key(node: str, vals: dict[str, float | None]) -> tuple[str, tuple[Any, ...]]:
            return node, tuple(sorted(vals.items()))

        stack: list[tuple[str, dict[str, float | None], int, int]] = []
        # iterative DFS: (node, values, depth, phase) where phase 0 = enter, 1 = leave
        first_vals = self.execute(entry, {})
        stack.append((entry, first_vals, self.weight(entry), 0))
        while stack:
            node, vals, depth, phase = stack.pop()
            k = key(node, vals)
            if phase == 1:
                on_path.discard(k)
                visited[path.pop()] -= 1
                continue
            if k in on_path:
                continue
            expansions += 1
            if expansions > MAX_EXPANSIONS:
                complete = False
                break
            on_path.add(k)
            path.append(node)
            visited[node] = visited.get(node, 0) + 1
            if node not in best or depth > best[node][0]:
                best[node] = (depth, list(path))
            stack.append((node, vals, depth, 1))
            for nxt in self.successors(node, vals, visited):
                if nxt == END:
                    if END not in best or depth > best[END][0]:
                        best[END] = (depth, [*path, END])
                    continue
                if nxt not in self.graph.succ:
                    continue
                nvals = self.execute(nxt, vals)
                if key(nxt, nvals) not in on_path:
                    stack.append((nxt, nvals, depth + self.weight(nxt), 0))
        return best, complete

    def loops(self) -> list[Loop]:
        order = [n for n in self.graph.nodes if n in self.graph.reachable()]
        index = {n: i for i, n in enumerate(order)}
        cycles: list[list[str]] = []
        for start in order:
            stack = [(start, [start])]
            while stack and len(cycles) < 60:
                node, path = stack.pop()
                for e in self.graph.succ.get(node, []):
                    nxt = e.dst
                    if nxt == start:
                        cycles.append(path)
                    elif nxt in index and index[nxt] > index[start] and nxt not in path:
                        stack.append((nxt, [*path, nxt]))
        out: list[Loop] = []
        seen: set[tuple[str, ...]] = set()
        for cyc in cycles:
            canon = tuple(cyc)
            if canon in seen:
                continue
            seen.add(canon)
            out.append(self._classify(cyc))
        out.sort(key=lambda lp: (lp.size, lp.nodes))
        return out

    def _classify(self, cyc: list[str]) -> Loop:
        # rotate so the loop starts at its first step in declaration order
        first = min(cyc, key=self.graph.nodes.index)
        i = cyc.index(first)
        cyc = cyc[i:] + cyc[:i]
        for node in cyc:
            c = self.counters.get(node)
            if c is None:
                continue
            for (owner, idx), t in self.thresholds.items():
                if t.counter != node or owner not in cyc:
                    continue
                edges = self.graph.succ[owner]
                target = next((e.dst for e in edges if e.index == idx), None)
                if target in cyc and cyc[(cyc.index(owner) + 1) % len(cyc)] == target:
                    continue  # the threshold route keeps the loop going, it does not exit it
                n = passes_until(c, t)
                if n is None:
                    continue
                ops = {"gteq": ">=", "gt": ">", "eq": "==", "lt": "<", "lteq": "<="}
                detail = (f"bounded by counter '{node}' (starts at {c.start + c.increment:g}, "
                          f"{c.increment:+g} per pass, leaves the loop when "
                          f"{node}.output {ops[t.op]} {t.limit:g}): at most {n} passes")
                return Loop(cyc, "counter", detail, n)
        gates = [n for n in cyc if isinstance(self.steps.get(n), HumanGateStep)]
        if gates:
            return Loop(cyc, "gate", f"a person decides at gate '{gates[0]}'")
        return Loop(cyc, "none", f"{self._closing(cyc)}; no bound of its own: only "
                    "max_iterations stops it")

    def _closing(self, cyc: list[str]) -> str:
        """How the loop comes back: the route from its last step to its first."""
        last, first = cyc[-1], cyc[0]
        edge = next((e for e in self.graph.succ.get(last, []) if e.dst == first), None)
        if edge is None:
            return f"back from {last}"
        if edge.kind == "when":
            return f"back from {last} when {edge.when}"
        earlier = [e.when for e in self.graph.succ[last] if e.index < edge.index and e.when]
        if earlier:
            return f"back from {last} by its default route (when not: {'; '.join(earlier)})"
        return f"back from {last} by its default route"
