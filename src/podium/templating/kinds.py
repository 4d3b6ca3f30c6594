"""Node kinds by Jinja's class names, for code that walks template trees of either maker.

A check walks the tree TemplateParser gives: lightparse.py's nodes for the common templates
(no Jinja2 imported), Jinja's for the others. `kinds.Getattr` stands for the class named
`Getattr` in both: `isinstance(node, kinds.Getattr)` holds when the node's class, or one of
its bases, has that name (`kinds.Expr` holds for any expression, `kinds.Stmt` for any
statement), and `tree.find_all(kinds.Output)` works on both trees. A kind is made at its
first use, for any name, so a kind lightparse.py never builds (`kinds.For`) simply matches
only Jinja's nodes. Type checkers see `jinja2.nodes` instead (the modules import this one as
`nodes` outside TYPE_CHECKING).
"""

from __future__ import annotations

from typing import Any

_NAMES: dict[type, frozenset[str]] = {}  # a node class -> its name and its bases' names


class _Kind(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        kind = type(obj)
        names = _NAMES.get(kind)
        if names is None:
            names = _NAMES[kind] = frozenset(k.__name__ for k in kind.__mro__
                                             if k.__module__ in _NODE_MODULES)
        return cls.__name__ in names

    def __repr__(cls) -> str:
        return f"<node kind {cls.__name__}>"


# the modules whose classes are template nodes: a str or a list is no kind's instance
_NODE_MODULES = frozenset({"jinja2.nodes", "podium.templating.lightparse"})


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    kind = _Kind(name, (), {"__module__": __name__})
    globals()[name] = kind
    return kind
