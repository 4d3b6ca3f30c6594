"""The engine's seams (docs/decisions/0033-seams.md): an engine is wired by the frozen
RunConfig it is built with, never by attributes set from outside; the in-process loop and a
Temporal activity advance a run through the same `Engine.advance`."""

from __future__ import annotations

import ast
import dataclasses
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from helpers_engine import write
from podium.app.durable import advance_stored
from podium.app.home import open_store
from podium.app.launch import LaunchOptions
from podium.app.runs import StartRequest, start_run
from podium.engine.run import Engine, Persistence, RunConfig
from podium.language.load import load_workflow
from podium.store.base import RunRecord

SRC = Path(__file__).resolve().parents[1] / "src" / "podium"

# the names an engine goes by outside engine/ (a local, a parameter)
ENGINE_NAMES = {"engine", "child", "eng"}


def _assigned(tree: ast.AST) -> Iterator[ast.Attribute]:
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for target in targets:
            if isinstance(target, ast.Attribute):
                yield target


def test_no_module_outside_the_engine_sets_an_engine_attribute() -> None:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith("engine/"):
            continue
        for target in _assigned(ast.parse(path.read_text(encoding="utf-8"))):
            owner = target.value
            on_engine = isinstance(owner, ast.Name) and owner.id in ENGINE_NAMES
            # engine.services.X = ...: the services the config wires (cancel, guidance)
            on_services = isinstance(owner, ast.Attribute) and owner.attr == "services" \
                and isinstance(owner.value, ast.Name) and owner.value.id in ENGINE_NAMES
            if on_engine or on_services:
                found.append(f"{rel}:{target.lineno}: {ast.unparse(target)} = ...")
    assert found == []


def test_the_config_is_frozen_and_its_parts_are_read_only(tmp_path: Path) -> None:
    path = write(tmp_path, FLOW)
    loaded = load_workflow(path)
    assert loaded.model is not None
    from podium.gates.base import ChainAnswerer
    from podium.providers.base import ProviderRegistry

    engine = Engine(loaded.model, path, inputs={}, providers=ProviderRegistry(),
                    answerer=ChainAnswerer([]),
                    config=RunConfig(persistence=Persistence(checkpoints=True)))
    assert engine.checkpoints is True
    with pytest.raises(dataclasses.FrozenInstanceError):
        engine.config.depth = 3  # type: ignore[misc]
    with pytest.raises(AttributeError):
        engine.checkpoints = False  # type: ignore[misc]
    engine.services.providers.close()


FLOW = """
workflow: {name: seams, entry_point: a}
agents:
  - {name: a, type: set, value: "one", routes: [{to: b}]}
  - {name: b, type: set, value: "two", routes: [{to: c}]}
  - {name: c, type: set, value: "{{ a.output }} {{ b.output }}", routes: [{to: $end}]}
output: {c: "{{ c.output }}"}
"""


@contextmanager
def _advances() -> Iterator[list[str]]:
    """The nodes `Engine.advance` was called with, in this thread, while inside."""
    code = Engine.advance.__code__
    calls: list[str] = []

    def trace(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code is code:
            calls.append(str(frame.f_locals["node"]))

    before = sys.getprofile()
    sys.setprofile(trace)
    try:
        yield calls
    finally:
        sys.setprofile(before)


def test_the_local_loop_and_a_temporal_activity_call_the_same_advance(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PODIUM_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("PODIUM_STORE", raising=False)
    path = write(tmp_path, FLOW)
    loaded = load_workflow(path)
    assert loaded.model is not None
    store = open_store()
    try:
        with _advances() as local:
            done = start_run(store, StartRequest(loaded.model, path, {}),
                             LaunchOptions(verbosity=0, interactive=False))
        assert done.result.status == "success"
        assert local == ["a", "b", "c"]  # the loop: one advance per node

        # a run on workers: the activity (temporal/activities.py advance_one) advances it
        # through app/durable.py, one Engine.advance per activity
        from podium.engine.run import file_hash, new_run_id

        run_id = new_run_id()
        store.create_run(RunRecord(run_id, "seams", str(path), file_hash(path), {},
                                   options={"executor": "temporal"}))
        store.commit()
        from podium.temporal.activities import advance_one

        described: list[dict[str, Any]] = []
        with _advances() as remote:
            while not described or described[-1]["kind"] == "next":
                described.append(advance_one(run_id, "raise", threading.Event()))
        assert remote == ["a", "b", "c"]
        assert [d["kind"] for d in described] == ["next", "next", "finished"]
        assert described[-1]["status"] == "success"
        assert store.get_run(run_id).output == done.result.output == {"c": "one two"}
        # (and app/durable.py is the one way in: the activity calls nothing else of it)
        assert advance_stored.__module__ == "podium.app.durable"
    finally:
        store.close()


CHILD = """
workflow: {name: child, entry_point: x, input: {n: {type: number}}}
agents:
  - {name: x, type: set, value: "{{ workflow.input.n + 1 }}", output_type: integer,
     routes: [{to: $end}]}
output: {n: "{{ x.output }}"}
"""

PARENT = """
workflow: {name: parent, entry_point: sub}
agents:
  - {name: sub, type: workflow, workflow: child.yaml, input_mapping: {n: 41},
     routes: [{to: $end}]}
output: {n: "{{ sub.output.n }}"}
"""


class _Children:
    """A ChildRuns that keeps what it is told (the port's whole surface, engine/children.py)."""

    def __init__(self) -> None:
        self.started: list[RunRecord] = []
        self.asked: list[tuple[str, Any, str]] = []
        self.resumed: list[str] = []

    def find(self, parent_run_id: str, slot: Any, entry_point: str) -> None:
        self.asked.append((parent_run_id, slot, entry_point))

    def start(self, record: RunRecord) -> None:
        self.started.append(record)

    def resume(self, run_id: str) -> None:
        self.resumed.append(run_id)


def test_a_sub_workflow_reaches_its_child_runs_through_the_port(tmp_path: Path) -> None:
    from podium.engine.children import ChildRuns, ChildSlot
    from podium.gates.base import ChainAnswerer
    from podium.providers.base import ProviderRegistry

    write(tmp_path, CHILD, "child.yaml")
    path = write(tmp_path, PARENT)
    loaded = load_workflow(path)
    assert loaded.model is not None
    children = _Children()
    port: ChildRuns = children
    engine = Engine(loaded.model, path, inputs={}, providers=ProviderRegistry(),
                    answerer=ChainAnswerer([]), run_id="p1",
                    config=RunConfig(persistence=Persistence(children=port)))
    result = engine.run()
    assert result.status == "success", result.error
    assert result.output == {"n": 42}
    assert children.asked == [("p1", ChildSlot("sub", 1, "sub"), "x")]
    (record,) = children.started
    assert record.parent_run_id == "p1"
    assert record.inputs == {"n": 41}
    assert record.options == {"parent_step": "sub", "parent_iteration": 1, "slot": "sub"}
    assert children.resumed == []
