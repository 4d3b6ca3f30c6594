"""Spans from a run's events, after the OpenTelemetry GenAI semantic conventions.

`TraceSink` is an observer of the event bus: it sees the events the store commits, already
redacted, and turns them into spans. A run is `invoke_workflow <name>`; each step a child
(`invoke_agent <step>` for an agent, `<type> <step>` otherwise) that stays open until its route
is taken; each model exchange a `chat <model>` span, each tool an `execute_tool <tool>` span, a
script a `script <step>` span and a gate the `gate <step>` span of its wait. A sub-workflow's
run is a child of its `workflow` step. Span times are the events' times (the run's clock).

Imported only when telemetry is configured: it imports the OpenTelemetry SDK.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import field
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.trace import (
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)

from podium.events import model as ev
from podium.records import record
from podium.telemetry import TelemetrySettings

# podium's provider names → gen_ai.provider.name
PROVIDER_NAMES = {"openai": "openai", "azure": "azure.ai.openai", "claude": "anthropic",
                  "anthropic": "anthropic", "copilot": "github.copilot",
                  "claude-agent": "anthropic", "scripted": "podium.scripted"}
MAX_TEXT = 16_000  # characters of captured content per attribute
# the fields of other events that hold what a model or a person said: content, captured only
# with capture_content (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT)
CONTENT_FIELDS: dict[str, frozenset[str]] = {
    "model_delta": frozenset({"text"}), "dialog_message": frozenset({"content"}),
    "guidance_added": frozenset({"text"}), "dialog_evaluated": frozenset({"reason", "question"}),
}

Attrs = dict[str, Any]


def _ns(ts: float) -> int:
    return int(ts * 1e9)


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, sort_keys=True)
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "…"


def _clean(attrs: Attrs) -> Attrs:
    return {k: v for k, v in attrs.items() if v is not None}


@record
class _Run:
    span: Span
    workflow: str
    steps: dict[tuple[str, int], tuple[Span, str]] = field(default_factory=dict)
    pending: dict[str, tuple[Span, int]] = field(default_factory=dict)  # finished, route to come
    gates: dict[tuple[str, int], Span] = field(default_factory=dict)
    prompts: dict[tuple[str, int, str | None], ev.PromptRendered] = field(default_factory=dict)
    # a for-each item's agent's (name, iteration) -> the item's own (label, iteration)
    items: dict[tuple[str, int], tuple[str, int]] = field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    priced: bool = True


class TraceSink:
    """An event observer that builds spans. `parent` continues a trace (a resumed run's spans
    go under its first attempt's root span); `on_root(trace_id, span_id)` is told the root
    span of a new trace, to keep it with the run."""

    def __init__(self, tracer: trace.Tracer, *, capture_content: bool = False,
                 parent: SpanContext | None = None,
                 on_root: Callable[[str, str], None] | None = None) -> None:
        self.tracer = tracer
        self.capture = capture_content
        self.parent = parent
        self.on_root = on_root
        self.runs: dict[str, _Run] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ the Sink protocol

    def handle(self, event: ev.Event) -> None:
        with self._lock:
            method = getattr(self, "_on_" + event.type, None)
            if method is not None:
                method(event)
            elif event.run_id in self.runs:
                self._note(event)

    def close(self) -> None:
        with self._lock:
            for run in list(self.runs.values()):
                self._end_all(run, None)
                run.span.end()
            self.runs.clear()

    # ------------------------------------------------------------------ runs

    def _start(self, name: str, parent: Span | SpanContext | None, ts: float, attrs: Attrs,
               kind: SpanKind = SpanKind.INTERNAL) -> Span:
        if isinstance(parent, SpanContext):
            parent = NonRecordingSpan(parent)
        ctx = trace.set_span_in_context(parent) if parent is not None else None
        return self.tracer.start_span(name, context=ctx, kind=kind, attributes=_clean(attrs),
                                      start_time=_ns(ts))

    def _on_run_started(self, e: ev.RunStarted) -> None:
        parent: Span | SpanContext | None = self.parent
        if e.parent_run_id is not None:
            parent = self._workflow_step(e.parent_run_id)
        span = self._start(f"invoke_workflow {e.workflow}", parent, e.ts, {
            "gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": e.workflow,
            "podium.run.id": e.run_id, "podium.run.parent_id": e.parent_run_id,
            "podium.run.entry_point": e.entry_point, "podium.run.resumed": e.resumed,
            "podium.workflow.path": e.workflow_path, "podium.workflow.hash": e.workflow_hash,
            "podium.version": e.podium_version, "podium.replay_of": e.replay_of,
            "podium.forked_from": e.forked_from})
        self.runs[e.run_id] = _Run(span, e.workflow)
        if e.parent_run_id is None and self.parent is None and self.on_root is not None:
            c = span.get_span_context()
            self.on_root(trace.format_trace_id(c.trace_id), trace.format_span_id(c.span_id))

    def _workflow_step(self, run_id: str) -> Span | None:
        run = self.runs.get(run_id)
        if run is None:
            return None
        for span, step_type in reversed(list(run.steps.values())):
            if step_type == "workflow":
                return span
        return run.span

    def _on_run_finished(self, e: ev.RunFinished) -> None:
        run = self.runs.pop(e.run_id, None)
        if run is None:
            return
        parent = self.runs.get(e.parent_run_id) if e.parent_run_id else None
        if parent is not None:  # a sub-workflow's calls are its parent's spend too
            parent.input_tokens += run.input_tokens
            parent.output_tokens += run.output_tokens
            parent.cost += run.cost
            parent.priced = parent.priced and run.priced
        self._end_all(run, e.ts)
        failed = e.status in ("failed", "error", "limit")
        run.span.set_attributes(_clean({
            "podium.run.status": e.status, "podium.run.exit_code": e.exit_code,
            "podium.run.iterations": e.iterations, "podium.run.terminal": e.terminal,
            "podium.run.elapsed": e.elapsed, "podium.run.cost_usd": run.cost,
            "podium.run.priced": run.priced, "podium.run.reason": e.reason,
            "gen_ai.usage.input_tokens": run.input_tokens,
            "gen_ai.usage.output_tokens": run.output_tokens,
            "error.type": (e.error_type or e.status) if failed else None}))
        if failed:
            run.span.set_status(Status(StatusCode.ERROR, e.message or e.reason or e.status))
        run.span.end(_ns(e.ts))

    def _end_all(self, run: _Run, ts: float | None) -> None:
        for span, end in run.pending.values():
            span.end(end)
        run.pending.clear()
        for span, _ in run.steps.values():
            span.end(None if ts is None else _ns(ts))
        run.steps.clear()
        for span in run.gates.values():
            span.set_attribute("podium.gate.outcome", "waiting")
            span.end(None if ts is None else _ns(ts))
        run.gates.clear()

    # ------------------------------------------------------------------ steps

    def _on_step_started(self, e: ev.StepStarted) -> None:
        run = self.runs.get(e.run_id)
        if run is None:
            return
        if e.group is None:  # the previous step's route was not reported: it ends as it was
            for span, end in run.pending.values():
                span.end(end)
            run.pending.clear()
        parent: Span = run.span
        if e.group is not None:
            for (name, _), (span, _) in reversed(list(run.steps.items())):
                if name == e.group:
                    parent = span
                    break
        agent = e.step_type == "agent"
        span = self._start(f"invoke_agent {e.step}" if agent else f"{e.step_type} {e.step}",
                           parent, e.ts, {
                               "gen_ai.operation.name": "invoke_agent" if agent else None,
                               "gen_ai.agent.name": e.step if agent else None,
                               "podium.step.name": e.step, "podium.step.type": e.step_type,
                               "podium.step.iteration": e.iteration,
                               "podium.run.iteration": e.run_iteration,
                               "podium.step.group": e.group})
        run.steps[(e.step, e.iteration)] = (span, e.step_type)
        if e.group is not None:  # its agent's events name it without the item's key
            for name in ev.item_agent_names(e.step):
                run.items.setdefault((name, e.iteration), (e.step, e.iteration))

    def _step_span(self, run: _Run, step: str | None, iteration: int | None) -> Span:
        if step is not None:
            if iteration is not None:
                key = run.items.get((step, iteration), (step, iteration))
                if key in run.steps:
                    return run.steps[key][0]
            for (name, _), (span, _) in reversed(list(run.steps.items())):
                if name == step:
                    return span
            if step in run.pending:
                return run.pending[step][0]
        return run.span

    @staticmethod
    def _ended(run: _Run, step: str, iteration: int) -> tuple[Span, str] | None:
        for name in ev.item_agent_names(step):
            if run.items.get((name, iteration)) == (step, iteration):
                del run.items[(name, iteration)]
        return run.steps.pop((step, iteration), None)

    def _on_step_finished(self, e: ev.StepFinished) -> None:
        run = self.runs.get(e.run_id)
        if run is None:
            return
        found = self._ended(run, e.step, e.iteration)
        if found is None:
            return
        span = found[0]
        span.set_attributes(_clean({
            "podium.step.elapsed": e.elapsed, "podium.step.outcome": "success",
            "gen_ai.request.model": e.model,
            "gen_ai.usage.input_tokens": e.input_tokens if e.model else None,
            "gen_ai.usage.output_tokens": e.output_tokens if e.model else None,
            "podium.cost_usd": e.cost_usd}))
        if self.capture and e.output is not None:
            span.set_attribute("podium.step.output", _text(e.output))
        if e.group is not None:
            span.end(_ns(e.ts))
        else:
            run.pending[e.step] = (span, _ns(e.ts))

    def _on_step_failed(self, e: ev.StepFailed) -> None:
        run = self.runs.get(e.run_id)
        if run is None:
            return
        found = self._ended(run, e.step, e.iteration)
        if found is None:
            return
        span = found[0]
        span.set_attributes(_clean({"podium.step.elapsed": e.elapsed,
                                    "podium.step.outcome": "failed",
                                    "error.type": e.error_type, "podium.cost_usd": e.cost_usd}))
        span.set_status(Status(StatusCode.ERROR, e.message))
        span.end(_ns(e.ts))

    def _on_route_taken(self, e: ev.RouteTaken) -> None:
        run = self.runs.get(e.run_id)
        if run is None:
            return
        attrs = _clean({"podium.route.to": e.to_step, "podium.route.index": e.route_index,
                        "podium.route.kind": e.kind, "podium.route.condition": e.condition})
        pending = run.pending.pop(e.from_step, None)
        if pending is None:
            self._step_span(run, e.from_step, None).add_event(
                "route_taken", {**attrs, "podium.route.from": e.from_step}, _ns(e.ts))
            return
        span, end = pending
        span.set_attributes(attrs)
        span.end(end)

    # ------------------------------------------------------------------ models and tools

    def _on_prompt_rendered(self, e: ev.PromptRendered) -> None:
        run = self.runs.get(e.run_id)
        if run is not None:
            run.prompts[(e.step, e.iteration, e.call)] = e

    def _on_model_exchange(self, e: ev.ModelExchange) -> None:
        """One `chat` span per API request: an answer that took several (a tool loop) has its
        requests in `requests`, each with its tokens and finish reason; the answer's interval
        is shared among them in order (the events time the answer, not each request)."""
        run = self.runs.get(e.run_id)
        if run is None:
            return
        run.input_tokens += e.input_tokens
        run.output_tokens += e.output_tokens
        run.cost += e.cost_usd or 0.0
        run.priced = run.priced and (e.cost_usd is not None or not (e.input_tokens
                                                                     or e.output_tokens))
        finish = getattr(e, "finish_reason", None)
        requests = e.requests or [{"input_tokens": e.input_tokens,
                                   "output_tokens": e.output_tokens,
                                   "cached_tokens": e.cached_tokens, "finish_reason": finish}]
        start, share = e.ts - e.elapsed, e.elapsed / len(requests)
        for i, req in enumerate(requests):
            last = i == len(requests) - 1
            self._chat_span(run, e, req, start + i * share, e.ts if last else
                            start + (i + 1) * share, answer=last)

    def _chat_span(self, run: _Run, e: ev.ModelExchange, req: dict[str, Any], begin: float,
                   end: float, *, answer: bool) -> None:
        prompt = run.prompts.get((e.step, e.iteration, e.call))
        request_model = (prompt.model if prompt is not None else None) or e.model
        finish = req.get("finish_reason")
        several = e.requests is not None
        span = self._start(f"chat {request_model or e.provider}",
                           self._step_span(run, e.step, e.iteration), begin, {
                               "gen_ai.operation.name": "chat",
                               "gen_ai.provider.name": PROVIDER_NAMES.get(e.provider,
                                                                          e.provider),
                               "gen_ai.request.model": request_model,
                               "gen_ai.response.model": e.model,
                               "gen_ai.usage.input_tokens": req.get("input_tokens", 0),
                               "gen_ai.usage.output_tokens": req.get("output_tokens", 0),
                               "gen_ai.usage.cache_read.input_tokens":
                                   req.get("cached_tokens") or None,
                               "gen_ai.response.finish_reasons": [finish] if finish else None,
                               "podium.request.reasoning_effort":
                                   prompt.reasoning_effort if prompt is not None else None,
                               "podium.model.call": e.call, "podium.model.attempt": e.attempt,
                               "podium.model.api_calls": e.api_calls,
                               "podium.provider": e.provider,
                               # the answer's cost, on the request that gave the answer
                               "podium.cost_usd": e.cost_usd if answer else None,
                               "podium.step.name": e.step},
                           SpanKind.CLIENT)
        if self.capture and (answer or not several):
            system = e.request.get("system") or (prompt.system_prompt if prompt else None)
            if system:
                span.set_attribute("gen_ai.system_instructions", _text(
                    [{"type": "text", "content": system}]))
            message = e.request.get("message") or (prompt.prompt if prompt else "")
            span.set_attribute("gen_ai.input.messages", _text(
                [{"role": "user", "parts": [{"type": "text", "content": message}]}]))
            span.set_attribute("gen_ai.output.messages", _text(
                [{"role": "assistant", "parts": [{"type": "text", "content": e.response_text}],
                  **({"finish_reason": finish} if finish else {})}]))
        span.end(_ns(end))

    def _tool_span(self, e: ev.ToolCalled | ev.McpCalled, source: str | None,
                   arguments: Any, result: Any) -> None:
        run = self.runs.get(e.run_id)
        if run is None:
            return
        mcp = source is not None and source.startswith("mcp")
        span = self._start(f"execute_tool {e.tool}", self._step_span(run, e.step, e.iteration),
                           e.ts - e.elapsed, {
                               "gen_ai.operation.name": "execute_tool",
                               "gen_ai.tool.name": e.tool,
                               "gen_ai.tool.type": "extension" if mcp else "function",
                               "podium.tool.source": source, "podium.step.name": e.step})
        if self.capture:
            span.set_attribute("gen_ai.tool.call.arguments", _text(arguments))
            span.set_attribute("gen_ai.tool.call.result", _text(result))
        if e.is_error:
            span.set_attribute("error.type", "tool_error")
            span.set_status(Status(StatusCode.ERROR))
        span.end(_ns(e.ts))

    def _on_tool_called(self, e: ev.ToolCalled) -> None:
        self._tool_span(e, e.source, e.arguments, e.output)

    def _on_mcp_called(self, e: ev.McpCalled) -> None:
        self._tool_span(e, f"mcp:{e.server}", e.arguments, e.result)

    def _on_script_output(self, e: ev.ScriptOutput) -> None:
        run = self.runs.get(e.run_id)
        if run is None:
            return
        span = self._start(f"script {e.step}", self._step_span(run, e.step, e.iteration),
                           e.ts - e.elapsed, {
                               "process.executable.name": e.argv[0] if e.argv else None,
                               "process.exit.code": e.exit_code,
                               "podium.script.working_dir": e.working_dir,
                               "podium.script.stdout_truncated": e.stdout_truncated,
                               "podium.script.stderr_truncated": e.stderr_truncated,
                               "podium.step.name": e.step})
        if self.capture:
            span.set_attribute("process.command_args", e.argv)
            span.set_attribute("podium.script.stdout", _text(e.stdout))
            span.set_attribute("podium.script.stderr", _text(e.stderr))
        if e.exit_code != 0:
            span.set_attribute("error.type", str(e.exit_code))
            span.set_status(Status(StatusCode.ERROR, f"exit code {e.exit_code}"))
        span.end(_ns(e.ts))

    # ------------------------------------------------------------------ gates

    def _on_gate_opened(self, e: ev.GateOpened) -> None:
        run = self.runs.get(e.run_id)
        if run is None:
            return
        span = self._start(f"gate {e.step}", self._step_span(run, e.step, e.iteration), e.ts, {
            "podium.gate.kind": e.kind, "podium.step.name": e.step,
            "podium.gate.options": [str(o.get("value", o.get("label", ""))) for o in e.options]})
        if self.capture:
            span.set_attribute("podium.gate.prompt", _text(e.prompt))
        run.gates[(e.step, e.iteration)] = span

    def _on_gate_answered(self, e: ev.GateAnswered) -> None:
        run = self.runs.get(e.run_id)
        if run is None:
            return
        span = run.gates.pop((e.step, e.iteration), None)
        if span is None:  # opened by an earlier attempt of the run: the answer alone
            span = self._start(f"gate {e.step}", self._step_span(run, e.step, e.iteration),
                               e.ts, {"podium.gate.kind": e.kind, "podium.step.name": e.step,
                                      "podium.gate.resumed": True})
        span.set_attributes(_clean({"podium.gate.selected": e.selected,
                                    "podium.gate.answered_by": e.answered_by,
                                    "podium.gate.route": e.route,
                                    "podium.gate.outcome": "answered"}))
        span.end(_ns(e.ts))

    # ------------------------------------------------------------------ the rest

    def _note(self, e: ev.Event) -> None:
        """Any other event: a span event on its step's span (or the run's). The text of what
        a model or a person said is content: only with capture_content, and streamed pieces
        are no span event at all without it."""
        if e.type == "model_delta" and not self.capture:
            return
        run = self.runs[e.run_id]
        content = CONTENT_FIELDS.get(e.type, frozenset())
        step = getattr(e, "step", None)
        span = self._step_span(run, step if isinstance(step, str) else None,
                               getattr(e, "iteration", None))
        attrs: Attrs = {}
        for key, value in e.model_dump(exclude={"v", "type", "run_id", "seq", "ts",
                                                "parent_run_id"}).items():
            if key in content and not self.capture:
                continue
            if isinstance(value, (bool, int, float)) or (isinstance(value, str)
                                                           and len(value) <= 500):
                attrs[f"podium.{key}"] = value
            elif isinstance(value, str) and self.capture:
                attrs[f"podium.{key}"] = _text(value)
        span.add_event(e.type, attrs, _ns(e.ts))


# ---------------------------------------------------------------------- export


class WarningExporter(SpanExporter):
    """Wraps the real exporter: a failed export is one warning on stderr, never an error."""

    def __init__(self, inner: SpanExporter, where: str) -> None:
        self.inner = inner
        self.where = where
        self.warned = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.inner.export(spans)
        except Exception as exc:  # an exporter must never break anything
            result, reason = SpanExportResult.FAILURE, f"{type(exc).__name__}: {exc}"
        else:
            reason = "the collector did not take them"
        if result is not SpanExportResult.SUCCESS and not self.warned:
            self.warned = True
            sys.stderr.write(f"podium: warning: traces could not be exported to {self.where} "
                             f"({reason}); the run is not affected\n")
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


_providers: dict[TelemetrySettings, TracerProvider] = {}


def tracer_provider(s: TelemetrySettings) -> TracerProvider:
    """One provider per configuration in the process, exporting in a background thread and
    flushed at exit (bounded by the export timeout)."""
    found = _providers.get(s)
    if found is not None:
        return found
    import logging

    # the SDK logs each failed export with a traceback: podium says it once, in a line
    for name in ("opentelemetry.exporter.otlp.proto.http",
                 "opentelemetry.exporter.otlp.proto.http.trace_exporter",
                 "opentelemetry.sdk.trace.export", "opentelemetry.sdk._shared_internal"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    provider = TracerProvider(resource=Resource.create({"service.name": s.service_name}))
    inner: SpanExporter
    if s.exporter == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        inner = ConsoleSpanExporter(out=sys.stderr)
        where = "stderr"
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        inner = OTLPSpanExporter(endpoint=s.endpoint, timeout=s.timeout)
        where = s.endpoint
    provider.add_span_processor(BatchSpanProcessor(
        WarningExporter(inner, where), export_timeout_millis=int(s.timeout * 1000)))
    _providers[s] = provider
    return provider


def remote_parent(trace_id: str, span_id: str) -> SpanContext | None:
    """The span context kept with a run (hex ids), to continue its trace."""
    try:
        context = SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=True,
                              trace_flags=TraceFlags(TraceFlags.SAMPLED))
    except (TypeError, ValueError):
        return None
    return context if context.is_valid else None


def make_sink(s: TelemetrySettings, *, trace_id: str | None = None, span_id: str | None = None,
              on_root: Callable[[str, str], None] | None = None) -> TraceSink:
    provider = tracer_provider(s)
    parent = remote_parent(trace_id, span_id) if trace_id and span_id else None
    from podium import __version__

    return TraceSink(provider.get_tracer("podium", __version__), capture_content=s.capture_content,
                     parent=parent, on_root=on_root)


def flush(timeout: float | None = None) -> None:
    """Export what is buffered now (tests; the process's exit does it otherwise)."""
    for s, provider in list(_providers.items()):
        provider.force_flush(int((timeout or s.timeout) * 1000))
