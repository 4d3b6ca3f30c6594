"""The fan-out bound without podium: 1,000 calls on 100 threads to bench/_stub_llm.py (each
answer held 50 ms), made by the bare SDK clients the way podium's adapters make them, and by a
bare HTTP client for comparison. What this costs is the floor of
`bench_foreach.py --provider openai|anthropic`: on a machine where the calls are CPU-bound
(the GIL), 1,000 calls take at least 1,000 x the CPU of one.

  raw             http.client, one keep-alive connection per thread, the same small body
  openai-create   client.chat.completions.with_streaming_response.create(stream=True, ...)
  openai-post     client.post("/chat/completions", ...), the body as podium builds it
                  (what providers/openai_chat.py does: no per-call transform)
  openai-post-spread  the same post, each call in flight on a copy of the client of its own
                  (own connection pool, one shared TLS context), copies reused: the cost
                  of sharing one pool between 100 threads (docs/performance.md, fourth pass)
  anthropic-stream  client.messages.stream(...), its events iterated, get_final_message()
  anthropic-post  client.post("/v1/messages", ...), the SSE events read with
                  podium.providers.sse and json.loads (what providers/anthropic_messages.py
                  does)
  openai-async-post, anthropic-async-post
                  the same posts through the SDKs' async clients (AsyncOpenAI,
                  AsyncAnthropic) on ONE event loop thread, each of the 100 threads
                  submitting its call with asyncio.run_coroutine_threadsafe and blocking
                  on the future: what moving the adapters to the async clients would give
  openai-gathered  no threads at all: the posts of openai-async-post as 1,000 tasks on one
                  event loop, --threads of them at a time (what members as tasks would cost)
  openai-async-post-aiohttp, anthropic-async-post-aiohttp, openai-gathered-aiohttp
                  the same on the SDKs' aiohttp transport (openai.DefaultAioHttpClient,
                  anthropic.DefaultAioHttpClient); not in the default set, as they need
                  aiohttp (`uv pip install --python .venv/bin/python aiohttp`), then
                  --modes openai-async-post-aiohttp,anthropic-async-post-aiohttp

Usage:
    .venv/bin/python bench/bench_sdk_fanout.py [--calls 1000] [--threads 100] [--repeats 3]

Prints a Markdown table: wall s, wall / ideal, CPU ms per call (this process, all threads),
median of the repeats after one warm-up.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import md_table
from bench_foreach import Stub

SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
          "additionalProperties": False}
FMT = {"type": "json_schema", "json_schema": {"name": "output", "strict": True,
                                              "schema": SCHEMA}}
STREAM = {"X-Stainless-Raw-Response": "stream"}


def on_loop() -> Callable[[Any], Any]:
    """Runs a coroutine on one shared event loop thread and waits for its result."""
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, name="bench-loop", daemon=True).start()
    return lambda coro: asyncio.run_coroutine_threadsafe(coro, loop).result()


async def openai_async_post(oa: Any, i: int) -> None:
    """The streamed post podium's OpenAI adapter makes, through an async client, read to its
    end."""
    import httpx2

    b = {"model": "gpt-5-mini", "messages": [{"role": "user", "content": f"x {i}"}],
         "response_format": FMT, "stream": True, "stream_options": {"include_usage": True}}
    from podium.providers.loop import raw_http

    r = raw_http(await oa.post("/chat/completions", cast_to=httpx2.Response, body=b,
                               options={"headers": STREAM, "timeout": 600.0,
                                        "security": {"bearer_auth": True}}, stream=True))
    try:
        async for _ in r.aiter_lines():
            pass
    finally:
        await r.aclose()


def async_caller(mode: str, url: str) -> Callable[[int], None]:
    import httpx2

    run = on_loop()
    aio = mode.endswith("-aiohttp")
    if mode.startswith("openai"):
        import openai

        oa = openai.AsyncOpenAI(api_key="sk-bench", base_url=url + "/v1", max_retries=0,
                                http_client=openai.DefaultAioHttpClient() if aio else None)
        return lambda i: run(openai_async_post(oa, i))
    import anthropic

    from podium.providers.sse import events

    an = anthropic.AsyncAnthropic(api_key="sk-bench", base_url=url, max_retries=0,
                                  http_client=anthropic.DefaultAioHttpClient() if aio else None)

    async def apost(i: int) -> None:
        b = {"model": "claude-sonnet-4-6", "max_tokens": 100,
             "messages": [{"role": "user", "content": f"x {i}"}], "stream": True}
        from podium.providers.loop import raw_http

        r = raw_http(await an.post("/v1/messages", cast_to=httpx2.Response, body=b,
                                   options={"headers": STREAM, "timeout": 600.0},
                                   stream=True))
        try:
            lines = [line async for line in r.aiter_lines()]
        finally:
            await r.aclose()
        for name, data in events(iter(lines)):
            if data and name != "ping":
                json.loads(data)
    return lambda i: run(apost(i))


def caller(mode: str, port: int) -> Callable[[int], None]:
    url = f"http://127.0.0.1:{port}"
    if "async" in mode:
        return async_caller(mode, url)
    if mode == "raw":
        local = threading.local()

        def raw(i: int) -> None:
            if not hasattr(local, "conn"):
                local.conn = http.client.HTTPConnection("127.0.0.1", port)
            local.conn.request("POST", "/v1/chat/completions", body=b"{}",
                               headers={"content-type": "application/json"})
            local.conn.getresponse().read()
        return raw
    if mode.startswith("openai"):
        import httpx2
        import openai

        oa = openai.OpenAI(api_key="sk-bench", base_url=url + "/v1", max_retries=0)

        def body(i: int) -> dict[str, Any]:
            return {"model": "gpt-5-mini", "messages": [{"role": "user", "content": f"x {i}"}],
                    "response_format": FMT}

        def create(i: int) -> None:
            with oa.chat.completions.with_streaming_response.create(  # type: ignore[call-overload]
                    stream=True, stream_options={"include_usage": True}, **body(i)) as r:
                for _ in r.iter_lines():
                    pass

        def post_with(client: openai.OpenAI, i: int) -> None:
            b = {**body(i), "stream": True, "stream_options": {"include_usage": True}}
            with closing(client.post("/chat/completions", cast_to=httpx2.Response, body=b,
                                     options={"headers": STREAM, "timeout": 600.0,
                                              "security": {"bearer_auth": True}},
                                     stream=True)) as r:
                for _ in r.iter_lines():
                    pass

        def post(i: int) -> None:
            post_with(oa, i)
        if mode == "openai-post-spread":  # a copy of the client per call in flight
            free: list[Any] = []
            lock = threading.Lock()
            tls = httpx2.create_ssl_context()  # one for all: building one costs ~20 ms

            def spread(i: int) -> None:
                with lock:
                    c = free.pop() if free else oa.copy(
                        http_client=openai.DefaultHttpxClient(verify=tls))
                try:
                    post_with(c, i)
                finally:
                    with lock:
                        free.append(c)
            return spread
        return create if mode == "openai-create" else post
    import anthropic
    import httpx2

    from podium.providers.sse import events

    an = anthropic.Anthropic(api_key="sk-bench", base_url=url, max_retries=0)
    msgs = {"model": "claude-sonnet-4-6", "max_tokens": 100}

    def stream(i: int) -> None:
        with an.messages.stream(messages=[{"role": "user", "content": f"x {i}"}],
                                **msgs) as s:  # type: ignore[arg-type]
            for _ in s:
                pass
            s.get_final_message()

    def apost(i: int) -> None:
        b = {**msgs, "messages": [{"role": "user", "content": f"x {i}"}], "stream": True}
        with closing(an.post("/v1/messages", cast_to=httpx2.Response, body=b,
                             options={"headers": STREAM, "timeout": 600.0},
                             stream=True)) as r:
            for name, data in events(r.iter_lines()):
                if data and name != "ping":
                    json.loads(data)
    return stream if mode == "anthropic-stream" else apost


def gathered(mode: str, port: int, width: int) -> Callable[[int], None]:
    """No threads at all: `calls` posts as tasks on one event loop, `width` at a time. The
    returned function runs one round of that many calls."""
    import openai

    loop = asyncio.new_event_loop()
    aio = mode.endswith("-aiohttp")
    oa = openai.AsyncOpenAI(api_key="sk-bench", base_url=f"http://127.0.0.1:{port}/v1",
                            max_retries=0,
                            http_client=openai.DefaultAioHttpClient() if aio else None)

    async def one(i: int, gate: asyncio.Semaphore) -> None:
        async with gate:
            await openai_async_post(oa, i)

    async def round_of(calls: int) -> None:
        gate = asyncio.Semaphore(width)
        await asyncio.gather(*(one(i, gate) for i in range(calls)))

    return lambda calls: loop.run_until_complete(round_of(calls))


MODES = ("raw", "openai-create", "openai-post", "openai-post-spread", "openai-async-post",
         "openai-gathered", "anthropic-stream", "anthropic-post", "anthropic-async-post")
# not run by default: they need aiohttp, which podium does not install
AIOHTTP_MODES = ("openai-async-post-aiohttp", "anthropic-async-post-aiohttp",
                 "openai-gathered-aiohttp")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=100)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--modes", default=",".join(MODES),
                    help="comma-separated, from: " + ", ".join(MODES + AIOHTTP_MODES))
    args = ap.parse_args()
    ideal = args.calls / args.threads * args.latency
    stub = Stub(args.latency, "openai")
    rows = []
    try:
        for mode in args.modes.split(","):
            if "gathered" in mode:
                run_round = gathered(mode, stub.port, args.threads)
                run_round(1)
            else:
                call = caller(mode, stub.port)
                call(0)

                def run_round(calls: int, call: Callable[[int], None] = call) -> None:
                    with ThreadPoolExecutor(args.threads) as pool:
                        list(pool.map(call, range(calls)))
            walls, cpus = [], []
            for _ in range(args.repeats + 1):
                t0, c0 = time.perf_counter(), time.process_time()
                run_round(args.calls)
                walls.append(time.perf_counter() - t0)
                cpus.append((time.process_time() - c0) / args.calls * 1000)
            wall, cpu = statistics.median(walls[1:]), statistics.median(cpus[1:])
            rows.append([mode, wall, wall / ideal, cpu])
    finally:
        stub.close()
    print(f"{args.calls} calls on {args.threads} threads, answers held "
          f"{args.latency * 1000:g} ms (ideal {ideal:g} s); median of {args.repeats}.\n")
    print(md_table(["client", "wall s", "wall / ideal", "CPU ms per call"], rows))


if __name__ == "__main__":
    main()
