"""When and how long to wait before trying a provider call again (spec 10.4).

Without a `retry:` block an agent gets the default policy: 3 attempts, 1 s base, exponential,
30 s cap, up to 25 % jitter. With one, its values apply (`max_attempts` 1 means no retry). Only
transient failures are retried: 408, 409, 429, 5xx, timeouts and connection errors; any other
4xx will not change by asking again. A server's Retry-After is honoured, within the cap.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from podium.aio import asleep, drive
from podium.language.model import RetryConfig
from podium.providers.base import ProviderError, TokenUsage
from podium.records import record

if TYPE_CHECKING:
    from podium.clock import Clock
    from podium.events.model import Event

RETRYABLE_STATUS = frozenset({408, 409, 429})
T = TypeVar("T")


def status_is_retryable(status: int | None) -> bool:
    return status is not None and (status in RETRYABLE_STATUS or status >= 500)


@record(frozen=True)
class RetryPolicy:
    max_attempts: int = 3
    base: float = 1.0
    backoff: str = "exponential"
    cap: float = 30.0
    jitter: float = 0.25
    retry_on: frozenset[str] = frozenset({"provider_error", "timeout"})

    @classmethod
    def of(cls, cfg: RetryConfig | None) -> RetryPolicy:
        if cfg is None:
            return _DEFAULT_POLICY
        return cls(cfg.max_attempts, cfg.delay_seconds, cfg.backoff,
                   max(30.0, cfg.delay_seconds), 0.25, frozenset(cfg.retry_on))

    def allows(self, error: ProviderError) -> bool:
        return error.retryable and error.category in self.retry_on

    def delay(self, attempt: int, retry_after: float | None = None,
              rng: random.Random | None = None) -> float:
        """Seconds to wait after failed attempt `attempt` (1-based)."""
        wait = self.base if self.backoff == "fixed" else self.base * 2 ** (attempt - 1)
        wait = min(wait, self.cap)
        wait += wait * self.jitter * (rng or random).random()
        if retry_after is not None:
            wait = max(wait, retry_after)
        return min(wait, self.cap * (1 + self.jitter))


_DEFAULT_POLICY = RetryPolicy()  # frozen: every agent without a `retry:` shares it


class PolicyRetrier:
    """Retries one call under a policy: waits on the run's clock (so tests never sleep), emits
    a `provider_retry` event before each wait, gives up when the wait would outlast the time
    the agent has left, and names the status and the attempts when it gives up."""

    def __init__(self, policy: RetryPolicy, clock: Clock, emit: Callable[[Event], object], *,
                 step: str, iteration: int, remaining: Callable[[], float | None] = lambda: None,
                 cancel: threading.Event | None = None) -> None:
        self.policy = policy
        self.clock = clock
        self.emit = emit
        self.step = step
        self.iteration = iteration
        self.remaining = remaining
        self.cancel = cancel
        self.failed_spend: list[TokenUsage] = []  # tokens spent by attempts that failed

    def call(self, fn: Callable[[], T], what: str) -> T:
        async def once() -> T:
            return fn()

        return drive(self.acall(once, what, aio=False))

    async def acall(self, fn: Callable[[], Awaitable[T]], what: str, aio: bool) -> T:
        """`call` for a coroutine function; with `aio`, the wait between attempts is the
        clock's async sleep (the loop goes on with the other members meanwhile)."""
        from podium.events.model import ProviderRetry

        attempt = 1
        while True:
            try:
                return await fn()
            except ProviderError as exc:
                if exc.spent:
                    self.failed_spend.extend(exc.spent)
                    exc.spent = None
                if not self.policy.allows(exc):
                    raise
                delay = round(self.policy.delay(attempt, exc.retry_after), 3)
                left = self.remaining()
                if attempt >= self.policy.max_attempts or (left is not None and delay >= left):
                    if self.policy.max_attempts <= 1:
                        raise
                    status = f" (last status {exc.status})" if exc.status else ""
                    why = "" if attempt >= self.policy.max_attempts else \
                        ", and the agent has no time left for another"
                    raise ProviderError(f"{what} failed after {attempt} attempt(s){why}"
                                        f"{status}: {exc}", status=exc.status,
                                        category=exc.category) from None
                self.emit(ProviderRetry(step=self.step, iteration=self.iteration,
                                        attempt=attempt, max_attempts=self.policy.max_attempts,
                                        error=str(exc)[:500], delay=delay,
                                        status=exc.status, category=exc.category))
                if aio:
                    await asleep(self.clock, delay, self.cancel)
                else:
                    self.clock.sleep(delay, self.cancel)
                if self.cancel is not None and self.cancel.is_set():
                    raise
                attempt += 1
