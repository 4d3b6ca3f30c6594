"""Laying out a workflow's route graph for the console: layered, top to bottom, computed here.

The layout is a small Sugiyama pipeline: back edges (found by a depth-first search from the
start) are reversed, nodes are layered by longest path, long edges get dummy nodes, layers are
ordered by barycenter sweeps (keeping the ordering with the fewest crossings), and x
coordinates are pulled towards the mean of each node's neighbours. The browser only draws what
this returns: boxes at (x, y) and edge paths as SVG path data, so the page needs no layout
library and a graph looks the same in every browser and in every screenshot.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import field
from typing import TYPE_CHECKING, Any

from podium.check.graph import RouteGraph
from podium.language.model import (
    END,
    AgentStep,
    HumanGateStep,
    ScriptStep,
    TerminateStep,
    WaitStep,
    WorkflowFile,
    WorkflowStep,
)
from podium.records import record

if TYPE_CHECKING:
    from podium.events.model import Event

NODE_W = 176.0
NODE_H = 54.0
ROW_H = 20.0  # one member row inside a group box
PILL_W = 84.0
PILL_H = 28.0
GAP_X = 40.0
GAP_Y = 70.0
DUMMY_GAP = 14.0
MARGIN = 28.0
LOOP_ROOM = 56.0  # room on the right for self-loops
START = "__start__"
SWEEPS = 8
LABEL_CHAR_W = 6.4  # an 11 px monospace character, as the page draws labels
LABEL_MAX_W = 220.0
LABEL_H = 18.0


@record
class GNode:
    id: str
    label: str
    kind: str
    w: float = NODE_W
    h: float = NODE_H
    detail: dict[str, Any] = field(default_factory=dict)
    dummy: bool = False
    layer: int = 0
    x: float = 0.0  # centre
    y: float = 0.0  # top

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "label": self.label, "kind": self.kind,
                "x": round(self.x - self.w / 2, 1), "y": round(self.y, 1),
                "w": self.w, "h": self.h, "detail": self.detail}


@record
class GEdge:
    src: str
    dst: str
    kind: str  # start | when | default | option | implicit | taken
    index: int
    label: str = ""
    title: str = ""
    back: bool = False
    chain: list[str] = field(default_factory=list)
    path: str = ""
    label_at: tuple[float, float] = (0.0, 0.0)

    @property
    def label_w(self) -> float:
        return min(LABEL_MAX_W, len(self.label) * LABEL_CHAR_W + 10)

    @property
    def id(self) -> str:
        return f"{self.src}->{self.dst}#{self.index}"

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "src": self.src, "dst": self.dst, "kind": self.kind,
                "index": self.index, "label": self.label, "title": self.title,
                "back": self.back, "path": self.path,
                "label_at": [round(self.label_at[0], 1), round(self.label_at[1], 1)],
                "label_w": round(self.label_w, 1)}


# ----------------------------------------------------------------------------- building


def condition_text(when: str) -> str:
    inner = " ".join(when.split())
    if inner.startswith("{{") and inner.endswith("}}"):
        inner = inner[2:-2].strip()
    return inner


def _short(text: str, limit: int = 30) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _detail(step: Any) -> dict[str, Any]:
    d: dict[str, Any] = {}
    if getattr(step, "description", None):
        d["description"] = step.description
    if isinstance(step, AgentStep):
        if step.model and "{{" not in step.model:  # a templated model shows per execution
            d["model"] = step.model
    elif isinstance(step, HumanGateStep):
        d["options"] = [o.value for o in step.options]
    elif isinstance(step, TerminateStep):
        d["status"] = step.status
        d["reason"] = step.reason
    elif isinstance(step, ScriptStep):
        d["command"] = " ".join([step.command, *step.args])[:200]
    elif isinstance(step, WorkflowStep):
        d["workflow"] = step.workflow
    elif isinstance(step, WaitStep):
        d["duration"] = str(step.duration)
    return d


def graph_of_workflow(wf: WorkflowFile) -> tuple[list[GNode], list[GEdge]]:
    """The nodes and edges of a workflow: a start, its steps and groups (parallel members
    drawn inside their group), an end when some route reaches `$end`."""
    g = RouteGraph.build(wf)
    steps: dict[str, Any] = {}
    for s in wf.agents:
        steps.setdefault(s.name, s)
    members = {m for pg in wf.parallel for m in pg.agents}
    parallel = {pg.name: pg for pg in wf.parallel}
    for_each = {fe.name: fe for fe in wf.for_each}
    nodes = [GNode(START, "start", "start", PILL_W, PILL_H)]
    for name in g.nodes:
        if name in members and name not in parallel and name not in for_each:
            continue
        kind = g.kinds.get(name, "agent")
        node = GNode(name, name, kind, detail=_detail(steps.get(name)))
        if name in parallel:
            pg = parallel[name]
            node.detail["members"] = [{"name": m, "kind": getattr(steps.get(m), "type", "agent")}
                                      for m in pg.agents]
            node.detail["failure_mode"] = pg.failure_mode
            node.h = NODE_H + ROW_H * len(pg.agents) + 6
            node.w = NODE_W + 16
        elif name in for_each:
            fe = for_each[name]
            node.detail["members"] = [{"name": fe.agent.name, "kind": fe.agent.type}]
            node.detail["source"] = fe.source
            node.detail["as"] = fe.as_
            node.h = NODE_H + ROW_H + 6
            node.w = NODE_W + 16
        nodes.append(node)
    names = {n.id for n in nodes}
    edges = [GEdge(START, wf.workflow.entry_point, "start", 0)]
    for name in g.nodes:
        if name not in names:
            continue
        many = len(g.succ[name]) > 1
        for e in g.succ[name]:
            label = title = ""
            if e.kind == "when" and e.when:
                title = condition_text(e.when)
                label = _short(title)
            elif e.kind == "option":
                title = f"option: {e.label}"
                label = _short(str(e.label))
            elif e.kind == "default" and many:
                label = title = "otherwise"
            edges.append(GEdge(name, e.dst, e.kind, e.index, label, title))
    if any(e.dst == END for e in edges):
        nodes.append(GNode(END, "end", "end", PILL_W, PILL_H))
    names = {n.id for n in nodes}
    return nodes, [e for e in edges if e.src in names and e.dst in names]


def graph_of_events(events: list[Event]) -> tuple[list[GNode], list[GEdge]]:
    """A graph from what a run did (its typed history, app/history.py), for a run whose
    workflow file is gone or unreadable: the steps it started and the routes it took."""
    from podium.events.model import RouteTaken, RunStarted, StepStarted

    nodes = [GNode(START, "start", "start", PILL_W, PILL_H)]
    seen: dict[str, GNode] = {}
    edges: dict[tuple[str, str, int], GEdge] = {}
    entry = None
    for e in events:
        if isinstance(e, RunStarted) and entry is None:
            entry = e.entry_point
        elif isinstance(e, StepStarted) and not e.group:
            if e.step not in seen:
                seen[e.step] = GNode(e.step, e.step, e.step_type)
                nodes.append(seen[e.step])
        elif isinstance(e, RouteTaken):
            key = (e.from_step, e.to_step, e.route_index)
            title = condition_text(e.condition) if e.condition else ""
            edges.setdefault(key, GEdge(key[0], key[1], e.kind, key[2], _short(title), title))
    if entry is not None and entry in seen:
        edges[(START, entry, 0)] = GEdge(START, entry, "start", 0)
    if any(k[1] == END for k in edges):
        nodes.append(GNode(END, "end", "end", PILL_W, PILL_H))
    names = {n.id for n in nodes}
    return nodes, [e for e in edges.values() if e.src in names and e.dst in names]


# ----------------------------------------------------------------------------- layout


def layout(nodes: list[GNode], edges: list[GEdge]) -> dict[str, Any]:
    """Place `nodes` (the first is the start) and route `edges`; returns the JSON the
    page draws: {nodes, edges, width, height}."""
    if not nodes:
        return {"nodes": [], "edges": [], "width": 0, "height": 0}
    by_id = {n.id: n for n in nodes}
    _mark_back_edges(nodes, edges)
    layers = _layer(nodes, edges, by_id)
    up, down = _neighbours(layers, [e.chain for e in edges])
    _order(layers, up, down)
    _place(layers, by_id, up, down)
    _route(edges, by_id)
    _spread_labels(edges)
    real = list(nodes)
    for e in edges:
        if e.label and e.label_at[0] - e.label_w / 2 < 2:
            e.label_at = (e.label_w / 2 + 2, e.label_at[1])
    width = max([n.x + n.w / 2 for n in real]
                + [e.label_at[0] + e.label_w / 2 for e in edges if e.label]) + MARGIN
    if any(e.src == e.dst for e in edges):
        width += LOOP_ROOM
    height = max(n.y + n.h for n in real) + MARGIN
    return {"nodes": [n.to_json() for n in real], "edges": [e.to_json() for e in edges],
            "width": round(width, 1), "height": round(height, 1)}


def _mark_back_edges(nodes: list[GNode], edges: list[GEdge]) -> None:
    out: dict[str, list[GEdge]] = {n.id: [] for n in nodes}
    for e in edges:
        out[e.src].append(e)
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    for root in (n.id for n in nodes):
        if root in state:
            continue
        state[root] = 1
        stack = [(root, iter(out[root]))]
        while stack:
            node, it = stack[-1]
            for e in it:
                if e.dst == e.src:
                    continue
                s = state.get(e.dst)
                if s is None:
                    state[e.dst] = 1
                    stack.append((e.dst, iter(out[e.dst])))
                    break
                if s == 1:
                    e.back = True
            else:
                state[node] = 2
                stack.pop()


def _layer(nodes: list[GNode], edges: list[GEdge],
           by_id: dict[str, GNode]) -> list[list[str]]:
    """Longest-path layers over the acyclic graph (back edges reversed), then a chain of
    dummy nodes for every edge that spans more than one layer."""
    succ: dict[str, list[str]] = {n.id: [] for n in nodes}
    indeg = {n.id: 0 for n in nodes}
    for e in edges:
        if e.src == e.dst:
            continue
        u, v = (e.dst, e.src) if e.back else (e.src, e.dst)
        succ[u].append(v)
        indeg[v] += 1
    layer = {n.id: 0 for n in nodes}
    todo = deque(n.id for n in nodes if indeg[n.id] == 0)
    while todo:
        u = todo.popleft()
        for v in succ[u]:
            layer[v] = max(layer[v], layer[u] + 1)
            indeg[v] -= 1
            if indeg[v] == 0:
                todo.append(v)
    for n in nodes:
        n.layer = layer[n.id]
    count = max(layer.values()) + 1
    layers: list[list[str]] = [[] for _ in range(count)]
    for n in nodes:
        layers[n.layer].append(n.id)
    dummy = 0
    for e in edges:
        if e.src == e.dst:
            e.chain = [e.src, e.dst]
            continue
        u, v = (e.dst, e.src) if e.back else (e.src, e.dst)
        chain = [u]
        for lay in range(by_id[u].layer + 1, by_id[v].layer):
            dummy += 1
            d = GNode(f"__d{dummy}", "", "dummy", 0.0, 0.0, dummy=True, layer=lay)
            by_id[d.id] = d
            layers[lay].append(d.id)
            chain.append(d.id)
        chain.append(v)
        e.chain = chain
    return layers


def _neighbours(layers: list[list[str]], chains: list[list[str]]
                ) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Each node's neighbours in the layer above (`up`) and below (`down`)."""
    up: dict[str, list[str]] = {i: [] for lay in layers for i in lay}
    down: dict[str, list[str]] = {i: [] for lay in layers for i in lay}
    for chain in chains:
        for a, b in itertools.pairwise(chain):
            if a == b:
                continue
            down[a].append(b)
            up[b].append(a)
    return up, down


