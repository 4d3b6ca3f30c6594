"""Streamed model text and secrets (issue 28, item 2): a secret cut across two streamed
pieces reaches no observer, neither the `-v` terminal, the `--log-file`, the live rows nor
the OTLP export; the bus holds back the tail of a piece that could begin a secret, in any
form the Redactor knows, and lets it go at the stream's end.

- the bus alone: a secret in two pieces, in three, JSON-escaped in a tool call's arguments;
  a tail that turns out to be no secret is delivered whole before the step's next event;
- a real `podium run -v --log-file` against a local Chat Completions server that holds the
  stream open just after the first half of the secret: the live row shown meanwhile holds
  no part of it, and after the run neither stderr, the log file nor the spans do.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fakes.held_openai import HeldOpenAI
from helpers_engine import cli_env, podium_argv, wait_until, write
from podium.clock import FakeClock
from podium.events.bus import EventBus
from podium.events.model import (
    ModelDelta,
    ModelExchange,
    RunFinished,
    StepFinished,
    Warning_,
)
from podium.events.sinks.jsonl import MemorySink
from podium.store.sqlite import SQLiteStore
from test_telemetry import Receiver

SECRET = 'tok-"split"-SECRET-7719'  # a quote: its JSON-escaped form differs


def _bus() -> tuple[EventBus, MemorySink]:
    bus = EventBus("r1", FakeClock())
    bus.redactor.add({"MY_TOKEN": SECRET})
    memory = MemorySink()
    bus.add(memory)
    return bus, memory


def _delta(text: str, kind: str = "text", tool: str | None = None,
           step: str = "a") -> ModelDelta:
    return ModelDelta(step=step, iteration=1, kind=kind, text=text, tool=tool)  # type: ignore[arg-type]


def _streamed(memory: MemorySink, kind: str = "text") -> list[str]:
    return [e.text for e in memory.events if isinstance(e, ModelDelta) and e.kind == kind]


def test_a_secret_in_pieces_reaches_observers_redacted_and_whole() -> None:
    bus, memory = _bus()
    third = len(SECRET) // 3
    for piece in (f"the key is {SECRET[:third]}", SECRET[third:2 * third],
                  f"{SECRET[2 * third:]} and more"):
        bus.emit(_delta(piece))
    bus.emit(ModelExchange(step="a", iteration=1, attempt=1, provider="openai", request={},
                           response_text=f"the key is {SECRET} and more"))
    pieces = _streamed(memory)
    assert "".join(pieces) == "the key is <secret:MY_TOKEN> and more"
    assert not any(SECRET[:4] in p for p in pieces)  # not even its first characters


def test_a_json_escaped_secret_in_a_tool_calls_arguments_is_held_too() -> None:
    bus, memory = _bus()
    escaped = json.dumps({"token": SECRET})
    cut = escaped.index("split") + 2  # inside the escaped quote's neighbourhood
    bus.emit(_delta(escaped[:cut], "tool_call", "run_command"))
    bus.emit(_delta(escaped[cut:], "tool_call", "run_command"))
    bus.emit(StepFinished(step="a", step_type="agent", iteration=1, elapsed=1.0))
    assert "".join(_streamed(memory, "tool_call")) == '{"token": "<secret:MY_TOKEN>"}'


def test_an_event_of_no_step_does_not_cut_a_stream() -> None:
    bus, memory = _bus()
    half = len(SECRET) // 2
    bus.emit(_delta(f"key {SECRET[:half]}"))
    bus.emit(Warning_(message="a warning of the run, from another thread"))
    bus.emit(_delta(f"{SECRET[half:]} done"))
    bus.emit(StepFinished(step="a", step_type="agent", iteration=1, elapsed=1.0))
    assert _streamed(memory) == ["key ", "<secret:MY_TOKEN> done"]


def test_a_tail_that_is_no_secret_is_delivered_whole_at_the_streams_end() -> None:
    bus, memory = _bus()
    bus.emit(_delta("almost tok-"))  # could begin the secret: held
    assert _streamed(memory) == ["almost "]
    bus.emit(_delta("ens are cheap", step="b"))  # another step's stream does not end it
    bus.emit(_delta("thinking", "reasoning"))  # the step's stream of another kind does
    assert _streamed(memory) == ["almost ", "ens are cheap", "tok-"]
    bus.emit(RunFinished(status="success", elapsed=1.0, iterations=1, exit_code=0))
    assert _streamed(memory, "reasoning") == ["thinking"]




def test_a_pieces_step_and_tool_names_are_redacted_held_or_not() -> None:
    """A for-each item's label holds its key and a tool's name comes from the model: a
    piece reaches observers with both redacted, whether it goes out at once, is held and
    released by the step's next event, or is released by the run's end; a piece without a
    secret anywhere goes out as the bus stamped it."""
    bus, memory = _bus()
    label, tool = f"fan[{SECRET}]", f"call_{SECRET}"
    bus.emit(_delta('{"a": 1}', "tool_call", tool, step=label))
    bus.emit(_delta("and tok-", step=label))  # the tail could begin the secret: held
    bus.emit(StepFinished(step=label, step_type="agent", iteration=1, elapsed=1.0))
    bus.emit(_delta("thinking tok-", "reasoning", step="plain"))  # held until the run ends
    bus.emit(RunFinished(status="success", elapsed=1.0, iterations=1, exit_code=0))
    bus.emit(_delta("clean words.", step="plain"))
    deltas = [e for e in memory.events if isinstance(e, ModelDelta)]
    assert [(d.step, d.tool, d.text) for d in deltas] == [
        ("fan[<secret:MY_TOKEN>]", "call_<secret:MY_TOKEN>", '{"a": 1}'),
        ("fan[<secret:MY_TOKEN>]", None, "and "),
        ("fan[<secret:MY_TOKEN>]", None, "tok-"),  # released by the step's end
        ("plain", None, "thinking "),
        ("plain", None, "tok-"),  # released by the run's end
        ("plain", None, "clean words."),
    ]
    assert not any(SECRET in json.dumps(d.model_dump(mode="json")) for d in deltas)
# ----------------------------------------------------------------------------- a real run

FLOW = """
workflow:
  name: held
  entry_point: a
  secrets: [MY_TOKEN]
  runtime: {provider: openai, default_model: gpt-4o-mini}
