"""`LazyModule`: a module imported at the first read of one of its attributes.

For a module that only some calls of its importer use (Jinja2's `nodes`, which the template
checks walk only for templates that quickparse.py does not read from their parts): the
importer names it as usual, and pays the import when it first touches it. Each attribute
read is then kept on this object, so later reads cost what a module's do.

    if TYPE_CHECKING:
        from jinja2 import nodes
    else:
        nodes = LazyModule("jinja2.nodes")
"""

from __future__ import annotations

import importlib
from typing import Any


class LazyModule:
    """Stands for the module `name` until an attribute is read, then imports it."""

    def __init__(self, name: str) -> None:
        self.__dict__["_name"] = name

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):  # copy, pickle and the like probing: not the module's
            raise AttributeError(attr)
        value = getattr(importlib.import_module(self.__dict__["_name"]), attr)
        self.__dict__[attr] = value
        return value

    def __repr__(self) -> str:
        return f"<lazy module {self.__dict__['_name']!r}>"
