"""Loops bounded by the workflow itself, read from its templates: a counter is a `set` step
whose value adds a constant to its own previous output, and a threshold is a route condition
comparing that output with a constant. From the two follows how many passes a loop can make.

This is pure analysis of Jinja syntax trees; the path search that uses it is in check/reach.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from podium.language.model import Route, SetStep
from podium.records import record
from podium.templating import RenderFailure, is_jinja_condition
from podium.templating.trees import TemplateParser

if TYPE_CHECKING:
    from jinja2 import nodes
else:  # the trees are lightparse.py's or Jinja's: kinds.py names their nodes in both
    from podium.templating import kinds as nodes


@record(frozen=True)
class Counter:
    """A set step that counts: value = (previous or start) + step."""

    step: str
    start: float
    increment: float


@record(frozen=True)
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


@record
class Loop:
    nodes: list[str]
    bound: str  # counter | gate | none
    detail: str
    passes: int | None = None

    @property
    def size(self) -> int:
        return len(self.nodes)


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


def find_counter(step: SetStep, parser: TemplateParser) -> Counter | None:
    if not isinstance(step.value, str) or step.values is not None:
        return None
    try:
        tree = parser.parse(step.value)
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
                   parser: TemplateParser) -> Threshold | None:
    """`{{ c.output >= 3 }}` (or the bare `c_output >= 3`, or `output >= 3` on c's own routes)."""
    if route.when is None:
        return None
    try:
        if is_jinja_condition(route.when):
            tree = parser.parse(route.when)
            outs = [n for n in tree.body if isinstance(n, nodes.Output)]
            exprs = [n for o in outs for n in o.nodes
                     if not (isinstance(n, nodes.TemplateData) and not n.data.strip())]
            if len(exprs) != 1:
                return None
            expr: nodes.Node = exprs[0]
        else:
            expr = parser.parse_expression(route.when)
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
