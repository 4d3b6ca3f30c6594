"""Output contracts: checking a value against a declared `output:` schema, and the JSON Schema
sent to models. Messages name the offending field, as Conductor's do (spec 9.2)."""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from podium import jsontext
from podium.language.model import OutputField

if TYPE_CHECKING:  # jsonschema loads when an output is first checked (~30 ms of start-up)
    from jsonschema import Draft202012Validator, ValidationError


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


def received(text: str, limit: int = 80) -> str:
    """What an output contract was given, for its error: the first `limit` characters of the
    text, JSON-quoted (newlines and control characters stay visible), or that it was empty."""
    if not text.strip():
        return "received nothing" if not text else f"received only whitespace ({len(text)} chars)"
    head = json.dumps(text[:limit], ensure_ascii=False)
    more = f"… ({len(text):,} chars)" if len(text) > limit else ""
    return f"received {head}{more}"


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
    """Raise SchemaViolation for the first field of `data` that breaks `schema`.

    The checking is the `jsonschema` library's (Draft 2020-12) over the declaration translated
    once (`_validator`); the error it reports is the first in declaration order, in podium's
    words (`_violation`).
    """
    if not isinstance(data, dict):
        raise SchemaViolation(prefix or "<output>",
                              f"output must be a JSON object, got {json_type_name(data)}")
    if not schema:
        return
    fast = _fast(schema)
    if fast is not None:
        try:
            if fast.is_valid(data):
                return
        except (ValueError, TypeError, OverflowError):
            pass  # a value it cannot take in (an integer past 64 bits): jsonschema decides
    errors = list(_validator(schema).iter_errors(data))
    if errors:
        raise min((_violation(schema, e, prefix) for e in errors), key=lambda v: v[0])[1]


def _patterned(fld: OutputField) -> bool:
    return fld.pattern is not None or any(
        _patterned(f) for f in (fld.properties or {}).values()) or (
        fld.items is not None and _patterned(fld.items))


# A field's own checks, in the order podium reports them: the first that fails is named.
_RANK = {"type": 0, "enum": 1, "minLength": 2, "maxLength": 3, "pattern": 4, "minimum": 5,
         "maximum": 6}
_CACHE_SIZE = 512
_validators: OrderedDict[int, tuple[dict[str, OutputField], Any]] = OrderedDict()
_fast_validators: OrderedDict[int, tuple[dict[str, OutputField], Any]] = OrderedDict()
_declared: OrderedDict[int, tuple[dict[str, OutputField], Any]] = OrderedDict()
_validators_lock = threading.Lock()


def _cached(cache: OrderedDict[int, tuple[dict[str, OutputField], Any]],
            schema: dict[str, OutputField], build: Callable[[], Any]) -> Any:
    """What `build` makes for a declaration, made once per declaration (a step's `output:`).

    Keyed by identity; the entry holds the declaration itself, so its id cannot be reused
    while the entry lives (declarations are parsed once per plan and never mutated).
    """
    key = id(schema)
    with _validators_lock:
        entry = cache.get(key)
        if entry is not None and entry[0] is schema:
            cache.move_to_end(key)
            return entry[1]
    made = build()
    with _validators_lock:
        cache[key] = (schema, made)
        while len(cache) > _CACHE_SIZE:
            cache.popitem(last=False)
    return made


def _fast(schema: dict[str, OutputField]) -> Any:
    """jsonschema-rs' validator of a declaration, which says only whether a value holds: a
    value that does is passed at once (~1 us, and jsonschema is not even imported); one that
    does not is checked again by `_validator`, whose errors podium words. None for a
    declaration with a `pattern` (Rust's regular expressions are not Python's: the two could
    disagree) or when jsonschema-rs is not installed."""

    def build() -> Any:
        if any(_patterned(f) for f in schema.values()):
            return None
        try:
            import jsonschema_rs
        except ImportError:
            return None
        return jsonschema_rs.Draft202012Validator(validation_schema(schema))

    return _cached(_fast_validators, schema, build)


