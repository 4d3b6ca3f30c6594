"""Model prices and the cost of a call.

A model's price comes from the workflow's `cost.pricing` (exact name) first, then the
maintained `genai-prices` table (matched within the provider's own price list, so a local model
served through an OpenAI-compatible endpoint is never priced as some other vendor's), then
podium's built-in table (Conductor's, spec 10.6: exact name, then a known name followed by a
version suffix). A model with no price is unpriced: its cost is None, never 0.

Input token counts include cached tokens; cache reads (and writes) are priced at their own rate
and taken out of the input count, so no token is paid twice.
"""

from __future__ import annotations

import contextlib
import re
import threading
from dataclasses import field
from functools import lru_cache
from typing import Any

from podium.language.model import ModelPricing
from podium.records import record


@record(frozen=True)
class Price:
    """USD per million tokens, and where the figures come from."""

    input: float
    output: float
    cache_read: float = 0.0
    cache_write: float = 0.0
    source: str = "podium"  # workflow | genai-prices | podium

    def cost(self, input_tokens: int, output_tokens: int, cached_tokens: int = 0,
             cache_write_tokens: int = 0) -> float:
        """USD for one call (`input_tokens` includes both cache buckets)."""
        uncached = input_tokens
        extra = 0.0
        if self.cache_read and cached_tokens:
            uncached -= cached_tokens
            extra += cached_tokens * self.cache_read
        if self.cache_write and cache_write_tokens:
            uncached -= cache_write_tokens
            extra += cache_write_tokens * self.cache_write
        return (max(0, uncached) * self.input + output_tokens * self.output + extra) / 1_000_000


@record(frozen=True)
class TablePrice(Price):
    """A price from genai-prices. A request whose input reaches a long-context tier is priced
    by genai-prices' own calculation; below every tier the base rates are the price."""

    model_price: Any = field(default=None, compare=False, repr=False)
    first_tier: float = float("inf")  # input tokens where a higher rate starts

    def cost(self, input_tokens: int, output_tokens: int, cached_tokens: int = 0,
             cache_write_tokens: int = 0) -> float:
        if input_tokens < self.first_tier:
            return super().cost(input_tokens, output_tokens, cached_tokens, cache_write_tokens)
        from genai_prices import Usage

        usage = Usage(input_tokens=input_tokens, output_tokens=output_tokens,
                      cache_read_tokens=cached_tokens, cache_write_tokens=cache_write_tokens)
        return float(self.model_price.calc_price(usage)["total_price"])


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

# podium provider name -> genai-prices provider id
_TABLE_PROVIDER = {"openai": "openai", "azure": "azure", "claude": "anthropic",
                   "anthropic": "anthropic", "copilot": "github-copilot",
                   # Hermes's usual endpoint is OpenRouter, whose names are `vendor/model`
                   "hermes": "openrouter"}


def _flat(value: Any) -> float:
    """A genai-prices rate as a number (the base tier of a tiered rate; 0 when absent)."""
    if value is None:
        return 0.0
    base = getattr(value, "base", value)
    return float(base)


_TABLE: dict[tuple[str, str | None], Price | None] = {}
_TABLE_LOCK = threading.Lock()


def preload_table() -> None:
    """Load genai-prices' table now (a provider calls this when it is created, once per run),
    so that agents running in parallel do not all wait for the first lookup."""
    with _TABLE_LOCK, contextlib.suppress(ImportError):
        from genai_prices import data_snapshot

        data_snapshot.get_snapshot()


def _table_price(model: str, provider: str | None) -> Price | None:
    key = (model, provider)
    if key in _TABLE:
        return _TABLE[key]
    with _TABLE_LOCK:  # one lookup per model, however many threads ask at once
        if key not in _TABLE:
            _TABLE[key] = _lookup(model, provider)
        return _TABLE[key]


def _lookup(model: str, provider: str | None) -> Price | None:
    try:
        from datetime import UTC, datetime

        from genai_prices import data_snapshot

        snapshot = data_snapshot.get_snapshot()
        _, info = snapshot.find_provider_model(model, None, _TABLE_PROVIDER.get(provider or ""),
                                               None)
        mp = info.get_prices(datetime.now(tz=UTC))
    except (LookupError, ValueError, ImportError):
        return None
    if getattr(mp, "input_mtok", None) is None and getattr(mp, "output_mtok", None) is None:
        return None
    tiers = [t.start for name in ("input_mtok", "output_mtok", "cache_read_mtok",
                                  "cache_write_mtok")
             for t in getattr(getattr(mp, name, None), "tiers", None) or []]
    return TablePrice(_flat(mp.input_mtok), _flat(mp.output_mtok),
                      _flat(getattr(mp, "cache_read_mtok", None)),
                      _flat(getattr(mp, "cache_write_mtok", None)), "genai-prices", mp,
                      float(min(tiers)) if tiers else float("inf"))


@lru_cache(maxsize=256)
def context_window(model: str | None, provider: str | None = None) -> int | None:
    """The context window of `model` in tokens, per genai-prices (None when unknown)."""
    if not model:
        return None
    try:
        from genai_prices import data_snapshot

        snapshot = data_snapshot.get_snapshot()
        _, info = snapshot.find_provider_model(model, None, _TABLE_PROVIDER.get(provider or ""),
                                               None)
    except (LookupError, ValueError, ImportError):
        return None
    window = getattr(info, "context_window", None)
    return int(window) if isinstance(window, int) and window > 0 else None


@lru_cache(maxsize=256)
def builtin_price(model: str) -> Price | None:
    """podium's own table: the exact name, then a known name followed by a version suffix (a
    date or version number, `latest`, `preview`): `gpt-4o-2024-08-06` is gpt-4o, while
    `gpt-4o-mnii` or `gpt-4.1-nano` is not priced as gpt-4o or gpt-4.1."""
    if model in BUILTIN_PRICES:
        return BUILTIN_PRICES[model]
    for known in sorted(BUILTIN_PRICES, key=len, reverse=True):
        if model.startswith(known + "-") and _VERSION.match(model, len(known) + 1):
            return BUILTIN_PRICES[known]
    return None


_VERSION = re.compile(r"(?:\d|latest$|preview\b)")



def find_price(model: str | None, overrides: dict[str, ModelPricing],
               provider: str | None = None, *, table: bool = True) -> Price | None:
    """The price of `model` (as served by `provider`, when known), or None when it is unknown
    (unpriced). `table=False` skips genai-prices (for quick checks that only ask whether a
    price exists, after the built-in table)."""
    if not model:
        return None
    o = overrides.get(model)
    if o is not None:
        return Price(o.input_per_mtok, o.output_per_mtok, o.cache_read_per_mtok,
                     o.cache_write_per_mtok, "workflow")
    if table:
        found = _table_price(model, provider)
        if found is not None:
            return found
    return builtin_price(model)


def is_priced(model: str, overrides: dict[str, ModelPricing], provider: str | None = None) -> bool:
    """Whether `model` has a price, loading the genai-prices table only when podium's own
    table does not know the model (keeps `validate` fast)."""
    if model in overrides or builtin_price(model) is not None:
        return True
    return find_price(model, overrides, provider) is not None


def cost_usd(price: Price | None, input_tokens: int, output_tokens: int,
             cached_tokens: int = 0, cache_write_tokens: int = 0) -> float | None:
    """Cost of one call, or None when tokens were spent on an unpriced model."""
    if price is None:
        return None if (input_tokens or output_tokens) else 0.0
    return price.cost(input_tokens, output_tokens, cached_tokens, cache_write_tokens)
