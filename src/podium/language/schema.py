"""The building blocks of the workflow language's model: base containers and output schemas.

`Strict` and `Lenient` are the two kinds of container every model derives from (unknown keys
are errors, or warnings the loader reports); `located` points a model-level error at one key.
The output schema (`OutputField`) and the JSON type helpers live here because both the steps
(podium.language.steps) and the workflow block (podium.language.model) use them.
"""

# No `from __future__ import annotations` here: pydantic would have to compile and evaluate
# every annotation string when the classes are built (~4 ms of each cold command).

import re
import warnings
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

Effort = Literal["low", "medium", "high", "xhigh", "max"]
EFFORTS: tuple[str, ...] = ("low", "medium", "high", "xhigh", "max")
FieldType = Literal["string", "number", "boolean", "array", "object"]
FailureMode = Literal["fail_fast", "continue_on_error", "all_or_nothing"]
END = "$end"


# Defaults: a list or dict default is written as `[]` / `{}` (pydantic copies it for each
# instance), not `Field(default_factory=list)`: pydantic parses the signature of every
# default factory, and a builtin's costs a tokenizer pass (~4 ms of each cold command here).


class Strict(BaseModel):
    """A container whose unknown keys are errors (Conductor rejects them)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, defer_build=True)


class Lenient(BaseModel):
    """A container whose unknown keys Conductor ignores: podium warns about them."""

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True, defer_build=True)

    def model_post_init(self, context: Any, /) -> None:
        if self.__pydantic_extra__:
            _kept_extras[0] += 1


# how many Lenient containers have been made holding unknown keys: the loader looks through
# a model for them (podium.language.load `_warn_extras`) only when this moved while the model
# was validated, which in a workflow with no unknown key is never (it only grows: a thread
# that validates at the same time can make another's look needed, never one's own skipped)
_kept_extras = [0]


def kept_extras() -> int:
    return _kept_extras[0]


def _is_template(text: str) -> bool:
    return "{{" in text or "{%" in text


def located(at: tuple[str | int, ...], message: str) -> PydanticCustomError:
    """A validation error about the key `at` below the container being validated.

    Raised from model-level rules so that the diagnostic points at the offending key rather
    than at the whole mapping; the loader reads the key path from the error's context. The
    message must not contain `{at}` (pydantic formats it with the context).
    """
    return PydanticCustomError("podium_located", message, {"at": at})


# --------------------------------------------------------------------------- output schemas


class OutputField(Strict):
    """One declared output field (Conductor's OutputField)."""

    type: FieldType
    description: str | None = None
    items: "OutputField | None" = None
    properties: "dict[str, OutputField] | None" = None
    enum: list[Any] | None = None
    pattern: str | None = None
    min_length: int | None = Field(default=None, alias="minLength", ge=0)
    max_length: int | None = Field(default=None, alias="maxLength", ge=0)
    minimum: float | None = None
    maximum: float | None = None
    required: bool = True
    nullable: bool = False

    @model_validator(mode="after")
    def _rules(self) -> Self:
        t = self.type
        if self.items is not None and t != "array":
            raise located(("items",), "'items' can only be set when type is 'array'")
        if self.properties is not None and t != "object":
            raise located(("properties",), "'properties' can only be set when type is 'object'")
        set_keys = {k for k, v in (("pattern", self.pattern), ("minLength", self.min_length),
                                   ("maxLength", self.max_length), ("minimum", self.minimum),
                                   ("maximum", self.maximum)) if v is not None}
        for key in sorted(set_keys):
            wanted = "number" if key in ("minimum", "maximum") else "string"
            if t != wanted:
                raise located((key,), f"'{key}' can only be set when type is '{wanted}'")
        if self.enum is not None:
            self._check_enum(t, self.enum)
        if self.pattern is not None:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    re.compile(self.pattern)
            except re.error as exc:
                raise located(("pattern",), f"not a valid regular expression: {exc}") from None
        if (self.min_length is not None and self.max_length is not None
                and self.min_length > self.max_length):
            raise located(("minLength",), "minLength is greater than maxLength")
        if (self.minimum is not None and self.maximum is not None
                and self.minimum > self.maximum):
            raise located(("minimum",), "minimum is greater than maximum")
        return self

    @staticmethod
    def _check_enum(t: str, enum: list[Any]) -> None:
        if t not in ("string", "number", "boolean"):
            raise located(("enum",), "'enum' can only be set when type is string, number or "
                                     "boolean")
        if not enum:
            raise located(("enum",), "'enum' must not be empty")
        for i, v in enumerate(enum):
            if v is None:
                raise located(("enum", i), "'enum' cannot contain null (use nullable: true)")
            if not value_has_type(v, t):
                raise located(("enum", i), f"enum value {v!r} is {json_kind(v)}, but the "
                                           f"field's type is '{t}'")


OutputSchema = dict[str, OutputField]


def value_has_type(value: Any, type_name: str) -> bool:
    """Whether a JSON value has one of the schema types (number excludes booleans)."""
    if type_name == "string":
        return isinstance(value, str)
    if type_name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if type_name == "boolean":
        return isinstance(value, bool)
    if type_name == "array":
        return isinstance(value, list)
    if type_name == "object":
        return isinstance(value, dict)
    return False


def json_kind(value: Any) -> str:
    """How a YAML value reads to a person: 'a string', 'a list', 'nothing', ..."""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _check_root_schema(schema: OutputSchema | None) -> OutputSchema | None:
    if schema:
        for name, fld in schema.items():
            if not fld.required:
                raise located((name, "required"),
                              f"root-level output field '{name}' cannot be optional "
                              "(required: false is only allowed inside 'properties')")
    return schema

