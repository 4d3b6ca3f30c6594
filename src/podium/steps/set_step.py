"""The set step: render a value (or a map of values) and coerce it to its declared type."""

from __future__ import annotations

import datetime
import json
import math
import re
import threading
from typing import Any

from podium import jsontext
from podium.errors import OutputContractError, StepError
from podium.language.model import SetStep, json_kind
from podium.steps.base import StepCall, StepOutcome
from podium.steps.schema import SchemaViolation, check_value

_TRUE = {"true", "1", "yes", "y", "on"}
_FALSE = {"false", "0", "no", "n", "off"}
_NULLS = {"null", "~", "Null", "NULL"}
# a decimal integer YAML 1.2 reads as that int (no sign +, leading zero, `_` or base prefix)
_PLAIN_INT = re.compile(r"-?(?:0|[1-9][0-9]*)")
_LOADERS = threading.local()


def coerce(text: str, output_type: str, label: str) -> Any:
    """Conductor's set coercion (spec 3.7); raises ValueError with a readable message."""
    if output_type == "string":
        return text
    stripped = text.strip()
    if output_type == "integer":
        try:
            return int(stripped)
        except ValueError:
            raise ValueError(f"{label}: cannot coerce {text!r} to integer") from None
    if output_type == "number":
        try:
            return int(stripped)
        except ValueError:
            try:
                return float(stripped)
            except ValueError:
                raise ValueError(f"{label}: cannot coerce {text!r} to number") from None
    if output_type == "boolean":
        low = stripped.lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise ValueError(f"{label}: cannot coerce {text!r} to boolean")
    if output_type in ("list", "dict"):
        try:
            value = _yaml_load(text)  # the whole text: an indented block list stays a list
        except ValueError as exc:
            raise ValueError(f"{label}: cannot coerce {text!r} to {output_type} "
                             f"(not YAML: {exc})") from None
        expected = list if output_type == "list" else dict
        if not isinstance(value, expected):
            raise ValueError(f"{label}: cannot coerce {text!r} to {output_type}")
        return _json_safe(value, label)
    # auto
    if not stripped:
        return ""
    if _PLAIN_INT.fullmatch(stripped):  # what YAML reads it as, without a YAML parser
        return int(stripped)
    try:
        value = _yaml_load(text)  # as Conductor: YAML reads the text's own indentation
    except ValueError:
        return text
    if value is None and stripped not in _NULLS:
        return text
    return _json_safe(value, label)


def _yaml_load(text: str) -> Any:
    from ruamel.yaml.error import YAMLError

    try:
        value = _loader().load(text)
    except YAMLError as exc:
        _LOADERS.yaml = None  # a failed load may leave anchors behind: the next gets a new one
        raise ValueError(str(exc).splitlines()[0]) from None
    except RecursionError:  # the composer recurses: data from outside may nest 10,000 deep
        _LOADERS.yaml = None
        raise ValueError(f"it nests deeper than {jsontext.MAX_DEPTH} levels") from None
    except BaseException:
        _LOADERS.yaml = None
        raise
    try:
        jsontext.check_depth(value)
    except jsontext.JsonLimitError as exc:
        raise ValueError(f"it {exc}") from None
    return value


def _loader() -> Any:
    """This thread's YAML loader, made once: a new YAML() per value searched ruamel's folder
    for plug-ins and built its resolvers again (most of a set step's cost). A loader is
    reused after a load that succeeded (its composer and constructor start each document
    afresh), dropped after one that failed, and never shared between threads (group members
    run set steps in threads of their own)."""
    loader = getattr(_LOADERS, "yaml", None)
    if loader is None:
        from ruamel.yaml import YAML

        loader = _LOADERS.yaml = YAML(typ="safe", pure=True)
    return loader


def _json_safe(value: Any, label: str) -> Any:
    if isinstance(value, (datetime.date, datetime.datetime, datetime.time)):
        return value.isoformat()
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValueError(f"{label}: mapping key {k!r} is not a string")
            out[k] = _json_safe(v, label)
        return out
    if isinstance(value, list):
        return [_json_safe(v, label) for v in value]
    if isinstance(value, float) and math.isnan(value):
        raise ValueError(f"{label}: NaN is not a JSON value")
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        raise ValueError(f"{label}: value of type {type(value).__name__} is not JSON") from None
    return value


def _render_any(call: StepCall, value: Any, ctx: dict[str, Any], what: str) -> Any:
    if isinstance(value, str):
        return call.run.render(value, ctx, step=call.step.name, what=what,
                               iteration=call.iteration)
    if isinstance(value, dict):
        return {k: _render_any(call, v, ctx, f"{what}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_render_any(call, v, ctx, f"{what}[{i}]") for i, v in enumerate(value)]
    return value


def execute_set(call: StepCall) -> StepOutcome:
    step = call.step
    assert isinstance(step, SetStep)
    ctx = call.run.step_context(step)
    try:
        if step.values is not None:
            value: Any = {}
            for key, template in step.values.items():
                rendered = _render_any(call, template, ctx, f"values.{key}")
                value[key] = coerce(rendered, "auto", f"values.{key}") \
                    if isinstance(rendered, str) else rendered
        else:
            rendered = _render_any(call, step.value, ctx, "value")
            output_type = step.output_type or "auto"
            if not isinstance(rendered, str) and output_type != "auto":
                # a literal YAML value (`value: 5`) still gets its declared type
                rendered = json.dumps(rendered, ensure_ascii=False)
            value = coerce(rendered, output_type, "value") \
                if isinstance(rendered, str) else rendered
    except ValueError as exc:
        raise StepError(str(exc), step=step.name, iteration=call.iteration) from None
    if step.output:
        if not isinstance(value, dict):
            raise OutputContractError(f"declares an output schema but its value is "
                                      f"{json_kind(value)}, not a mapping",
                                      step=step.name, iteration=call.iteration)
        try:
            check_value(step.output, value)
        except SchemaViolation as exc:
            raise OutputContractError(str(exc), step=step.name,
                                      iteration=call.iteration) from None
    return StepOutcome(value)
