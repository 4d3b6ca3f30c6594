"""Streamed model output in the shapes the SDKs give it, turned into `model_delta` pieces:
Anthropic Messages stream events (the `anthropic` SDK's typed events for provider claude, the
raw dicts Claude Code forwards for claude-agent-sdk) and the Copilot runtime's delta events.

Each maps onto a DeltaStream (providers/loop.py), which coalesces the pieces.
"""

from __future__ import annotations

from typing import Any

from podium.providers.loop import DeltaStream


def _field(obj: Any, name: str) -> Any:
    """`name` of a typed SDK object or of the raw dict it was parsed from."""
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def anthropic_delta(event: Any, tools: dict[int, str], deltas: DeltaStream) -> None:
    """One Anthropic stream event as a `model_delta` piece (text, thinking, a tool's input);
    `tools` remembers which tool each content block index is for."""
    kind = _field(event, "type")
    if kind == "content_block_start":
        block = _field(event, "content_block")
        if _field(block, "type") == "tool_use":
            tools[_field(event, "index")] = str(_field(block, "name"))
    elif kind == "content_block_delta":
        d = _field(event, "delta")
        dkind = _field(d, "type")
        if dkind == "text_delta":
            deltas.add("text", _field(d, "text") or "")
        elif dkind == "thinking_delta":
            deltas.add("reasoning", _field(d, "thinking") or "")
        elif dkind == "input_json_delta":
            deltas.add("tool_call", _field(d, "partial_json") or "",
                       tools.get(_field(event, "index")))


def anthropic_usage(event: Any, used: list[int]) -> None:
    """Keep in `used` ([input, output]) the tokens of the message being streamed, as its
    message_start and message_delta events report them: the context gauge of the last call."""
    kind = _field(event, "type")
    if kind == "message_start":
        usage = _field(_field(event, "message"), "usage")
        used[:] = [sum(int(_field(usage, k) or 0) for k in (
            "input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")),
            int(_field(usage, "output_tokens") or 0)]
    elif kind == "message_delta":
        out = _field(_field(event, "usage"), "output_tokens")
        if isinstance(out, int) and used:
            used[1] = out


# the Copilot runtime's session events that carry streamed output, and the field of each
COPILOT_DELTAS = {"assistant.message_delta": ("text", "delta_content"),
                  "assistant.reasoning_delta": ("reasoning", "delta_content"),
                  "assistant.tool_call_delta": ("tool_call", "input_delta")}


def copilot_delta(kind: str, data: Any, deltas: DeltaStream) -> bool:
    """A Copilot session event as a `model_delta` piece; False when it carries none."""
    found = COPILOT_DELTAS.get(kind)
    if found is None:
        return False
    if getattr(data, "parent_tool_call_id", None):  # a sub-agent's output
        return True
    delta_kind, name = found
    tool = getattr(data, "tool_name", None) if delta_kind == "tool_call" else None
    deltas.add(delta_kind, getattr(data, name, None) or "", tool)
    return True
