"""Workflow inputs: defaults and zero values applied as Conductor does (spec 2.4)."""

from __future__ import annotations

from typing import Any

from podium.language.model import InputDef

_ZERO: dict[str, Any] = {"string": "", "number": 0, "boolean": False}


def apply_input_defaults(declared: dict[str, InputDef], given: dict[str, Any]) -> list[str]:
    """Fill `given` in place with declared defaults (or zero values for optional inputs);
    return the names of required inputs that are still missing."""
    missing = []
    for name, decl in declared.items():
        if name in given:
            continue
        if decl.default is not None:
            given[name] = decl.default
        elif not decl.required:
            given[name] = _ZERO.get(decl.type, [] if decl.type == "array" else {})
        else:
            missing.append(name)
    return missing
