"""Trace export's cost per step: a set step looping N times in-process (`Engine.run()`), with
no sink, and with the trace exporter (`podium.telemetry.spans`) exporting through the SDK's
batch processor to an exporter that drops the spans (the network is off the run's thread).

Usage:
    .venv/bin/python bench/bench_telemetry.py [--steps 400] [--repeats 7]

Prints the best time per step of each and the difference.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from podium.engine.run import Engine
from podium.gates.base import ChainAnswerer
from podium.language.load import load_workflow
from podium.providers.base import ProviderRegistry
from podium.steps.base import RunOptions
from podium.telemetry.spans import TraceSink

WF = """
workflow: {{name: loop, entry_point: count, limits: {{max_iterations: 500}}}}
agents:
  - name: count
    type: set
    value: "{{{{ (count.output if count is defined else 0) + 1 }}}}"
    output_type: integer
    routes:
      - {{to: $end, when: "{{{{ count.output >= {n} }}}}"}}
      - {{to: count}}
"""


class Dropping(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def once(path: Path, traced: bool) -> float:
    wf = load_workflow(path).model
    assert wf is not None
    engine = Engine(wf, path, inputs={}, providers=ProviderRegistry(None),
                    answerer=ChainAnswerer([]), options=RunOptions())
    provider = None
    if traced:
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(Dropping()))
        engine.bus.add(TraceSink(provider.get_tracer("bench")))
    start = time.perf_counter()
    result = engine.run()
    took = time.perf_counter() - start
    assert result.exit_code == 0, result.error
    if provider is not None:
        provider.shutdown()
    return took


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "loop.yaml"
        path.write_text(textwrap.dedent(WF.format(n=args.steps)), encoding="utf-8")
        off = min(once(path, False) for _ in range(args.repeats)) / args.steps
        on = min(once(path, True) for _ in range(args.repeats)) / args.steps
    sys.stdout.write(f"per step, {args.steps} set steps, best of {args.repeats}:\n"
                     f"  telemetry off: {off * 1e6:.1f} µs\n  telemetry on:  {on * 1e6:.1f} µs"
                     f"\n  difference:    {(on - off) * 1e6:+.1f} µs ({(on / off - 1) * 100:+.0f}%)\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
