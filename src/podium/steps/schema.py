"""Output contracts: checking a value against a declared `output:` schema, and the JSON Schema
sent to models. Messages name the offending field, as Conductor's do (spec 9.2)."""

from __future__ import annotations

import json
import re
from typing import Any

from podium import jsontext
from podium.language.model import OutputField, value_has_type


class SchemaViolation(Exception):
    """A value does not satisfy its schema; `field` is the dotted name of the culprit."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        keys = ", ".join(list(value)[:5])
        return f"object with keys [{keys}]"
    if isinstance(value, list):
        return f"array of length {len(value)}"
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def json_type_name(value: Any) -> str:
    """The JSON name of a value's type: null, boolean, number, string, array, object."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def check_value(schema: dict[str, OutputField], data: Any, prefix: str = "") -> None:
    """Raise SchemaViolation for the first field of `data` that breaks `schema`."""
    if not isinstance(data, dict):
        raise SchemaViolation(prefix or "<output>",
                              f"output must be a JSON object, got {json_type_name(data)}")
    for name, fld in schema.items():
        path = f"{prefix}{name}"
        if name not in data:
            if not fld.required:
                continue
            raise SchemaViolation(path, f"missing required output field: {path}")
        _check_field(fld, data[name], path)


def _check_field(fld: OutputField, value: Any, path: str) -> None:
    if value is None:
        if fld.nullable:
            return
        raise SchemaViolation(path, f"output field '{path}' must not be null")
    if not value_has_type(value, fld.type):
        raise SchemaViolation(path, f"output field '{path}' has wrong type: expected "
                              f"{fld.type}, got {json_type_name(value)} (received: "
                              f"{_describe(value)})")
    if fld.enum is not None and value not in fld.enum:
        allowed = ", ".join(json.dumps(v) for v in fld.enum)
        raise SchemaViolation(path, f"output field '{path}' must be one of {allowed} "
                              f"(received: {_describe(value)})")
    if fld.type == "string":
        if fld.min_length is not None and len(value) < fld.min_length:
            raise SchemaViolation(path, f"output field '{path}' is shorter than "
                                  f"{fld.min_length} characters")
        if fld.max_length is not None and len(value) > fld.max_length:
            raise SchemaViolation(path, f"output field '{path}' is longer than "
                                  f"{fld.max_length} characters")
        if fld.pattern is not None and re.search(fld.pattern, value) is None:
            raise SchemaViolation(path, f"output field '{path}' does not match pattern "
                                  f"{fld.pattern!r}")
    if fld.type == "number":
        if fld.minimum is not None and value < fld.minimum:
            raise SchemaViolation(path, f"output field '{path}' is below the minimum "
                                  f"{fld.minimum:g}")
        if fld.maximum is not None and value > fld.maximum:
            raise SchemaViolation(path, f"output field '{path}' is above the maximum "
                                  f"{fld.maximum:g}")
    if fld.type == "object" and fld.properties is not None:
        check_value(fld.properties, value, prefix=f"{path}.")
    if fld.type == "array" and fld.items is not None:
        for i, item in enumerate(value):
            item_path = f"{path}[{i}]"
            if item is None and fld.items.nullable:
                continue
            if item is not None and not value_has_type(item, fld.items.type):
                raise SchemaViolation(item_path, f"array item {i} in '{path}' has wrong type: "
                                      f"expected {fld.items.type}, got {json_type_name(item)}")
            _check_field(fld.items, item, item_path)


def to_json_schema(schema: dict[str, OutputField]) -> dict[str, Any]:
    """The JSON Schema of an output declaration (for native structured output)."""
    return {
        "type": "object",
        "properties": {name: _field_schema(f) for name, f in schema.items()},
        "required": [name for name, f in schema.items() if f.required],
        "additionalProperties": False,
    }


def _field_schema(fld: OutputField) -> dict[str, Any]:
    out: dict[str, Any] = {"type": [fld.type, "null"] if fld.nullable else fld.type}
    if fld.description:
        out["description"] = fld.description
    if fld.enum is not None:
        out["enum"] = [*fld.enum, None] if fld.nullable else list(fld.enum)
    if fld.pattern is not None:
        out["pattern"] = fld.pattern
    if fld.min_length is not None:
        out["minLength"] = fld.min_length
    if fld.max_length is not None:
        out["maxLength"] = fld.max_length
    if fld.minimum is not None:
        out["minimum"] = fld.minimum
    if fld.maximum is not None:
        out["maximum"] = fld.maximum
    if fld.type == "object" and fld.properties is not None:
        out["properties"] = {n: _field_schema(f) for n, f in fld.properties.items()}
        out["required"] = [n for n, f in fld.properties.items() if f.required]
    if fld.type == "array" and fld.items is not None:
        out["items"] = _field_schema(fld.items)
    return out


REFUSED_JSON = "the answer's JSON "  # begins the message for JSON past podium's bounds


def extract_json_object(text: str) -> tuple[Any, str | None]:
    """Find the JSON answer in a model's text: whole text, fenced block, then outermost braces.

    Returns (value, None) or (None, parser message). JSON past podium's bounds (too deep, an
    integer too long, a lone surrogate: podium/jsontext.py) is never taken; the message then
    says which bound it passed.
    """
    stripped = text.strip()
    refused: str | None = None
    try:
        return jsontext.loads(stripped), None
    except jsontext.JsonLimitError as exc:
        refused = first_error = f"{REFUSED_JSON}{exc}"
    except ValueError as exc:
        first_error = str(exc)
    candidates = [m.group(1).strip()
                  for m in re.finditer(r"```(?:json|JSON)?\s*\n(.*?)```", text, re.DOTALL)]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start:end + 1])
    for candidate in candidates:
        try:
            return jsontext.loads(candidate), None
        except jsontext.JsonLimitError as exc:
            refused = refused or f"{REFUSED_JSON}{exc}"
        except ValueError:
            continue
    return None, refused or first_error
