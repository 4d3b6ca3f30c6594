"""Events: the JSONL log written by `podium run --events`, the typed event stream, and sinks
that fail (spec 12)."""

from __future__ import annotations

from pathlib import Path

from helpers_engine import cli_env, podium_argv, read_jsonl, run_cli, run_yaml, wait_until, write
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


WAITING = """
workflow: {name: waiting, entry_point: a}
agents:
  - {name: a, type: set, value: 1, routes: [{to: b}]}
  - name: b
    type: script
    command: python
    args: ["-c", "import pathlib, time; pathlib.Path('ready').touch()\\nwhile not pathlib.Path('go').exists(): time.sleep(0.02)"]
    working_dir: "{{ workflow.dir }}"
output:
  a: "{{ a.output }}"
"""


def test_the_jsonl_copy_holds_what_the_store_has_committed_while_a_step_runs(
        tmp_path: Path) -> None:
    """The JSONL copy reaches its file when the store commits: while the script step waits,
    the file holds exactly the events the store holds (the set step's, committed with its
    checkpoint, and the script's start), and the rest comes with the run's end."""
    import subprocess
    from contextlib import closing

    from podium.store.sqlite import SQLiteStore

    path = write(tmp_path, WAITING)
    log = tmp_path / "events.jsonl"
    home = tmp_path / "home"
    proc = subprocess.Popen(podium_argv("run", path, "--events", log), cwd=tmp_path,
                            env=cli_env(home), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_until((tmp_path / "ready").exists, timeout=30)
        copied = [(e["seq"], e["type"]) for e in read_jsonl(log)]
        run_id = read_jsonl(log)[0]["run_id"]
        with closing(SQLiteStore(home / "podium.db")) as store:
            stored = [(e["seq"], e["type"]) for e in store.events(run_id)]
        assert copied == stored
        assert [t for _, t in copied] == ["run_started", "step_started", "step_finished",
                                          "route_taken", "checkpoint", "step_started"]
        (tmp_path / "go").touch()
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    events = read_jsonl(log)
    assert events[-1]["type"] == "run_finished"
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))


def test_the_jsonl_copy_writes_a_set_step_with_its_checkpoint(tmp_path: Path) -> None:
    """What the store commits in one transaction reaches the JSONL file in one write: a
    `set` step's start, end and route wait for its checkpoint, and so do a script's start
    and output, until the bus commits what waits (a script that runs on); an agent's start
    does not wait."""
    from podium.events.model import (
        Checkpointed,
        RouteTaken,
        ScriptOutput,
        StepFinished,
        StepStarted,
    )
    from podium.events.sinks.jsonl import JsonlSink

    log = tmp_path / "events.jsonl"
    sink = JsonlSink(log)
    on_disk = []
    for seq, event in enumerate([
            StepStarted(step="a", step_type="set", iteration=1, run_iteration=1),
            StepFinished(step="a", step_type="set", iteration=1, elapsed=0.0, output=1),
            RouteTaken(from_step="a", to_step="b", route_index=0),
            Checkpointed(step="a", next_step="b", run_iteration=1),
            StepStarted(step="b", step_type="script", iteration=1, run_iteration=2),
            ScriptOutput(step="b", iteration=1, argv=["true"], exit_code=0, stdout="",
                         stderr=""),
            "commit_waiting",
            StepStarted(step="c", step_type="agent", iteration=1, run_iteration=3)], 1):
        if isinstance(event, str):
            sink.on_commit_held("r")  # what EventBus.commit_waiting tells the sinks
        else:
            sink.handle(event.model_copy(update={"run_id": "r", "seq": seq}))
        on_disk.append(len(read_jsonl(log)) if log.exists() else 0)
    sink.close()
    assert on_disk == [0, 0, 0, 4, 4, 4, 6, 7]


def test_the_jsonl_copy_writes_a_groups_members_with_each_batch(tmp_path: Path) -> None:
    """While a group batches its members' commits (the bus's hold), their lines reach the
    file with each batch, as the store commits them; another run's lines, and the run's own
    once the group ends, as they come."""
    from podium.events.model import PromptRendered, StepFinished, StepStarted
    from podium.events.sinks.jsonl import JsonlSink

    log = tmp_path / "events.jsonl"
    sink = JsonlSink(log)
    lines = iter(range(1, 100))

    def feed(event: Event, run_id: str = "r") -> int:
        sink.handle(event.model_copy(update={"run_id": run_id, "seq": next(lines)}))
        return len(read_jsonl(log)) if log.exists() else 0

    def member(i: int) -> list[Event]:
        return [StepStarted(step="w", step_type="agent", iteration=i, run_iteration=i, group="g"),
                PromptRendered(step="w", iteration=i, provider="copilot", prompt=f"item {i}"),
                StepFinished(step="w", step_type="agent", iteration=i, elapsed=0.1, group="g")]

    try:
        sink.on_hold("r")
        assert [feed(e) for e in member(1) + member(2)] == [0] * 6
        sink.on_commit_held("r")
        assert len(read_jsonl(log)) == 6
        assert feed(PromptRendered(step="c", iteration=1, provider="copilot", prompt="x"),
                    run_id="child") == 7  # a run the group does not hold
        assert [feed(e) for e in member(3)] == [7, 7, 7]
        sink.on_release("r")
        assert len(read_jsonl(log)) == 10
        # the group has ended: a member's start waits for its prompt, as the store's does
        assert [feed(e) for e in member(4)] == [10, 12, 13]
    finally:
        sink.close()


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