def _order(layers: list[list[str]], up: dict[str, list[str]],
           down: dict[str, list[str]]) -> None:
    """Barycenter sweeps, keeping the ordering with the fewest crossings."""
    best = [list(lay) for lay in layers]
    best_cross = _crossings(layers, down)
    for sweep in range(SWEEPS):
        downward = sweep % 2 == 0
        rng = range(1, len(layers)) if downward else range(len(layers) - 2, -1, -1)
        for i in rng:
            ref = layers[i - 1] if downward else layers[i + 1]
            pos = {v: k for k, v in enumerate(ref)}
            nbrs = up if downward else down
            current = {v: k for k, v in enumerate(layers[i])}

            def key(v: str, pos: dict[str, int] = pos, nbrs: dict[str, list[str]] = nbrs,
                    current: dict[str, int] = current) -> tuple[float, int]:
                ps = [pos[w] for w in nbrs[v] if w in pos]
                return (sum(ps) / len(ps) if ps else float(current[v]), current[v])

            layers[i].sort(key=key)
        cross = _crossings(layers, down)
        if cross < best_cross:
            best_cross = cross
            best = [list(lay) for lay in layers]
    layers[:] = best


def _crossings(layers: list[list[str]], down: dict[str, list[str]]) -> int:
    total = 0
    for i in range(len(layers) - 1):
        pos = {v: k for k, v in enumerate(layers[i + 1])}
        pairs = [(a, pos[b]) for a, v in enumerate(layers[i]) for b in down[v] if b in pos]
        for k, (a1, b1) in enumerate(pairs):
            for a2, b2 in pairs[k + 1:]:
                if (a1 - a2) * (b1 - b2) < 0:
                    total += 1
    return total


