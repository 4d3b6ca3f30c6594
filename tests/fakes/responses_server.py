"""A local server that speaks OpenAI's Responses wire protocol (POST /v1/responses), scripted
per test: a final message, function calls, or an error. The Copilot CLI uses it with
`wire_api: responses`; it asks without streaming, and a request that does ask for a stream
gets the SSE events the real API sends (response.created ... response.completed).

    with FakeResponses() as srv:
        srv.script(response(calls=[function_call("create", {...})]), response("done"))
        srv.requests[0].body["tools"]
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from fakes.wire import Canned, Recorded, WireServer

_ids = itertools.count(1)


def function_call(name: str, arguments: dict[str, Any], call_id: str | None = None
                  ) -> dict[str, Any]:
    n = next(_ids)
    return {"type": "function_call", "id": f"fc_{n}", "call_id": call_id or f"call_{n}",
            "name": name, "arguments": json.dumps(arguments), "status": "completed"}


def response(text: str | None = None, *, calls: list[dict[str, Any]] | None = None,
             model: str = "gpt-5-mini-2025-08-07", usage: tuple[int, int, int] = (100, 20, 0)
             ) -> dict[str, Any]:
    """A Response object; `usage` is (input, output, cached input tokens)."""
    output: list[dict[str, Any]] = []
    if text is not None:
        output.append({"type": "message", "id": f"msg_{next(_ids)}", "role": "assistant",
                       "status": "completed",
                       "content": [{"type": "output_text", "text": text, "annotations": []}]})
    output += calls or []
    inp, out, cached = usage
    return {"id": f"resp_{next(_ids)}", "object": "response", "created_at": 1_700_000_000,
            "status": "completed", "model": model, "output": output,
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "usage": {"input_tokens": inp, "output_tokens": out, "total_tokens": inp + out,
                      "input_tokens_details": {"cached_tokens": cached},
                      "output_tokens_details": {"reasoning_tokens": 0}}}


def stream_events(resp: dict[str, Any]) -> list[tuple[str, Any]]:
    """The SSE events of a streamed Response (each output item whole, then completed)."""
    seq = itertools.count()
    start = dict(resp, status="in_progress", output=[])
    events: list[tuple[str, Any]] = [
        ("response.created", {"type": "response.created", "response": start,
                              "sequence_number": next(seq)})]
    for i, item in enumerate(resp["output"]):
        events.append(("response.output_item.added", {
            "type": "response.output_item.added", "output_index": i, "item": item,
            "sequence_number": next(seq)}))
        events.append(("response.output_item.done", {
            "type": "response.output_item.done", "output_index": i, "item": item,
            "sequence_number": next(seq)}))
    events.append(("response.completed", {"type": "response.completed", "response": resp,
                                          "sequence_number": next(seq)}))
    return events


def error(status: int, message: str = "error", *, kind: str = "server_error") -> Canned:
    return Canned(status, {"error": {"message": message, "type": kind, "param": None,
                                     "code": None}})


class FakeResponses(WireServer):
    """Serves POST /v1/responses (a stream when the request asks for one)."""

    def stream_events(self, item: Any) -> list[tuple[str | None, Any]] | None:
        return list(stream_events(item))

    def response_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.path.endswith("/responses")]
