"""A run's inputs from the command line, an input file or a console form: typed by the
workflow's declarations, with its defaults, or refused with a message that names the input."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from podium.errors import UsageError, WorkflowFileError
from podium.language.diagnostics import did_you_mean
from podium.language.model import InputDef, WorkflowFile


def coerce_cli_value(text: str) -> Any:
    """Conductor's --input coercion (spec 11) for inputs the workflow does not type."""
    value = text.strip()
    low = value.lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "null":
        return None
    if value.startswith(("[", "{")):
        try:
            return json.loads(value)
        except ValueError:
            return value
    if "." in value:
        try:
            return float(value)
        except ValueError:
            return value
    try:
        return int(value)
    except ValueError:
        return value


def _typed(name: str, text: str, decl: InputDef) -> Any:
    t = decl.type
    if t == "string":
        return text
    value = coerce_cli_value(text)
    if t == "number" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    if t == "boolean" and isinstance(value, bool):
        return value
    if t == "array" and isinstance(value, list):
        return value
    if t == "object" and isinstance(value, dict):
        return value
    raise UsageError(f"--input {name}: expected a {t}, got {text!r}")


def parse_inputs(wf: WorkflowFile, pairs: list[str], input_file: Path | None) -> dict[str, Any]:
    """Inputs from --input-file then --input (later wins), checked against the declarations,
    with defaults applied as Conductor does (spec 2.4)."""
    declared = wf.workflow.input
    given: dict[str, Any] = {}
    if input_file is not None:
        given.update(_read_input_file(input_file))
    for pair in pairs:
        if "=" not in pair:
            raise UsageError(f"--input {pair!r}: expected NAME=VALUE")
        name, _, text = pair.partition("=")
        name = name.strip()
        if not name:
            raise UsageError(f"--input {pair!r}: the name is empty")
        given[name] = _typed(name, text.strip(), declared[name]) if name in declared \
            else coerce_cli_value(text)
    return resolve_inputs(wf, given)


def resolve_inputs(wf: WorkflowFile, given: Mapping[str, Any]) -> dict[str, Any]:
    """Given inputs checked against the workflow's declarations, with defaults applied."""
    declared = wf.workflow.input
    given = dict(given)
    if declared:
        for name in given:
            if name not in declared:
                hint = did_you_mean(name, declared)
                raise UsageError(f"unknown input '{name}'" + (f" ({hint})" if hint else "")
                                 + f"; the workflow declares: {', '.join(declared)}")
    from podium.engine.inputs import apply_input_defaults

    missing = apply_input_defaults(declared, given)
    if missing:
        raise UsageError("missing required input" + ("s" if len(missing) > 1 else "") + ": "
                         + ", ".join(missing) + f" (pass --input {missing[0]}=VALUE)")
    return given


def _read_input_file(path: Path) -> dict[str, Any]:
    from podium.language.source import FileUnreadable, LoadFailure, load_document

    try:
        doc = load_document(path, environ={})
    except FileUnreadable as exc:
        raise WorkflowFileError(f"--input-file {exc}") from None
    except LoadFailure as exc:
        raise UsageError(exc.diagnostics[0].format()) from None
    if not isinstance(doc.data, dict):
        raise UsageError(f"{doc.shown}:1:1: an input file must be a mapping of name: value")
    return dict(doc.data)
