"""The bounds of one render: how much it may output, build and do, and until when.

Every render (and every bare expression) runs with a `Budget` installed on its thread. The
sandbox's hooks tick it at each loop iteration, call, filter, test and comparison, charge it
for each value they build, and measure containers before they are turned into text, so a
hostile template fails with a `RenderFailure` naming the limit it reached instead of running
without bound in time or memory.
"""

from __future__ import annotations

import threading
import time
from collections.abc import ItemsView, KeysView, ValuesView
from typing import Any

from jinja2.utils import Namespace

from podium.records import record
from podium.templating.text import RenderFailure

MAX_RENDER_CHARS = 2_000_000  # the text a template renders to
MAX_VALUE_SIZE = 10_000_000  # one value a template builds (characters, or a container's size)
MAX_RENDER_BUILT = 40_000_000  # all values one render builds, together
MAX_RENDER_STEPS = 1_000_000  # loop iterations, calls, filters, tests, comparisons
MAX_RENDER_SECONDS = 2.0  # the time one render may take when no earlier deadline applies
MAX_SLOW_INPUT = 500_000  # characters the slow pure-Python filters (wordwrap, urlize) take
MAX_INT_BITS = 100_000  # integer results beyond this are refused: they only burn CPU

_LEAF = 24  # the size of the text of a value that is not a container (a float, a macro)
_WALK_CHECK = 4096  # nodes measured between two looks at the clock
_CLOCK_EVERY = 16  # steps between two looks at the clock (a step is short: its values are
LARGE_VALUE = 65_536  # bounded); building a value larger than this looks at once


@record(frozen=True)
class Deadline:
    """A time bound a caller puts on a render, in seconds from its start; `what` names it in
    the error ("the step's timeout of 30s") and `limit` is the RenderFailure.limit it gives."""

    seconds: float
    what: str
    limit: str = "step-timeout"


DEFAULT_DEADLINE = Deadline(MAX_RENDER_SECONDS, f"the time limit of one render "
                                                f"({MAX_RENDER_SECONDS:g} s)", "time")


def too_big(what: str, limit: int = MAX_VALUE_SIZE) -> RenderFailure:
    return RenderFailure("size", f"{what} would build a value of more than {limit:,} "
                                 "characters or items (the limit of one template value)",
                         limit="value")


class Budget:
    """What one render has spent: steps, characters built, and the deadline it must meet.

    `sizes` remembers the measured size of each container the render built (by id; `keep`
    holds them so an id is never reused during the render): a container not in it came from
    the run's context, whose size is that of data already in memory.
    """

    __slots__ = ("_walked", "at", "built", "check_at", "deadline", "keep", "sizes", "steps")

    def __init__(self, deadline: Deadline | None = None) -> None:
        chosen = DEFAULT_DEADLINE
        if deadline is not None and deadline.seconds < chosen.seconds:
            chosen = deadline
        self.deadline = chosen
        self.at = time.monotonic() + max(chosen.seconds, 0.0)
        self.steps = 0
        self.check_at = _CLOCK_EVERY  # tick() looks at the limits when steps reach it
        self.built = 0
        self.sizes: dict[int, int] = {}
        self.keep: list[Any] = []
        self._walked = 0

    # ----------------------------------------------------------------- work and time

    def tick(self, n: int = 1) -> None:
        self.steps += n
        if self.steps >= self.check_at:
            self.check()

    def check(self) -> None:
        """Raise when the steps or the time are spent (tick() calls it every few steps)."""
        if self.steps > MAX_RENDER_STEPS:
            raise RenderFailure("limit", f"the template took more than {MAX_RENDER_STEPS:,} "
                                         "steps (loop iterations, calls, filters, tests and "
                                         "comparisons: the limit of one render)",
                                limit="steps")
        if time.monotonic() > self.at:
            raise self.expired()
        self.check_at = min(self.steps + _CLOCK_EVERY, MAX_RENDER_STEPS + 1)

    def expired(self) -> RenderFailure:
        d = self.deadline
        if d.limit == "time":
            return RenderFailure("timeout", f"rendering took longer than {d.what}", limit="time")
        return RenderFailure("timeout", f"rendering was stopped by {d.what}", limit=d.limit)

    # ----------------------------------------------------------------- memory

    def charge(self, size: int, what: str, counted: int = 0) -> None:
        """Count a value of `size` characters or items that the render just built (a caller
        that already added it to `built` passes it as `counted`)."""
        self.built += size
        size = size or counted
        if size > LARGE_VALUE:
            if size > MAX_VALUE_SIZE:
                raise too_big(what)
            self.check()  # building it took time: look at the clock now
        if self.built > MAX_RENDER_BUILT:
            raise RenderFailure("size", f"the template built more than {MAX_RENDER_BUILT:,} "
                                        "characters or items in all (the limit of one render)",
                                limit="memory")

    def known(self, value: Any) -> int | None:
        """The size of a container this render built, None for any other value."""
        return self.sizes.get(id(value))

    def measure(self, value: Any, what: str, limit: int = MAX_VALUE_SIZE) -> int:
        """The size of `value` as text (about the length of its repr), counting a container
        shared N times N times; raises past `limit`. Containers are remembered."""
        self._walked = 0
        size = self._size(value, limit)
        if size > limit:
            raise too_big(what, limit)
        return size

    def track(self, value: Any, what: str) -> Any:
        """Measure, remember and charge a container the render built; return it."""
        size = self.measure(value, what)
        self.charge(size, what)
        return value

    def _size(self, value: Any, limit: int) -> int:
        t = type(value)
        if t is str:
            return len(value) + 2
        if t is int:
            return int(value.bit_length()) // 3 + 2
        if t is list or t is tuple or t is dict or isinstance(
                value, (list, tuple, dict, set, frozenset, KeysView, ValuesView, ItemsView)):
            return self._container(value, limit)
        if isinstance(value, (str, bytes, bytearray)):
            return len(value) + 3
        if isinstance(value, int) and not isinstance(value, bool):
            return int(value).bit_length() // 3 + 2
        if isinstance(value, Namespace):
            return _LEAF  # its text does not show what it holds (see sandbox.BoundedNamespace)
        return _LEAF

    def _container(self, value: Any, limit: int) -> int:
        key = id(value)
        hit = self.sizes.get(key)
        if hit is not None:
            return hit
        self._walked += 1
        if self._walked % _WALK_CHECK == 0 and time.monotonic() > self.at:
            raise self.expired()
        total = 2
        if isinstance(value, dict):
            for k, v in value.items():
                total += self._size(k, limit) + self._size(v, limit) + 4
                if total > limit:
                    return total
        else:
            for item in value:
                total += self._size(item, limit) + 2
                if total > limit:
                    return total
        self.sizes[key] = total
        self.keep.append(value)
        return total


class _Local(threading.local):
    budget: Budget | None = None


_local = _Local()


def current() -> Budget:
    """The budget of the render running on this thread (a fresh one outside a render, e.g.
    when Jinja folds constants at compile time)."""
    return _local.budget or Budget()


def install(budget: Budget | None) -> Budget | None:
    """Make `budget` this thread's current budget; return the one it replaces."""
    previous = _local.budget
    _local.budget = budget
    return previous
