"""The run's budget ledger: each model call reserves its worst case before it starts, and
settles to what it cost once it ends.

Under `budget_mode: enforce` a call is refused (LimitExceeded, exit 4) when what the run has
spent, plus the worst case of the calls still in flight, plus this call's worst case would pass
`limits.budget_usd`; so members of a parallel or for-each group reserve before they call and
the ones that do not fit are never made. A call's worst case is its prompt (estimated as one
token per 4 characters of the text the model is sent: system prompt, schema, the conversation
so far) at the model's input price, plus its output limit (`runtime.max_tokens`, else
DEFAULT_MAX_OUTPUT_TOKENS: genai-prices knows no output limits) at its output price. A call
that costs more than its worst case (a tool loop's several API calls, a provider that ignores
the limit) is the overshoot the summary reports; no call starts once the budget is passed.
Under `audit` nothing is refused: the ledger only counts. The engine creates one ledger per
run; a sub-workflow's ledger reserves in its parent's too.
"""

from __future__ import annotations

import json
import math
import threading
from typing import TYPE_CHECKING, Any

from podium.errors import LimitExceeded
from podium.events.model import LimitReached
from podium.records import record

if TYPE_CHECKING:
    from podium.events.bus import EventBus
    from podium.language.model import ModelPricing

DEFAULT_MAX_OUTPUT_TOKENS = 8192  # when runtime.max_tokens is not set (Anthropic's default)
CHARS_PER_TOKEN = 4  # a rough estimate of a prompt's tokens, on the safe side for English
_EPSILON = 1e-12  # float sums that land exactly on the budget do not pass it


@record(frozen=True)
class WorstCase:
    """What one model call may cost at most; `usd` is None for an unpriced model."""

    label: str  # "agent 'review'", "the validator call of agent 'review'"
    model: str | None
    input_tokens: int
    output_tokens: int
    usd: float | None


def estimate_tokens(*texts: str | None) -> int:
    """Tokens of the text a model is sent, estimated as len(text) / 4, rounded up."""
    return math.ceil(sum(len(t) for t in texts if t) / CHARS_PER_TOKEN)


def worst_case(label: str, model: str | None, *, provider: str | None,
               pricing: dict[str, ModelPricing], sent: list[str | None],
               max_tokens: int | None, schema: dict[str, Any] | None = None) -> WorstCase:
    """The worst case of one call that sends the texts `sent` (system prompt, the
    conversation so far, the new message) and may answer up to `max_tokens`."""
    tokens_in = estimate_tokens(*sent, json.dumps(schema) if schema else None)
    tokens_out = max_tokens or DEFAULT_MAX_OUTPUT_TOKENS
    from podium.providers.pricing import find_price  # (a run without agents never loads it)

    price = find_price(model, pricing, provider)
    usd = None if price is None else price.cost(tokens_in, tokens_out)
    return WorstCase(label, model, tokens_in, tokens_out, usd)


@record
class Reservation:
    """One call's hold on the budget, until it is settled."""

    worst: WorstCase
    amount: float
    settled: bool = False


@record(frozen=True)
class BudgetReport:
    """Where a run stands against its budget (None when it has none)."""

    budget_usd: float
    mode: str
    spent_usd: float
    overshoot_usd: float  # spent beyond the budget (0 when within it)
    refused: int  # calls not made because they could have passed the budget
    over_worst_case: str | None  # the call that cost most beyond its worst case, if any


