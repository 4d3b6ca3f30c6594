"""The event loop group members run on, and the bridge that lets one coroutine serve both the
synchronous engine and the loop.

One loop per process, on its own daemon thread, started when the first group runs: a group
hands it its members as tasks and waits (engine/groups.py). The SDKs' async clients are bound
to the loop they first ran on, so one long-lived loop lets a run's clients (and their pooled
connections) serve every group of the run.

Each step's logic is written once, as a coroutine that takes `aio`: with `aio` false it never
suspends (its I/O is the blocking call), so `drive` runs it to the end without any loop; with
`aio` true it awaits the async I/O on the loop (decision 0031).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # asyncio loads with the first group, not with every run
    import asyncio

T = TypeVar("T")

_lock = threading.Lock()
_state: dict[str, asyncio.AbstractEventLoop] = {}  # "loop": the member loop, once started


def drive(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that does not suspend (`aio` false) to its end, here, without a loop."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("a coroutine run synchronously tried to suspend (it awaited async I/O "
                       "with aio false)")


def loop() -> asyncio.AbstractEventLoop:
    """The process's member loop, started on first use."""
    import asyncio

    with _lock:
        running = _state.get("loop")
        if running is None or running.is_closed():
            made = asyncio.new_event_loop()
            ready = threading.Event()

            def serve() -> None:
                asyncio.set_event_loop(made)
                made.call_soon(ready.set)
                made.run_forever()

            threading.Thread(target=serve, name="podium-members", daemon=True).start()
            ready.wait()
            _state["loop"] = running = made
        return running


def on_loop() -> bool:
    """Is the caller a task of the member loop?"""
    import asyncio

    try:
        return asyncio.get_running_loop() is _state.get("loop")
    except RuntimeError:
        return False


async def blocking(fn: Callable[[], T], aio: bool) -> T:
    """`fn()` (blocking I/O): here with `aio` false, in a worker thread with `aio` true (the
    loop is never blocked; the worker sees the caller's context: its member)."""
    import asyncio

    if not aio:
        return fn()
    return await asyncio.to_thread(fn)


async def asleep(clock: Any, seconds: float, cancel: threading.Event | None = None) -> None:
    """Sleep on the run's clock without blocking the loop: its `asleep` (podium's clocks have
    one), else its blocking `sleep` in a worker thread."""
    import asyncio

    own = getattr(clock, "asleep", None)
    if own is not None:
        await own(seconds, cancel)
    else:
        await asyncio.to_thread(clock.sleep, seconds, cancel)


def close_on_loop(coro: Coroutine[Any, Any, Any]) -> None:
    """Close an async client (its `close()` coroutine) on the member loop it was made on,
    waiting up to a few seconds; nothing to do when that loop never started."""
    import asyncio

    running = _state.get("loop")
    if running is None or running.is_closed():
        coro.close()
        return
    if on_loop():  # closing from a task of the loop itself: let it run after this one
        running.create_task(coro)
        return
    try:
        asyncio.run_coroutine_threadsafe(coro, running).result(timeout=5.0)
    except Exception:  # a connection that will not close cleanly is dropped with the loop
        return