agents:
  - {name: a, prompt: "tell a story"}
"""

HALF = len(SECRET) // 2
HEAD = "Once upon a time " + "x" * 2500 + " "


def _story() -> str:
    """A text whose first streamed third (fakes/openai_server.py cuts it in three) ends
    in the middle of the secret, and is long enough to be one delta of its own."""
    for n in range(3 * len(HEAD)):
        text = HEAD + SECRET + " " + "y" * n + " THE END"
        if len(text) // 3 + 1 == len(HEAD) + HALF:
            return text
    raise AssertionError("no length puts the cut inside the secret")


def test_a_real_run_shows_logs_and_traces_no_secret_cut_across_chunks(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    log = tmp_path / "run.log"
    flow = write(tmp_path, FLOW, "flow.yaml")
    receiver = Receiver()
    try:
        with HeldOpenAI(_story()) as srv:
            env = cli_env(home, {"OPENAI_BASE_URL": srv.url + "/v1",
                                 "OPENAI_API_KEY": "sk-test-held", "MY_TOKEN": SECRET,
                                 "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
                                 "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"})
            proc = subprocess.Popen(podium_argv("run", flow, "-v", "--json", "--log-file", log),
                                    env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, encoding="utf-8")
            try:
                assert srv.held.wait(60), proc.stderr.read() if proc.poll() is not None else ""
                viewer = SQLiteStore(home / "podium.db")  # another reader of the store
                try:
                    def row() -> str:
                        runs = viewer.list_runs()
                        return str(viewer.live(runs[0].id).get("a#1", {}).get("text", "")) \
                            if runs else ""
                    assert wait_until(lambda: "xxxx" in row(), 30)
                    assert SECRET[:HALF] not in row()  # the first half is held back
                finally:
                    viewer.close()
            finally:
                srv.release.set()
                out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert "THE END" in err  # the stream reached the terminal
        assert "<secret:MY_TOKEN>" in err
        assert SECRET not in err
        assert SECRET[:HALF] + "\n" not in err
        logged = log.read_text(encoding="utf-8")
        assert "<secret:MY_TOKEN>" in logged
        assert SECRET not in logged
        assert wait_until(lambda: any(s.name.startswith("chat") for _, s in receiver.spans()),
                          30)
        streamed = "".join(a.value.string_value for _, s in receiver.spans()
                           for e in s.events if e.name == "model_delta"
                           for a in e.attributes if a.key == "podium.text")
        assert "<secret:MY_TOKEN>" in streamed
        assert SECRET not in streamed
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()
    assert SECRET not in out


def test_the_fleet_tuis_live_panel_shows_no_part_of_a_secret(tmp_path: Path) -> None:
    pytest.importorskip("textual")
    from textual.widgets import Static

    from podium.tui.app import DetailScreen, FleetApp
    from test_fleet import _drive, _select, _until

    home = tmp_path / "home"
    flow = write(tmp_path, FLOW, "flow.yaml")
    with HeldOpenAI(_story()) as srv:
        env = cli_env(home, {"OPENAI_BASE_URL": srv.url + "/v1",
                             "OPENAI_API_KEY": "sk-test-held", "MY_TOKEN": SECRET})
        proc = subprocess.Popen(podium_argv("run", flow), env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                encoding="utf-8")
        try:
            assert srv.held.wait(60)
            seen: list[str] = []

            async def body(app: FleetApp, pilot: object) -> None:
                await _until(pilot, lambda: any(r.status == "running" for r in app.rows))
                _select(app, app.rows[0].id)
                await pilot.press("enter")  # type: ignore[attr-defined]
                screen = app.screen
                assert isinstance(screen, DetailScreen)
                live = screen.query_one("#detail-live", Static)
                await _until(pilot, lambda: "xxxx" in str(live.content))
                seen.append(str(live.content))
                srv.release.set()
                await _until(pilot, lambda: not live.display)

            _drive(home, body)
            assert proc.wait(60) == 0
        finally:
            srv.release.set()
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=30)
    assert seen
    assert SECRET[:HALF] not in seen[0]


# ----------------------------------------------------------------------------- any cut

_FORMS = [SECRET, json.dumps(SECRET)[1:-1], "tok-%22split%22-SECRET-7719",
          "tok-&quot;split&quot;-SECRET-7719"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([*_FORMS, "a", " ", "tok-", "xyz ", "\n"]), max_size=12),
       st.lists(st.integers(min_value=0, max_value=400), max_size=8))
def test_any_cut_of_any_text_streams_as_the_whole_text_redacted(parts: list[str],
                                                                cuts: list[int]) -> None:
    whole = "".join(parts)
    at = sorted({c % (len(whole) + 1) for c in cuts})
    pieces = [whole[i:j] for i, j in zip([0, *at], [*at, len(whole)], strict=True)]
    bus, memory = _bus()
    for piece in pieces:
        if piece:
            bus.emit(_delta(piece))
    bus.emit(StepFinished(step="a", step_type="agent", iteration=1, elapsed=1.0))
    streamed = _streamed(memory)
    assert "".join(streamed) == bus.redactor.text(whole)
    for form in _FORMS:  # no form of the secret is in what was delivered, joined or not
        assert form not in "".join(streamed)
