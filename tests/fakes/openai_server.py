"""A local server that speaks OpenAI's Chat Completions wire protocol (and Azure OpenAI's
deployment paths), scripted per test: answers, tool calls, errors with Retry-After.

    with FakeOpenAI() as srv:
        srv.script(tool_call_answer([call("write_file", {...})]), answer('{"ok": true}'))
        ... OPENAI_BASE_URL=srv.url + "/v1" ...
        srv.requests[0].body["tools"]
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from fakes.wire import Canned, Recorded, WireServer

_ids = itertools.count(1)


def call(name: str, arguments: dict[str, Any] | str, id: str | None = None) -> dict[str, Any]:
    """One tool call as the API writes it."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": id or f"call_{next(_ids)}", "type": "function",
            "function": {"name": name, "arguments": args}}


def answer(content: str | None = None, *, tool_calls: list[dict[str, Any]] | None = None,
           model: str = "gpt-5-mini-2025-08-07", usage: tuple[int, int, int] = (100, 20, 0),
           finish: str | None = None) -> dict[str, Any]:
    """A chat.completion body; `usage` is (prompt, completion, cached prompt tokens)."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    prompt, completion, cached = usage
    return {
        "id": f"chatcmpl-{next(_ids)}", "object": "chat.completion", "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None,
                     "finish_reason": finish or ("tool_calls" if tool_calls else "stop")}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                  "total_tokens": prompt + completion,
                  "prompt_tokens_details": {"cached_tokens": cached}},
    }


def error(status: int, message: str = "error", *, retry_after: str | None = None,
          kind: str = "server_error") -> Canned:
    headers = {"retry-after": retry_after} if retry_after is not None else {}
    return Canned(status, {"error": {"message": message, "type": kind, "param": None,
                                     "code": None}}, headers)


def _pieces(value: str, n: int = 3) -> list[str]:
    size = max(1, len(value) // n + 1)
    return [value[i:i + size] for i in range(0, len(value), size)]


def stream_chunks(body: dict[str, Any]) -> list[tuple[str | None, Any]]:
    """The SSE chunks Chat Completions sends for a chat.completion `body` with stream=True and
    stream_options.include_usage: the role first, the text and each tool call's arguments in
    several pieces (a call's id and name in its first piece), the finish reason, a last chunk
    with the usage and no choices, then [DONE]."""
    head = {k: body[k] for k in ("id", "created", "model")}
    head["object"] = "chat.completion.chunk"

    def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[None, Any]:
        return None, dict(head, choices=[{"index": 0, "delta": delta, "logprobs": None,
                                          "finish_reason": finish}])

    choice = body["choices"][0]
    message = choice["message"]
    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"content": p}) for p in _pieces(message.get("content") or "")]
    for i, tc in enumerate(message.get("tool_calls") or []):
        args = _pieces(tc["function"]["arguments"]) or [""]
        out.append(chunk({"tool_calls": [{"index": i, "id": tc["id"], "type": "function",
                                          "function": {"name": tc["function"]["name"],
                                                       "arguments": args[0]}}]}))
        out += [chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]})
                for p in args[1:]]
    out.append(chunk({}, choice["finish_reason"]))
    out.append((None, dict(head, choices=[], usage=body.get("usage"))))
    out.append((None, "[DONE]"))
    return out


class FakeOpenAI(WireServer):
    """Serves /v1/chat/completions and /openai/deployments/<d>/chat/completions (as SSE chunks
    when the request asks for a stream, as podium does)."""

    def stream_events(self, item: Any) -> list[tuple[str | None, Any]] | None:
        if isinstance(item, dict) and item.get("object") == "chat.completion":
            return stream_chunks(item)
        return None

    def chat_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]
