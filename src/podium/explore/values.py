"""The values a step can produce, as explore sees them: one representative per class.

A model, a script, a person or a sub-workflow moves a run only through the data its step
produces, and only the parts of that data which routing reads matter. Each declared field
that a routing text (a route condition, a `set` value, a for-each source) mentions is split
into classes: every enum value, true and false, null for an optional or nullable field, and
for free numbers and strings the classes that the conditions' own comparisons with literals
define (`score > 7` gives two: one value for which it holds, one for which it does not).
A field no routing text mentions gets one representative: its value cannot change a route.
"""

from __future__ import annotations

import ast
import itertools
import operator
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from podium import conditions
from podium.language.model import InputDef, OutputField
from podium.records import record
from podium.templating.text import RenderFailure
from podium.templating.trees import TemplateParser

if TYPE_CHECKING:
    from jinja2 import nodes
else:  # the trees are lightparse.py's or Jinja's: kinds.py names their nodes in both
    from podium.templating import kinds as nodes

MAX_PRODUCT = 512  # combinations of one step's field classes, past which explore samples

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "lteq": operator.le,
    "gt": operator.gt, "gteq": operator.ge, "in": lambda a, b: _contains(b, a),
    "notin": lambda a, b: not _contains(b, a),
}
_PY_OPS: dict[type[ast.cmpop], str] = {
    ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "lteq", ast.Gt: "gt",
    ast.GtE: "gteq", ast.In: "in", ast.NotIn: "notin",
}
_FLIP = {"lt": "gt", "gt": "lt", "lteq": "gteq", "gteq": "lteq", "eq": "eq", "ne": "ne"}


def _contains(container: Any, item: Any) -> bool:
    try:
        return bool(item in container)
    except TypeError:
        return False


@record(frozen=True)
class Comparison:
    """`<field> <op> <literal>` as found in a routing text (the field side normalised left)."""

    field: str
    op: str
    literal: Any

    def holds(self, value: Any) -> bool:
        try:
            return bool(_OPS[self.op](value, self.literal))
        except TypeError:
            return False


class Literals:
    """The words and comparisons of the routing texts of a workflow: each text with the
    step it routes (None for a text of no step's routes, such as a `set` value)."""

    def __init__(self, texts: list[tuple[str | None, str]]) -> None:
        self.words: set[str] = set()
        self.comparisons: list[Comparison] = []
        self._texts: list[tuple[str | None, set[str]]] = []
        self._owned: dict[str, list[Comparison]] = {}
        for owner, text in texts:
            words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))
            self.words.update(words)
            self._texts.append((owner, words))
            found = list(_comparisons(text))
            self.comparisons.extend(found)
            if owner is not None:
                self._owned.setdefault(owner, []).extend(found)

    def mentions(self, name: str, step: str | None = None) -> bool:
        """Whether a routing text may read `name` (of `step`'s output, when given): the
        step's own routes naming it (bare, `output.name`, `output_name`), or a text naming
        both the step and the field."""
        keys = {name, "output_" + name}
        for owner, words in self._texts:
            if not keys & words:
                continue
            if step is None or owner == step or step in words or f"{step}_output" in words:
                return True
        return False

    def compared_by(self, step: str) -> dict[str, Spec]:
        """Fields the step's own route conditions compare with a literal, each with the
        type its literals have: what a script's undeclared stdout JSON must hold for its
        routes to read it (Conductor merges every key of a script's JSON object)."""
        out: dict[str, Spec] = {}
        for c in self._owned.get(step, []):
            lit = c.literal[0] if isinstance(c.literal, list) and c.literal else c.literal
            kind = ("boolean" if isinstance(lit, bool) else "number"
                    if isinstance(lit, (int, float)) else "string")
            out.setdefault(c.field, Spec(kind))
        return out

    def for_field(self, name: str) -> list[Comparison]:
        return [c for c in self.comparisons if c.field == name]


def _comparisons(text: str) -> Iterator[Comparison]:
    if conditions.is_bare(text):
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except (SyntaxError, ValueError):
            return
        yield from _py_comparisons(tree)
        return
    try:
        template = TemplateParser().parse(text)  # none kept: the console runs this too
    except RenderFailure:
        return
    for node in template.find_all(nodes.Compare):
        left = node.expr
        for operand in node.ops:
            yield from _pair(_jinja_tail(left), operand.op, _jinja_const(operand.expr))
            yield from _pair(_jinja_tail(operand.expr), _FLIP.get(operand.op, ""),
                             _jinja_const(left))
            left = operand.expr


def _py_comparisons(tree: ast.AST) -> Iterator[Comparison]:
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        left = node.left
        for op, right in zip(node.ops, node.comparators, strict=True):
            name = _PY_OPS.get(type(op), "")
            yield from _pair(_py_tail(left), name, _py_const(right))
            yield from _pair(_py_tail(right), _FLIP.get(name, ""), _py_const(left))
            left = right


