"""A run's history reads back typed: the store's `history` (SQLite, and the console's catalog)
gives the events of events/model.py's union, in order, each as committed; `podium events`
prints exactly the committed text's fields; an event that no longer parses is one clear
StoreError naming the run and the event, never a traceback."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from helpers_engine import run_cli, write
from podium.events.model import Event, RouteTaken, RunFinished, RunStarted, StepFinished

FLOW = """
workflow: {name: h, entry_point: a}
agents:
  - {name: a, type: set, value: "one", routes: [{to: b}]}
  - {name: b, type: script, command: python, args: ["-c", "print('two')"], routes: [{to: $end}]}
output: {a: "{{ a.output }}", b: "{{ b.output.stdout }}"}
"""


def _run(tmp_path: Path) -> tuple[Path, str]:
    home = tmp_path / "home"
    proc = run_cli(home, "run", write(tmp_path, FLOW), "--json")
    assert proc.returncode == 0, proc.stderr
    return home, str(json.loads(proc.stdout)["run_id"])


def _bodies(home: Path, run_id: str) -> list[str]:
    db = sqlite3.connect(str(home / "podium.db"))
    try:
        return [str(r[0]) for r in db.execute(
            "SELECT body FROM events WHERE run_id = ? ORDER BY seq", (run_id,))]
    finally:
        db.close()


def test_history_is_typed_in_both_reads(tmp_path: Path) -> None:
    from podium.app.history import event_json, history
    from podium.app.home import open_store
    from podium.store.catalog import Catalog

    home, rid = _run(tmp_path)
    store = open_store(home=home)
    try:
        events = history(store, rid[:6])
    finally:
        store.close()
    catalog = Catalog(home / "podium.db")
    try:
        again = catalog.history(rid, after=2)
    finally:
        catalog.close()
    assert all(isinstance(e, Event) for e in events)
    assert isinstance(events[0], RunStarted)
    assert isinstance(events[-1], RunFinished)
    finished = [e.step for e in events if isinstance(e, StepFinished)]
    assert finished == ["a", "b"]
    assert [e.to_step for e in events if isinstance(e, RouteTaken)] == ["b", "$end"]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert again == events[2:]
    assert [event_json(e) for e in events] == [json.loads(b) for b in _bodies(home, rid)]


def test_podium_events_prints_the_committed_fields(tmp_path: Path) -> None:
    home, rid = _run(tmp_path)
    proc = run_cli(home, "events", rid, "--after", "1")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [json.loads(x) for x in lines] == [json.loads(b) for b in _bodies(home, rid)[1:]]
    assert lines[0] == json.dumps(json.loads(_bodies(home, rid)[1]), ensure_ascii=False,
                                  separators=(",", ":"))


def test_an_unreadable_event_is_one_clear_error(tmp_path: Path) -> None:
    home, rid = _run(tmp_path)
    db = sqlite3.connect(str(home / "podium.db"))
    try:
        db.execute("UPDATE events SET body = ? WHERE run_id = ? AND seq = 2",
                   ('{"type": "step_started", "nonsense": 1}', rid))
        db.commit()
    finally:
        db.close()
    proc = run_cli(home, "events", rid)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert f"event 2 of run {rid}" in line
    assert "step_started" in line


@pytest.mark.parametrize("after", [0, 3])
def test_history_after_a_seq(tmp_path: Path, after: int) -> None:
    from podium.app.home import open_store

    home, rid = _run(tmp_path)
    store = open_store(home=home)
    try:
        assert [e.seq for e in store.history(rid, after)] == \
            [int(e["seq"]) for e in store.events(rid, after)]
    finally:
        store.close()
