"""Secrets out of the places issue 28 (item 2) found them in, each on the real parts: spans,
guidance and gate answers in the store, the graph views, the reaper's environment, the MCP
server, `podium test`, spilled tool output, the fleet TUI's live data, and replay of a run
that read a secret (issue 27, item 4).
"""

from __future__ import annotations

from typing import Any

from podium.events.model import DialogMessage, GuidanceAdded, ModelDelta
from test_telemetry import agent_events, feed, sink


# ----------------------------------------------------------------------------- spans


def _with_content() -> list[Any]:
    events = agent_events()
    extra = [ModelDelta(step="a", iteration=1, kind="text", text="streamed words"),
             DialogMessage(step="a", iteration=1, role="user", content="said by a person"),
             GuidanceAdded(text="guided words", step="a", iteration=1)]
    return [*events[:4], *extra, *events[4:]]


def _span_text(exporter: Any) -> str:
    return "".join(repr(dict(s.attributes or {})) + repr([(e.name, dict(e.attributes or {}))
                                                           for e in s.events])
                   for s in exporter.get_finished_spans())


def test_spans_carry_no_streamed_or_said_text_without_the_capture_variable() -> None:
    trace_sink, exporter = sink()
    feed(trace_sink, *_with_content())
    text = _span_text(exporter)
    for said in ("streamed words", "said by a person", "guided words"):
        assert said not in text
    assert "model_delta" not in text  # no span event for a piece at all
    assert "dialog_message" in text  # the turn itself is still seen


def test_spans_carry_the_text_with_the_capture_variable() -> None:
    trace_sink, exporter = sink(capture=True)
    feed(trace_sink, *_with_content())
    text = _span_text(exporter)
    for said in ("streamed words", "said by a person", "guided words"):
        assert said in text