def _validator(schema: dict[str, OutputField]) -> Draft202012Validator:
    """jsonschema's validator of a declaration: the checking whose errors podium words."""

    def build() -> Draft202012Validator:
        from jsonschema import Draft202012Validator

        return Draft202012Validator(validation_schema(schema))

    validator: Draft202012Validator = _cached(_validators, schema, build)
    return validator


def validation_schema(schema: dict[str, OutputField]) -> dict[str, Any]:
    """The JSON Schema `check_value` checks with: `to_json_schema` without its closing of
    objects (extra keys are allowed in an output, as in Conductor) and without descriptions."""
    return {"type": "object", "properties": {n: _check_schema(f) for n, f in schema.items()},
            "required": [n for n, f in schema.items() if f.required]}


def _check_schema(fld: OutputField) -> dict[str, Any]:
    out = _field_schema(fld)
    out.pop("description", None)
    if fld.type == "object" and fld.properties is not None:
        out["properties"] = {n: _check_schema(f) for n, f in fld.properties.items()}
    if fld.type == "array" and fld.items is not None:
        out["items"] = _check_schema(fld.items)
    return out


def _violation(schema: dict[str, OutputField], error: ValidationError,
               prefix: str) -> tuple[tuple[int, ...], SchemaViolation]:
    """podium's words for one jsonschema error, with its place in podium's report order: the
    declaration index of each property on the path (an array index for items), then the rank
    of the failed check."""
    fields: dict[str, OutputField] | None = schema
    fld: OutputField | None = None
    order: list[int] = []
    path = prefix.removesuffix(".")
    parent = ""  # the array's path when the last step was an item
    for step in error.absolute_path:
        if isinstance(step, int):
            assert fld is not None
            assert fld.items is not None
            parent, path, fld = path, f"{path}[{step}]", fld.items
            order.append(step)
        else:
            assert fields is not None
            order.append(list(fields).index(step))
            parent, fld = "", fields[step]
            path = f"{path}.{step}" if path else step
        fields = fld.properties
    keyword = error.validator
    value = error.instance
    if keyword == "required":
        assert fields is not None
        assert isinstance(value, dict)
        name = next(n for n, f in fields.items() if f.required and n not in value)
        missing = f"{path}.{name}" if path else name
        return (*order, list(fields).index(name), -1), SchemaViolation(
            missing, f"missing required output field: {missing}")
    assert fld is not None, f"unexpected error at the top of the output: {error.message}"
    rank = (*order, _RANK.get(str(keyword), len(_RANK)))
    if keyword == "type" and value is None:
        return rank, SchemaViolation(path, f"output field '{path}' must not be null")
    if keyword == "type" and parent:
        return rank, SchemaViolation(path, f"array item {order[-1]} in '{parent}' has wrong "
                                     f"type: expected {fld.type}, got {json_type_name(value)}")
    messages = {
        "type": f"has wrong type: expected {fld.type}, got {json_type_name(value)} "
                f"(received: {_describe(value)})",
        "enum": "must be one of " + ", ".join(json.dumps(v) for v in fld.enum or ())
                + f" (received: {_describe(value)})",
        "minLength": f"is shorter than {fld.min_length} characters",
        "maxLength": f"is longer than {fld.max_length} characters",
        "pattern": f"does not match pattern {fld.pattern!r}",
        "minimum": f"is below the minimum {fld.minimum or 0:g}",
        "maximum": f"is above the maximum {fld.maximum or 0:g}",
    }
    return rank, SchemaViolation(path, f"output field '{path}' "
                                 f"{messages.get(str(keyword), error.message)}")


def to_json_schema(schema: dict[str, OutputField]) -> dict[str, Any]:
    """The JSON Schema of an output declaration (for native structured output)."""
    return {
        "type": "object",
        "properties": {name: _field_schema(f) for name, f in schema.items()},
        "required": [name for name, f in schema.items() if f.required],
        "additionalProperties": False,
    }


def declared_schema(schema: dict[str, OutputField]) -> dict[str, Any]:
    """`to_json_schema` of a step's `output:`, made once per declaration: every execution of
    the step, and every member of its fan-out, sends the same dict, which no one changes (the
    providers copy it before adapting it: openai_chat.py `strict_schema`)."""
    return _cached(_declared, schema, lambda: to_json_schema(schema))  # type: ignore[no-any-return]


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
