"""The output contract (steps/schema.py): checked by jsonschema (Draft 2020-12), reported in
podium's words: the path of the failing field and what was expected, first in declaration
order."""

from __future__ import annotations

from typing import Any

import pytest

from podium.language.model import OutputField
from podium.steps import schema as schema_module
from podium.steps.schema import SchemaViolation, check_value, validation_schema


def _decl(fields: dict[str, Any]) -> dict[str, OutputField]:
    return {name: OutputField.model_validate(f) for name, f in fields.items()}


REVIEW = _decl({
    "verdict": {"type": "string", "enum": ["approve", "revise"]},
    "score": {"type": "number", "minimum": 0, "maximum": 10},
    "ticket": {"type": "string", "pattern": r"^[A-Z]+-\d+$", "minLength": 3, "maxLength": 9,
               "required": False},
    "notes": {"type": "string", "nullable": True},
    "issues": {"type": "array", "items": {"type": "object", "properties": {
        "file": {"type": "string"}, "line": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string"}, "required": False}}}},
})
GOOD: dict[str, Any] = {"verdict": "revise", "score": 7, "notes": None, "extra": "allowed",
                        "issues": [{"file": "a.py", "line": 3}]}


def _violation(data: Any, decl: dict[str, OutputField] = REVIEW) -> tuple[str, str]:
    with pytest.raises(SchemaViolation) as info:
        check_value(decl, data)
    return info.value.field, str(info.value)


def test_a_valid_output_passes_and_extra_keys_are_allowed() -> None:
    check_value(REVIEW, GOOD)
    check_value({}, {"anything": 1})


@pytest.mark.parametrize(("change", "field", "message"), [
    ({"verdict": "ship"}, "verdict",
     "output field 'verdict' must be one of \"approve\", \"revise\" (received: \"ship\")"),
    ({"verdict": 3}, "verdict",
     "output field 'verdict' has wrong type: expected string, got number (received: 3)"),
    ({"score": True}, "score",
     "output field 'score' has wrong type: expected number, got boolean (received: true)"),
    ({"score": -1}, "score", "output field 'score' is below the minimum 0"),
    ({"score": 10.5}, "score", "output field 'score' is above the maximum 10"),
    ({"score": None}, "score", "output field 'score' must not be null"),
    ({"ticket": "AB"}, "ticket", "output field 'ticket' is shorter than 3 characters"),
    ({"ticket": "ABCDEFG-12"}, "ticket", "output field 'ticket' is longer than 9 characters"),
    ({"ticket": "ab-1"}, "ticket",
     "output field 'ticket' does not match pattern '^[A-Z]+-\\\\d+$'"),
    ({"issues": [{"file": "a.py", "line": 1}, {"file": "b.py", "line": "ten"}]}, "issues[1].line",
     "output field 'issues[1].line' has wrong type: expected number, got string "
     "(received: \"ten\")"),
    ({"issues": [{"file": "a.py"}]}, "issues[0].line",
     "missing required output field: issues[0].line"),
    ({"issues": ["a.py"]}, "issues[0]",
     "array item 0 in 'issues' has wrong type: expected object, got string"),
    ({"issues": [None]}, "issues[0]", "output field 'issues[0]' must not be null"),
    ({"issues": [{"file": "a", "line": 1, "tags": ["x", 2]}]}, "issues[0].tags[1]",
     "array item 1 in 'issues[0].tags' has wrong type: expected string, got number"),
    ({"issues": {"file": "a"}}, "issues",
     "output field 'issues' has wrong type: expected array, got object (received: object "
     "with keys [file])"),
])
def test_each_violation_names_its_field_and_what_was_expected(
        change: dict[str, Any], field: str, message: str) -> None:
    assert _violation({**GOOD, **change}) == (field, message)


def test_a_missing_required_field_is_named() -> None:
    data = dict(GOOD)
    del data["score"]
    assert _violation(data) == ("score", "missing required output field: score")


def test_the_first_violation_in_declaration_order_is_reported() -> None:
    # jsonschema finds every error; podium reports the first field as declared, and within a
    # field the type before the enum, the length before the pattern.
    bad = {**GOOD, "verdict": 1, "score": "x", "issues": [{"line": "y"}]}
    assert _violation(bad)[0] == "verdict"
    del bad["verdict"]
    assert _violation(bad) == ("verdict", "missing required output field: verdict")
    assert _violation({**GOOD, "ticket": "a"})[1] == \
        "output field 'ticket' is shorter than 3 characters"
    assert _violation({**GOOD, "issues": [{"file": 1}, {"line": 2}]})[0] == "issues[0].file"


def test_an_output_that_is_not_an_object() -> None:
    assert _violation([1, 2]) == ("<output>", "output must be a JSON object, got array")
    with pytest.raises(SchemaViolation, match="got null"):
        check_value({}, None)


def test_nested_objects_and_prefixes() -> None:
    decl = _decl({"meta": {"type": "object", "properties": {
        "owner": {"type": "string"}, "size": {"type": "number", "required": False}}}})
    assert _violation({"meta": {"size": 1}}, decl) == (
        "meta.owner", "missing required output field: meta.owner")
    with pytest.raises(SchemaViolation) as info:
        check_value(decl, {"meta": {"owner": 1}}, prefix="result.")
    assert info.value.field == "result.meta.owner"


def test_the_json_schema_is_built_once_per_declaration() -> None:
    schema_module._validators.clear()
    schema_module._fast_validators.clear()
    plain = {k: v for k, v in REVIEW.items() if k != "ticket"}  # no pattern: jsonschema-rs
    check_value(plain, GOOD)
    first = schema_module._fast(plain)
    assert first is not None
    for _ in range(3):
        check_value(plain, GOOD)
    assert schema_module._fast(plain) is first
    assert len(schema_module._fast_validators) == 1
    assert not schema_module._validators  # a valid value needs no jsonschema validator
    # a declaration with a pattern, and a value that fails, are jsonschema's: built once too
    check_value(REVIEW, GOOD)
    for _ in range(2):
        with pytest.raises(SchemaViolation):
            check_value(plain, {})
    assert len(schema_module._validators) == 2
    # An equal but distinct declaration gets its own entry; the cache is bounded.
    check_value(_decl({"verdict": {"type": "string"}}), {"verdict": "x"})
    assert len(schema_module._fast_validators) == 3
    assert validation_schema(REVIEW)["required"] == ["verdict", "score", "notes", "issues"]
    assert "additionalProperties" not in validation_schema(REVIEW)


def test_a_declaration_is_translated_once_and_each_provider_copies_before_it_adapts() -> None:
    from podium.providers.openai_chat import response_format
    from podium.steps.schema import declared_schema, to_json_schema

    decl = {"verdict": OutputField(type="string", enum=["ok", "no"]),
            "score": OutputField(type="number", required=False)}
    made = declared_schema(decl)
    assert made is declared_schema(decl)  # every member of a fan-out sends this one
    assert made == to_json_schema(decl)
    before = to_json_schema(decl)
    fmt = response_format(made)
    assert fmt is response_format(made)
    assert fmt["json_schema"]["strict"] is False  # an optional field: not strict
    assert made == before  # adapting it for OpenAI left the shared one as it was
    other = {"verdict": OutputField(type="string")}
    strict = response_format(declared_schema(other))
    assert strict["json_schema"]["strict"] is True
    assert strict["json_schema"]["schema"] is not declared_schema(other)  # a copy, adapted
    assert response_format(made) == fmt  # an earlier schema again: worked out again, equal
