"""The OpenAI-compatible endpoint the Hermes agent (hermes-agent) talks to, on 127.0.0.1: Chat
Completions as FakeOpenAI serves them (streamed when asked), and a 404 for the model-metadata
probes Hermes sends first (GET /models, /api/tags, /props, ...), which take nothing from the
script."""

from __future__ import annotations

from fakes.openai_server import FakeOpenAI
from fakes.wire import Canned, Recorded


class FakeHermesEndpoint(FakeOpenAI):
    def _respond(self, request: Recorded) -> Canned:
        if request.path.endswith("/chat/completions"):
            return super()._respond(request)
        with self._lock:
            self.requests.append(request)
        return Canned(404, {"error": {"message": "not here", "type": "not_found"}})


def last_user_text(request: Recorded) -> str:
    """The text of the last user message of a chat request."""
    body = request.body if isinstance(request.body, dict) else {}
    for msg in reversed(body.get("messages") or []):
        if msg.get("role") == "user":
            content = msg.get("content")
            if isinstance(content, list):
                return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            return str(content or "")
    return ""
