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


# In a process of its own: a freeze takes every object of the process out of the collector's
# reach, pytest's own included. Checks two files (what a first check sets up once), then
# the second again, and reports for it: the young generation's count right after the check, how many objects the
# check left frozen, and the garbage cycles a full collection finds once they are unfrozen
# and the check's result is dropped.
CHECK_ONCE = """
import gc, json, sys
from pathlib import Path
from podium import collector
from podium.check.validate import validate_file
validate_file(Path(sys.argv[2]))
validate_file(Path(sys.argv[3]))
gc.collect()
if sys.argv[1] == "one-check":
    collector.one_check_per_process()
before = gc.get_freeze_count()
result = validate_file(Path(sys.argv[3]))
young, frozen = gc.get_count()[0], gc.get_freeze_count() - before
del result
gc.unfreeze()
print(json.dumps({"young": young, "frozen": frozen, "cycles": gc.collect()}))
"""


def _check_once(mode: str, tmp_path: Path) -> dict[str, int]:
    import json
    import subprocess
    import sys

    from helpers_engine import EXAMPLES

    big = tmp_path / "linear-200.yaml"
    steps = "\n".join(f"  - name: s{i}\n    type: set\n    value: \"{{{{ {i} + 1 }}}}\"\n"
                      f"    routes: [{{to: {f's{i + 1}' if i < 199 else '$end'}}}]"
                      for i in range(200))
    big.write_text(f"workflow:\n  name: big\n  entry_point: s0\nagents:\n{steps}\n",
                   encoding="utf-8")
    proc = subprocess.run([sys.executable, "-c", CHECK_ONCE, mode,
                           str(EXAMPLES / "dev-review" / "workflow.yaml"), str(big)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report: dict[str, int] = json.loads(proc.stdout)
    return report


def test_a_one_shot_command_freezes_what_its_check_leaves_and_it_holds_no_cycle(
        tmp_path: Path) -> None:
    """`podium validate` and `podium run` check once: what the check leaves alive is frozen
    when it ends (no young collection walks it), and none of it is in a garbage cycle, so
    freezing it keeps nothing alive that reference counting would not free."""
    report = _check_once("one-check", tmp_path)
    assert report["young"] < 100, report
    assert report["frozen"] > 1_000, report
    assert report["cycles"] == 0, report


def test_a_process_that_checks_among_other_work_freezes_nothing(tmp_path: Path) -> None:
    """The console, `podium test`, a worker: their other threads' objects stay in reach."""
    report = _check_once("console", tmp_path)
    assert report["frozen"] == 0, report
    assert report["cycles"] == 0, report


def test_checking_the_examples_leaves_no_garbage_cycle() -> None:
    """A check's objects are freed by reference counting as soon as it is dropped: none is
    in a cycle (a recursive closure, the checker and its partials holding each other were),
    so no collection has to walk them, and freezing them keeps nothing dead alive."""
    import types

    from helpers_engine import EXAMPLES
    from podium.check.validate import validate_file

    files = [p for p in sorted(EXAMPLES.rglob("*.yaml"))
             if not p.name.endswith((".test.yaml", ".eval.yaml"))
             and "\nworkflow:" in "\n" + p.read_text(encoding="utf-8")]
    assert len(files) >= 5
    for path in files:  # what a first check of each sets up once (imports, caches)
        validate_file(path)
    gc.collect()
    saved = gc.get_debug()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for path in files:
            result = validate_file(path)
            assert result.model is not None, path
            del result
            gc.collect()
            kinds = sorted({o.__qualname__ if isinstance(o, types.FunctionType)
                            else type(o).__name__ for o in gc.garbage})
            assert not gc.garbage, (path, kinds[:10])
    finally:
        gc.set_debug(saved)
        gc.garbage.clear()

