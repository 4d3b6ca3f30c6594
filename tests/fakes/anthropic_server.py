"""A local server that speaks Anthropic's Messages wire protocol, streaming included (podium
streams): each scripted message is sent as the SSE events the real API sends (message_start,
content_block_start / _delta / _stop, message_delta, message_stop), text and tool input split
into several deltas. Errors are the API's JSON error bodies with their HTTP status.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from fakes.wire import Canned, Recorded, WireServer

_ids = itertools.count(1)


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(name: str, input: dict[str, Any], id: str | None = None) -> dict[str, Any]:
    return {"type": "tool_use", "id": id or f"toolu_{next(_ids):04d}", "name": name,
            "input": input}


def thinking(value: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": value, "signature": f"sig-{next(_ids)}"}


def message(*blocks: dict[str, Any], model: str = "claude-sonnet-5",
            usage: tuple[int, int, int, int] = (100, 30, 0, 0),
            stop: str | None = None) -> dict[str, Any]:
    """A Message; `usage` is (input, output, cache read, cache write) tokens as the API counts
    them (input excludes both cache buckets)."""
    inp, out, read, write = usage
    return {"id": f"msg_{next(_ids)}", "type": "message", "role": "assistant", "model": model,
            "content": list(blocks),
            "stop_reason": stop or ("tool_use" if any(b["type"] == "tool_use" for b in blocks)
                                    else "end_turn"),
            "stop_sequence": None,
            "usage": {"input_tokens": inp, "output_tokens": out,
                      "cache_read_input_tokens": read, "cache_creation_input_tokens": write}}


def error(status: int, message: str = "error", *, kind: str = "api_error",
          retry_after: str | None = None) -> Canned:
    headers = {"retry-after": retry_after} if retry_after is not None else {}
    return Canned(status, {"type": "error", "error": {"type": kind, "message": message}},
                  headers)


def _pieces(value: str, n: int = 3) -> list[str]:
    size = max(1, len(value) // n + 1)
    return [value[i:i + size] for i in range(0, len(value), size)] or [""]


def stream_events(msg: dict[str, Any]) -> list[tuple[str, Any]]:
    """The SSE events the Messages API sends for `msg`."""
    usage = msg["usage"]
    start = dict(msg, content=[], stop_reason=None,
                 usage=dict(usage, output_tokens=1))
    events: list[tuple[str, Any]] = [("message_start", {"type": "message_start",
                                                        "message": start})]
    for i, block in enumerate(msg["content"]):
        kind = block["type"]
        if kind == "text":
            first = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in _pieces(block["text"])]
        elif kind == "tool_use":
            first = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": p}
                      for p in _pieces(json.dumps(block["input"]))]
        elif kind == "thinking":
            first = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": p}
                      for p in _pieces(block["thinking"])]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        else:
            raise ValueError(kind)
        events.append(("content_block_start", {"type": "content_block_start", "index": i,
                                               "content_block": first}))
        events += [("content_block_delta", {"type": "content_block_delta", "index": i,
                                            "delta": d}) for d in deltas]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events.append(("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": msg["stop_reason"],
                                               "stop_sequence": None},
                                     "usage": {"output_tokens": usage["output_tokens"]}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


class FakeAnthropic(WireServer):
    """Serves POST /v1/messages, as a stream when the request asks for one."""

    def stream_events(self, item: Any) -> list[tuple[str | None, Any]] | None:
        return list(stream_events(item))

    def message_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.path.endswith("/messages")]
