"""Route conditions that compare an output field declared with an `enum:` to a literal the
enum does not hold (`verdict == 'approved'` for [approve, revise]): a route that can never be
taken (or, with `!=`, always is), found in `{{ }}` and bare conditions alike."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from podium.language.diagnostics import KeyPath, did_you_mean
from podium.language.model import Route
from podium.templating.quickparse import EXPR, scan
from podium.templating.text import WALK_FROM, RenderFailure, is_jinja_condition

if TYPE_CHECKING:
    from jinja2 import nodes

    from podium.check.semantic import Checker
else:  # the trees are lightparse.py's or Jinja's: kinds.py names their nodes in both
    from podium.templating import kinds as nodes

Chain = tuple[str, ...]


def check_enum_literals(checker: Checker) -> None:
    """An error for each comparison of an enum field with a value outside its enum."""
    if not any(getattr(fld, "enum", None) for step in checker.steps.values()
               if isinstance(schema := getattr(step, "output", None), dict)
               for fld in schema.values()):
        return  # no top-level field has an enum (`_field` finds none): nothing to compare
    for owner, path, routes in _route_sites(checker):
        for j, route in enumerate(routes):
            if route.when is None:
                continue
            for chain, literal, negated in _comparisons(checker, route.when):
                found = _field(checker, owner, chain, bare=not is_jinja_condition(route.when))
                if found is None:
                    continue
                step, name, values = found
                if literal in values:
                    continue
                shown = ", ".join(str(v) for v in values)
                close = did_you_mean(str(literal), [str(v) for v in values])
                checker.err((*path, "routes", j, "when"),
                            f"{literal!r} is not a value of {step}.output.{name} (its enum: "
                            f"[{shown}]), so this comparison "
                            f"{'always' if negated else 'never'} holds", close,
                            code="enum-literal", at="value")


def _route_sites(checker: Checker) -> Iterator[tuple[str, KeyPath, list[Route]]]:
    wf = checker.wf
    for i, step in enumerate(wf.agents):
        routes = getattr(step, "routes", None)
        if routes:
            yield step.name, ("agents", i), list(routes)
    for i, pg in enumerate(wf.parallel):
        yield pg.name, ("parallel", i), list(pg.routes)
    for i, fe in enumerate(wf.for_each):
        yield fe.name, ("for_each", i), list(fe.routes)


def _field(checker: Checker, owner: str, chain: Chain, *, bare: bool
           ) -> tuple[str, str, list[Any]] | None:
    """(step, field, enum) that a chain read in `owner`'s routes names, when it is a declared
    top-level field with an enum."""
    candidates: list[tuple[str, str]] = []
    if len(chain) == 3 and chain[1] == "output":  # {{ review.output.verdict }}
        candidates.append((chain[0], chain[2]))
    elif len(chain) == 2 and chain[0] == "output":  # output.verdict
        candidates.append((owner, chain[1]))
    elif len(chain) == 2 and chain[0].endswith("_output"):  # review_output.verdict
        candidates.append((chain[0].removesuffix("_output"), chain[1]))
    elif len(chain) == 1 and bare:  # a bare condition's `verdict` or `output_verdict`
        candidates.append((owner, chain[0].removeprefix("output_")))
    for step, name in candidates:
        schema = getattr(checker.steps.get(step), "output", None)
        fld = schema.get(name) if isinstance(schema, dict) else None
        if fld is not None and fld.enum:
            return step, name, list(fld.enum)
    return None


Found = tuple[Chain, Any, bool]  # (chain, literal, whether the comparison is negated)


def _comparisons(checker: Checker, text: str) -> list[Found]:
    """What each `chain == literal`, `!=`, `in [...]` of a condition compares."""
    try:
        if is_jinja_condition(text):
            quick = _quick(text)
            return quick if quick is not None else list(_jinja(checker.parser.parse(text)))
        from podium import conditions

        return list(_bare(conditions.parse(text)))
    except (RenderFailure, RecursionError):
        return []  # reported by the template checks


def _quick(text: str) -> list[Found] | None:
    """What `_jinja` finds in a condition of quickparse.py's shapes (`{{ a.b == 'x' }}`, the
    commonest route condition), read from its parts with no tree made and no Jinja2 imported;
    None for any other template, and for one longer than WALK_FROM (the parser's depth check
    decides those). tests/test_enum_literals.py compares the two on every condition it has."""
    if len(text) > WALK_FROM:
        return None
    parts = scan(None, text)
    if parts is None:
        return None
    # a comparison's left side is a dotted name, its right a constant or another name
    return [(part.names, part.right[1], part.op == "!=") for kind, part, _ in parts
            if kind == EXPR and part.op in ("==", "!=") and part.right[0]]


def _jinja(tree: nodes.Template) -> Iterator[Found]:
    for cmp in tree.find_all(nodes.Compare):
        if len(cmp.ops) != 1:
            continue
        op, other = cmp.ops[0].op, cmp.ops[0].expr
        left, right = _jinja_chain(cmp.expr), _jinja_chain(other)
        if op in ("eq", "ne"):
            if left and isinstance(other, nodes.Const):
                yield left, other.value, op == "ne"
            elif right and isinstance(cmp.expr, nodes.Const):
                yield right, cmp.expr.value, op == "ne"
        elif op in ("in", "notin") and left and isinstance(other, (nodes.List, nodes.Tuple)):
            yield from ((left, item.value, op == "notin") for item in other.items
                        if isinstance(item, nodes.Const))


def _jinja_chain(node: nodes.Node) -> Chain | None:
    if isinstance(node, nodes.Name):
        return (node.name,)
    if isinstance(node, nodes.Getattr):
        head = _jinja_chain(node.node)
        return None if head is None else (*head, node.attr)
    if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const) \
            and isinstance(node.arg.value, str):
        head = _jinja_chain(node.node)
        return None if head is None else (*head, node.arg.value)
    return None


def _bare(tree: ast.expr) -> Iterator[Found]:
    for cmp in ast.walk(tree):
        if not isinstance(cmp, ast.Compare) or len(cmp.ops) != 1:
            continue
        op, other = cmp.ops[0], cmp.comparators[0]
        left, right = _bare_chain(cmp.left), _bare_chain(other)
        if isinstance(op, (ast.Eq, ast.NotEq)):
            negated = isinstance(op, ast.NotEq)
            if left and isinstance(other, ast.Constant):
                yield left, other.value, negated
            elif right and isinstance(cmp.left, ast.Constant):
                yield right, cmp.left.value, negated


def _bare_chain(node: ast.expr) -> Chain | None:
    if isinstance(node, ast.Name):
        return (node.id,)
    if isinstance(node, ast.Attribute):
        head = _bare_chain(node.value)
        return None if head is None else (*head, node.attr)
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
            and isinstance(node.slice.value, str):
        head = _bare_chain(node.value)
        return None if head is None else (*head, node.slice.value)
    return None
