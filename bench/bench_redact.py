"""Secret redaction on the path every event takes (src/podium/events/redact.py).

Times, in one process, with three secrets set (a provider key, a declared ASCII token and a
non-ASCII one with quotes and a backslash):
  text 1 KB / 64 KB     - Redactor.text on prose that holds no secret (a streamed chunk, a
                          script's stdout);
  text 64 KB, 3 hits    - the same with the secret in three forms inside;
  event: delta          - what the bus does to a small `model_delta` (no secret);
  event: step output    - a `step_finished` with a 4 KB structured output (no secret);
  event: exchange 20 KB - a `model_exchange` whose request holds 20 KB of messages (no secret);
  event: exchange, hit  - the same with the key in it (the event is rebuilt).

`--baseline FILE` also times a redact module loaded from FILE (the one before this bench:
`git show d71c58f:src/podium/events/redact.py > /tmp/old_redact.py`), whose events went through
the bus as JSON text (`model_dump_json`, text replace, `json.loads`, `parse_event`); the
variants are interleaved, each figure the best of --repeats batches of --number calls.

Usage:
    .venv/bin/python bench/bench_redact.py [--baseline FILE] [--repeats 7] [--number 200]

Prints a Markdown report on stdout; writes bench/results/redact.json.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine_info, md_table, write_json
from podium.events import redact
from podium.events.model import Event, ModelDelta, ModelExchange, StepFinished, parse_event

SECRETS = {"OPENAI_API_KEY": "sk-bench-0123456789abcdefghijklmnop",
           "MY_TOKEN": "tok_4f9a2c7e1b",
           "OTHER": 'ü"ber\\geheim/ключ'}
PROSE = ("The reviewer read the diff, ran the tests and wrote back: the change looks right, "
         "but the error path in `load()` still swallows the exception. ") * 8


def events() -> dict[str, Event]:
    output = {"findings": [{"file": f"src/m{i}.py", "line": i, "note": PROSE[:120]}
                           for i in range(24)], "ok": False}
    messages = [{"role": "user" if i % 2 else "assistant", "content": PROSE[:1000]}
                for i in range(20)]
    exchange = ModelExchange(step="review", iteration=2, attempt=1, provider="openai",
                             model="gpt-5-mini", request={"messages": messages},
                             response_text=PROSE[:800], input_tokens=5000, output_tokens=300)
    hit = exchange.model_copy(update={"response_text": "key " + SECRETS["OPENAI_API_KEY"]})
    return {
        "event: delta": ModelDelta(step="review", iteration=2, kind="text", text=PROSE[:80]),
        "event: step output 4 KB": StepFinished(step="review", step_type="agent", iteration=2,
                                                elapsed=1.5, output=output),
        "event: exchange 20 KB": exchange,
        "event: exchange 20 KB, hit": hit,
    }


def old_bus(redactor: Any) -> Callable[[Event], Event]:
    """events/bus.py's `_redacted` before this change."""
    def redacted(event: Event) -> Event:
        text = event.model_dump_json()
        clean = redactor.text(text)
        return event if clean == text else parse_event(json.loads(clean))
    return redacted


def cases(module: Any, *, old: bool) -> dict[str, Callable[[], Any]]:
    r = module.Redactor(SECRETS)
    big = PROSE * 64  # ~64 KB
    hits = big[:20000] + SECRETS["MY_TOKEN"] + big[20000:40000] \
        + json.dumps(json.dumps(SECRETS["OTHER"])) + big[40000:] + SECRETS["OPENAI_API_KEY"]
    handle = old_bus(r) if old else r.event
    out: dict[str, Callable[[], Any]] = {
        "text 1 KB": lambda: r.text(PROSE),
        "text 64 KB": lambda: r.text(big),
        "text 64 KB, 3 hits": lambda: r.text(hits),
    }
    for name, event in events().items():
        out[name] = lambda e=event: handle(e)
    return out


def best(fn: Callable[[], Any], number: int) -> float:
    started = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - started) / number


def load(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("baseline_redact", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--number", type=int, default=200)
    args = ap.parse_args()
    variants = {"now": cases(redact, old=False)}
    if args.baseline:
        variants["baseline"] = cases(load(args.baseline), old=True)
    times: dict[str, dict[str, float]] = {v: {} for v in variants}
    for name in variants["now"]:
        for _ in range(args.repeats):
            for v, cs in variants.items():
                t = best(cs[name], args.number) * 1e6
                times[v][name] = min(times[v].get(name, t), t)
    headers = ["case", "now (µs)"] + (["baseline (µs)"] if args.baseline else [])
    rows = [[n, times["now"][n]] + ([times["baseline"][n]] if args.baseline else [])
            for n in variants["now"]]
    print(md_table(headers, rows))
    write_json("redact.json", {"machine": machine_info(), "us_per_call": times})


if __name__ == "__main__":
    main()
