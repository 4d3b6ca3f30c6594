"""The RunStore conformance suite: what every run store must do, whatever its database.

A store runs it by subclassing `RunStoreConformance` in a test module and giving the `opener`
fixture: a function that opens the store kept in a folder. Two calls on the same folder must
give two independent handles on the same data, as two podium processes have::

    class TestSQLiteStore(RunStoreConformance):
        @pytest.fixture
        def opener(self) -> Opener:
            return lambda folder: SQLiteStore(folder / "podium.db")

The first part pins the protocol call by call (runs, events, checkpoints, gates). The second
runs real workflows through the real engine and resume code with the store as sink,
checkpointer and gate keeper, while a second handle watches every commit: a step is visible
only together with the checkpoint after it, the last checkpoint only with the run's end, and a
parked gate's answer is consumed only with the step that used it.
"""

from __future__ import annotations

import contextlib
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from podium.events.model import (
    Checkpointed,
    Event,
    LimitReached,
    ModelExchange,
    ParseRecovery,
    PromptRendered,
    RouteTaken,
    RunFinished,
    RunStarted,
    ScriptOutput,
    StepFailed,
    StepFinished,
    StepStarted,
    parse_event,
)
from podium.store.base import (
    Checkpoint,
    GateRecord,
    Owner,
    RunNotFound,
    RunOwned,
    RunRecord,
    RunStore,
    StoreError,
)

Opener = Callable[[Path], RunStore]


def _record(run_id: str, **fields: Any) -> RunRecord:
    base: dict[str, Any] = {"workflow_name": "flow", "workflow_path": "/work/flows/flow.yaml",
                            "workflow_hash": "sha256:" + "ab" * 32,
                            "inputs": {"topic": "ünïcode ✓", "n": 3, "nested": {"a": [1, None]}}}
    base.update(fields)
    return RunRecord(run_id, **base)


def _stamp(event: Event, run_id: str, seq: int, ts: float | None = None) -> Event:
    return event.model_copy(update={"run_id": run_id, "seq": seq,
                                    "ts": 1_700_000_000.0 + seq if ts is None else ts})


def _history(run_id: str) -> list[Event]:
    """A plausible history of one run, stamped with seq 1..n (None-valued fields included)."""
    raw: list[Event] = [
        RunStarted(workflow="flow", workflow_path="/f.yaml", workflow_hash="sha256:00",
                   entry_point="a", inputs={"x": "ü"}, podium_version="0", max_iterations=5),
        # an agent: its start and its prompt commit at once (a script's wait for its end)
        StepStarted(step="a", step_type="agent", iteration=1, run_iteration=1),
        PromptRendered(step="a", iteration=1, provider="copilot", model="m",
                       prompt='línea {"v": 1}\n', system_prompt="ü"),
        StepFinished(step="a", step_type="agent", iteration=1, elapsed=0.5,
                     output={"v": 1, "text": "ok ✓"}, model="m", input_tokens=10,
                     output_tokens=5, cost_usd=0.25),
        RouteTaken(from_step="a", to_step="b", route_index=0, condition="{{ true }}"),
        Checkpointed(step="a", next_step="b", run_iteration=1),
        LimitReached(limit="timeout", step=None, current=1.0, maximum=1.0),
        StepStarted(step="b", step_type="terminate", iteration=1, run_iteration=2),
        StepFinished(step="b", step_type="terminate", iteration=1, elapsed=0.0,
                     output={"status": "success"}, input_tokens=1, output_tokens=2,
                     cost_usd=None, priced=False),
        Checkpointed(step="b", next_step=None, run_iteration=2),
        RunFinished(status="success", output={"answer": 42}, terminal="b", reason="done",
                    elapsed=1.0, iterations=2, exit_code=0),
    ]
    return [_stamp(e, run_id, i) for i, e in enumerate(raw, 1)]


def _with_calls(history: list[Event]) -> list[Event]:
    """`history` with the model calls its steps' figures come from (the run row sums the
    calls: docs/decisions/0023-one-fold-of-spend.md), stamped again 1..n."""
    def call(step: str, i: int, o: int, cost: float | None) -> Event:
        return ModelExchange(step=step, iteration=1, attempt=1, provider="p", model="m",
                             request={}, response_text="", input_tokens=i, output_tokens=o,
                             cost_usd=cost)

    run_id = history[0].run_id
    events = [*history[:3], call("a", 10, 5, 0.25), *history[3:8], call("b", 1, 2, None),
              *history[8:]]
    return [_stamp(e, run_id, i) for i, e in enumerate(events, 1)]


