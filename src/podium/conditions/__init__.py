"""Route conditions: Conductor's bare expression language (`when: score > 7`) and how a
`{{ }}` condition's rendered text reads as true or false.

A condition without both `{{` and `}}` is, in Conductor, an expression of simpleeval's
`simple_eval` (spec 4.2): Python expression syntax without list, tuple, dict or set literals,
comprehensions or lambdas; the functions int, float, str, rand and randint; comparison
chains, `in`, `not in`, `is`, `is not`, `and`/`or`/`not`, arithmetic, subscripts, attribute
access that falls back to a key (`review_output.score`), method calls and f-strings. Its
names are the one-level flattening of the route scope (`flatten`). podium evaluates it with
simpleeval too, and keeps what its templates guarantee (docs/compatibility.md): a condition
cannot change the run's state (mutating methods are refused), cannot build huge values, is
one expression (an assignment or a second statement is a syntax error, not ignored), and
reads a dict's key before a method of the same name, as templates do.

The evaluator (evaluator.py, simpleeval) is imported on the first evaluation only: `podium
validate` parses conditions with Python's `ast` and never needs it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

from podium.language.diagnostics import did_you_mean
from podium.templating.text import TOO_DEEP, RenderFailure

FUNCTIONS = ("int", "float", "str", "rand", "randint")
MAX_CONDITION_CHARS = 100_000

# `{{ }}` conditions: the rendered text (stripped, lower-cased) that reads as false. Conductor
# has only the first four; podium adds what a value that is "nothing" renders as (Conductor
# reads `None`, `[]`, `{}` and `0.0` as true: docs/compatibility.md).
FALSE_TEXTS = frozenset({"false", "0", "no", "", "none", "[]", "{}", "0.0"})

# Python expression nodes Conductor's evaluator (simpleeval's SimpleEval) has.
_NODES: tuple[type[ast.AST], ...] = (
    ast.Name, ast.UnaryOp, ast.BinOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Call,
    ast.keyword, ast.Subscript, ast.Attribute, ast.Slice, ast.JoinedStr, ast.FormattedValue,
    ast.Constant,
    # what those nodes hold: operators, contexts
    ast.operator, ast.unaryop, ast.cmpop, ast.boolop, ast.expr_context,
)
_NO_OPERATOR = (ast.MatMult,)
_NODE_WORDS = {
    "List": "a list literal", "Tuple": "a tuple literal", "Dict": "a dict literal",
    "Set": "a set literal", "ListComp": "a comprehension", "SetComp": "a comprehension",
    "DictComp": "a comprehension", "GeneratorExp": "a generator expression",
    "Lambda": "a lambda", "NamedExpr": "an assignment expression (:=)",
    "Starred": "unpacking (*)", "Await": "await", "Yield": "yield", "YieldFrom": "yield",
}
_DISALLOWED_ATTRS = ("format", "format_map", "mro", "tb_frame", "gi_frame", "ag_frame",
                     "cr_frame", "exec")


def is_bare(when: str) -> bool:
    """Conductor's rule: a condition is Jinja only when it contains both '{{' and '}}'."""
    return not ("{{" in when and "}}" in when)


def text_holds(rendered: str) -> bool:
    """Whether a `{{ }}` condition's rendered text reads as true (spec 4.2, with podium's
    additions in FALSE_TEXTS)."""
    return rendered.strip().lower() not in FALSE_TEXTS


def flatten(scope: Mapping[str, Any]) -> dict[str, Any]:
    """The names a bare condition sees (Conductor's Router._flatten_context): each top-level
    dict contributes `<key>_<subkey>` (and, for `output`, its keys bare); any other top-level
    value keeps its name. Keys are taken in Conductor's order (workflow, context, the steps,
    output last), so a later name wins as it does there."""
    first = [k for k in ("workflow", "context") if k in scope]
    rest = [k for k in scope if k not in ("workflow", "context", "output")]
    order = first + rest + (["output"] if "output" in scope else [])
    flat: dict[str, Any] = {}
    for key in order:
        value = scope[key]
        if isinstance(value, dict):
            for sub, v in value.items():
                flat[f"{key}_{sub}"] = v
                if key == "output":
                    flat[sub] = v
        else:
            flat[key] = value
    return flat


# --------------------------------------------------------------------------- parsing


