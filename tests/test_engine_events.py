"""Events: the JSONL log written by `podium run --events`, the typed event stream, and sinks
that fail (spec 12)."""

from __future__ import annotations

from pathlib import Path

from helpers_engine import read_jsonl, run_cli, run_yaml, write
from podium.events.model import SCHEMA_VERSION, Event, RunFinished, parse_event

WF = """
workflow: {name: events, entry_point: s}
agents:
  - name: s
    type: script
    command: python
    args: ["-c", "print('{\\"ok\\": true}')"]
    routes:
      - {to: t, when: "ok"}
      - {to: t}
  - {name: t, type: set, value: 2}
output:
  t: "{{ t.output }}"
"""


def test_jsonl_log_has_one_stamped_event_per_line(tmp_path: Path) -> None:
    path = write(tmp_path, WF)
    log = tmp_path / "events.jsonl"
    proc = run_cli(tmp_path / "home", "run", path, "--events", log)
    assert proc.returncode == 0, proc.stderr
    lines = log.read_text(encoding="utf-8").splitlines()
    events = read_jsonl(log)
    assert len(lines) == len(events) >= 6
    run_ids = {e["run_id"] for e in events}
    assert len(run_ids) == 1
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    for e in events:
        assert e["v"] == SCHEMA_VERSION
        assert isinstance(e["type"], str)
        assert isinstance(e["ts"], float)
    timestamps = [e["ts"] for e in events]
    assert timestamps == sorted(timestamps)
    types = [e["type"] for e in events]
    assert types[0] == "run_started"
    assert types[-1] == "run_finished"
    assert [e["step"] for e in events if e["type"] == "step_started"] == ["s", "t"]
    routes = [(e["from_step"], e["to_step"]) for e in events if e["type"] == "route_taken"]
    assert routes == [("s", "t"), ("t", "$end")]
    assert [e.get("condition") for e in events if e["type"] == "route_taken"] == ["ok", None]
    assert events[-1]["status"] == "success"
    assert events[-1]["output"] == {"t": 2}
    run_id = run_ids.pop()
    assert run_id in proc.stderr.splitlines()[0]


def test_every_jsonl_line_parses_back_into_its_event(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    proc = run_cli(tmp_path / "home", "run", write(tmp_path, WF), "--events", log)
    assert proc.returncode == 0, proc.stderr
    for e in read_jsonl(log):
        assert parse_event(e).type == e["type"]


class ExplodingSink:
    def __init__(self) -> None:
        self.calls = 0

    def handle(self, event: Event) -> None:
        self.calls += 1
        raise RuntimeError("sink is broken")

    def close(self) -> None:
        pass


def test_a_raising_sink_does_not_break_the_run(tmp_path: Path, capsys: object) -> None:
    exploding = ExplodingSink()
    run = run_yaml(tmp_path, WF, sinks=[exploding])
    assert run.exit_code == 0
    assert run.output == {"t": 2}
    # the other sinks still saw every event, in order
    assert [e.seq for e in run.events] == list(range(1, len(run.events) + 1))
    assert isinstance(run.events[-1], RunFinished)
    # the broken sink was disabled after its first failure
    assert exploding.calls == 1


def test_events_from_memory_sink_are_typed_and_stamped(tmp_path: Path) -> None:
    run = run_yaml(tmp_path, WF)
    run_id = run.result.run_id
    assert all(e.run_id == run_id for e in run.events)
    assert [e.type for e in run.events] == [
        "run_started", "step_started", "script_output", "step_finished", "route_taken",
        "step_started", "step_finished", "route_taken", "run_finished"]
