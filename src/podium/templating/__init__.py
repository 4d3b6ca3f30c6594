"""podium's templates: one sandboxed Jinja2 environment (engine.py) that renders templates,
conditions and bare expressions, each within the bounds of budget.py.

This package's own names come from text.py, which needs no Jinja2; the engine, the
environment and the bounds are imported at their first use (PEP 562), so a command that only
checks templates quickparse.py can read never imports Jinja2.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from podium.templating.text import (
    TOO_DEEP,
    WALK_FROM,
    RenderFailure,
    is_jinja_condition,
    is_template,
)

if TYPE_CHECKING:
    from podium.templating.budget import (
        MAX_INT_BITS,
        MAX_RENDER_BUILT,
        MAX_RENDER_CHARS,
        MAX_RENDER_SECONDS,
        MAX_RENDER_STEPS,
        MAX_VALUE_SIZE,
        Deadline,
    )
    from podium.templating.engine import (
        Compiled,
        TemplateEngine,
        coerce_output_value,
        make_environment,
    )

__all__ = ["MAX_INT_BITS", "MAX_RENDER_BUILT", "MAX_RENDER_CHARS", "MAX_RENDER_SECONDS",
           "MAX_RENDER_STEPS", "MAX_VALUE_SIZE", "TOO_DEEP", "WALK_FROM", "Compiled",
           "Deadline", "RenderFailure", "TemplateEngine", "coerce_output_value",
           "is_jinja_condition", "is_template", "make_environment"]

_LATER = {
    **dict.fromkeys(("MAX_INT_BITS", "MAX_RENDER_BUILT", "MAX_RENDER_CHARS",
                     "MAX_RENDER_SECONDS", "MAX_RENDER_STEPS", "MAX_VALUE_SIZE", "Deadline"),
                    "podium.templating.budget"),
    **dict.fromkeys(("Compiled", "TemplateEngine", "coerce_output_value", "make_environment"),
                    "podium.templating.engine"),
}


def __getattr__(name: str) -> Any:
    module = _LATER.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