def _sep(a: GNode, b: GNode) -> float:
    gap = DUMMY_GAP if a.dummy or b.dummy else GAP_X
    return a.w / 2 + b.w / 2 + gap


def _place(layers: list[list[str]], by_id: dict[str, GNode], up: dict[str, list[str]],
           down: dict[str, list[str]]) -> None:
    # y: each layer as tall as its tallest node; nodes centred in it.
    top = MARGIN
    for lay in layers:
        height = max((by_id[i].h for i in lay), default=0.0) or PILL_H
        for i in lay:
            n = by_id[i]
            n.y = top + (height - n.h) / 2
            if n.dummy:
                n.y = top
                n.h = height
        top += height + GAP_Y
    # x: packed, then pulled towards the neighbours' mean, keeping the separation.
    for lay in layers:
        x = 0.0
        prev: GNode | None = None
        for i in lay:
            n = by_id[i]
            x = x + (_sep(prev, n) if prev else n.w / 2)
            n.x = x
            prev = n
    widest = max(layers, key=lambda lay: by_id[lay[-1]].x if lay else 0.0)
    span = by_id[widest[-1]].x if widest else 0.0
    for lay in layers:
        if lay:
            shift = (span - by_id[lay[-1]].x) / 2
            for i in lay:
                by_id[i].x += shift
    for sweep in range(SWEEPS):
        downward = sweep % 2 == 0
        order = layers[1:] if downward else layers[-2::-1]
        nbrs = up if downward else down
        for lay in order:
            desired = []
            for i in lay:
                xs = [by_id[w].x for w in nbrs[i]]
                desired.append(sum(xs) / len(xs) if xs else by_id[i].x)
            _fit(lay, desired, by_id)
    low = min(by_id[i].x - by_id[i].w / 2 for lay in layers for i in lay)
    for lay in layers:
        for i in lay:
            by_id[i].x += MARGIN - low


