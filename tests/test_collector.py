"""podium/collector.py: what a run and a check ask of Python's cyclic collector, and that each
hands it back as it was (docs/performance.md, "Eighth pass", for what it saves)."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers_engine import run_yaml
from podium import collector
from podium.events.model import Event
from podium.events.sinks.jsonl import MemorySink


@pytest.fixture
def thresholds() -> Iterator[tuple[int, ...]]:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        yield gc.get_threshold()
    finally:
        gc.set_threshold(*before)


class ThresholdSink(MemorySink):
    """Notes the young generation's threshold at every event of the run."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[int] = []

    def handle(self, event: Event) -> None:
        self.seen.append(gc.get_threshold()[0])
        super().handle(event)


FAN_OUT = """
workflow:
  name: fan
  entry_point: fan
  input:
    items: {type: array, default: [a, b, c, d, e, f]}
for_each:
  - name: fan
    type: for_each
    source: workflow.input.items
    as: item
    max_concurrent: 4
    agent: {name: worker, prompt: "item {{ item }}"}
agents: []
output:
  n: "{{ fan.count }}"
"""


def test_a_run_raises_the_young_threshold_while_it_runs_and_restores_it(
        tmp_path: Path, thresholds: tuple[int, ...]) -> None:
    sink = ThresholdSink()
    run = run_yaml(tmp_path, FAN_OUT, sinks=[sink],
                   responses={"agents": {"worker": [{"text": "done"}] * 6}})
    assert run.result.exit_code == 0, run.result
    assert len(sink.seen) == len(sink.events) > 10
    assert sink.events[0].type == "run_started"  # announced before the loop begins
    assert set(sink.seen[1:]) == {collector.RUN_YOUNG_THRESHOLD}, sink.seen
    assert gc.get_threshold() == thresholds


def test_runs_at_once_share_one_raise_and_the_last_to_end_restores(
        thresholds: tuple[int, ...]) -> None:
    inside = threading.Event()
    leave = threading.Event()
    seen: list[tuple[int, ...]] = []

    def long_run() -> None:
        with collector.relaxed():
            inside.set()
            leave.wait(10)
            seen.append(gc.get_threshold())

    other = threading.Thread(target=long_run)
    other.start()
    assert inside.wait(10)
    with collector.relaxed():
        assert gc.get_threshold() == (collector.RUN_YOUNG_THRESHOLD, *thresholds[1:])
    assert gc.get_threshold()[0] == collector.RUN_YOUNG_THRESHOLD  # the other run goes on
    leave.set()
    other.join(10)
    assert seen == [(collector.RUN_YOUNG_THRESHOLD, *thresholds[1:])]
    assert gc.get_threshold() == thresholds


def test_a_threshold_the_process_chose_is_never_lowered_and_zero_stays_zero(
        thresholds: tuple[int, ...]) -> None:
    gc.set_threshold(50_000, 5, 5)
    with collector.relaxed():
        assert gc.get_threshold() == (50_000, 5, 5)
    gc.set_threshold(0, 10, 10)  # the process turned automatic collection off this way
    with collector.relaxed():
        assert gc.get_threshold() == (0, 10, 10)
    assert gc.get_threshold() == (0, 10, 10)


def test_an_error_inside_still_restores(thresholds: tuple[int, ...]) -> None:
    with pytest.raises(RuntimeError), collector.relaxed():
        raise RuntimeError("boom")
    assert gc.get_threshold() == thresholds
    with pytest.raises(RuntimeError), collector.paused():
        raise RuntimeError("boom")
    assert gc.isenabled()
