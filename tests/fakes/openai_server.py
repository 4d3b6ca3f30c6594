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


class FakeOpenAI(WireServer):
    """Serves /v1/chat/completions and /openai/deployments/<d>/chat/completions."""

    def chat_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]