_NO = object()


def _pair(field: str | None, op: str, literal: Any) -> Iterator[Comparison]:
    if field and op in _OPS and literal is not _NO:
        yield Comparison(field, op, literal)


def _jinja_tail(node: nodes.Node) -> str | None:
    if isinstance(node, nodes.Getattr):
        return node.attr
    if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const):
        return str(node.arg.value)
    if isinstance(node, nodes.Name):
        return node.name
    if isinstance(node, nodes.Filter) and node.node is not None:
        return _jinja_tail(node.node)  # `x | default(0) > 2` compares x
    return None


def _jinja_const(node: nodes.Node) -> Any:
    if isinstance(node, nodes.Const):
        return node.value
    if isinstance(node, (nodes.List, nodes.Tuple)) and all(
            isinstance(i, nodes.Const) for i in node.items):
        return [i.value for i in node.items if isinstance(i, nodes.Const)]
    return _NO


def _py_tail(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return str(node.slice.value)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
        return _py_tail(node.args[0])  # int(x) > 2 compares x
    return None


def _py_const(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    return _NO


@record(frozen=True)
class Spec:
    """What is declared of one value: its JSON type, enum, and whether it may be null."""

    type: str
    enum: tuple[Any, ...] | None = None
    nullable: bool = False

    @classmethod
    def of_field(cls, f: OutputField) -> Spec:
        enum = tuple(f.enum) if f.enum else None
        return cls(f.type, enum, f.nullable or not f.required)

    @classmethod
    def of_input(cls, d: InputDef) -> Spec:
        return cls(d.type, None, not d.required and d.default is None)


def classes(name: str, spec: Spec, lit: Literals, step: str | None = None) -> list[Any]:
    """One representative per class of the values `name` (of `step`) may take (a single
    one when no routing text mentions it)."""
    if not lit.mentions(name, step):
        return [_default(spec)]
    values: list[Any]
    if spec.enum:
        values = list(spec.enum)
    elif spec.type == "boolean":
        values = [True, False]
    elif spec.type in ("number", "integer"):
        values = _split(_number_candidates(lit.for_field(name), spec.type), lit.for_field(name))
    elif spec.type == "string":
        values = _split(_string_candidates(lit.for_field(name)), lit.for_field(name))
    elif spec.type == "array":
        values = [[], ["item"]]
    else:
        values = [_default(spec)]
    if spec.nullable:
        values.append(None)
    return values


def _default(spec: Spec) -> Any:
    if spec.enum:
        return spec.enum[0]
    return {"string": "text", "number": 0, "integer": 0, "boolean": True, "array": [],
            "object": {}}.get(spec.type, "text")


def _number_candidates(found: list[Comparison], kind: str) -> list[Any]:
    step = 1 if kind == "integer" else 0.5
    out: list[Any] = [0]
    for c in found:
        if isinstance(c.literal, (int, float)) and not isinstance(c.literal, bool):
            base = c.literal if kind != "integer" else int(c.literal)
            out.extend([base - step, base, base + step])
    return sorted(set(out))


def exit_codes(lit: Literals, step: str) -> list[int]:
    """A script's exit codes: 0 and 1, and the classes its conditions' literals add."""
    if not lit.mentions("exit_code", step):
        return [0]
    found = lit.for_field("exit_code")
    candidates = [0, 1]
    for c in found:
        if isinstance(c.literal, int) and not isinstance(c.literal, bool):
            candidates.extend(v for v in (c.literal, c.literal + 1) if v >= 0)
    seen = dict.fromkeys(candidates)
    return list(_split(list(seen), found)) if found else [0, 1]


def _string_candidates(found: list[Comparison]) -> list[Any]:
    out: list[Any] = []
    for c in found:
        items = c.literal if isinstance(c.literal, list) else [c.literal]
        out.extend(i for i in items if isinstance(i, str) and i not in out)
    other = "other"
    while other in out:
        other += "_"
    return [*out, other]


def _split(candidates: list[Any], found: list[Comparison]) -> list[Any]:
    """Keep one candidate per signature: the tuple of what each comparison says of it."""
    seen: dict[tuple[bool, ...], Any] = {}
    for value in candidates:
        seen.setdefault(tuple(c.holds(value) for c in found), value)
    return list(seen.values())


def product(fields: dict[str, list[Any]]) -> tuple[list[dict[str, Any]], bool]:
    """Every combination of the fields' representatives, bounded by MAX_PRODUCT, and
    whether the bound cut some off."""
    names = list(fields)
    total = 1
    for n in names:
        total *= max(1, len(fields[n]))
    combos = itertools.islice(itertools.product(*(fields[n] for n in names)), MAX_PRODUCT)
    return [dict(zip(names, combo, strict=True)) for combo in combos], total > MAX_PRODUCT