class RunStoreConformance:
    """The behaviour podium relies on from any RunStore. Subclass it and give `opener`."""

    @pytest.fixture
    def opener(self) -> Opener:
        raise NotImplementedError("a conformance test module must override the opener fixture")

    @pytest.fixture
    def handles(self, opener: Opener, tmp_path: Path) -> Iterator[Callable[[], RunStore]]:
        """Opens handles on one store in tmp_path; closes them all at the end."""
        opened: list[RunStore] = []

        def open_one() -> RunStore:
            store = opener(tmp_path / "store")
            opened.append(store)
            return store

        yield open_one
        for store in opened:
            with contextlib.suppress(Exception):
                store.close()

    @pytest.fixture
    def store(self, handles: Callable[[], RunStore]) -> RunStore:
        return handles()

    # ------------------------------------------------------------------ runs

    def test_a_new_store_is_empty(self, store: RunStore) -> None:
        assert store.list_runs() == []
        assert store.gates() == []
        assert store.events("nothing") == []
        assert store.latest_checkpoint("nothing") is None

    def test_a_run_round_trips_every_field(self, handles: Callable[[], RunStore]) -> None:
        writer, reader = handles(), handles()
        record = _record("r1", status="running", current_step="a", created_at=1000.5,
                         iterations=2, input_tokens=7, output_tokens=9, cost_usd=0.125,
                         cost_partial=True, exit_code=None, output={"k": ["v", 1, None]},
                         error=None, terminal=None, reason=None, parent_run_id="p0",
                         forked_from="f0", pid=4242, pid_start="123456", last_seq=0,
                         options={"responses": None, "skip_gates": True})
        writer.create_run(record)
        got = reader.get_run("r1")
        assert got.created_at == 1000.5
        assert got.updated_at > 0
        expected = dict(record.to_json(), updated_at=got.updated_at)
        assert got.to_json() == expected

    def test_create_run_stamps_the_creation_time(self, store: RunStore) -> None:
        store.create_run(_record("r1"))
        assert store.get_run("r1").created_at > 1_600_000_000

    def test_an_unknown_run_is_not_found(self, store: RunStore) -> None:
        with pytest.raises(RunNotFound, match="nope"):
            store.get_run("nope")
        with pytest.raises(RunNotFound, match="podium runs"):
            store.find_run("nope")

    def test_find_run_by_unique_prefix_or_exact_id(self, store: RunStore) -> None:
        for rid in ("abc123", "abd456", "abc"):
            store.create_run(_record(rid))
        assert store.find_run("abd").id == "abd456"
        assert store.find_run("abc").id == "abc"  # exact wins over the longer match
        assert store.find_run("abc1").id == "abc123"
        with pytest.raises(RunNotFound, match="several runs") as info:
            store.find_run("ab")
        assert "abc123" in str(info.value)
        assert "abd456" in str(info.value)
        with pytest.raises(RunNotFound):
            store.find_run("%")  # a LIKE wildcard is not a prefix of anything

    def test_list_runs_newest_first_with_filters(self, store: RunStore) -> None:
        store.create_run(_record("old", created_at=100.0, status="success"))
        store.create_run(_record("new", created_at=300.0, status="waiting",
                                 workflow_name="other", workflow_path="/x/other.yaml"))
        store.create_run(_record("mid", created_at=200.0, status="success",
                                 parent_run_id="new"))
        assert [r.id for r in store.list_runs()] == ["new", "mid", "old"]
        assert [r.id for r in store.list_runs(limit=2)] == ["new", "mid"]
        assert [r.id for r in store.list_runs(status="success")] == ["mid", "old"]
        assert [r.id for r in store.list_runs(workflow="other")] == ["new"]
        assert [r.id for r in store.list_runs(workflow="flows/flow")] == ["mid", "old"]
        assert [r.id for r in store.list_runs(parent="new")] == ["mid"]
        assert store.list_runs(status="failed") == []

    def test_update_run_changes_only_the_given_fields(
            self, handles: Callable[[], RunStore]) -> None:
        writer, reader = handles(), handles()
        writer.create_run(_record("r1"))
        before = reader.get_run("r1")
        writer.update_run("r1", status="interrupted", pid=77, cost_partial=True,
                          output={"x": {"y": "ü"}})
        after = reader.get_run("r1")
        assert (after.status, after.pid, after.cost_partial, after.output) == \
            ("interrupted", 77, True, {"x": {"y": "ü"}})
        assert after.inputs == before.inputs
        assert after.workflow_hash == before.workflow_hash
        assert after.updated_at >= before.updated_at
        writer.update_run("r1", output=None, finished_at=None)
        assert reader.get_run("r1").output is None

    def test_run_options_are_read_alone_and_changed_in_one_swap(
            self, handles: Callable[[], RunStore]) -> None:
        writer, other, reader = handles(), handles(), handles()
        writer.create_run(_record("r1", options={"responses": "r.yaml"}))
        assert reader.run_options("r1") == {"responses": "r.yaml"}
        calls: list[dict[str, Any]] = []

        def add_a(options: dict[str, Any]) -> dict[str, Any]:
            calls.append(dict(options))
            if len(calls) == 1:  # another handle writes between this read and its swap
                other.change_run_options("r1", lambda o: {**o, "b": 2})
            return {**options, "a": 1}

        written = writer.change_run_options("r1", add_a)
        assert written == reader.run_options("r1") == {"responses": "r.yaml", "a": 1, "b": 2}
        assert calls == [{"responses": "r.yaml"}, {"responses": "r.yaml", "b": 2}]
        with pytest.raises(RunNotFound):
            reader.run_options("nope")
        with pytest.raises(RunNotFound):
            writer.change_run_options("nope", dict)

    def test_runs_survive_reopening(self, handles: Callable[[], RunStore]) -> None:
        first = handles()
        first.create_run(_record("r1"))
        for event in _history("r1"):
            first.append_event(event)
        first.close()
        again = handles()
        assert again.get_run("r1").status == "success"
        assert len(again.events("r1")) == len(_history("r1"))

    # ------------------------------------------------------------------ events

    def test_events_round_trip_in_seq_order(self, handles: Callable[[], RunStore]) -> None:
        writer, reader = handles(), handles()
        writer.create_run(_record("r1"))
        writer.create_run(_record("r2"))
        history = _history("r1")
        for event in history:
            writer.append_event(event)
        writer.append_event(_history("r2")[0])
        stored = reader.events("r1")
        assert stored == [e.model_dump(mode="json") for e in history]
        assert [parse_event(e) for e in stored] == history  # the JSON Schema's shape
        assert [e["seq"] for e in reader.events("r1", after_seq=8)] == [9, 10, 11]
        assert [e["seq"] for e in reader.events("r2")] == [1]

    def test_history_reads_the_events_back_typed(self, handles: Callable[[], RunStore]) -> None:
        writer, reader = handles(), handles()
        writer.create_run(_record("r1"))
        history = _history("r1")
        for event in history:
            writer.append_event(event)
        assert reader.history("r1") == history  # each its own class of the union, equal
        assert [type(e) for e in reader.history("r1", after_seq=9)] == [Checkpointed,
                                                                         RunFinished]
        assert reader.history("nothing") == []

    def test_the_run_row_summarises_its_events(self, handles: Callable[[], RunStore]) -> None:
        writer, reader = handles(), handles()
        writer.create_run(_record("r1"))
        history = _with_calls(_history("r1"))
        for event in history[:2]:
            writer.append_event(event)
        mid = reader.get_run("r1")
        assert (mid.status, mid.current_step, mid.last_seq) == ("running", "a", 2)
        for event in history[2:]:
            writer.append_event(event)
        run = reader.get_run("r1")
        assert (run.status, run.exit_code, run.output, run.terminal, run.reason) == \
            ("success", 0, {"answer": 42}, "b", "done")
        assert (run.iterations, run.input_tokens, run.output_tokens) == (2, 11, 7)
        assert run.cost_usd == pytest.approx(0.25)
        assert run.cost_partial  # step b's model has no price
        assert run.finished_at == history[-1].ts
        assert run.last_seq == len(history)

    def test_a_child_runs_calls_count_in_the_runs_above_it(
            self, handles: Callable[[], RunStore]) -> None:
        store = handles()
        store.create_run(_record("top"))
        store.create_run(_record("mid", parent_run_id="top"))
        store.create_run(_record("leaf", parent_run_id="mid"))
        store.create_run(_record("other"))
        for run_id, parent, tokens in (("top", None, 1), ("mid", "top", 10),
                                       ("leaf", "mid", 100)):
            call = ModelExchange(step="s", iteration=1, attempt=1, provider="p", request={},
                                 response_text="", input_tokens=tokens, output_tokens=tokens,
                                 cost_usd=tokens / 100, parent_run_id=parent)
            store.append_event(_stamp(call, run_id, 1))
        rows = {r: store.get_run(r) for r in ("top", "mid", "leaf", "other")}
        assert {r: row.input_tokens for r, row in rows.items()} == {
            "top": 111, "mid": 110, "leaf": 100, "other": 0}
        assert rows["top"].cost_usd == pytest.approx(1.11)

    def test_a_waiting_run_is_not_finished(self, store: RunStore) -> None:
        store.create_run(_record("r1"))
        store.append_event(_history("r1")[0])
        store.append_event(_stamp(RunFinished(status="waiting", step="gate", message="waiting",
                                              elapsed=0.1, iterations=0, exit_code=5),
                                  "r1", 2))
        run = store.get_run("r1")
        assert (run.status, run.exit_code, run.current_step, run.finished_at) == \
            ("waiting", 5, "gate", None)

    def test_a_step_is_visible_only_with_its_checkpoint(
            self, handles: Callable[[], RunStore]) -> None:
        writer, reader = handles(), handles()
        writer.create_run(_record("r1"))
        history = _history("r1")
        for event in history[:3]:  # run_started, step_started, prompt_rendered
            writer.append_event(event)
        assert len(reader.events("r1")) == 3
        writer.append_event(history[3])  # step_finished
        writer.append_event(history[4])  # route_taken
        assert len(reader.events("r1")) == 3
        assert reader.get_run("r1").iterations == 0
        assert reader.latest_checkpoint("r1") is None
        writer.append_event(history[5])  # the checkpoint event commits the step
        assert len(reader.events("r1")) == 6
        cp = reader.latest_checkpoint("r1")
        assert cp is not None
        assert (cp.seq, cp.step, cp.next_step) == (6, "a", "b")
        assert cp.created_at == history[5].ts

    def test_a_set_step_starts_and_ends_in_one_commit(
            self, handles: Callable[[], RunStore]) -> None:
        """A set step only computes: its step_started waits for its checkpoint (one commit
        per step), then the run row shows it as any step's start would have."""
        writer, reader = handles(), handles()
        writer.create_run(_record("r1"))
        raw: list[Event] = [
            StepStarted(step="s", step_type="set", iteration=1, run_iteration=1),
            StepFinished(step="s", step_type="set", iteration=1, elapsed=0.0, output=1),
            RouteTaken(from_step="s", to_step="t", route_index=0, condition=None),
            Checkpointed(step="s", next_step="t", run_iteration=1),
            StepStarted(step="t", step_type="agent", iteration=1, run_iteration=2)]
        events = [_stamp(e, "r1", i) for i, e in enumerate(raw, 1)]
        for event in events[:3]:
            writer.append_event(event)
        assert reader.events("r1") == []
        writer.append_event(events[3])
        assert [e["type"] for e in reader.events("r1")] == [
            "step_started", "step_finished", "route_taken", "checkpoint"]
        assert reader.get_run("r1").current_step == "s"
        writer.append_event(events[4])  # any other step's start commits at once
        assert len(reader.events("r1")) == 5
        assert reader.get_run("r1").current_step == "t"

    def test_a_group_members_agent_starts_with_its_prompt(
            self, handles: Callable[[], RunStore]) -> None:
        """A member's agent step_started commits with the next thing it records (its prompt,
        or its failure): one commit less per member. A top-level agent's commits at once."""
        writer, reader = handles(), handles()
        writer.create_run(_record("r1"))
        raw: list[Event] = [
            StepStarted(step="a", step_type="agent", iteration=1, run_iteration=1),
            StepStarted(step="m[0]", step_type="agent", iteration=1, run_iteration=2,
                        group="g"),
            PromptRendered(step="m[0]", iteration=1, provider="copilot", prompt="hi"),
            StepStarted(step="m[1]", step_type="agent", iteration=1, run_iteration=2,
                        group="g"),
            StepFailed(step="m[1]", step_type="agent", iteration=1, elapsed=0.0,
                       error_type="template_error", message="bad", group="g")]
        events = [_stamp(e, "r1", i) for i, e in enumerate(raw, 1)]
        writer.append_event(events[0])
        assert [e["type"] for e in reader.events("r1")] == ["step_started"]
        writer.append_event(events[1])
        assert len(reader.events("r1")) == 1
        writer.append_event(events[2])
        assert [e["step"] for e in reader.events("r1")] == ["a", "m[0]", "m[0]"]
        writer.append_event(events[3])
        assert len(reader.events("r1")) == 3
        writer.append_event(events[4])
        assert [e["type"] for e in reader.events("r1")][3:] == ["step_started", "step_failed"]

    def test_a_group_members_answer_commits_with_its_end(
            self, handles: Callable[[], RunStore]) -> None:
        """A member's model_exchange commits with what follows it (its step_finished, or a
        parse recovery): one commit less per member. A top-level agent's commits at once."""
        writer, reader = handles(), handles()
        writer.create_run(_record("r1"))

        def answer(step: str, group: str | None) -> ModelExchange:
            return ModelExchange(step=step, iteration=1, attempt=1, provider="openai",
                                 request={"message": "hi"}, response_text="{}", group=group)

        raw: list[Event] = [
            answer("a", None),
            answer("m[0]", "g"),
            StepFinished(step="m[0]", step_type="agent", iteration=1, elapsed=0.0,
                         output={}, group="g"),
            answer("m[1]", "g"),
            ParseRecovery(step="m[1]", iteration=1, attempt=1, max_attempts=2,
                          reason="syntax", error="no JSON")]
        events = [_stamp(e, "r1", i) for i, e in enumerate(raw, 1)]
        writer.append_event(events[0])
        assert [e["type"] for e in reader.events("r1")] == ["model_exchange"]
        writer.append_event(events[1])
        assert len(reader.events("r1")) == 1
        writer.append_event(events[2])
        assert [e["type"] for e in reader.events("r1")][1:] == ["model_exchange",
                                                                "step_finished"]
        writer.append_event(events[3])
        assert len(reader.events("r1")) == 3
        writer.append_event(events[4])
        assert [e["type"] for e in reader.events("r1")][3:] == ["model_exchange",
                                                                "parse_recovery"]

    def test_the_last_checkpoint_is_visible_only_with_the_end(
            self, handles: Callable[[], RunStore]) -> None:
        writer, reader = handles(), handles()
        writer.create_run(_record("r1"))
        history = _history("r1")
        for event in history[:5]:
            writer.append_event(event)
        for event in history[5:9]:
            writer.append_event(event)
        writer.append_event(history[9])  # checkpoint with next_step None (b terminated)
        assert len(reader.events("r1")) == 8
        cp = reader.latest_checkpoint("r1")
        assert cp is not None
        assert cp.step == "a"
        writer.append_event(history[10])  # run_finished
        assert len(reader.events("r1")) == 11
        cp = reader.latest_checkpoint("r1")
        assert cp is not None
        assert (cp.step, cp.next_step) == ("b", None)

    def test_commit_makes_pending_events_visible(self, handles: Callable[[], RunStore]) -> None:
        writer, reader = handles(), handles()
        writer.create_run(_record("r1"))
        history = _history("r1")
        for event in history[:4]:
            writer.append_event(event)
        assert len(reader.events("r1")) == 3
        writer.commit()
        assert len(reader.events("r1")) == 4
        writer.commit()  # nothing pending: a no-op

    def test_a_later_checkpoint_replaces_the_earlier(self, store: RunStore) -> None:
        store.create_run(_record("r1"))
        store.append_event(_stamp(Checkpointed(step="a", next_step="b", run_iteration=1),
                                  "r1", 3, 1.0))
        store.append_event(_stamp(Checkpointed(step="b", next_step="c", run_iteration=2),
                                  "r1", 7, 2.0))
        store.commit()
        assert store.latest_checkpoint("r1") == Checkpoint("r1", 7, "b", "c", 2.0)

    # ------------------------------------------------------------------ live rows

    def test_live_rows_are_put_overwritten_and_seen_by_another_handle(
            self, handles: Callable[[], RunStore]) -> None:
        writer, reader = handles(), handles()
        assert reader.live("r1") == {}
        body: dict[str, Any] = {"step": "a", "iteration": 1, "text": "ünïcode ✓ <b>x</b>",
                                "tools": ["read_file"], "tokens_used": None}
        writer.put_live("r1", "a#1", body)
        assert reader.live("r1") == {"a#1": body}
        writer.put_live("r1", "a#1", {**body, "text": "more"})  # overwritten, not added
        writer.put_live("r1", "b#2", {"step": "b"})
        writer.put_live("r2", "a#1", {"step": "other run"})
        assert reader.live("r1") == {"a#1": {**body, "text": "more"}, "b#2": {"step": "b"}}
        assert reader.live("r2") == {"a#1": {"step": "other run"}}

    def test_clear_live_removes_one_key_or_the_whole_run(
            self, handles: Callable[[], RunStore]) -> None:
        writer, reader = handles(), handles()
        for key in ("a#1", "b#1"):
            writer.put_live("r1", key, {"k": key})
        writer.put_live("r2", "a#1", {"k": "r2"})
        writer.clear_live("r1", "a#1")
        assert reader.live("r1") == {"b#1": {"k": "b#1"}}
        writer.clear_live("r1", "nothing")  # no such row: a no-op
        writer.clear_live("r1")
        assert reader.live("r1") == {}
        assert reader.live("r2") == {"a#1": {"k": "r2"}}

    def test_a_live_write_never_commits_a_pending_step(
            self, handles: Callable[[], RunStore]) -> None:
        """A live row is written at once, while the run's finished step still waits for its
        checkpoint: the step is not committed by it, nor held back."""
        writer, reader = handles(), handles()
        writer.create_run(_record("r1"))
        history = _history("r1")
        for event in history[:5]:  # up to route_taken: the step waits for its checkpoint
            writer.append_event(event)
        writer.put_live("r1", "a#1", {"text": "streaming"})
        assert reader.live("r1") == {"a#1": {"text": "streaming"}}
        assert [e["type"] for e in reader.events("r1")] == [
            "run_started", "step_started", "prompt_rendered"]
        writer.clear_live("r1")
        assert len(reader.events("r1")) == 3
        writer.append_event(history[5])  # the checkpoint commits the step
        assert [e["type"] for e in reader.events("r1")][3:] == [
            "step_finished", "route_taken", "checkpoint"]
        assert reader.events("r1") == writer.events("r1")

    def test_a_run_ended_before_its_checkpoint_keeps_its_events_numbered_1_to_n(
            self, handles: Callable[[], RunStore]) -> None:
        """A step finished, then the run ended before its checkpoint (a routing error, an
        interrupt): the step's events are not committed, and the run's end takes the seq of
        the first of them, so the events stay 1..n (before: a gap, e.g. 1..7 then 9)."""
        writer, reader = handles(), handles()
        writer.create_run(_record("r1"))
        history = _history("r1")
        for event in history[:5]:  # step_finished and route_taken (seq 4, 5) wait
            writer.append_event(event)
        writer.append_event(_stamp(RunFinished(status="error", step="a", message="no route",
                                               elapsed=1.0, iterations=1, exit_code=3),
                                   "r1", 6))
        events = reader.events("r1")
        assert [(e["seq"], e["type"]) for e in events] == [
            (1, "run_started"), (2, "step_started"), (3, "prompt_rendered"), (4, "run_finished")]
        assert [e.seq for e in reader.history("r1")] == [1, 2, 3, 4]  # the body says so too
        assert reader.get_run("r1").last_seq == 4
        assert reader.get_run("r1").status == "error"

    def test_held_instant_steps_commit_together_and_a_step_without_checkpoint_is_dropped(
            self, handles: Callable[[], RunStore]) -> None:
        """Consecutive instant steps wait for one transaction while their run's commits are
        held (engine/run.py `_InstantSteps`): a reader sees none of them before it. The run
        then ends before the third step's checkpoint (its route failed): the two steps whose
        checkpoints were given are kept, and of the third its start (what happened), not
        the events that finish it; the events stay numbered 1..n."""
        writer, reader = handles(), handles()
        writer.create_run(_record("r1"))
        numbers = iter(range(1, 100))

        def emit(event: Event) -> None:
            writer.append_event(_stamp(event, "r1", next(numbers)))

        emit(RunStarted(workflow="flow", workflow_path="/f.yaml", workflow_hash="sha256:00",
                        entry_point="s", inputs={}, podium_version="0", max_iterations=9))
        woken: list[int] = []
        writer.hold("r1", lambda: woken.append(1))
        for i in (1, 2, 3):
            emit(StepStarted(step="s", step_type="set", iteration=i, run_iteration=i))
            emit(StepFinished(step="s", step_type="set", iteration=i, elapsed=0.0,
                              output={"n": i}))
            emit(RouteTaken(from_step="s", to_step="s", route_index=0, condition=None))
            if i < 3:
                emit(Checkpointed(step="s", next_step="s", run_iteration=i))
        assert woken == [1]  # the first checkpoint began the batch
        assert [e["type"] for e in reader.events("r1")] == ["run_started"]
        assert reader.latest_checkpoint("r1") is None
        emit(RunFinished(status="error", step="s", message="no route", elapsed=1.0,
                         iterations=3, exit_code=3))
        writer.release("r1")
        events = reader.events("r1")
        one_step = ["step_started", "step_finished", "route_taken", "checkpoint"]
        assert [e["type"] for e in events] == (["run_started"] + one_step * 2
                                               + ["step_started", "run_finished"])
        assert [e["seq"] for e in events] == list(range(1, 12))
        assert [e["output"] for e in events if e["type"] == "step_finished"] == [
            {"n": 1}, {"n": 2}]
        checkpoint = reader.latest_checkpoint("r1")
        assert checkpoint is not None
        assert checkpoint.seq == 9
        assert reader.get_run("r1").last_seq == 11
        assert reader.get_run("r1").status == "error"

    def test_a_script_commits_with_its_end_unless_it_is_still_running(
            self, handles: Callable[[], RunStore]) -> None:
        """A script step's start and output wait for its checkpoint (one transaction for a
        short script); `commit_waiting` commits what waits while it runs (a long script shows
        running). A route that then fails keeps the start and the output (the script ran)
        and drops the events that finish it, and a gate answer its step used is asked again;
        the events stay numbered 1..n."""
        writer, reader = handles(), handles()
        writer.create_run(_record("r1"))
        numbers = iter(range(1, 100))

        def emit(event: Event) -> None:
            writer.append_event(_stamp(event, "r1", next(numbers)))

        def script(i: int) -> list[Event]:
            return [StepStarted(step="t", step_type="script", iteration=i, run_iteration=i),
                    ScriptOutput(step="t", iteration=i, argv=["true"], exit_code=0,
                                 stdout=f"{i}\n", stderr="")]

        def finish(i: int) -> list[Event]:
            return [StepFinished(step="t", step_type="script", iteration=i, elapsed=0.0,
                                 output={"exit_code": 0}),
                    RouteTaken(from_step="t", to_step="t", route_index=0, condition=None)]

        emit(RunStarted(workflow="flow", workflow_path="/f.yaml", workflow_hash="sha256:00",
                        entry_point="t", inputs={}, podium_version="0", max_iterations=9))
        for event in script(1) + finish(1):  # a short script: nothing before its checkpoint
            emit(event)
        assert [e["type"] for e in reader.events("r1")] == ["run_started"]
        assert reader.get_run("r1").current_step is None
        emit(Checkpointed(step="t", next_step="t", run_iteration=1))
        assert len(reader.events("r1")) == 6
        started, output = script(2)
        emit(started)
        assert len(reader.events("r1")) == 6
        writer.commit_waiting("r1")  # the script outlasted the window: its start commits
        assert [e["type"] for e in reader.events("r1")][6:] == ["step_started"]
        assert reader.get_run("r1").current_step == "t"
        emit(output)
        gate = writer.open_gate(self._gate("r1", step="t"))
        writer.answer_gate(gate, "yes", {}, "ana")
        writer.consume_gate(gate)
        for event in finish(2):
            emit(event)
        emit(RunFinished(status="error", step="t", message="no route", elapsed=1.0,
                         iterations=2, exit_code=3))
        events = reader.events("r1")
        assert [e["type"] for e in events][6:] == [
            "step_started", "script_output", "run_finished"]
        assert events[7]["stdout"] == "2\n"
        assert [e["seq"] for e in events] == list(range(1, 10))
        assert reader.get_run("r1").last_seq == 9
        assert [g.status for g in reader.gates(run_id="r1")] == ["answered"]
        assert [g.status for g in writer.gates(run_id="r1")] == ["answered"]

    def test_live_rows_are_no_history(self, handles: Callable[[], RunStore]) -> None:
        writer, reader = handles(), handles()
        writer.create_run(_record("r1"))
        writer.put_live("r1", "a#1", {"text": "x" * 20_000})
        run = reader.get_run("r1")
        assert (run.last_seq, reader.events("r1")) == (0, [])

    # ------------------------------------------------------------------ gates

    def _gate(self, run_id: str, step: str = "review", kind: str = "human_gate") -> GateRecord:
        return GateRecord(0, run_id, step, kind, "Ship it?",
                          [{"label": "Yes", "value": "yes", "route": "done"},
                           {"label": "Fix", "value": "fix", "prompt_for": "why"}],
                          "open", 0.0)

    def test_gates_open_answer_consume(self, handles: Callable[[], RunStore]) -> None:
        writer, reader = handles(), handles()
        writer.create_run(_record("r1"))
        writer.create_run(_record("r2"))
        first = writer.open_gate(self._gate("r1"))
        second = writer.open_gate(self._gate("r2", "limit", "iteration_limit"))
        assert second > first > 0
        (gate,) = reader.gates(run_id="r1")
        assert (gate.id, gate.step, gate.kind, gate.status, gate.prompt) == \
            (first, "review", "human_gate", "open", "Ship it?")
        assert gate.options[1]["prompt_for"] == "why"
        assert gate.created_at > 0
        assert [g.id for g in reader.gates(status="open")] == [first, second]
        reader.answer_gate(first, "fix", {"why": "too long ✓"}, "cli")
        (answered,) = writer.gates(run_id="r1")
        assert (answered.status, answered.answer, answered.additional_input,
                answered.answered_by) == ("answered", "fix", {"why": "too long ✓"}, "cli")
        assert answered.answered_at is not None
        assert [g.id for g in writer.gates(status="open")] == [second]
        writer.consume_gate(first)
        writer.commit()
        assert [g.status for g in reader.gates(run_id="r1")] == ["consumed"]

    def test_runs_in_flight_at_once_commit_only_their_own_steps(
            self, handles: Callable[[], RunStore]) -> None:
        """Runs in flight at once on one handle (the sub-workflows of a group, each in its own
        thread): a run that parks or ends never commits nor drops another run's pending step,
        nor a gate the other run opened meanwhile."""
        writer, reader = handles(), handles()
        for run_id in ("a", "b", "c"):
            writer.create_run(_record(run_id))
        a, b, c = _history("a"), _history("b"), _history("c")
        used = writer.open_gate(self._gate("a"))
        reader.answer_gate(used, "yes", {}, "cli")
        for event in a[:3] + b[:3] + c[:3]:  # run_started, step_started, prompt_rendered
            writer.append_event(event)
        writer.consume_gate(used)  # a's step uses the answer...
        writer.append_event(a[3])  # ... and finishes: a's step is pending
        reopened = writer.open_gate(self._gate("b"))  # b parks at its gate meanwhile
        writer.append_event(_stamp(RunFinished(status="waiting", step="review",
                                               message="waiting", elapsed=0.1, iterations=0,
                                               exit_code=5), "b", 4))
        assert [g.id for g in reader.gates(status="open")] == [reopened]
        assert [e["seq"] for e in reader.events("b")] == [1, 2, 3, 4]
        assert reader.get_run("b").status == "waiting"
        assert [e["seq"] for e in reader.events("a")] == [1, 2, 3]  # a's step: not yet
        assert [g.status for g in reader.gates(run_id="a")] == ["answered"]
        assert [g.status for g in writer.gates(run_id="a")] == ["consumed"]  # own view
        writer.append_event(c[3])  # c's step finishes too, then c is interrupted
        writer.append_event(_stamp(RunFinished(status="interrupted", elapsed=0.1,
                                               iterations=0, exit_code=130), "c", 5))
        # its step dropped, and its end takes the step's first seq: 1..n, no gap
        assert [e["seq"] for e in reader.events("c")] == [1, 2, 3, 4]
        writer.append_event(a[4])
        writer.append_event(a[5])  # a's checkpoint commits a's step, with the answer used
        assert [e["seq"] for e in reader.events("a")] == [1, 2, 3, 4, 5, 6]
        assert [g.status for g in reader.gates(run_id="a")] == ["consumed"]
        assert [g.status for g in reader.gates(run_id="b")] == ["open"]

    def test_handles_numbering_at_commit_share_one_run(
            self, handles: Callable[[], RunStore]) -> None:
        """Two processes advance one run at once (group members on two Temporal workers),
        each numbering at commit: whatever seq their buses stamped, the run's events are 1..n
        in commit order, a pending step is numbered when its checkpoint commits it (after
        what the other handle committed meanwhile), the checkpoint row has its event's seq
        and last_seq is the last seq given."""
        first, second, reader = handles(), handles(), handles()
        first.number_at_commit()
        second.number_at_commit()
        first.create_run(_record("r"))
        h = _history("r")
        first.append_event(h[0])  # run_started
        first.append_event(_stamp(h[1], "r", 1))  # step_started, with a clashing seq
        second.append_event(_stamp(h[2], "r", 1))  # another process's prompt, same seq
        first.append_event(h[3])  # step_finished: pending until its checkpoint
        first.append_event(h[4])  # route_taken: pending too
        second.append_event(_stamp(h[6], "r", 2))  # limit_reached from the other handle
        assert [(e["seq"], e["type"]) for e in reader.events("r")] == [
            (1, "run_started"), (2, "step_started"), (3, "prompt_rendered"),
            (4, "limit_reached")]
        assert reader.get_run("r").last_seq == 4
        first.append_event(h[5])  # the checkpoint commits the step after the other's event
        events = reader.events("r")
        assert [(e["seq"], e["type"]) for e in events[4:]] == [
            (5, "step_finished"), (6, "route_taken"), (7, "checkpoint")]
        assert [parse_event(e).seq for e in events] == list(range(1, 8))  # bodies agree
        cp = reader.latest_checkpoint("r")
        assert cp is not None
        assert (cp.seq, cp.step, cp.next_step) == (7, "a", "b")
        assert reader.get_run("r").last_seq == 7
        assert [e["seq"] for e in reader.events("r", after_seq=6)] == [7]

    def test_a_gate_is_answered_once(self, store: RunStore) -> None:
        store.create_run(_record("r1"))
        gate = store.open_gate(self._gate("r1"))
        store.answer_gate(gate, "yes", {}, "cli")
        with pytest.raises(StoreError, match="not open"):
            store.answer_gate(gate, "fix", {}, "cli")
        assert store.gates()[0].answer == "yes"

    def test_withdrawing_closes_only_the_open_gates_at_once(
            self, handles: Callable[[], RunStore]) -> None:
        """A resume withdraws the gates nobody answered (the run asks them again): another
        process sees it at once, so an answer either lands before (and is used) or finds no
        open gate; it is never recorded on a gate the run no longer waits at."""
        writer, other = handles(), handles()
        writer.create_run(_record("r1"))
        answered = writer.open_gate(self._gate("r1", "first"))
        unanswered = writer.open_gate(self._gate("r1", "second"))
        other.answer_gate(answered, "yes", {}, "cli")
        assert writer.withdraw_gates("r1") == [unanswered]
        assert {g.id: g.status for g in other.gates(run_id="r1")} == {
            answered: "answered", unanswered: "withdrawn"}
        with pytest.raises(StoreError, match="not open"):
            other.answer_gate(unanswered, "yes", {}, "cli")
        assert writer.withdraw_gates("r1") == []

    # ------------------------------------------------------------------ leases

    def test_a_run_is_created_with_its_owner_and_only_one_owner_holds_it(
            self, handles: Callable[[], RunStore]) -> None:
        first, second = handles(), handles()
        alive = {"a": True}
        owner_a = Owner(101, 1.0, "host", "run")
        owner_b = Owner(202, 2.0, "host", "resume")
        first.create_run(_record("r1"), owner_a)
        lease = second.lease("r1")
        assert lease is not None
        assert lease.owner == owner_a
        with pytest.raises(RunOwned, match="pid 101"):
            second.acquire_lease("r1", owner_b, lambda held: alive["a"])
        alive["a"] = False  # the owner died: its lease is taken over
        assert second.acquire_lease("r1", owner_b, lambda held: alive["a"]).owner == owner_b
        assert not first.heartbeat("r1", owner_a)
        assert second.heartbeat("r1", owner_b)
        assert [lease.run_id for lease in first.leases()] == ["r1"]
        second.release_lease("r1", owner_a)  # not its lease: nothing happens
        assert first.lease("r1") is not None
        second.release_lease("r1", owner_b)
        assert first.lease("r1") is None

    def test_a_lease_of_a_reused_pid_is_taken_but_not_one_of_a_live_process(
            self, store: RunStore) -> None:
        """With podium's own liveness check (owners.owner_alive): a lease whose pid now
        belongs to another process (its start time differs) is taken over; the process
        that took it keeps it against that dead owner, and the refusal is exit 2."""
        from podium.app import owners

        me = owners.this_process("resume")
        other = Owner(me.pid, me.pid_start - 50.0, me.host, "run")  # a reused pid
        store.create_run(_record("r"), other)
        store.acquire_lease("r", me, owners.owner_alive)  # the dead owner's lease is taken
        lease = store.lease("r")
        assert lease is not None
        assert lease.owner == me
        with pytest.raises(RunOwned, match=f"pid {me.pid}") as info:
            store.acquire_lease("r", other, owners.owner_alive)
        assert info.value.exit_code == 2
        assert store.heartbeat("r", me)
        assert not store.heartbeat("r", other)
        store.release_lease("r", me)
        assert store.lease("r") is None

    def test_a_removal_spares_a_run_a_live_owner_holds_and_a_lease_never_revives_one(
            self, handles: Callable[[], RunStore]) -> None:
        """Prune and resume are serialised by the run's lease: the removal decides again
        inside its transaction (a resume that took the lease since prune's look keeps the
        run), and a lease asked for after the removal finds no run."""
        pruner, resumer = handles(), handles()
        alive = {"owner": True}
        owner = Owner(303, 3.0, "host", "resume")
        pruner.create_run(_record("kept", status="error"))
        pruner.create_run(_record("child", status="error", parent_run_id="kept"))
        resumer.acquire_lease("kept", owner, lambda held: False)
        assert pruner.delete_runs(["kept", "child"], unless_owned=lambda held: alive["owner"],
                                  statuses=("error",)) == 0
        assert {r.id for r in pruner.list_runs()} == {"kept", "child"}
        resumer.update_run("kept", status="running")
        alive["owner"] = False  # the owner died, but its run is no longer finished
        assert pruner.delete_runs(["kept", "child"], unless_owned=lambda held: alive["owner"],
                                  statuses=("error",)) == 0
        resumer.update_run("kept", status="error")
        assert pruner.delete_runs(["kept", "child"], unless_owned=lambda held: alive["owner"],
                                  statuses=("error",)) == 2
        assert pruner.list_runs() == []
        assert pruner.lease("kept") is None
        with pytest.raises(RunNotFound, match="no longer in the run store"):
            resumer.acquire_lease("kept", owner, lambda held: False)
        assert resumer.lease("kept") is None

    def test_a_commit_for_a_removed_run_stops_the_run(
            self, handles: Callable[[], RunStore]) -> None:
        """A run removed under its process (a hung owner's, or a store replaced) is never
        written as orphan events: its next commit raises, and every later write too."""
        writer, other = handles(), handles()
        writer.create_run(_record("r1"))
        events = _history("r1")
        writer.append_event(events[0])
        writer.commit()
        assert other.delete_runs(["r1"]) == 1

        def go_on() -> None:
            for event in events[1:6]:
                writer.append_event(event)
            writer.commit()

        with pytest.raises(StoreError, match="run r1 is no longer in the run store"):
            go_on()
        with pytest.raises(StoreError, match="no longer in the run store"):
            writer.create_run(_record("r2"))
        assert other.events("r1") == []
        assert other.latest_checkpoint("r1") is None

    # ------------------------------------------------------------------ under the engine

    def _workflow(self, folder: Path, text: str) -> Path:
        path = folder / "wf.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
        return path

    def _start(self, store: Watched, path: Path) -> Any:
        """Run a workflow as `podium run` wires it (sink, checkpointer, parked gates)."""
        from podium.app.launch import LaunchOptions, make_engine
        from podium.engine.run import file_hash
        from podium.language.load import load_workflow

        wf = load_workflow(path).model
        assert wf is not None
        engine = make_engine(wf, path, {}, LaunchOptions(verbosity=0), store)  # type: ignore[arg-type]
        store.create_run(RunRecord(engine.run_id, wf.workflow.name, str(path), file_hash(path),
                                   {}))
        store.run_id = engine.run_id
        return engine.run()

    def _resume(self, store: Watched) -> int:
        """Resume the run as `podium resume` / `podium gate answer` do."""
        from podium.app.runs import ResumeRequest, resume_run

        assert store.run_id is not None
        done = resume_run(store, store.run_id,  # type: ignore[arg-type]
                          ResumeRequest(store.run_id, verbosity=0))
        return done.result.exit_code

    def test_a_run_with_a_parked_gate_commits_consistently(
            self, handles: Callable[[], RunStore], tmp_path: Path) -> None:
        path = self._workflow(tmp_path, GATE_FLOW)
        store = Watched(handles(), handles())
        parked = self._start(store, path)
        assert parked.exit_code == 5
        (gate,) = store.view.gates(run_id=store.run_id, status="open")
        assert (gate.step, gate.kind) == ("review", "human_gate")
        store.view.answer_gate(gate.id, "fix", {"why": "shorter"}, "cli")  # "days later"
        assert self._resume(store) == 0
        run = store.view.get_run(parked.run_id)
        assert (run.status, run.terminal) == ("success", "done")
        assert run.output == {"said": "fix: shorter", "n": 3}
        assert [g.status for g in store.view.gates(run_id=run.id)] == ["consumed"]
        store.assert_clean()

    def test_a_run_ending_at_end_commits_consistently(
            self, handles: Callable[[], RunStore], tmp_path: Path) -> None:
        path = self._workflow(tmp_path, END_FLOW)
        store = Watched(handles(), handles())
        result = self._start(store, path)
        assert (result.exit_code, result.output) == (0, {"a": 7, "extra": 8})
        cp = store.view.latest_checkpoint(result.run_id)
        assert cp is not None
        assert (cp.step, cp.next_step) == ("a", "$end")
        store.assert_clean()

    def test_an_iteration_grant_commits_consistently(
            self, handles: Callable[[], RunStore], tmp_path: Path) -> None:
        path = self._workflow(tmp_path, LOOP_FLOW)
        store = Watched(handles(), handles())
        parked = self._start(store, path)
        assert parked.exit_code == 5
        (gate,) = store.view.gates(run_id=store.run_id, status="open")
        assert gate.kind == "iteration_limit"
        store.view.answer_gate(gate.id, "3", {}, "cli")
        assert self._resume(store) == 0
        run = store.view.get_run(parked.run_id)
        assert (run.status, run.output, run.iterations) == ("success", {"count": 4}, 5)
        store.assert_clean()