@lru_cache(maxsize=2048)
def parse(text: str) -> ast.expr:
    """The Python AST of a bare condition. RenderFailure: 'syntax' when it is not one Python
    expression, 'error' when it uses what Conductor's language does not have (a list
    literal, a lambda), 'security' for an attribute no condition may read."""
    if len(text) > MAX_CONDITION_CHARS:
        raise RenderFailure("syntax", f"the condition is longer than {MAX_CONDITION_CHARS:,} "
                                      "characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        msg = exc.msg or "invalid syntax"
        if "too many nested" in msg:
            msg = TOO_DEEP
        elif "{%" in text or "{#" in text:
            msg = ("a condition is Jinja only with both '{{' and '}}' (Conductor's rule); "
                   "write it as {{ ... }}")
        elif msg == "invalid syntax" and _statement(text):
            msg = "a condition is one expression (an assignment or a second statement is " \
                  "not one)"
        raise RenderFailure("syntax", msg, lineno=exc.lineno) from None
    except (RecursionError, MemoryError, ValueError) as exc:
        raise RenderFailure("syntax", f"the condition cannot be read: {exc}") from None
    try:
        _check_nodes(tree.body)
    except RecursionError:
        raise RenderFailure("syntax", TOO_DEEP) from None
    return tree.body


def _statement(text: str) -> bool:
    try:
        ast.parse(text.strip(), mode="exec")
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        return False
    return True


def _check_nodes(node: ast.AST) -> None:
    if not isinstance(node, _NODES) or isinstance(node, _NO_OPERATOR):
        name = type(node).__name__
        what = _NODE_WORDS.get(name, f"'{name}'" if not isinstance(node, ast.operator)
                               else "the operator @")
        raise RenderFailure("error", f"{what} is not available in a condition without "
                                      "{{ }} (Conductor's expression language has none); "
                                      "write the condition as a {{ }} template")
    if isinstance(node, ast.keyword) and node.arg is None:
        raise RenderFailure("error", "unpacking (**) is not available in a condition")
    if isinstance(node, ast.Attribute) and (node.attr.startswith(("_", "func_"))
                                            or node.attr in _DISALLOWED_ATTRS):
        raise RenderFailure("security", f"'.{node.attr}' is not allowed in a condition")
    for child in ast.iter_child_nodes(node):
        _check_nodes(child)


def references(tree: ast.expr) -> Iterator[tuple[str, ...]]:
    """Each use of a name in a condition, with the attributes and constant keys read of it
    (`review_output.meta['a']` -> ('review_output', 'meta', 'a'); a method called at the
    end is not part of it: `meta.get('a')` -> ('meta',)). Functions called by name are not
    included (see `functions_called`)."""
    parent: dict[int, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parent[id(child)] = node
    for node in ast.walk(tree):
        if not isinstance(node, ast.Name):
            continue
        up = parent.get(id(node))
        if isinstance(up, ast.Call) and up.func is node:
            continue
        top: ast.expr = node
        while True:
            up = parent.get(id(top))
            if isinstance(up, (ast.Attribute, ast.Subscript)) and up.value is top:
                top = up
            else:
                break
        chain = _chain(top) or (node.id,)
        if isinstance(top, ast.Attribute) and isinstance(up, ast.Call) and up.func is top:
            chain = chain[:-1]  # a method call: `x.get(...)` reads x
        yield chain


def _chain(node: ast.expr) -> tuple[str, ...] | None:
    parts: list[str] = []
    cur: ast.expr = node
    while True:
        if isinstance(cur, ast.Attribute):
            parts.append(cur.attr)
            cur = cur.value
        elif isinstance(cur, ast.Subscript):
            key = cur.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, (str, int)) \
                    and not isinstance(key.value, bool):
                parts.append(str(key.value))
            else:
                parts.clear()
            cur = cur.value
        elif isinstance(cur, ast.Name):
            return (cur.id, *reversed(parts))
        else:
            return None


def functions_called(tree: ast.expr) -> Iterator[str]:
    """Names called as functions (`int(x)` -> 'int'); methods are not included."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            yield node.func.id


# --------------------------------------------------------------------------- evaluation


def evaluate(text: str, scope: Mapping[str, Any]) -> Any:
    """The value of a bare condition over a route scope (the full context plus `output`);
    raises RenderFailure with kind 'syntax', 'undefined', 'security', 'size' or 'error'."""
    from podium.conditions.evaluator import run

    tree = parse(text)
    names = flatten(scope)
    return run(text, tree, names, lambda name: _unknown_name(name, scope, names))


def _unknown_name(name: str, scope: Mapping[str, Any], names: dict[str, Any]) -> str:
    value = scope.get(name)
    if isinstance(value, dict):  # `output.score`, `review.output.x`: dicts are not names
        keys = [k for k in value if isinstance(k, str)]
        example = f"{name}_{keys[0]}" if keys else f"{name}_<key>"
        also = f" or '{keys[0]}'" if name == "output" and keys else ""
        return (f"'{name}' is undefined: a condition without {{{{ }}}} reads its keys as "
                f"names of their own ('{example}'{also}); or write it as {{{{ ... }}}}")
    hint = did_you_mean(name, [n for n in names if isinstance(n, str)])
    return f"'{name}' is undefined" + (f" ({hint})" if hint else "")
