"""Running a coroutine to its end from synchronous code: what a step or a command does with an
async SDK (the MCP client, Temporal's client) when it is called from a thread that may
already run an event loop (the console's)."""

from __future__ import annotations

import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_to_end(coro: Coroutine[Any, Any, T], name: str) -> T:
    """`coro`'s result (or what it raised), on a private event loop: in this thread when it
    runs none, else in a thread of its own called `name`, waited for."""
    import asyncio  # lazily: a run without an async SDK never needs it

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:
            box["error"] = exc

    worker = threading.Thread(target=target, name=name, daemon=True)
    worker.start()
    worker.join()
    if "error" in box:
        raise box["error"]
    result: T = box["value"]
    return result