class BudgetLedger:
    """Thread-safe: what the run spent and what the calls in flight reserved."""

    def __init__(self, budget_usd: float | None = None, mode: str = "audit",
                 bus: EventBus | None = None) -> None:
        self.budget_usd = budget_usd
        self.mode = mode
        self.bus = bus
        self.spent = 0.0
        self.reserved = 0.0
        self.refused = 0
        self.outer: BudgetLedger | None = None
        self._excess = 0.0
        self._excess_label: str | None = None
        self._lock = threading.Lock()

    @property
    def enforced(self) -> bool:
        return self.budget_usd is not None and self.mode == "enforce"

    @property
    def enforcing(self) -> bool:
        """Whether a budget of this run (or of a run it is part of) refuses calls."""
        return any(ledger.enforced for ledger in self._chain())

    def attach(self, outer: BudgetLedger) -> None:
        """A sub-workflow's calls count against its parent's budget too (one lock for both,
        set before any call)."""
        self.outer = outer
        self._lock = outer._lock

    def _chain(self) -> list[BudgetLedger]:
        chain: list[BudgetLedger] = []
        ledger: BudgetLedger | None = self
        while ledger is not None:
            chain.append(ledger)
            ledger = ledger.outer
        return chain

    def reserve(self, worst: WorstCase, *, step: str, iteration: int | None) -> Reservation:
        """Hold `worst` against every budget of the chain, or raise LimitExceeded (exit 4)
        naming the budget, what was spent and reserved, and the call."""
        amount = worst.usd or 0.0
        with self._lock:
            chain = self._chain()
            for ledger in chain:
                budget = ledger.budget_usd
                if not ledger.enforced or budget is None:
                    continue
                if ledger.spent + ledger.reserved + amount > budget + _EPSILON:
                    for counted in chain:
                        counted.refused += 1
                    refusal = ledger._refusal(worst, amount, step, iteration, nested=ledger
                                              is not self)
                    break
            else:
                for ledger in chain:
                    ledger.reserved += amount
                return Reservation(worst, amount)
        if self.bus is not None:
            self.bus.emit(LimitReached(limit="budget", step=step,
                                       current=round(refusal[1], 6),
                                       maximum=refusal[2]))
        raise refusal[0]

    def _refusal(self, worst: WorstCase, amount: float, step: str, iteration: int | None, *,
                 nested: bool) -> tuple[LimitExceeded, float, float]:
        budget = self.budget_usd or 0.0
        whose = "its parent run's budget" if nested else "the budget"
        message = (
            f"{worst.label} was not made: its worst case ${amount:.4f} (~{worst.input_tokens} "
            f"input tokens, estimated as characters / 4, and up to {worst.output_tokens} output "
            f"tokens of {worst.model or 'the default model'}) would pass {whose} of "
            f"${budget:.2f} (budget_mode: enforce): ${self.spent:.4f} spent and "
            f"${self.reserved:.4f} reserved by calls in flight")
        if amount > budget:  # no call of this size could ever fit
            message += "; set runtime.max_tokens to bound its answer, or raise the budget"
        total = self.spent + self.reserved + amount
        return LimitExceeded(message, limit="budget", step=step, iteration=iteration), \
            total, budget

    def settle(self, reservation: Reservation | None, cost: float | None) -> None:
        """The call ended: its reservation gives way to what it cost (None: unpriced)."""
        actual = cost or 0.0
        with self._lock:
            if reservation is None or reservation.settled:
                return
            reservation.settled = True
            for ledger in self._chain():
                ledger.reserved = max(0.0, ledger.reserved - reservation.amount)
                ledger.spent += actual
                excess = actual - reservation.amount
                if reservation.worst.usd is not None and excess > ledger._excess:
                    ledger._excess = excess
                    ledger._excess_label = (f"{reservation.worst.label}: ${actual:.4f}, its "
                                            f"worst case ${reservation.amount:.4f}")

    def sync(self, spent: float) -> None:
        """At a step boundary (nothing of this run in flight) the engine's count of what was
        spent is the one that stands (a resumed run's spending, members reused)."""
        with self._lock:
            self.spent = spent

    def report(self) -> BudgetReport | None:
        if self.budget_usd is None:
            return None
        with self._lock:
            return BudgetReport(self.budget_usd, self.mode, round(self.spent, 6),
                                round(max(0.0, self.spent - self.budget_usd), 6),
                                self.refused, self._excess_label)