GATE_FLOW = """
workflow:
  name: gated
  entry_point: draft
agents:
  - {name: draft, type: set, value: 3, routes: [{to: review}]}
  - name: review
    type: human_gate
    prompt: "Ship draft {{ draft.output }}?"
    options:
      - {label: Ship, value: ship, route: done}
      - {label: Fix, value: fix, route: done, prompt_for: why}
  - name: done
    type: terminate
    status: success
    reason: reviewed
    output_template:
      said: "{{ review.output.selected }}: {{ review.output.additional_input.why }}"
      n: "{{ draft.output }}"
"""

END_FLOW = """
workflow:
  name: ends
  entry_point: a
agents:
  - name: a
    type: set
    value: 7
    routes:
      - to: $end
        output: {extra: "{{ a.output + 1 }}"}
output:
  a: "{{ a.output }}"
"""

LOOP_FLOW = """
workflow:
  name: loop
  entry_point: count
  limits: {max_iterations: 2}
agents:
  - name: count
    type: set
    value: "{{ (count.output if count is defined else 0) + 1 }}"
    output_type: integer
    routes:
      - to: count
        when: "{{ count.output < 4 }}"
      - to: done
  - name: done
    type: terminate
    status: success
    reason: counted
    output_template:
      count: "{{ count.output }}"
"""

