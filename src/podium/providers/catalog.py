"""What podium knows about each provider name, without importing any SDK: which names exist,
which are installed, which reasoning efforts and provider-object fields each accepts, and the
model rules (which models reason, how Claude thinks). `validate` and the adapters share it."""

from __future__ import annotations

import re
from dataclasses import dataclass

ALL_EFFORTS: tuple[str, ...] = ("low", "medium", "high", "xhigh", "max")


@dataclass(frozen=True)
class ProviderInfo:
    """One provider name: its adapter ("module:factory"), or None when podium does not have
    its runtime yet, and what a workflow may ask of it."""

    name: str
    factory: str | None
    efforts: tuple[str, ...]
    fields: tuple[str, ...]  # provider-object keys it takes (besides `name`)
    max_temperature: float
    summary: str


_HTTP_FIELDS = ("base_url", "api_key", "api_key_env", "headers")

PROVIDERS: dict[str, ProviderInfo] = {
    "openai": ProviderInfo(
        "openai", "podium.providers.openai_chat:create_openai", ("low", "medium", "high"),
        _HTTP_FIELDS, 2.0, "OpenAI API, or any OpenAI-compatible endpoint by base_url"),
    "azure": ProviderInfo(
        "azure", "podium.providers.openai_chat:create_azure", ("low", "medium", "high"),
        (*_HTTP_FIELDS, "api_version"), 2.0, "Azure OpenAI (deployment = model)"),
    "claude": ProviderInfo(
        "claude", "podium.providers.anthropic_messages:create_claude", ALL_EFFORTS,
        (*_HTTP_FIELDS, "auth_token"), 1.0, "Anthropic Messages API"),
    # agent runtimes (a CLI driven by its SDK; see providers/runtime_common.py)
    "copilot": ProviderInfo(
        "copilot", "podium.providers.copilot:create_copilot", ALL_EFFORTS,
        ("base_url", "api_key", "api_key_env", "headers", "type", "wire_api", "bearer_token",
         "azure", "runtime_url", "runtime_token"), 1.0,
        "GitHub Copilot CLI through github-copilot-sdk (custom endpoints: bring your own key)"),
    "claude-agent-sdk": ProviderInfo(
        "claude-agent-sdk", "podium.providers.claude_agent:create_claude_agent", ALL_EFFORTS,
        (*_HTTP_FIELDS, "auth_token"), 1.0,
        "Claude Code CLI through claude-agent-sdk (ANTHROPIC_BASE_URL-style endpoints)"),
}

# Other names podium accepts for a provider.
ALIASES: dict[str, str] = {"anthropic": "claude"}


def canonical(name: str) -> str:
    return ALIASES.get(name, name)


def info(name: str) -> ProviderInfo | None:
    return PROVIDERS.get(canonical(name))


def known_names() -> list[str]:
    """Every name `runtime.provider`, an agent's `provider:` and `--provider` accept."""
    return sorted({*PROVIDERS, *ALIASES})


def describe_known() -> str:
    parts = []
    for name in sorted(PROVIDERS):
        p = PROVIDERS[name]
        alias = [a for a, target in ALIASES.items() if target == name]
        label = name + (f" (alias {', '.join(alias)})" if alias else "")
        parts.append(label + ("" if p.factory else " [not installed]"))
    return ", ".join(parts)


# --------------------------------------------------------------------------- model rules

_OPENAI_CLASSIC = ("gpt-4", "gpt-3.5", "chatgpt-4o", "gpt-35")


def openai_rejects_effort(model: str) -> bool:
    """True for OpenAI models known not to reason (they reject `reasoning_effort`). Unknown
    names (a local model behind a compatible endpoint) get the parameter: the user asked."""
    low = model.lower()
    return low.startswith(_OPENAI_CLASSIC)


_CLAUDE_4 = re.compile(r"^claude-(opus|sonnet|haiku)-4(?:[-.](\d+))?")
_NO_THINKING = ("claude-2", "claude-instant", "claude-3-5", "claude-3.5", "claude-3-opus",
                "claude-3-sonnet", "claude-3-haiku")


def claude_minor(model: str) -> int | None:
    """4 for claude-*-4, 5 for claude-sonnet-4-5, 0 for a dated claude-sonnet-4-20250514;
    None when the model is not a Claude 4 model."""
    m = _CLAUDE_4.match(model.lower())
    if not m:
        return None
    minor = m.group(2)
    return int(minor) if minor is not None and len(minor) <= 2 else 0


def claude_thinking(model: str) -> str | None:
    """How a Claude model reasons: "budget" (extended thinking with budget_tokens), "adaptive"
    (adaptive thinking + output_config.effort: the 4.6 models and every newer one, where
    budget_tokens is deprecated or rejected), or None (the model cannot think)."""
    low = model.lower()
    if low.startswith(_NO_THINKING):
        return None
    if low.startswith(("claude-3-7", "claude-3.7")):
        return "budget"
    minor = claude_minor(low)
    if minor is not None:
        return "adaptive" if minor >= 6 else "budget"
    return "adaptive"


def claude_native_schema(model: str) -> bool:
    """Whether a Claude model supports `output_config.format` (structured outputs): every model
    from Opus 4.1 / Sonnet 4.5 / Haiku 4.5 on. Older ones answer through a forced tool call."""
    low = model.lower()
    if low.startswith(("claude-2", "claude-instant", "claude-3")):
        return False
    minor = claude_minor(low)
    if minor is None:
        return True
    kind = _CLAUDE_4.match(low)
    assert kind is not None
    return minor >= {"opus": 1, "sonnet": 5, "haiku": 5}[kind.group(1)]


# Extended-thinking budgets per effort (spec 10.3); max_tokens becomes budget + 4096, capped.
THINKING_BUDGETS: dict[str, int] = {"low": 2048, "medium": 8192, "high": 16384,
                                    "xhigh": 32768, "max": 59904}
THINKING_MAX_TOKENS_CAP = 64000


def effort_problem(provider: str, model: str | None, effort: str) -> str | None:
    """Why `effort` cannot be used with this provider and model, or None when it can."""
    p = info(provider)
    if p is None:
        return None
    if effort not in p.efforts:
        if not p.efforts:
            return f"provider '{p.name}' does not support reasoning.effort"
        return (f"provider '{p.name}' supports reasoning.effort {', '.join(p.efforts)}, "
                f"not '{effort}'")
    if model and p.name in ("openai", "azure") and openai_rejects_effort(model):
        return f"model '{model}' does not reason, so it takes no reasoning.effort"
    if model and p.name == "claude" and claude_thinking(model) is None:
        return f"model '{model}' has no extended thinking, so it takes no reasoning.effort"
    return None
