"""The Redactor: every form a secret travels in becomes `<secret:NAME>`; values come back from
the environment only for the variables asked for, and a missing one is named."""

from __future__ import annotations

import base64
import html
import json
from urllib.parse import quote, quote_plus

import pytest

from podium.events.redact import MIN_LENGTH, MissingSecret, Redactor, restore_secrets

SECRET = 'ü"ber\\geheim/ключ 🔑&<x>'


@pytest.mark.parametrize("form", [
    SECRET,
    json.dumps(SECRET, ensure_ascii=False)[1:-1],
    json.dumps(SECRET, ensure_ascii=True)[1:-1],
    quote(SECRET, safe=""),
    quote(SECRET),
    quote_plus(SECRET),
    html.escape(SECRET),
    base64.b64encode(SECRET.encode()).decode().rstrip("="),
    base64.urlsafe_b64encode(SECRET.encode()).decode().rstrip("="),
], ids=["raw", "json", "json-ascii", "url", "url-path", "url-plus", "html", "base64",
        "base64-url"])
def test_every_form_is_redacted(form: str) -> None:
    r = Redactor({"TOKEN": SECRET})
    assert r.text(f"before {form} after") == "before <secret:TOKEN> after"


def test_values_inside_structures_and_keys_are_redacted() -> None:
    r = Redactor({"TOKEN": SECRET})
    got = r.value({"a": [SECRET, {SECRET: 1}], "n": 3, "none": None})
    assert got == {"a": ["<secret:TOKEN>", {"<secret:TOKEN>": 1}], "n": 3, "none": None}


def test_short_values_are_not_secrets_and_longer_ones_win() -> None:
    r = Redactor({"SHORT": "x" * (MIN_LENGTH - 1), "LONG": "abcdefgh-123", "PART": "abcdefgh"})
    assert r.text("xxxxx") == "xxxxx"
    assert r.text("abcdefgh-123 abcdefgh") == "<secret:LONG> <secret:PART>"


def test_restore_takes_named_values_from_the_environment() -> None:
    value = {"t": "<secret:TOKEN> and <secret:OTHER>", "l": ["<secret:TOKEN>"]}
    got = restore_secrets(value, {"TOKEN"}, {"TOKEN": SECRET, "OTHER": "no"})
    assert got == {"t": f"{SECRET} and <secret:OTHER>", "l": [SECRET]}  # OTHER: not asked
    with pytest.raises(MissingSecret) as info:
        restore_secrets(value, {"TOKEN", "OTHER"}, {"TOKEN": SECRET})
    assert info.value.names == ["OTHER"]
