"""podium.blocking.run_to_end: a coroutine run to its end from synchronous code, in this
thread when it runs no event loop, else in a thread of its own; its result or its error."""

from __future__ import annotations

import asyncio
import threading

import pytest

from podium.blocking import run_to_end


async def _where() -> str:
    await asyncio.sleep(0)
    return threading.current_thread().name


async def _fails() -> None:
    raise ValueError("from the coroutine")


def test_without_a_running_loop_it_runs_in_this_thread() -> None:
    assert run_to_end(_where(), "unused") == threading.current_thread().name
    with pytest.raises(ValueError, match="from the coroutine"):
        run_to_end(_fails(), "unused")


def test_inside_a_running_loop_it_runs_in_a_named_thread_of_its_own() -> None:
    async def inside() -> tuple[str, str]:
        got = run_to_end(_where(), "podium-test")
        with pytest.raises(ValueError, match="from the coroutine"):
            run_to_end(_fails(), "podium-test")
        return got, threading.current_thread().name

    ran_in, caller = asyncio.run(inside())
    assert ran_in == "podium-test"
    assert caller != "podium-test"
