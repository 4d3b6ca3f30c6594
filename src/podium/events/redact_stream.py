"""Streamed model text with no secret cut in two: each stream holds back, at the end of every
piece, the longest tail that could be the beginning of a secret in any form the run's
Redactor knows, and lets it go once the next piece shows what it was, or when the stream ends.

A stream is one step iteration's run of `model_delta` pieces of one kind (and one tool). Each
piece is joined to what its stream held, redacted whole, and delivered without its held tail
(its step and tool names redacted too: what comes out is ready for any observer);
so a secret split across two pieces (or across many) reaches an observer (the `-v` terminal,
`--log-file`, live rows, traces) as `<secret:NAME>`, never in halves. The bus asks `release`
before any other event of the step (its `model_exchange` follows the last piece) and at the
run's end, so nothing held is lost: a tail that never became a secret goes out as it was.
"""

from __future__ import annotations

from podium.events.model import ModelDelta, stamped
from podium.events.redact import Redactor
from podium.records import record

StreamKey = tuple[str | None, str, int]  # run id, step, iteration


@record
class _Held:
    piece: ModelDelta  # the last piece of the stream (its kind, tool, run and step)
    text: str  # redacted text not delivered yet: a possible beginning of a secret


class StreamRedactor:
    """The held tails of a bus's open streams. Not thread-safe: the bus calls it under its
    lock."""

    def __init__(self) -> None:
        self._held: dict[StreamKey, _Held] = {}
        self._forms: tuple[str, ...] = ()
        self._starts: frozenset[str] = frozenset()  # every proper prefix of every form
        self._firsts: frozenset[str] = frozenset()  # their first characters
        self._longest = 0

    def __bool__(self) -> bool:
        return bool(self._held)

    def piece(self, delta: ModelDelta, redactor: Redactor) -> list[ModelDelta]:
        """What to deliver now for `delta`: the rest of the step's previous stream when this
        one is of another kind or tool, then this piece's text, redacted, less its held tail
        (nothing when all of it is held)."""
        out: list[ModelDelta] = []
        key = (delta.run_id, delta.step, delta.iteration)  # as the step's other events say
        delta = _named(delta, redactor)
        held = self._held.pop(key, None)
        text = delta.text
        if held is not None:
            if (held.piece.kind, held.piece.tool) == (delta.kind, delta.tool):
                text = held.text + text
            else:
                out.append(_with(held.piece, held.text))
        clean = redactor.text(text)
        cut = self._tail_start(clean, redactor)
        if cut < len(clean):
            self._held[key] = _Held(delta, clean[cut:])
        if cut and cut == len(clean) and clean is delta.text:
            out.append(delta)  # nothing held before it, nothing to hold or redact in it
        elif cut > 0:
            out.append(_with(delta, clean[:cut]))
        return out

    def release(self, run_id: str | None, step: str | None = None) -> list[ModelDelta]:
        """The held tails of the streams that end now: `step`'s (any iteration), or every
        stream of the run when `step` is None."""
        keys = [k for k in self._held if k[0] == run_id and (step is None or k[1] == step)]
        return [_with(held.piece, held.text) for held in (self._held.pop(k) for k in keys)]

    def _tail_start(self, text: str, redactor: Redactor) -> int:
        """Where the longest tail of `text` that begins some form of a secret starts
        (len(text): no such tail)."""
        self._learn(redactor)
        if not self._longest:
            return len(text)
        firsts = self._firsts
        for start in range(max(0, len(text) - self._longest + 1), len(text)):
            if text[start] in firsts and text[start:] in self._starts:
                return start
        return len(text)

    def _learn(self, redactor: Redactor) -> None:
        forms = redactor.forms()
        if forms is self._forms or forms == self._forms:
            return
        self._forms = forms
        self._starts = frozenset(f[:n] for f in forms for n in range(1, len(f)))
        self._firsts = frozenset(f[0] for f in forms if len(f) > 1)  # where a tail can begin
        self._longest = max((len(f) for f in forms), default=0)


def _with(piece: ModelDelta, text: str) -> ModelDelta:
    return stamped(piece, {"text": text})  # model_copy's result, made as the bus makes its own


def _named(delta: ModelDelta, redactor: Redactor) -> ModelDelta:
    """The delta with its step and tool names redacted (a for-each item's label holds its
    key, a tool's name comes from the model): with its text, the only fields of a piece a
    secret can reach (events/redact.py _fixed_fields)."""
    step = redactor.text(delta.step)
    tool = redactor.text(delta.tool) if delta.tool is not None else None
    if step is delta.step and tool is delta.tool:
        return delta
    return stamped(delta, {"step": step, "tool": tool})
