"""The Redactor: every form a secret travels in becomes `<secret:NAME>` (as is, JSON-escaped at
any depth either way, URL, HTML, shell-quoted, base64 at any offset), in text, in JSON-like
values and in every event type, which stays valid JSON of the same shape; a short value is
redacted only as a whole word, and a short declared secret is refused; values come back from
the environment only for the variables asked for, and a missing one is named."""

from __future__ import annotations

import base64
import html
import json
import os
import re
import shlex
import string
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, get_args, get_origin
from urllib.parse import quote, quote_plus

import markupsafe
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from helpers_engine import load, write
from podium.errors import UsageError
from podium.events.model import EVENT_CLASSES, Event, StepFinished, parse_event
from podium.events.redact import (
    MIN_LENGTH,
    MissingSecret,
    Redactor,
    restore_secrets,
    secret_values,
)

SECRET = 'ü"ber\\geheim/ключ 🔑&<x>\'q'


def _j(value: str, ascii_: bool = True) -> str:
    return json.dumps(value, ensure_ascii=ascii_)[1:-1]


def _b64_chunks(value: str) -> list[bytes]:
    """The base64 characters `value`'s bytes alone decide, at the three offsets (the test's
    own arithmetic, not the Redactor's)."""
    raw = value.encode("utf-8", "surrogatepass")
    out = []
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw + b"\0\0")
        first, last = -(-8 * offset // 6), (8 * (offset + len(raw)) - 6) // 6
        chunk = encoded[first:last + 1]
        out += [chunk, chunk.replace(b"+", b"-").replace(b"/", b"_")]
    return out


# encodings a secret travels in, composable (each takes the text holding it)
ENCODINGS: dict[str, Callable[[str], str]] = {
    "raw": lambda s: s,
    "json": _j,
    "json-unicode": lambda s: _j(s, ascii_=False),
    "json-in-json": lambda s: _j(json.dumps({"v": s})),
    "json x3 mixed": lambda s: _j(_j(_j(s, ascii_=False)), ascii_=False),
    "url": lambda s: quote(s, safe=""),
    "url-path": quote,
    "url-plus": quote_plus,
    "url-lower-hex": lambda s: re.sub("%[0-9A-F]{2}", lambda m: m.group(0).lower(),
                                      quote(s, safe="")),
    "html": html.escape,
    "markupsafe": lambda s: str(markupsafe.escape(s)),
    "html-in-json": lambda s: _j(str(markupsafe.escape(s))),
    "shlex": shlex.quote,
    "shlex-in-json": lambda s: _j(shlex.quote(s)),
    "bash '\\''": lambda s: "'" + s.replace("'", "'\\''") + "'",
    "base64": lambda s: base64.b64encode(s.encode()).decode(),
    "basic header": lambda s: "Basic " + base64.b64encode(f"user:{s}".encode()).decode(),
    "base64 offset 1": lambda s: base64.b64encode(b"u" + s.encode()).decode(),
    "base64-url offset 2": lambda s: base64.urlsafe_b64encode(b"us" + s.encode()).decode(),
}


@pytest.mark.parametrize("name", list(ENCODINGS))
def test_every_form_is_redacted(name: str) -> None:
    form = ENCODINGS[name](SECRET)
    got = Redactor({"TOKEN": SECRET}).text(f"before {form} after")
    assert "<secret:TOKEN>" in got
    assert SECRET not in got
    assert not any(c in got.encode() for c in _b64_chunks(SECRET))
    assert got.startswith("before ")
    assert got.endswith(" after")


def test_max_form_length_bounds_the_forms_a_stream_must_hold_back() -> None:
    r = Redactor({"TOKEN": SECRET})
    longest = max(len(ENCODINGS[e](SECRET)) for e in ENCODINGS if "base64" not in e
                  and "basic" not in e)
    assert len(_j(_j(_j(SECRET)))) <= r.max_form_length
    assert longest <= r.max_form_length
    assert Redactor().max_form_length == 0


def test_values_inside_structures_keys_and_numbers_are_redacted() -> None:
    r = Redactor({"TOKEN": SECRET, "NUM": "73915468"})
    got = r.value({"a": [SECRET, {SECRET: 1}], "n": 73915468, "m": 1739154680.5, "k": 3,
                   "none": None, "flag": True})
    assert got == {"a": ["<secret:TOKEN>", {"<secret:TOKEN>": 1}], "n": "<number:<secret:NUM>>",
                   "m": "<number:1<secret:NUM>0.5>", "k": 3, "none": None, "flag": True}
    back = restore_secrets(got, {"TOKEN", "NUM"}, {"TOKEN": SECRET, "NUM": "73915468"})
    assert (back["n"], back["m"]) == (73915468, 1739154680.5)  # numbers again, on resume


def test_short_values_are_redacted_as_whole_words_and_longer_ones_win() -> None:
    r = Redactor({"SHORT": "sk-x", "LONG": "abcdefgh-123", "PART": "abcdefgh"})
    assert r.text("Bearer sk-x, 'sk-x' ask-xyz sk-xy") == \
        "Bearer <secret:SHORT>, '<secret:SHORT>' ask-xyz sk-xy"
    assert r.text("abcdefgh-123 abcdefgh") == "<secret:LONG> <secret:PART>"


def test_a_short_declared_secret_is_refused_naming_the_variable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wf = load(write(tmp_path, """
        workflow: {name: s, entry_point: a, secrets: [MY_TOKEN]}
        agents: [{name: a, type: set, value: x}]
        """))
    monkeypatch.setenv("MY_TOKEN", "abc")
    with pytest.raises(UsageError) as info:
        secret_values(wf)
    assert info.value.exit_code == 2
    assert "MY_TOKEN is 3 characters long" in str(info.value)
    assert "abc" not in str(info.value).replace("MY_TOKEN", "")
    monkeypatch.setenv("MY_TOKEN", "x" * MIN_LENGTH)
    assert secret_values(wf)["MY_TOKEN"] == "x" * MIN_LENGTH
    monkeypatch.setenv("OPENAI_API_KEY", "EMPTY")  # a local server's placeholder: not refused
    assert secret_values(wf)["OPENAI_API_KEY"] == "EMPTY"


@pytest.mark.parametrize("secret", ["73915468", "true", "123", "1.5", "null", '"x"'])
def test_a_secret_that_is_json_keeps_the_event_valid(secret: str) -> None:
    """A numeric (or JSON-literal) secret used to be replaced in the event's JSON text, which
    then failed to parse: the run and its resume died with a JSONDecodeError."""
    event = StepFinished(step="s", step_type="script", iteration=1, elapsed=73915468.0,
                         seq=123, input_tokens=73915468, output={"n": 73915468, "b": True,
                                                                  "t": f"is {secret} here"})
    got = Redactor({"MY_TOKEN": secret}).event(event)
    again = parse_event(json.loads(got.model_dump_json()))
    assert again == got
    assert (got.seq, got.input_tokens, got.elapsed) == (123, 73915468, 73915468.0)  # podium's
    assert got.output["t"] == "is <secret:MY_TOKEN> here"
    assert got.output["b"] is True
    if secret == "73915468":
        assert got.output["n"] == "<number:<secret:MY_TOKEN>>"


def test_restore_takes_named_values_from_the_environment() -> None:
    value = {"t": "<secret:TOKEN> and <secret:OTHER>", "l": ["<secret:TOKEN>"]}
    got = restore_secrets(value, {"TOKEN"}, {"TOKEN": SECRET, "OTHER": "no"})
    assert got == {"t": f"{SECRET} and <secret:OTHER>", "l": [SECRET]}  # OTHER: not asked
    with pytest.raises(MissingSecret) as info:
        restore_secrets(value, {"TOKEN", "OTHER"}, {"TOKEN": SECRET})
    assert info.value.names == ["OTHER"]


# ---------------------------------------------------------------- the property, every event

SPECIAL = '"\\\'&<>/ %+=\n\t\r\x00\x1f\x7f\u2028üß€ключ🔑'
secrets = st.one_of(
    st.text(min_size=MIN_LENGTH, max_size=40),  # any character (control, non-ASCII, ...)
    st.text(alphabet=SPECIAL + "ab1", min_size=MIN_LENGTH, max_size=24),
    st.text(alphabet=string.digits, min_size=MIN_LENGTH, max_size=16),
    st.text(alphabet=string.printable, min_size=MIN_LENGTH, max_size=30),
    st.text(alphabet=string.ascii_letters + string.digits, min_size=200, max_size=400),
    st.text(alphabet=string.ascii_letters + string.digits + "-_", min_size=1,
            max_size=MIN_LENGTH - 1),  # short: whole words only
    st.sampled_from(["true", "false", "null", "12345678", "-1.5e10", '{"a": 1}', "[]"]),
)
SHORT_ENCODINGS = ("raw", "json", "json-in-json", "url", "html", "shlex")


def _sample(tp: Any, payload: str) -> Any:
    """A value of annotation `tp` that holds `payload` wherever a value can."""
    origin, args = get_origin(tp), get_args(tp)
    if origin is Literal:
        return args[0]
    if args and origin not in (list, dict):  # a union: its first non-None member
        return _sample(next(a for a in args if a is not type(None)), payload)
    if tp is str:
        return payload
    if tp is Any:
        return {"text": payload, "deep": [{"in": payload}], payload: 1}
    if tp in (int, float):
        return 2
    if tp is bool:
        return False
    if origin is list:
        return [_sample(args[0], payload)]
    if origin is dict:
        return {"k": _sample(args[1], payload), payload: _sample(args[1], "plain")}
    raise AssertionError(f"no sample for {tp!r}")


def _event(cls: type[Event], payload: str) -> Event:
    envelope = {"v", "type", "run_id", "seq", "ts", "parent_run_id"}
    data = {n: _sample(f.annotation, payload) for n, f in cls.model_fields.items()
            if n not in envelope}
    return cls(run_id="run-1", seq=7, ts=1.0, **data)


def _shape(value: Any) -> Any:
    if isinstance(value, dict):
        return ["dict", [_shape(v) for v in value.values()]]
    if isinstance(value, list):
        return ["list", [_shape(v) for v in value]]
    return "scalar"


def _needles(secret: str) -> list[bytes]:
    forms = {ENCODINGS[e](secret) for e in ("raw", "json", "json-unicode", "url", "url-plus",
                                             "html", "markupsafe", "shlex")}
    forms |= {_j(f) for f in list(forms)} | {_j(_j(secret))}
    needles = [f.encode("utf-8", "surrogatepass") for f in forms]
    return needles + (_b64_chunks(secret) if len(secret) >= MIN_LENGTH else [])


@settings(max_examples=int(os.environ.get("PODIUM_REDACT_EXAMPLES", "400")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(secret=secrets, cls=st.sampled_from(sorted(EVENT_CLASSES.values(), key=str)),
       encodings=st.lists(st.sampled_from(sorted(ENCODINGS)), min_size=1, max_size=3))
def test_no_form_of_a_secret_survives_in_any_event(secret: str, cls: type[Event],
                                                   encodings: list[str]) -> None:
    short = len(secret) < MIN_LENGTH
    if short:
        encodings = [e for e in encodings if e in SHORT_ENCODINGS] or ["raw"]
    payload = " ".join(f"[ {ENCODINGS[e](secret)} ]" for e in encodings)
    placeholder = _event(cls, " ".join(f"[ {ENCODINGS[e]('QQQQQQ')} ]" for e in encodings))
    plain = placeholder.model_dump_json().encode() + b"<secret:MY_TOKEN>"
    needles = _needles(secret) if not short else [
        n for e in SHORT_ENCODINGS for n in [ENCODINGS[e](secret).encode()]]
    # a secret the event's own syntax or podium's words already spell is no finding
    assume(not any(n in plain for n in needles))
    event = _event(cls, payload)
    redacted = Redactor({"MY_TOKEN": secret}).event(event)
    text = redacted.model_dump_json()
    data = json.loads(text)  # still valid JSON, still this event, still its shape
    assert parse_event(data) == redacted
    assert _shape(data) == _shape(json.loads(event.model_dump_json()))
    found = [n for n in needles if n in text.encode("utf-8", "surrogatepass")]
    assert found == [], (secret, encodings, text[:400])
    assert "<secret:MY_TOKEN>" in text
