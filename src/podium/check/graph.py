"""The route graph of a workflow: nodes, edges, reachability, dominators and example paths."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import field
from typing import Literal

from podium.language.model import END, HumanGateStep, Route, TerminateStep, WorkflowFile
from podium.records import record

EdgeKind = Literal["when", "default", "option", "implicit"]


@record(frozen=True)
class Edge:
    """One way to leave a node: a route (conditional or default), a gate option, or the
    implicit `$end` of a node without routes."""

    src: str
    dst: str
    kind: EdgeKind
    index: int
    when: str | None = None
    label: str | None = None


@record
class RouteGraph:
    entry: str
    nodes: list[str]
    succ: dict[str, list[Edge]]
    terminates: dict[str, TerminateStep]
    kinds: dict[str, str]
    _idom: dict[str, str] = field(default_factory=dict)
    _pre: dict[str, int] = field(default_factory=dict)
    _post: dict[str, int] = field(default_factory=dict)
    _reach: set[str] | None = None

    @classmethod
    def build(cls, wf: WorkflowFile) -> RouteGraph:
        succ: dict[str, list[Edge]] = {}
        kinds: dict[str, str] = {}
        terminates: dict[str, TerminateStep] = {}
        nodes: list[str] = []
        members = {m for g in wf.parallel for m in g.agents}
        for step in wf.agents:
            if step.name in succ:
                continue  # duplicate names are reported elsewhere; the first one wins
            nodes.append(step.name)
            kinds[step.name] = step.type
            edges: list[Edge] = []
            if isinstance(step, TerminateStep):
                terminates[step.name] = step
            elif isinstance(step, HumanGateStep):
                edges = [Edge(step.name, o.route, "option", i, label=o.value)
                         for i, o in enumerate(step.options)]
            elif step.name not in members:
                edges = _route_edges(step.name, step.routes)
            succ[step.name] = edges
        for pg in wf.parallel:
            if pg.name not in succ:
                nodes.append(pg.name)
                kinds[pg.name] = "parallel"
                succ[pg.name] = _route_edges(pg.name, pg.routes)
        for fe in wf.for_each:
            if fe.name not in succ:
                nodes.append(fe.name)
                kinds[fe.name] = "for_each"
                succ[fe.name] = _route_edges(fe.name, fe.routes)
        succ.setdefault(END, [])
        return cls(wf.workflow.entry_point, nodes, succ, terminates, kinds)

    def reachable(self) -> set[str]:
        if self._reach is None:
            seen: set[str] = set()
            if self.entry in self.succ:
                todo = [self.entry]
                seen.add(self.entry)
                while todo:
                    n = todo.pop()
                    for e in self.succ.get(n, []):
                        if e.dst in self.succ and e.dst not in seen:
                            seen.add(e.dst)
                            todo.append(e.dst)
            self._reach = seen
        return self._reach

    def _compute_dominators(self) -> None:
        if self._idom or self.entry not in self.succ:
            return
        post: list[str] = []
        seen = {self.entry}
        stack = [(self.entry, iter(self.succ[self.entry]))]
        while stack:
            node, it = stack[-1]
            for e in it:
                if e.dst in self.succ and e.dst not in seen:
                    seen.add(e.dst)
                    stack.append((e.dst, iter(self.succ[e.dst])))
                    break
            else:
                stack.pop()
                post.append(node)
        rpo = post[::-1]
        index = {n: i for i, n in enumerate(rpo)}
        preds: dict[str, dict[str, None]] = {n: {} for n in rpo}  # ordered sets
        for n in rpo:
            for e in self.succ[n]:
                if e.dst in preds:
                    preds[e.dst][n] = None
        idom = {self.entry: self.entry}

        def intersect(a: str, b: str) -> str:
            while a != b:
                while index[a] > index[b]:
                    a = idom[a]
                while index[b] > index[a]:
                    b = idom[b]
            return a

        changed = True
        while changed:
            changed = False
            for n in rpo[1:]:
                # deepest predecessor first: the running intersection then only climbs, so a
                # node with many predecessors along a chain (every step's failure route to
                # one terminal) costs the chain's length once, not once per predecessor
                ps = sorted((p for p in preds[n] if p in idom), key=index.__getitem__,
                            reverse=True)
                if not ps:
                    continue
                new = ps[0]
                for p in ps[1:]:
                    new = intersect(p, new)
                if idom.get(n) != new:
                    idom[n] = new
                    changed = True
        self._idom = idom
        children: dict[str, list[str]] = {n: [] for n in idom}
        for n, d in idom.items():
            if n != d:
                children[d].append(n)
        counter = 0
        walk = [(self.entry, False)]
        while walk:
            n, done = walk.pop()
            if done:
                self._post[n] = counter
                counter += 1
                continue
            self._pre[n] = counter
            counter += 1
            walk.append((n, True))
            walk.extend((c, False) for c in children[n])

    def dominates(self, x: str, s: str) -> bool:
        """Whether every path from the entry point to `s` passes through `x`."""
        self._compute_dominators()
        if x not in self._pre or s not in self._pre:
            return False
        return self._pre[x] <= self._pre[s] and self._post[s] <= self._post[x]

    def path_avoiding(self, avoid: str, target: str) -> list[str] | None:
        """A shortest path from the entry to `target` that never passes `avoid`."""
        if avoid in (self.entry, target):
            return None
        return self._bfs(self.entry, target, frozenset({avoid}))

    def _bfs(self, start: str, target: str, avoid: frozenset[str]) -> list[str] | None:
        """A shortest path from `start` to `target` through no node of `avoid` (`target`
        itself may be in it: the path only arrives there)."""
        if start in avoid and start != target:
            return None
        parent: dict[str, str | None] = {start: None}
        todo = deque([start])
        while todo:
            n = todo.popleft()
            if n == target:
                path = [n]
                while parent[path[-1]] is not None:
                    p = parent[path[-1]]
                    assert p is not None
                    path.append(p)
                return path[::-1]
            for e in self.succ.get(n, []):
                d = e.dst
                if d in self.succ and d not in parent and (d == target or d not in avoid):
                    parent[d] = n
                    todo.append(d)
        return None

    def path_under(self, target: str, avoid: frozenset[str], through: frozenset[str]
                   ) -> list[str] | None:
        """A path from the entry to `target` that passes no node of `avoid` (before arriving)
        and passes each node of `through` (each checked on its own: entry → p → target), or
        None when there is none. What `{% if x is defined %}` branches know about a run."""
        firsts: list[str] | None = None
        for p in sorted(through - {target}):
            head = self._bfs(self.entry, p, avoid)
            tail = self._bfs(p, target, avoid) if head is not None else None
            if head is None or tail is None:
                return None
            if firsts is None:
                firsts = head + tail[1:]
        return firsts if firsts is not None else self._bfs(self.entry, target, avoid)

    def trapped(self) -> list[str]:
        """Reachable nodes from which no path leads to a terminate step or `$end` (a route to
        a name the graph does not know counts as a way out: that error is reported apart),
        first the ones a run enters the trap by: the entry point or a node some node outside
        the trap routes to."""
        preds: dict[str, list[str]] = {}
        for src, edges in self.succ.items():
            for e in edges:
                preds.setdefault(e.dst, []).append(src)
        ends = [END, *self.terminates,
                *{e.dst for edges in self.succ.values() for e in edges if e.dst not in self.succ}]
        free, todo = set(ends), list(ends)
        while todo:
            for p in preds.get(todo.pop(), []):
                if p not in free:
                    free.add(p)
                    todo.append(p)
        stuck = [n for n in self.nodes if n in self.reachable() and n not in free]
        return [n for n in stuck if n == self.entry or any(
            p in self.reachable() and p in free for p in preds.get(n, []))]

    def end_points(self) -> list[str]:
        """Reachable nodes that can end the run with the workflow's `output:`."""
        out = []
        for n in self.nodes:
            if n not in self.reachable():
                continue
            if n in self.terminates or any(e.dst == END for e in self.succ[n]):
                out.append(n)
        return out


def _route_edges(name: str, routes: Sequence[Route]) -> list[Edge]:
    edges: list[Edge] = []
    for i, r in enumerate(routes):
        edges.append(Edge(name, r.to, "when" if r.when is not None else "default", i, r.when))
    if not routes:
        edges.append(Edge(name, END, "implicit", -1))
    return edges