def _fit(lay: list[str], desired: list[float], by_id: dict[str, GNode]) -> None:
    """Put the nodes of a layer as near their desired x as their order and separation allow."""
    xs = list(desired)
    for k in range(1, len(xs)):
        xs[k] = max(xs[k], xs[k - 1] + _sep(by_id[lay[k - 1]], by_id[lay[k]]))
    shift = sum(d - x for d, x in zip(desired, xs, strict=True)) / len(xs)
    xs = [x + shift for x in xs]
    for k in range(1, len(xs)):
        xs[k] = max(xs[k], xs[k - 1] + _sep(by_id[lay[k - 1]], by_id[lay[k]]))
    for i, x in zip(lay, xs, strict=True):
        by_id[i].x = x


def _route(edges: list[GEdge], by_id: dict[str, GNode]) -> None:
    """SVG path data for each edge: vertical S-curves through its dummies; ports spread along
    the bottom and top of each box, ordered by where the other end is."""
    bottom: dict[str, list[tuple[float, int, GEdge]]] = {}
    topside: dict[str, list[tuple[float, int, GEdge]]] = {}
    for k, e in enumerate(edges):
        if e.src == e.dst:
            continue
        c = e.chain
        bottom.setdefault(c[0], []).append((by_id[c[1]].x, k, e))
        topside.setdefault(c[-1], []).append((by_id[c[-2]].x, k, e))
    port_out: dict[int, float] = {}
    port_in: dict[int, float] = {}
    for node_id, items in bottom.items():
        n = by_id[node_id]
        items.sort(key=lambda t: (t[0], t[1]))
        for j, (_, _, e) in enumerate(items):
            port_out[id(e)] = n.x - n.w / 2 + n.w * (j + 1) / (len(items) + 1)
    for node_id, items in topside.items():
        n = by_id[node_id]
        items.sort(key=lambda t: (t[0], t[1]))
        for j, (_, _, e) in enumerate(items):
            port_in[id(e)] = n.x - n.w / 2 + n.w * (j + 1) / (len(items) + 1)
    for e in edges:
        if e.src == e.dst:
            n = by_id[e.src]
            right = n.x + n.w / 2
            cy = n.y + n.h / 2
            e.path = (f"M{right:.1f},{cy - 9:.1f} C{right + 44:.1f},{cy - 30:.1f} "
                      f"{right + 44:.1f},{cy + 30:.1f} {right + 2:.1f},{cy + 9:.1f}")
            e.label_at = (right + 40, cy)
            continue
        c = e.chain
        first, last = by_id[c[0]], by_id[c[-1]]
        pts: list[tuple[float, float]] = [(port_out[id(e)], first.y + first.h)]
        for d in c[1:-1]:
            dn = by_id[d]
            pts += [(dn.x, dn.y), (dn.x, dn.y + dn.h)]
        pts.append((port_in[id(e)], last.y))
        if e.back:
            pts.reverse()
        e.path = _curve(pts)
        if len(c) > 2:
            mid = by_id[c[len(c) // 2]]
            e.label_at = (mid.x, mid.y + mid.h / 2)
        else:
            (x0, y0), (x1, y1) = pts[0], pts[-1]
            e.label_at = ((x0 + x1) / 2, (y0 + y1) / 2)


def _curve(pts: list[tuple[float, float]]) -> str:
    x0, y0 = pts[0]
    out = [f"M{x0:.1f},{y0:.1f}"]
    for (ax, ay), (bx, by) in itertools.pairwise(pts):
        if ax == bx:
            out.append(f"L{bx:.1f},{by:.1f}")
            continue
        my = (ay + by) / 2
        out.append(f"C{ax:.1f},{my:.1f} {bx:.1f},{my:.1f} {bx:.1f},{by:.1f}")
    return " ".join(out)


def _spread_labels(edges: list[GEdge]) -> None:
    """Push overlapping edge labels apart sideways (labels of routes that leave one step
    side by side would otherwise cover each other)."""
    labelled = [e for e in edges if e.label and e.src != e.dst]
    for _ in range(30):
        moved = False
        for i, a in enumerate(labelled):
            for b in labelled[i + 1:]:
                (ax, ay), (bx, by) = a.label_at, b.label_at
                need = (a.label_w + b.label_w) / 2 + 6
                if abs(ay - by) >= LABEL_H + 2 or abs(ax - bx) >= need:
                    continue
                push = (need - abs(ax - bx)) / 2 + 0.5
                if ax < bx or (ax == bx and a.index < b.index):
                    push = -push
                a.label_at = (ax + push, ay)
                b.label_at = (bx - push, by)
                moved = True
        if not moved:
            break
