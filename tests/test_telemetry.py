"""OpenTelemetry traces (docs/decisions/0014-telemetry.md): spans built from a run's events,
collected with the SDK's in-memory exporter for every step type; the configuration from the
OTEL_* variables and `runtime.telemetry`; and through the real CLI, an OTLP/HTTP receiver on
127.0.0.1 (protobuf, decoded with opentelemetry-proto), a resumed run keeping its trace id, a
dead collector costing a warning and a bounded wait, and no OpenTelemetry import without it."""

from __future__ import annotations

import http.server
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers_engine import cli_env, imported, podium_argv, run_cli, run_workflow, write
from podium.events.model import (
    ModelExchange,
    PromptRendered,
    RunFinished,
    RunStarted,
    StepFinished,
    StepStarted,
    ToolCalled,
)
from podium.gates.base import GateAnswer
from podium.telemetry import settings, trace_link, traces_url

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from podium.telemetry.spans import TraceSink


def sink(capture: bool = False, **kw: Any) -> tuple[TraceSink, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return TraceSink(provider.get_tracer("test"), capture_content=capture, **kw), exporter


def by_name(spans: tuple[ReadableSpan, ...]) -> dict[str, ReadableSpan]:
    return {s.name: s for s in spans}


EVERY_STEP = """
workflow:
  name: every-step
  entry_point: draft
  runtime: {provider: openai, default_model: gpt-5.5}
agents:
  - name: draft
    model: gpt-5.5
    reasoning: {effort: high}
    prompt: "Write about {{ workflow.input.topic | default('otters') }}"
    output: {text: {type: string}}
    routes: [{to: build}]
  - name: build
    type: script
    command: python
    args: ["-c", "print('{\\"ok\\": true}')"]
    routes: [{to: review, when: "ok"}, {to: review}]
  - name: review
    type: human_gate
    prompt: "Accept?"
    options:
      - {label: Accept, value: accept, route: fan}
      - {label: Abandon, value: abandon, route: $end}
  - {name: a, type: set, value: 1}
  - {name: b, type: set, value: 2}
  - {name: sub, type: workflow, workflow: child.yaml, routes: [{to: pause}]}
  - {name: pause, type: wait, duration: "1s", routes: [{to: done}]}
  - {name: done, type: terminate, status: success, reason: finished}
parallel:
  - {name: fan, agents: [a, b], routes: [{to: sub}]}
"""

CHILD = """
workflow: {name: child, entry_point: inner}
agents:
  - {name: inner, type: set, value: 7}
output:
  v: "{{ inner.output }}"
"""


def test_every_step_type_gets_a_span_under_the_run(tmp_path: Path) -> None:
    write(tmp_path, CHILD, "child.yaml")
    trace_sink, exporter = sink()
    usage = {"input_tokens": 120, "output_tokens": 30}
    run = run_workflow(write(tmp_path, EVERY_STEP), sinks=[trace_sink],
                       responses={"agents": {"draft": [{"output": {"text": "hi"},
                                                        "usage": usage}]}},
                       answers={"review": [GateAnswer("accept")]})
    assert run.exit_code == 0, run.error_text()
    spans = exporter.get_finished_spans()
    names = by_name(spans)
    assert {"invoke_workflow every-step", "invoke_agent draft", "chat gpt-5.5", "script build",
            "human_gate review", "gate review", "parallel fan", "set a", "set b",
            "workflow sub", "invoke_workflow child", "set inner", "wait pause",
            "terminate done"} <= set(names), sorted(names)
    root = names["invoke_workflow every-step"]
    assert root.parent is None
    assert len({s.context.trace_id for s in spans}) == 1
    attrs = root.attributes or {}
    assert attrs["gen_ai.operation.name"] == "invoke_workflow"
    assert attrs["gen_ai.workflow.name"] == "every-step"
    assert attrs["podium.run.id"] == run.engine.run_id
    assert attrs["podium.run.status"] == "success"
    assert attrs["gen_ai.usage.input_tokens"] == 120
    assert "podium.run.cost_usd" in attrs
    # steps are children of the run, group members of the group, the child run of its step
    for step in ("invoke_agent draft", "script build", "human_gate review", "parallel fan",
                 "workflow sub", "wait pause", "terminate done"):
        parent = names[step].parent
        assert parent is not None
        assert parent.span_id == root.context.span_id, step
    assert names["set a"].parent.span_id == names["parallel fan"].context.span_id  # type: ignore[union-attr]
    child = names["invoke_workflow child"]
    assert child.parent.span_id == names["workflow sub"].context.span_id  # type: ignore[union-attr]
    assert names["set inner"].parent.span_id == child.context.span_id  # type: ignore[union-attr]
    agent = names["invoke_agent draft"].attributes or {}
    assert agent["gen_ai.operation.name"] == "invoke_agent"
    assert agent["gen_ai.agent.name"] == "draft"
    assert agent["podium.step.type"] == "agent"
    assert agent["podium.step.iteration"] == 1
    assert agent["podium.route.to"] == "build"
    assert (names["script build"].attributes or {})["podium.route.condition"] == "ok"
    chat = names["chat gpt-5.5"]
    assert chat.parent.span_id == names["invoke_agent draft"].context.span_id  # type: ignore[union-attr]
    c = chat.attributes or {}
    assert c["gen_ai.operation.name"] == "chat"
    assert c["gen_ai.provider.name"] == "openai"
    assert c["gen_ai.request.model"] == "gpt-5.5"
    assert c["gen_ai.response.model"] == "gpt-5.5"
    assert c["gen_ai.usage.input_tokens"] == 120
    assert c["gen_ai.usage.output_tokens"] == 30
    assert c["podium.request.reasoning_effort"] == "high"
    assert "gen_ai.input.messages" not in c
    assert "gen_ai.output.messages" not in c
    gate = names["gate review"]
    assert gate.parent.span_id == names["human_gate review"].context.span_id  # type: ignore[union-attr]
    assert (gate.attributes or {})["podium.gate.selected"] == "accept"
    assert (names["human_gate review"].attributes or {})["podium.route.to"] == "fan"
    scripts = [s for s in spans if s.name == "script build"]
    process = [s for s in scripts if "process.exit.code" in (s.attributes or {})]
    assert process
    assert (process[0].attributes or {})["process.exit.code"] == 0
    assert "process.command_args" not in (process[0].attributes or {})
    for s in spans:  # every span starts before it ends
        assert s.start_time is not None
        assert s.end_time is not None
        assert s.start_time <= s.end_time, s.name


EACH = """
workflow:
  name: each
  entry_point: fan
  input:
    items: {type: array}
  runtime: {provider: openai, default_model: gpt-5.5}
for_each:
  - name: fan
    type: for_each
    source: workflow.input.items
    as: item
    max_concurrent: 3
    agent: {name: worker, prompt: "Handle {{ item }}", output: {ok: {type: boolean}}}
agents: []
"""


def test_a_for_each_items_model_calls_are_children_of_their_item(tmp_path: Path) -> None:
    # an item's span is `invoke_agent worker[<key>]`, while its agent's events name the
    # step `worker`: each chat span goes under its own item, not the run's root
    trace_sink, exporter = sink()
    usage = {"input_tokens": 10, "output_tokens": 2}
    run = run_workflow(write(tmp_path, EACH), sinks=[trace_sink],
                       inputs={"items": ["a", "b", "c"]}, responses={"agents": {
        "worker": {"every": {"output": {"ok": True}, "usage": usage}}}})
    assert run.exit_code == 0, run.error_text()
    spans = exporter.get_finished_spans()
    items = {s.context.span_id: s for s in spans if s.name.startswith("invoke_agent worker[")}
    assert len(items) == 3
    chats = [s for s in spans if s.name == "chat gpt-5.5"]
    assert len(chats) == 3
    assert {c.parent.span_id for c in chats if c.parent} == set(items)
    fan = next(s for s in spans if s.name == "for_each fan")
    assert {i.parent.span_id for i in items.values() if i.parent} == {fan.context.span_id}


def test_a_failed_step_and_run_are_errors(tmp_path: Path) -> None:
    trace_sink, exporter = sink()
    run = run_workflow(write(tmp_path, """
        workflow: {name: boom, entry_point: bad}
        agents:
          - {name: bad, type: script, command: /nonexistent/podium-no-such-command}
    """), sinks=[trace_sink])
    assert run.exit_code != 0
    names = by_name(exporter.get_finished_spans())
    from opentelemetry.trace import StatusCode

    assert names["script bad"].status.status_code is StatusCode.ERROR
    assert (names["script bad"].attributes or {})["error.type"]
    assert names["invoke_workflow boom"].status.status_code is StatusCode.ERROR
    assert (names["invoke_workflow boom"].attributes or {})["podium.run.status"] == "error"


def feed(trace_sink: TraceSink, *events: Any) -> None:
    for i, e in enumerate(events, 1):
        trace_sink.handle(e.model_copy(update={"run_id": "r1", "seq": i,
                                               "ts": 1000.0 + i}))


def agent_events(secret_text: str = "the answer") -> list[Any]:
    return [
        RunStarted(workflow="w", workflow_path="/w.yaml", workflow_hash="h", entry_point="a",
                   inputs={}, podium_version="0", max_iterations=10),
        StepStarted(step="a", step_type="agent", iteration=1, run_iteration=1),
        PromptRendered(step="a", iteration=1, provider="claude", model="claude-x",
                       prompt="the prompt", system_prompt="be brief", reasoning_effort="low"),
        ToolCalled(step="a", iteration=1, tool="read_file", source="workspace",
                   arguments={"path": "x"}, output="contents", elapsed=0.5),
        ToolCalled(step="a", iteration=1, tool="search", source="mcp:docs",
                   arguments={"q": "y"}, output="boom", is_error=True, elapsed=0.2),
        ModelExchange(step="a", iteration=1, attempt=1, provider="claude",
                      model="claude-x-2026", request={"message": "the prompt",
                                                      "system": "be brief"},
                      response_text=secret_text, input_tokens=5, output_tokens=6,
                      cached_tokens=2, elapsed=0.9, api_calls=2, cost_usd=0.25),
        StepFinished(step="a", step_type="agent", iteration=1, elapsed=1.0, model="claude-x",
                     input_tokens=5, output_tokens=6, cost_usd=0.25),
        RunFinished(status="success", elapsed=3.0, iterations=1, exit_code=0),
    ]


def test_tool_calls_are_execute_tool_spans_and_content_is_off_by_default() -> None:
    trace_sink, exporter = sink()
    feed(trace_sink, *agent_events())
    names = by_name(exporter.get_finished_spans())
    agent = names["invoke_agent a"]
    tool = names["execute_tool read_file"]
    assert tool.parent.span_id == agent.context.span_id  # type: ignore[union-attr]
    t = tool.attributes or {}
    assert t["gen_ai.operation.name"] == "execute_tool"
    assert t["gen_ai.tool.name"] == "read_file"
    assert t["gen_ai.tool.type"] == "function"
    assert "gen_ai.tool.call.arguments" not in t
    mcp = names["execute_tool search"].attributes or {}
    assert mcp["gen_ai.tool.type"] == "extension"
    assert mcp["error.type"] == "tool_error"
    chat = names["chat claude-x"].attributes or {}
    assert chat["gen_ai.provider.name"] == "anthropic"
    assert chat["gen_ai.request.model"] == "claude-x"
    assert chat["gen_ai.response.model"] == "claude-x-2026"
    assert chat["gen_ai.usage.cache_read.input_tokens"] == 2
    assert chat["podium.model.api_calls"] == 2
    assert (names["invoke_workflow w"].attributes or {})["podium.run.cost_usd"] == 0.25
    for span in names.values():
        text = repr(dict(span.attributes or {})) + repr([e.attributes for e in span.events])
        assert "the answer" not in text
        assert "the prompt" not in text


def test_content_is_captured_only_when_asked() -> None:
    trace_sink, exporter = sink(capture=True)
    feed(trace_sink, *agent_events())
    names = by_name(exporter.get_finished_spans())
    chat = names["chat claude-x"].attributes or {}
    assert "the prompt" in str(chat["gen_ai.input.messages"])
    assert "the answer" in str(chat["gen_ai.output.messages"])
    assert "be brief" in str(chat["gen_ai.system_instructions"])
    tool = names["execute_tool read_file"].attributes or {}
    assert "contents" in str(tool["gen_ai.tool.call.result"])


def test_a_resumed_run_continues_the_kept_trace() -> None:
    kept: list[tuple[str, str]] = []
    first, _exporter = sink(on_root=lambda t, s: kept.append((t, s)))
    feed(first, *agent_events()[:2])
    assert len(kept) == 1
    from podium.telemetry.spans import remote_parent

    second, exporter2 = sink(parent=remote_parent(*kept[0]))
    feed(second, agent_events()[0].model_copy(update={"resumed": True}), *agent_events()[1:])
    spans = exporter2.get_finished_spans()
    assert {format(s.context.trace_id, "032x") for s in spans} == {kept[0][0]}
    root = by_name(spans)["invoke_workflow w"]
    assert format(root.parent.span_id, "016x") == kept[0][1]  # type: ignore[union-attr]
    assert (root.attributes or {})["podium.run.resumed"] is True


def test_secrets_are_redacted_before_spans_see_them(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKEN_FOR_TEST", "hunter2-very-secret")
    trace_sink, exporter = sink(capture=True)
    run = run_workflow(write(tmp_path, """
        workflow:
          name: secretive
          entry_point: s
          secrets: [TOKEN_FOR_TEST]
        agents:
          - name: s
            type: script
            command: python
            args: ["-c", "import os; print(os.environ['TOKEN_FOR_TEST'])"]
    """, ), sinks=[trace_sink], check=False)
    spans = exporter.get_finished_spans()
    assert spans
    dump = "".join(repr(dict(s.attributes or {})) + repr([e.attributes for e in s.events])
                   for s in spans)
    assert "hunter2-very-secret" not in dump, run.error_text()
    assert "<secret:TOKEN_FOR_TEST>" in dump


# ---------------------------------------------------------------------- configuration


def wf_with(tmp_path: Path, telemetry: str = "") -> Any:
    from helpers_engine import load

    return load(write(tmp_path, f"""
        workflow:
          name: t
          entry_point: s
          runtime: {{provider: openai{telemetry}}}
        agents:
          - {{name: s, type: set, value: 1}}
    """), check=False)


def test_settings_are_off_without_variables_or_telemetry(tmp_path: Path) -> None:
    assert settings(wf_with(tmp_path), {}) is None
    assert settings(None, {"OTEL_SERVICE_NAME": "x"}) is None


def test_settings_from_the_standard_variables(tmp_path: Path) -> None:
    s = settings(None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/",
                        "OTEL_SERVICE_NAME": "svc",
                        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
                        "OTEL_EXPORTER_OTLP_TIMEOUT": "0.5"})
    assert s is not None
    assert (s.endpoint, s.service_name, s.capture_content, s.timeout, s.exporter) == \
        ("http://c:4318/v1/traces", "svc", True, 0.5, "otlp")
    s = settings(None, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:9/x",
                        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://other"})
    assert s is not None
    assert s.endpoint == "http://c:9/x"
    assert s.timeout == 2.0
    s = settings(None, {"OTEL_TRACES_EXPORTER": "otlp"})
    assert s is not None
    assert s.endpoint == "http://localhost:4318/v1/traces"
    assert settings(None, {"OTEL_TRACES_EXPORTER": "none",
                           "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"}) is None
    assert settings(None, {"OTEL_SDK_DISABLED": "true",
                           "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"}) is None
    assert traces_url("http://c:4318/v1/traces") == "http://c:4318/v1/traces"


def test_settings_from_runtime_telemetry_and_variables_win(tmp_path: Path) -> None:
    wf = wf_with(tmp_path, ", telemetry: {endpoint: 'http://w:4318', service_name: wfsvc, "
                           "capture_content: true}")
    s = settings(wf, {})
    assert s is not None
    assert (s.endpoint, s.service_name, s.capture_content) == \
        ("http://w:4318/v1/traces", "wfsvc", True)
    s = settings(wf, {"OTEL_SERVICE_NAME": "env", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://e",
                      "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "false"})
    assert s is not None
    assert (s.endpoint, s.service_name, s.capture_content) == \
        ("http://e/v1/traces", "env", False)
    assert settings(wf_with(tmp_path, ", telemetry: {enabled: false}"), {}) is None


def test_trace_link_needs_the_template() -> None:
    assert trace_link("abc", {}) is None
    assert trace_link("abc", {"PODIUM_TRACE_URL": "http://j/trace/{trace_id}"}) == \
        "http://j/trace/abc"


# ---------------------------------------------------------------------- end to end


class Receiver:
    """An OTLP/HTTP traces receiver on 127.0.0.1: POST /v1/traces, protobuf."""

    def __init__(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        self.requests: list[Any] = []
        received = self.requests

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                ok = self.path == "/v1/traces" and \
                    self.headers.get("Content-Type") == "application/x-protobuf"
                if ok:
                    msg = ExportTraceServiceRequest()
                    msg.ParseFromString(body)
                    received.append(msg)
                self.send_response(200 if ok else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def spans(self) -> list[tuple[Any, Any]]:
        out: list[tuple[Any, Any]] = []
        for req in self.requests:
            for rs in req.resource_spans:
                for ss in rs.scope_spans:
                    out.extend((rs.resource, span) for span in ss.spans)
        return out


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.server.shutdown()
    r.server.server_close()


GATED = """
workflow: {name: gated, entry_point: first}
agents:
  - {name: first, type: set, value: 1, routes: [{to: ask}]}
  - name: ask
    type: human_gate
    prompt: "Go on?"
    options:
      - {label: Yes, value: yes, route: last}
  - {name: last, type: set, value: 2}
output:
  v: "{{ last.output }}"
"""


def otel_env(home: Path, **extra: str) -> dict[str, str]:
    env = cli_env(home)
    env.update(extra)
    return env


def test_spans_reach_an_otlp_receiver_and_a_resume_keeps_the_trace(
        tmp_path: Path, receiver: Receiver) -> None:
    home = tmp_path / "home"
    path = write(tmp_path, GATED)
    env = otel_env(home, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url, OTEL_SERVICE_NAME="podium-t")
    first = subprocess.run(podium_argv("run", path), env=env, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=60, check=False)
    assert first.returncode == 5, first.stderr  # parked at the gate
    spans = receiver.spans()
    assert spans, first.stderr
    resource = spans[0][0]
    assert {a.key: a.value.string_value for a in resource.attributes}["service.name"] == \
        "podium-t"
    names = {s.name for _, s in spans}
    assert {"invoke_workflow gated", "set first", "human_gate ask", "gate ask"} <= names
    trace_ids = {s.trace_id.hex() for _, s in spans}
    assert len(trace_ids) == 1
    run_id = next(a.value.string_value for _, s in spans for a in s.attributes
              if a.key == "podium.run.id")
    shown = run_cli(home, "show", run_id)
    assert f"trace: {next(iter(trace_ids))}" in shown.stdout, shown.stdout
    before = len(spans)
    resumed = subprocess.run(podium_argv("gate", "answer", run_id, "yes"), env=env,
                             stdin=subprocess.DEVNULL, capture_output=True, text=True,
                             timeout=60, check=False)
    assert resumed.returncode == 0, resumed.stderr
    later = receiver.spans()[before:]
    assert {"set last"} <= {s.name for _, s in later}, resumed.stderr
    assert {s.trace_id.hex() for _, s in later} == {s.trace_id.hex() for _, s in spans}


def test_a_dead_collector_costs_a_warning_and_a_bounded_wait(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = write(tmp_path, """
        workflow: {name: quick, entry_point: s}
        agents:
          - {name: s, type: set, value: 1}
        output:
          v: "{{ s.output }}"
    """)
    env = otel_env(tmp_path / "home", OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
                   OTEL_EXPORTER_OTLP_TIMEOUT="1")
    base = time.monotonic()
    plain = run_cli(tmp_path / "home", "run", path)
    plain_time = time.monotonic() - base
    assert plain.returncode == 0
    start = time.monotonic()
    proc = subprocess.run(podium_argv("run", path), env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60, check=False)
    took = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr
    assert '"v": 1' in proc.stdout
    assert "traces could not be exported" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert took < plain_time + 4.0, (took, plain_time)


def test_a_run_without_telemetry_imports_no_opentelemetry(tmp_path: Path) -> None:
    path = write(tmp_path, """
        workflow: {name: quiet, entry_point: s}
        agents:
          - {name: s, type: set, value: 1}
    """)
    for args in (("run", path), ("validate", path)):
        modules = imported(tmp_path, *args)
        assert "podium.cli" in modules
        assert not {m for m in modules if m.startswith(("opentelemetry", "podium.telemetry"))}
