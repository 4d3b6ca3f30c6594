"""Output contracts pass a value that holds through jsonschema-rs, and word the errors of one
that does not with jsonschema (steps/schema.py `_fast`). The two must agree on every value:
generated declarations (every keyword podium emits but `pattern`, which jsonschema-rs is never
asked about) and generated JSON, checked by both; and a run of valid outputs never imports
jsonschema at all."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from podium.language.schema import OutputField
from podium.steps.schema import _fast, _validator, check_value

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=6))
json_values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.sampled_from("abcd"), inner, max_size=4)),
    max_leaves=12)


def _field(depth: int) -> st.SearchStrategy[dict[str, Any]]:
    base = st.fixed_dictionaries({"type": st.sampled_from(["string", "number", "boolean"])},
                                 optional={"required": st.booleans(),
                                           "nullable": st.booleans()})

    def keywords(d: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
        if d["type"] == "string":
            return st.fixed_dictionaries({**{k: st.just(v) for k, v in d.items()}}, optional={
                "minLength": st.integers(0, 3), "maxLength": st.integers(3, 6),
                "enum": st.lists(st.text(max_size=3), min_size=1, max_size=3)})
        if d["type"] == "number":
            return st.fixed_dictionaries({**{k: st.just(v) for k, v in d.items()}}, optional={
                "minimum": st.integers(-5, 0), "maximum": st.integers(1, 5),
                "enum": st.lists(st.one_of(st.integers(-3, 3), st.floats(-3, 3)), min_size=1,
                                 max_size=3)})
        return st.fixed_dictionaries({**{k: st.just(v) for k, v in d.items()}}, optional={
            "enum": st.lists(st.booleans(), min_size=1, max_size=2)})

    leaf = base.flatmap(keywords)
    if depth == 0:
        return leaf
    inner = _field(depth - 1)
    return st.one_of(
        leaf,
        st.fixed_dictionaries({"type": st.just("array"), "items": inner},
                              optional={"required": st.booleans(), "nullable": st.booleans()}),
        st.fixed_dictionaries({"type": st.just("object"),
                               "properties": st.dictionaries(st.sampled_from("abcd"), inner,
                                                             min_size=1, max_size=3)},
                              optional={"required": st.booleans(), "nullable": st.booleans()}))


declarations = st.dictionaries(st.sampled_from("abcd"), _field(2), min_size=1, max_size=3)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(declarations, st.dictionaries(st.sampled_from("abcdx"), json_values, max_size=4))
def test_jsonschema_rs_and_jsonschema_agree_on_every_value(
        raw: dict[str, Any], data: dict[str, Any]) -> None:
    schema = {name: OutputField.model_validate(f) for name, f in raw.items()}
    fast = _fast(schema)
    assert fast is not None
    slow = not list(_validator(schema).iter_errors(data))
    try:
        quick = fast.is_valid(data)
    except (ValueError, TypeError, OverflowError):
        return  # check_value asks jsonschema then
    assert quick == slow, (raw, data)


def test_a_pattern_is_checked_by_jsonschema_alone() -> None:
    schema = {"id": OutputField.model_validate({"type": "string", "pattern": "^(?=a)a+$"})}
    assert _fast(schema) is None
    check_value(schema, {"id": "aaa"})


def test_valid_outputs_never_import_jsonschema() -> None:
    code = textwrap.dedent("""
        import sys
        from podium.language.schema import OutputField
        from podium.steps.schema import SchemaViolation, check_value
        schema = {"ok": OutputField.model_validate({"type": "boolean"}),
                  "n": OutputField.model_validate({"type": "number", "minimum": 0})}
        for i in range(100):
            check_value(schema, {"ok": True, "n": i})
        print("jsonschema" in sys.modules)
        try:
            check_value(schema, {"ok": True, "n": -1})
        except SchemaViolation as exc:
            print(exc)
        print("jsonschema" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60).stdout.splitlines()
    assert out == ["False", "output field 'n' is below the minimum 0", "True"]
