"""Model prices and the cost of a call: the workflow's `cost.pricing` first, then the built-in
table (exact name, then a known name followed by a version suffix). A model with no price is
unpriced: its cost is None, never 0."""

from __future__ import annotations

from dataclasses import dataclass

from podium.spec.model import ModelPricing


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    cache_read: float = 0.0
    cache_write: float = 0.0


_OPENAI_BIG = Price(2.0, 8.0)
_OPENAI_MINI = Price(0.15, 0.6)
_SONNET = Price(3.0, 15.0, 0.3, 3.75)
_OPUS_NEW = Price(5.0, 25.0, 0.5, 6.25)

BUILTIN_PRICES: dict[str, Price] = {
    "gpt-4o": Price(2.5, 10.0), "gpt-4o-mini": _OPENAI_MINI, "gpt-4.1": Price(2.0, 8.0),
    "gpt-4.1-mini": _OPENAI_MINI, "gpt-4": Price(30.0, 60.0), "gpt-4-turbo": Price(10.0, 30.0),
    "gpt-3.5-turbo": Price(0.5, 1.5),
    "gpt-5.1": _OPENAI_BIG, "gpt-5.2": _OPENAI_BIG, "gpt-5.3-codex": _OPENAI_BIG,
    "gpt-5.4": _OPENAI_BIG, "gpt-5.5": _OPENAI_BIG, "gpt-5.6-sol": _OPENAI_BIG,
    "gpt-5.6-terra": _OPENAI_BIG, "gpt-5.6-luna": _OPENAI_BIG,
    "gpt-5-mini": _OPENAI_MINI, "gpt-5.4-mini": _OPENAI_MINI,
    "o1": Price(15.0, 60.0), "o1-mini": Price(3.0, 12.0), "o1-preview": Price(15.0, 60.0),
    "o3-mini": Price(1.1, 4.4),
    "claude-opus-5": _OPUS_NEW, "claude-opus-4-5": _OPUS_NEW, "claude-opus-4.5": _OPUS_NEW,
    "opus-4.5": _OPUS_NEW, "claude-opus-4.6": _OPUS_NEW, "claude-opus-4.6-1m": _OPUS_NEW,
    "claude-opus-4.7": _OPUS_NEW, "claude-opus-4.8": _OPUS_NEW,
    "claude-sonnet-5": _SONNET, "claude-sonnet-4-5": _SONNET, "claude-sonnet-4.5": _SONNET,
    "claude-sonnet-4.6": _SONNET, "sonnet-4.5": _SONNET, "claude-sonnet-4": _SONNET,
    "claude-3-7-sonnet": _SONNET, "claude-3.7-sonnet": _SONNET, "claude-3-5-sonnet": _SONNET,
    "claude-3.5-sonnet": _SONNET, "claude-3-sonnet": _SONNET,
    "claude-haiku-4-5": Price(1.0, 5.0, 0.1, 1.25), "claude-haiku-4.5": Price(1.0, 5.0, 0.1, 1.25),
    "haiku-4.5": Price(1.0, 5.0, 0.1, 1.25),
    "claude-opus-4": Price(15.0, 75.0, 1.5, 18.75), "claude-3-opus": Price(15.0, 75.0, 1.5, 18.75),
    "claude-haiku-4": Price(0.25, 1.25, 0.03, 0.3), "claude-3-haiku": Price(0.25, 1.25, 0.03, 0.3),
    "claude-3-5-haiku": Price(0.8, 4.0, 0.08, 1.0), "claude-3.5-haiku": Price(0.8, 4.0, 0.08, 1.0),
    "gemini-3.1-pro-preview": Price(1.25, 5.0), "gemini-3.5-flash": Price(0.3, 2.5),
}


def find_price(model: str | None, overrides: dict[str, ModelPricing]) -> Price | None:
    """The price of `model`, or None when it is unknown (unpriced)."""
    if not model:
        return None
    o = overrides.get(model)
    if o is not None:
        return Price(o.input_per_mtok, o.output_per_mtok, o.cache_read_per_mtok,
                     o.cache_write_per_mtok)
    if model in BUILTIN_PRICES:
        return BUILTIN_PRICES[model]
    for known in sorted(BUILTIN_PRICES, key=len, reverse=True):
        if model.startswith(known + "-"):
            return BUILTIN_PRICES[known]
    return None


def cost_usd(price: Price | None, input_tokens: int, output_tokens: int,
             cached_tokens: int = 0) -> float | None:
    """Cost of one call; `input_tokens` includes `cached_tokens`, which are priced as cached
    (not twice) when the model has a cache-read price."""
    if price is None:
        return None if (input_tokens or output_tokens) else 0.0
    uncached = input_tokens
    cached_cost = 0.0
    if price.cache_read and cached_tokens:
        uncached = max(0, input_tokens - cached_tokens)
        cached_cost = cached_tokens * price.cache_read
    return (uncached * price.input + output_tokens * price.output + cached_cost) / 1_000_000
