"""A run's inputs from the command line, an input file or a console form: typed by the
workflow's declarations, with its defaults, or refused with a message that names the input."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from podium import jsontext
from podium.errors import UsageError, WorkflowFileError
from podium.language.diagnostics import did_you_mean
from podium.language.model import InputDef, WorkflowFile


def coerce_cli_value(text: str, name: str | None = None) -> Any:
    """Conductor's --input coercion (spec 11) for inputs the workflow does not type.
    JSON past podium's bounds and integers past Python's digit limit are a UsageError."""
    where = f"--input {name}" if name else "--input"
    value = text.strip()
    low = value.lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "null":
        return None
    if value.startswith(("[", "{")):
        try:
            return jsontext.loads(value)
        except jsontext.JsonLimitError as exc:
            raise UsageError(f"{where}: the value is JSON that {exc}") from None
        except ValueError:
            return value
    if "." in value:
        try:
            return float(value)
        except ValueError:
            return value
    why = jsontext.too_many_digits(value) if value.lstrip("+-").isdigit() else None
    if why is not None:
        raise UsageError(f"{where}: the value {why}; declare the input as a string to keep "
                         "it as text")
    try:
        return int(value)
    except ValueError:
        return value


def _typed(name: str, text: str, decl: InputDef) -> Any:
    t = decl.type
    if t == "string":
        return text
    value = coerce_cli_value(text, name)
    if t == "number" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    if t == "boolean" and isinstance(value, bool):
        return value
    if t == "array" and isinstance(value, list):
        return value
    if t == "object" and isinstance(value, dict):
        return value
    shown = text if len(text) <= 80 else f"{text[:60]}... ({len(text):,} characters)"
    raise UsageError(f"--input {name}: expected a {t}, got {shown!r}")


def parse_inputs(wf: WorkflowFile, pairs: list[str], input_file: Path | None,
                 json_values: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Inputs from --input-file then --input then --input-json (later wins), checked
    against the declarations, with defaults applied as Conductor does (spec 2.4)."""
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
            else coerce_cli_value(text, name)
    given.update(json_values or {})
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
    try:  # the loader allows workflow files deeper nesting than podium takes as data
        jsontext.check_depth(doc.data)
    except jsontext.JsonLimitError as exc:
        raise UsageError(f"--input-file {doc.shown}: the inputs are data that {exc}") from None
    return dict(doc.data)
