"""Step budgets before a run: shortest and longest paths to each outcome, loops and what bounds
them, the margin `max_iterations` leaves, and a cost forecast per outcome.

Loops are bounded by counters found in the workflow itself: a `set` step whose value adds a
constant to its own previous output, and a route condition comparing that output with a
constant. The longest paths are found by a search over (step, counter values), where a path
may come back to a step only when a counter moved, so only counter-bounded loops are unrolled;
loops with no bound of their own are reported as such.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jinja2 import nodes

from podium.check.graph import RouteGraph
from podium.language.load import LoadResult
from podium.language.model import (
    END,
    AgentStep,
    HumanGateStep,
    ParallelGroup,
    Route,
    SetStep,
    TerminateStep,
    WorkflowFile,
    WorkflowStep,
)
from podium.templating import RenderFailure, TemplateEngine, is_jinja_condition

MAX_EXPANSIONS = 300_000
DEFAULT_INPUT_TOKENS = 4000
DEFAULT_OUTPUT_TOKENS = 1000


@dataclass(frozen=True)
class Counter:
    """A set step that counts: value = (previous or start) + step."""

    step: str
    start: float
    increment: float


@dataclass(frozen=True)
class Threshold:
    """A route condition `counter <op> limit` (op is one of >=, >, ==)."""

    counter: str
    op: str
    limit: float

    def holds(self, value: float | None) -> bool:
        if value is None:
            return False
        if self.op == "gteq":
            return value >= self.limit
        if self.op == "gt":
            return value > self.limit
        if self.op == "eq":
            return value == self.limit
        if self.op == "lt":
            return value < self.limit
        if self.op == "lteq":
            return value <= self.limit
        return False


@dataclass
class Loop:
    nodes: list[str]
    bound: str  # counter | gate | none
    detail: str
    passes: int | None = None

    @property
    def size(self) -> int:
        return len(self.nodes)


@dataclass
class Reach:
    """Earliest and latest step number at which a node is reached."""

    node: str
    kind: str
    status: str | None
    shortest: int | None
    longest: int | None
    shortest_path: list[str] = field(default_factory=list)
    longest_path: list[str] = field(default_factory=list)


@dataclass
class BudgetReport:
    max_iterations: int
    outcomes: list[Reach]
    gates: list[Reach]
    loops: list[Loop]
    counters: list[Counter]
    complete: bool
    warnings: list[str]
    cost: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        def reach(r: Reach) -> dict[str, Any]:
            return {"node": r.node, "kind": r.kind, "status": r.status,
                    "shortest": r.shortest, "longest": r.longest,
                    "shortest_path": r.shortest_path, "longest_path": r.longest_path}

        happy = min((r for r in self.outcomes if r.status == "success" and r.shortest),
                    key=lambda r: r.shortest or 0, default=None)
        return {
            "max_iterations": self.max_iterations,
            "happy_path": reach(happy) if happy else None,
            "outcomes": [reach(r) for r in self.outcomes],
            "gates": [reach(r) for r in self.gates],
            "loops": [{"nodes": lp.nodes, "steps": lp.size, "bound": lp.bound,
                       "detail": lp.detail, "passes": lp.passes} for lp in self.loops],
            "counters": [{"step": c.step, "start": c.start, "increment": c.increment}
                         for c in self.counters],
            "longest_paths_complete": self.complete,
            "warnings": self.warnings,
            "cost": self.cost,
        }


# --------------------------------------------------------------------------- counters


def _ref_chain(node: nodes.Node) -> tuple[str, ...] | None:
    parts: list[str] = []
    cur = node
    while isinstance(cur, (nodes.Getattr, nodes.Getitem)):
        if isinstance(cur, nodes.Getattr):
            parts.append(cur.attr)
        elif isinstance(cur.arg, nodes.Const) and isinstance(cur.arg.value, str):
            parts.append(cur.arg.value)
        else:
            return None
        cur = cur.node
    if isinstance(cur, nodes.Name):
        return (cur.name, *reversed(parts))
    return None


def _is_self(node: nodes.Node, step: str) -> bool:
    chain = _ref_chain(node)
    return chain in ((step, "output"),)


def _number(node: nodes.Node) -> float | None:
    if isinstance(node, nodes.Const) and isinstance(node.value, (int, float)) \
            and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, nodes.Neg):
        inner = _number(node.node)
        return -inner if inner is not None else None
    return None


def _previous_or_start(node: nodes.Node, step: str) -> float | None:
    """`S.output` guarded with a start value: returns the start, or None if not that shape."""
    if isinstance(node, nodes.CondExpr) and node.expr2 is not None:
        if _is_self(node.expr1, step):
            return _number(node.expr2)
        if _is_self(node.expr2, step):
            return _number(node.expr1)
    if isinstance(node, nodes.Or) and _is_self(node.left, step):
        return _number(node.right)
    if isinstance(node, nodes.Filter) and node.name in ("default", "d") and node.node is not None \
            and _is_self(node.node, step) and node.args:
        return _number(node.args[0])
    if isinstance(node, nodes.Filter) and node.name in ("int", "float") and node.node is not None:
        return _previous_or_start(node.node, step)
    return None


def find_counter(step: SetStep, engine: TemplateEngine) -> Counter | None:
    if not isinstance(step.value, str) or step.values is not None:
        return None
    try:
        tree = engine.parse(step.value)
    except RenderFailure:
        return None
    outputs = [n for n in tree.body if isinstance(n, nodes.Output)]
    if len(outputs) != 1:
        return None
    exprs = [n for n in outputs[0].nodes if not isinstance(n, nodes.TemplateData)
             or n.data.strip()]
    if len(exprs) != 1 or not isinstance(exprs[0], (nodes.Add, nodes.Sub)):
        return None
    expr = exprs[0]
    # `previous + c` or `c + previous`; for subtraction only `previous - c`
    shapes = ([(expr.left, expr.right, -1.0)] if isinstance(expr, nodes.Sub)
              else [(expr.left, expr.right, 1.0), (expr.right, expr.left, 1.0)])
    for prev, const, sign in shapes:
        inc = _number(const)
        start = _previous_or_start(prev, step.name)
        if inc is not None and start is not None and inc != 0:
            return Counter(step.name, start, sign * inc)
    return None


_OPS = {"gteq": "lteq", "gt": "lt", "eq": "eq", "lt": "gt", "lteq": "gteq"}


def find_threshold(route: Route, owner: str, counters: dict[str, Counter],
                   engine: TemplateEngine) -> Threshold | None:
    """`{{ c.output >= 3 }}` (or the bare `c_output >= 3`, or `output >= 3` on c's own routes)."""
    if route.when is None:
        return None
    try:
        if is_jinja_condition(route.when):
            tree = engine.parse(route.when)
            outs = [n for n in tree.body if isinstance(n, nodes.Output)]
            exprs = [n for o in outs for n in o.nodes
                     if not (isinstance(n, nodes.TemplateData) and not n.data.strip())]
            if len(exprs) != 1:
                return None
            expr: nodes.Node = exprs[0]
        else:
            expr = engine.parse_expression(route.when)
    except RenderFailure:
        return None
    if not isinstance(expr, nodes.Compare) or len(expr.ops) != 1:
        return None
    left, op = expr.expr, expr.ops[0]
    for subject, other, operator in ((left, op.expr, op.op), (op.expr, left, _OPS.get(op.op))):
        if operator is None:
            continue
        name = _counter_name(subject, owner, counters)
        limit = _number(other)
        if name is not None and limit is not None and operator in _OPS:
            return Threshold(name, operator, limit)
    return None


def _counter_name(node: nodes.Node, owner: str, counters: dict[str, Counter]) -> str | None:
    chain = _ref_chain(node)
    if chain and len(chain) == 2 and chain[1] == "output" and chain[0] in counters:
        return chain[0]
    if isinstance(node, nodes.Name):
        if node.name == "output" and owner in counters:
            return owner
        if node.name.endswith("_output") and node.name[: -len("_output")] in counters:
            return node.name[: -len("_output")]
    return None


def passes_until(counter: Counter, threshold: Threshold) -> int | None:
    """How many executions of the counter until `threshold` holds (None if never)."""
    value = counter.start
    for n in range(1, 10_001):
        value += counter.increment
        if threshold.holds(value):
            return n
    return None


# --------------------------------------------------------------------------- analysis


class _Analysis:
    def __init__(self, wf: WorkflowFile) -> None:
        self.wf = wf
        self.engine = TemplateEngine()
        self.graph = RouteGraph.build(wf)
        self.steps = {s.name: s for s in reversed(wf.agents)}
        self.groups: dict[str, ParallelGroup] = {g.name: g for g in wf.parallel}
        self.children: dict[str, dict[str, Any]] = {}  # sub-workflow steps: their cost
        self.counters: dict[str, Counter] = {}
        for s in wf.agents:
            if isinstance(s, SetStep):
                c = find_counter(s, self.engine)
                if c is not None:
                    self.counters[s.name] = c
        self.thresholds: dict[tuple[str, int], Threshold] = {}
        for name in self.graph.succ:
            step = self.steps.get(name)
            routes = step.routes if step is not None else (
                self.groups[name].routes if name in self.groups else [])
            for i, r in enumerate(routes):
                t = find_threshold(r, name, self.counters, self.engine)
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


def analyse_budget(result: LoadResult, _seen: frozenset[Path] = frozenset()) -> BudgetReport:
    """`_seen`: the sub-workflow files above this one (a cycle is not followed)."""
    wf = result.model
    assert wf is not None
    a = _Analysis(wf)
    a.children = _subworkflow_costs(result, _seen | {result.path.resolve()})
    short = a.shortest()
    long_, complete = a.longest()
    loops = a.loops()
    outcomes: list[Reach] = []
    gates: list[Reach] = []
    for name in a.graph.nodes:
        if name not in a.graph.reachable():
            continue
        step = a.steps.get(name)
        s = short.get(name)
        lg = long_.get(name)
        r = Reach(name, step.type if step else a.graph.kinds.get(name, "?"),
                  step.status if isinstance(step, TerminateStep) else None,
                  s[0] if s else None, lg[0] if lg else None,
                  s[1] if s else [], lg[1] if lg else [])
        if isinstance(step, TerminateStep):
            outcomes.append(r)
        elif isinstance(step, HumanGateStep):
            gates.append(r)
    if END in short:
        lg = long_.get(END)
        outcomes.append(Reach(END, "end", "success", short[END][0], lg[0] if lg else None,
                              short[END][1], lg[1] if lg else []))
    limit = wf.workflow.limits.max_iterations
    warnings = _limit_warnings(limit, outcomes, loops, complete)
    report = BudgetReport(limit, outcomes, gates, loops, list(a.counters.values()), complete,
                          warnings, {})
    report.cost = _forecast(a, report)
    budget = wf.workflow.limits.budget_usd
    worst = report.cost.get("worst_usd")
    if budget is not None and isinstance(worst, float) and worst > budget:
        report.warnings.append(f"budget_usd {budget:.2f} may stop the longest modelled path "
                               f"(estimated up to ${worst:.2f})")
    return report


def _limit_warnings(limit: int, outcomes: list[Reach], loops: list[Loop],
                    complete: bool) -> list[str]:
    out: list[str] = []
    for r in outcomes:
        if r.shortest is not None and r.shortest > limit:
            out.append(f"max_iterations {limit} cuts off outcome '{r.node}': it needs at least "
                       f"{r.shortest} steps")
        elif r.longest is not None and r.longest > limit:
            out.append(f"max_iterations {limit} can cut off outcome '{r.node}': its longest "
                       f"modelled path is {r.longest} steps")
    longest = max((r.longest or r.shortest or 0 for r in outcomes), default=0)
    retry = min((lp.size for lp in loops if lp.bound != "counter"), default=None)
    if complete and retry is not None and longest <= limit and limit - longest < retry:
        out.append(f"max_iterations {limit} leaves {limit - longest} step(s) after the longest "
                   f"modelled path ({longest}): no room for one more pass of a "
                   f"{retry}-step loop")
    return out


def _models_of(a: _Analysis, step: AgentStep) -> list[str]:
    model = step.model or a.wf.workflow.runtime.default_model
    if model is None:
        return []
    if "{{" not in model and "{%" not in model:
        return [model]
    try:
        tree = a.engine.parse(model)
    except RenderFailure:
        return []
    found: set[str] = set()

    def results(node: nodes.Node) -> None:
        # only values the template can print: literal strings, or either branch of an `if`
        if isinstance(node, nodes.Const) and isinstance(node.value, str) and node.value.strip():
            found.add(node.value.strip())
        elif isinstance(node, nodes.CondExpr):
            results(node.expr1)
            if node.expr2 is not None:
                results(node.expr2)

    for out in tree.find_all(nodes.Output):
        for n in out.nodes:
            results(n)
    return sorted(found)


def _forecast(a: _Analysis, report: BudgetReport) -> dict[str, Any]:
    from podium.providers.pricing import cost_usd, find_price

    cost_cfg = a.wf.workflow.cost
    tokens_in = cost_cfg.tokens_per_call or DEFAULT_INPUT_TOKENS
    tokens_out = max(1, tokens_in // 4) if cost_cfg.tokens_per_call else DEFAULT_OUTPUT_TOKENS
    per_step: dict[str, tuple[float, float]] = {}
    unpriced: set[str] = set()

    def call_range(models: list[str]) -> tuple[float, float] | None:
        costs = []
        for m in models:
            c = cost_usd(find_price(m, cost_cfg.pricing), tokens_in, tokens_out)
            if c is None:
                unpriced.add(m)
            else:
                costs.append(c)
        if costs:
            return min(costs), max(costs)
        return (0.0, 0.0) if models else None

    per_exec: dict[str, dict[str, Any]] = {}
    for s in a.wf.agents:
        if not isinstance(s, AgentStep):
            continue
        one = call_range(_models_of(a, s))
        if one is not None:
            per_step[s.name] = one
        checks = _checked_execution(s, one, call_range)
        if checks is not None:
            per_exec[s.name] = checks

    for name, child in a.children.items():  # a sub-workflow costs what its runs cost
        per_exec[name] = child
        unpriced.update(child.get("unpriced_models", []))

    def path_cost(path: list[str], pick: int) -> float:
        key = ("min_usd", "max_usd")[pick]
        return sum(per_exec[n][key] if n in per_exec else per_step[n][pick]
                   for n in path if n in per_step or n in per_exec)

    outcomes = {}
    for r in report.outcomes:
        lo = path_cost(r.shortest_path, 0) if r.shortest_path else None
        hi = path_cost(r.longest_path or r.shortest_path, 1) if r.shortest_path else None
        outcomes[r.node] = {"min_usd": round(lo, 4) if lo is not None else None,
                            "max_usd": round(hi, 4) if hi is not None else None}
    worst = max((v["max_usd"] for v in outcomes.values() if v["max_usd"] is not None),
                default=None)
    most = max([hi for _, hi in per_step.values()]
               + [float(v["max_usd"]) for v in per_exec.values()], default=0.0)
    return {"tokens_per_call": {"input": tokens_in, "output": tokens_out,
                                "source": "cost.tokens_per_call" if cost_cfg.tokens_per_call
                                else "podium default"},
            "per_call_usd": {k: {"min": round(v[0], 4), "max": round(v[1], 4)}
                             for k, v in per_step.items()},
            "per_execution": {k: {**v, "min_usd": round(v["min_usd"], 4),
                                  "max_usd": round(v["max_usd"], 4)}
                              for k, v in per_exec.items()},
            "outcomes": outcomes, "worst_usd": worst,
            "ceiling_usd": round(most * report.max_iterations, 4),
            "unpriced_models": sorted(unpriced),
            "budget_usd": a.wf.workflow.limits.budget_usd}


def _subworkflow_costs(result: LoadResult, seen: frozenset[Path]) -> dict[str, dict[str, Any]]:
    """What one execution of each `type: workflow` step costs: the cheapest and the dearest
    outcome of its file's own forecast (its agents, and its sub-workflows', recursively)."""
    from podium.check.semantic import resolve_subworkflow
    from podium.check.validate import validate_file
    from podium.language.source import FileUnreadable

    wf = result.model
    assert wf is not None
    out: dict[str, dict[str, Any]] = {}
    for step in wf.agents:
        if not isinstance(step, WorkflowStep):
            continue
        path = resolve_subworkflow(result.path.parent, step.workflow)
        if path is None or path.resolve() in seen or len(seen) > 10:
            continue
        try:
            child = validate_file(path)
        except FileUnreadable:
            continue
        if child.model is None or child.sink.errors:
            continue
        cost = analyse_budget(child, seen).cost
        ranges = [v for v in cost.get("outcomes", {}).values() if v.get("min_usd") is not None]
        if not ranges:
            continue
        lo = min(float(v["min_usd"]) for v in ranges)
        hi = max(float(v["max_usd"]) for v in ranges if v.get("max_usd") is not None)
        out[step.name] = {"kind": "sub-workflow", "workflow": step.workflow,
                          "calls_min": 0, "calls_max": 0, "min_usd": lo, "max_usd": hi,
                          "extra": [f"sub-workflow {step.workflow}, its cheapest to its "
                                    "dearest outcome"],
                          "unpriced_models": cost.get("unpriced_models", [])}
    return out


def _checked_execution(step: AgentStep, one: tuple[float, float] | None,
                       call_range: Any) -> dict[str, Any] | None:
    """The model calls (and their cost) of one execution of an agent with a `validator:` or
    a `dialog:`: the validator adds its verdict and, on a fail, one re-run (and a second
    verdict under on_error: fail); the dialog adds its evaluator and, after a conversation,
    a re-execution (the conversation's own replies depend on the person: not counted)."""
    if step.validator is None and step.dialog is None:
        return None
    own = one or (0.0, 0.0)
    lo, hi = own
    calls_min = calls_max = 1
    extra: list[str] = []
    if step.dialog is not None:
        lo, hi = lo + own[0], hi + own[1] + own[1]
        calls_min, calls_max = calls_min + 1, calls_max + 2
        extra.append("dialog: +1 evaluator call, +1 re-execution after a conversation (plus "
                     "one reply per turn of the person)")
    v = step.validator
    if v is not None:
        verdict = (call_range([v.model]) if v.model else one) or (0.0, 0.0)
        lo, hi = lo + verdict[0], hi + verdict[1]
        calls_min, calls_max = calls_min + 1, calls_max + 1
        what = "validator: +1 verdict"
        if v.max_retries:
            hi += own[1]
            calls_max += 1
            what += ", +1 re-run on a failed verdict"
            if v.on_error == "fail":
                hi += verdict[1]
                calls_max += 1
                what += ", +1 verdict of the re-run (on_error: fail)"
        extra.append(what)
    return {"calls_min": calls_min, "calls_max": calls_max, "min_usd": lo, "max_usd": hi,
            "extra": extra}


# --------------------------------------------------------------------------- text


def format_budget(data: dict[str, Any]) -> str:
    lines = [f"step budget (max_iterations {data['max_iterations']}):"]
    happy = data.get("happy_path")
    if happy:
        lines.append(f"  happy path: {happy['shortest']} steps to '{happy['node']}': "
                     + " → ".join(happy["shortest_path"]))
    lines.append("  outcomes (steps, the terminal step included):")
    width = max((len(o["node"]) + len(o["status"] or "") for o in data["outcomes"]), default=10)
    for o in data["outcomes"]:
        label = f"{o['node']} ({o['status']})"
        longest = o["longest"]
        extra = ""
        if o["shortest_path"] and len(o["shortest_path"]) >= 2 and o["node"] != END:
            before = o["shortest_path"][-2]
            extra = f" · ends 1 step after {before}"
        lng = f"longest {longest}" if longest is not None else "longest ?"
        lines.append(f"    {label.ljust(width + 3)} shortest {o['shortest']:>3} · {lng}{extra}")
    if data["gates"]:
        lines.append("  gates (step number at which each is reached):")
        for g in data["gates"]:
            lines.append(f"    {g['node']}: at step {g['shortest']} at the earliest, "
                         f"{g['longest']} at the latest (counter-bounded loops only)")
    if data["loops"]:
        lines.append("  loops (steps each pass adds):")
        for lp in data["loops"]:
            cycle = " → ".join([*lp["nodes"], lp["nodes"][0]])
            lines.append(f"    +{lp['steps']}  {cycle}")
            lines.append(f"        {lp['detail']}")
    if not data["longest_paths_complete"]:
        lines.append("  longest paths: not fully computed (too many paths); figures are lower "
                     "bounds")
    longest = max((o["longest"] or o["shortest"] or 0 for o in data["outcomes"]), default=0)
    margin = data["max_iterations"] - longest
    lines.append(f"  margin: the longest modelled path is {longest} steps; max_iterations "
                 f"{data['max_iterations']} leaves {margin}")
    unbounded = [lp for lp in data["loops"] if lp["bound"] != "counter"]
    for lp in unbounded:
        if margin > 0:
            lines.append(f"    room for {margin // lp['steps']} more pass(es) of the "
                         f"+{lp['steps']} loop at {lp['nodes'][0]}")
    cost = data["cost"]
    if cost.get("per_call_usd"):
        tok = cost["tokens_per_call"]
        lines.append(f"  cost forecast ({tok['input']} input + {tok['output']} output tokens per "
                     f"agent call, {tok['source']}):")
        for name, o in cost["outcomes"].items():
            if o["min_usd"] is not None:
                lines.append(f"    {name}: ${o['min_usd']:.4f} - ${o['max_usd']:.4f}")
        for name, x in cost.get("per_execution", {}).items():
            if x.get("kind") == "sub-workflow":
                lines.append(f"    {name}: ${x['min_usd']:.4f} - ${x['max_usd']:.4f} per "
                             f"execution ({'; '.join(x['extra'])})")
                continue
            lines.append(f"    {name}: {x['calls_min']}-{x['calls_max']} model calls per "
                         f"execution, ${x['min_usd']:.4f} - ${x['max_usd']:.4f} "
                         f"({'; '.join(x['extra'])})")
        lines.append(f"    ceiling at max_iterations: ${cost['ceiling_usd']:.4f}")
        if cost.get("budget_usd") is not None:
            lines.append(f"    budget_usd: ${cost['budget_usd']:.2f}")
        if cost["unpriced_models"]:
            lines.append(f"    unpriced (partial): {', '.join(cost['unpriced_models'])}")
    for w in data["warnings"]:
        lines.append(f"  warning: {w}")
    return "\n".join(lines) + "\n"
