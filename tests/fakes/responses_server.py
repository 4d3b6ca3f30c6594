"""A local server that speaks OpenAI's Responses wire protocol (POST /v1/responses), scripted
per test: a final message, function calls, a reasoning summary, or an error. The Copilot CLI
uses it with `wire_api: responses`; a request that asks for a stream (the CLI does, as podium
streams) gets the SSE events the real API sends: response.created, each output item added,
its text, arguments or summary in several deltas, the item done, then response.completed.

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
             model: str = "gpt-5-mini-2025-08-07", usage: tuple[int, int, int] = (100, 20, 0),
             reasoning: str | None = None) -> dict[str, Any]:
    """A Response object; `usage` is (input, output, cached input tokens); `reasoning` a
    reasoning summary before the answer."""
    output: list[dict[str, Any]] = []
    if reasoning is not None:
        output.append({"type": "reasoning", "id": f"rs_{next(_ids)}",
                       "summary": [{"type": "summary_text", "text": reasoning}]})
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


def _pieces(value: str, n: int = 3) -> list[str]:
    size = max(1, len(value) // n + 1)
    return [value[i:i + size] for i in range(0, len(value), size)] or [""]


def _item_deltas(i: int, item: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The events between an output item's `added` and `done`: its content in pieces."""
    at = {"item_id": item["id"], "output_index": i}
    kind = item["type"]
    if kind == "message":
        whole = item["content"][0]["text"]
        part = {"type": "output_text", "text": "", "annotations": []}
        at_part = dict(at, content_index=0)
        return [("response.content_part.added", dict(at_part, part=part)),
                *[("response.output_text.delta", dict(at_part, delta=p))
                  for p in _pieces(whole)],
                ("response.output_text.done", dict(at_part, text=whole)),
                ("response.content_part.done", dict(at_part, part=dict(part, text=whole)))]
    if kind == "function_call":
        whole = item["arguments"]
        return [*[("response.function_call_arguments.delta", dict(at, delta=p))
                  for p in _pieces(whole)],
                ("response.function_call_arguments.done", dict(at, arguments=whole))]
    if kind == "reasoning":
        whole = item["summary"][0]["text"]
        at_sum = dict(at, summary_index=0)
        return [("response.reasoning_summary_part.added",
                 dict(at_sum, part={"type": "summary_text", "text": ""})),
                *[("response.reasoning_summary_text.delta", dict(at_sum, delta=p))
                  for p in _pieces(whole)],
                ("response.reasoning_summary_text.done", dict(at_sum, text=whole)),
                ("response.reasoning_summary_part.done",
                 dict(at_sum, part={"type": "summary_text", "text": whole}))]
    raise ValueError(kind)


def _started(item: dict[str, Any]) -> dict[str, Any]:
    """An output item as `output_item.added` shows it: in progress, its content still empty."""
    empty = {"message": {"content": []}, "function_call": {"arguments": ""},
             "reasoning": {"summary": []}}[item["type"]]
    return dict(item, status="in_progress", **empty)


def stream_events(resp: dict[str, Any]) -> list[tuple[str, Any]]:
    """The SSE events of a streamed Response, as the real API sends them."""
    seq = itertools.count()
    start = dict(resp, status="in_progress", output=[])
    events: list[tuple[str, Any]] = [("response.created", {"response": start}),
                                     ("response.in_progress", {"response": start})]
    for i, item in enumerate(resp["output"]):
        events.append(("response.output_item.added", {"output_index": i,
                                                      "item": _started(item)}))
        events += _item_deltas(i, item)
        events.append(("response.output_item.done", {"output_index": i, "item": item}))
    events.append(("response.completed", {"response": resp}))
    return [(name, {"type": name, **data, "sequence_number": next(seq)})
            for name, data in events]


def error(status: int, message: str = "error", *, kind: str = "server_error") -> Canned:
    return Canned(status, {"error": {"message": message, "type": kind, "param": None,
                                     "code": None}})


class FakeResponses(WireServer):
    """Serves POST /v1/responses (a stream when the request asks for one)."""

    def stream_events(self, item: Any) -> list[tuple[str | None, Any]] | None:
        return list(stream_events(item))

    def response_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.path.endswith("/responses")]
