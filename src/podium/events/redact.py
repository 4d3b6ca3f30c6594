"""Secrets out of everything podium records: the values of API-key variables and of a workflow's
`secrets:`, in the forms they travel in (as is, JSON-escaped either way, URL-encoded, HTML-
escaped, base64), become `<secret:NAME>` before anything is written.

One Redactor serves a run, its sub-workflows (which inherit its secrets) and its run store, so
whatever reaches the store, the event log, the recording or a surface has passed through it.
`restore` puts the values back, from the environment, where a run needs them again (the
inputs of a resumed or forked run); a value that is not there is named, never invented.
"""

from __future__ import annotations

import base64
import json
import os
import re
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, quote_plus

if TYPE_CHECKING:
    from podium.language.model import WorkflowFile

MIN_LENGTH = 6  # shorter values would redact ordinary words

# Variables whose values are secrets even when a workflow does not say so: model providers'
# keys and tokens. Commands a model runs never see them, nor a workflow's `secrets:`.
KEY_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN",
                 "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_AD_TOKEN", "GITHUB_TOKEN", "GH_TOKEN",
                 "COPILOT_PROVIDER_API_KEY", "COPILOT_PROVIDER_BEARER_TOKEN")
_TOKEN = re.compile(r"<secret:([A-Za-z_][A-Za-z0-9_]*)>")


def secret_names(workflow: WorkflowFile) -> set[str]:
    """The variables whose values are secrets for this workflow."""
    return {*KEY_VARIABLES, *workflow.workflow.secrets}


def secret_values(workflow: WorkflowFile) -> dict[str, str]:
    """Values never to record, by variable name: the workflow's `secrets:` and API keys."""
    return {n: v for n in secret_names(workflow) if (v := os.environ.get(n, ""))}


class MissingSecret(Exception):
    """A recorded `<secret:NAME>` is needed again and NAME is not set."""

    def __init__(self, names: list[str]) -> None:
        super().__init__(", ".join(names))
        self.names = names


def _html(text: str) -> str:
    """html.escape, without importing html (and its entity tables) into every run."""
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;").replace("'", "&#x27;"))


def _forms(value: str) -> set[str]:
    """The ways `value` is written in the places podium records."""
    raw = value.encode("utf-8")
    forms = {
        value,
        json.dumps(value, ensure_ascii=False)[1:-1],
        json.dumps(value, ensure_ascii=True)[1:-1],
        quote(value, safe=""),
        quote(value),
        quote_plus(value),
        _html(value),
        base64.b64encode(raw).decode("ascii").rstrip("="),
        base64.urlsafe_b64encode(raw).decode("ascii").rstrip("="),
    }
    return {f for f in forms if len(f) >= MIN_LENGTH}


class Redactor:
    """Replaces secret values by `<secret:NAME>` in text and in JSON-like values."""

    def __init__(self, secrets: Mapping[str, str] | None = None) -> None:
        self._lock = threading.Lock()
        self.secrets: dict[str, str] = {}
        self._pairs: list[tuple[str, str]] = []  # (form, replacement), longest form first
        if secrets:
            self.add(secrets)

    def __bool__(self) -> bool:
        return bool(self._pairs)

    def add(self, secrets: Mapping[str, str]) -> None:
        """Also redact these values (by variable name); values shorter than MIN_LENGTH are
        left alone."""
        with self._lock:
            for name, value in secrets.items():
                if len(value) >= MIN_LENGTH:
                    self.secrets[name] = value
            pairs = {(form, f"<secret:{name}>") for name, value in self.secrets.items()
                     for form in _forms(value)}
            self._pairs = sorted(pairs, key=lambda p: (-len(p[0]), p[0]))

    def forms(self) -> list[str]:
        """Every text this redactor replaces, longest first (a stream holds back their
        beginnings at the end of a piece: events/redact_stream.py)."""
        return [form for form, _ in self._pairs]

    def text(self, text: str) -> str:
        for form, token in self._pairs:
            if form in text:
                text = text.replace(form, token)
        return text

    def value(self, value: Any) -> Any:
        """A copy of a JSON-like value with every string redacted (keys included)."""
        if not self._pairs:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {(self.text(k) if isinstance(k, str) else k): self.value(v)
                    for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.value(v) for v in value]
        return value


def restore_secrets(value: Any, names: set[str], environ: Mapping[str, str] | None = None
                    ) -> Any:
    """`value` with every `<secret:NAME>` of a variable in `names` replaced by its value in
    the environment. Raises MissingSecret naming the variables that are not set."""
    env = os.environ if environ is None else environ
    missing: list[str] = []

    def put(text: str) -> str:
        def one(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in names:
                return match.group(0)
            if name in env:
                return env[name]
            if name not in missing:
                missing.append(name)
            return match.group(0)

        return _TOKEN.sub(one, text)

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            return put(v) if "<secret:" in v else v
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    out = walk(value)
    if missing:
        raise MissingSecret(missing)
    return out