_COMPLETING = ("step_finished", "route_taken", "gate_answered")


class Watched:
    """A store handle that, after each event it records, checks through a second handle
    (another process's view) that what is committed is a state a resume can start from."""

    def __init__(self, store: RunStore, view: RunStore) -> None:
        self.store = store
        self.view = view
        self.run_id: str | None = None
        self.problems: list[str] = []
        self.checks = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def handle(self, event: Event) -> None:
        self.append_event(event)

    def append_event(self, event: Event) -> None:
        self.store.append_event(event)
        if self.run_id is not None and event.run_id == self.run_id:
            self._check(f"after {event.type} #{event.seq}")

    def _check(self, when: str) -> None:
        assert self.run_id is not None
        self.checks += 1
        events = self.view.events(self.run_id)
        seqs = [e["seq"] for e in events]
        if seqs != list(range(1, len(seqs) + 1)):
            self.problems.append(f"{when}: committed seqs are not 1..n: {seqs}")
        finished = any(e["type"] == "run_finished" for e in events)
        marks = [i for i, e in enumerate(events) if e["type"] == "checkpoint"]
        # Since the last checkpoint (or process start), no completed step may be visible
        # unless the run ended there (a failure records the step that failed).
        starts = [i for i, e in enumerate(events) if e["type"] in ("checkpoint", "run_started")]
        tail = events[starts[-1] + 1:] if starts else events
        ended = any(e["type"] == "run_finished" for e in tail)
        if not ended and any(e["type"] in _COMPLETING and e.get("kind") != "iteration_limit"
                             for e in tail):
            self.problems.append(f"{when}: a step's completion is committed without its "
                                 f"checkpoint: {[e['type'] for e in tail]}")
        cp = self.view.latest_checkpoint(self.run_id)
        if marks and (cp is None or cp.seq != events[marks[-1]]["seq"]):
            self.problems.append(f"{when}: the checkpoint row does not match the last "
                                 f"checkpoint event")
        if cp is not None and cp.next_step in (None, "$end") and not finished:
            self.problems.append(f"{when}: the last checkpoint is committed before the end")
        for gate in self.view.gates(run_id=self.run_id, status="consumed"):
            answered = [e for e in events if e["type"] == "gate_answered"
                        and e["step"] == gate.step]
            if not answered:
                self.problems.append(f"{when}: gate {gate.step} consumed but never answered")
                continue
            after = events[events.index(answered[-1]):]
            kinds = {e["type"] for e in after}
            needed = "limit_resolved" if gate.kind == "iteration_limit" else "checkpoint"
            if needed not in kinds:
                self.problems.append(f"{when}: gate {gate.step} consumed before its {needed}")

    def assert_clean(self) -> None:
        assert self.checks > 5
        assert not self.problems, "\n".join(self.problems)
