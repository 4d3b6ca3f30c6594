"""`podium fleet`: the fleet TUI (Textual's pilot, and once in a real pseudo-terminal), and
`podium fleet list` / `prune` without it."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "web"))

from console_helpers import (
    LOOP_FLOW,
    block_flow,
    gate_flow,
    run_id_of,
    run_podium,
    start_podium,
    stop_process,
    write_flow,
)

from helpers_engine import EXAMPLES, cli_env, podium_argv
from podium.app.owners import this_host
from podium.store.base import Owner, RunRecord
from podium.store.sqlite import SQLiteStore

pytest.importorskip("textual")

from textual.widgets import DataTable, Input

from podium.tui.app import DetailScreen, FleetApp

SIZE = (180, 45)


def _interrupted_run(home: Path) -> str:
    """A run left `running` by an owner that is gone (its pid no longer exists)."""
    store = SQLiteStore(home / "podium.db")
    try:
        rid = "dead0000-0000-4000-8000-000000000001"
        store.create_run(RunRecord(rid, "orphan", str(home / "orphan.yaml"), "x", {},
                                   current_step="work", created_at=time.time()),
                         Owner(2 ** 22 + 12345, 1.0, this_host(), "run"))
        return rid
    finally:
        store.close()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def _drive(home: Path, body: Callable[[FleetApp, object], Awaitable[None]]) -> None:
    async def main() -> None:
        store = SQLiteStore(home / "podium.db")
        app = FleetApp(store, home, interval=0.2)
        try:
            async with app.run_test(size=SIZE) as pilot:
                await pilot.pause()
                await body(app, pilot)
        finally:
            store.close()

    os.environ["PODIUM_HOME"] = str(home)  # the processes the TUI spawns use it
    asyncio.run(main())


async def _until(pilot: object, check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        await pilot.pause(0.1)  # type: ignore[attr-defined]
    assert check(), "timed out"


def _statuses(app: FleetApp) -> dict[str, str]:
    table = app.query_one("#runs", DataTable)
    out = {}
    for i in range(table.row_count):
        cells = table.get_row_at(i)
        out[str(cells[0])] = str(cells[2])
    return out


def _select(app: FleetApp, run_id: str) -> None:
    ids = [r.id for r in app.rows]
    app.query_one("#runs", DataTable).move_cursor(row=ids.index(run_id))


def test_table_shows_every_run_with_its_status_and_filters(home: Path,
                                                           tmp_path: Path) -> None:
    done = run_podium(home, "run", EXAMPLES / "review-counter" / "workflow.yaml")
    assert done.returncode == 0, done.stderr
    flow, responses = gate_flow(tmp_path / "flows")
    parked = run_podium(home, "run", flow, "--responses", responses)
    assert parked.returncode == 5, parked.stderr
    ok, wait, dead = run_id_of(done), run_id_of(parked), _interrupted_run(home)

    async def body(app: FleetApp, pilot: object) -> None:
        assert _statuses(app) == {ok: "success", wait: "waiting", dead: "interrupted"}
        row = {r.id: r for r in app.rows}
        assert row[wait].gate == "approval"
        assert row[dead].step == "work"
        app.set_filter("interrupted")
        await pilot.pause()  # type: ignore[attr-defined]
        assert _statuses(app) == {dead: "interrupted"}
        await pilot.press("f")  # type: ignore[attr-defined]
        assert app.status_filter == "finished"
        assert _statuses(app) == {ok: "success"}
        app.set_filter("all")
        await pilot.press("slash", *"relea")  # type: ignore[attr-defined]
        await pilot.pause()  # type: ignore[attr-defined]
        assert app.query_one("#search", Input).value == "relea"
        assert set(_statuses(app)) == {wait}
        await pilot.press("enter")  # type: ignore[attr-defined]
        await pilot.press("q")  # type: ignore[attr-defined]

    _drive(home, body)


def test_a_runs_detail_shows_its_path_outputs_and_events(home: Path) -> None:
    done = run_podium(home, "run", EXAMPLES / "review-counter" / "workflow.yaml")
    assert done.returncode == 0, done.stderr
    rid = run_id_of(done)

    async def body(app: FleetApp, pilot: object) -> None:
        _select(app, rid)
        await pilot.press("enter")  # type: ignore[attr-defined]
        await pilot.pause()  # type: ignore[attr-defined]
        screen = app.screen
        assert isinstance(screen, DetailScreen)
        assert screen.run_id == rid
        assert screen.data is not None
        path = screen.query_one("#detail-path", DataTable)
        assert path.row_count == len(screen.data.path) > 0
        steps = [str(path.get_row_at(i)[0]) for i in range(path.row_count)]
        assert steps[0] == screen.data.path[0].step
        events = screen.query_one("#detail-events", DataTable)
        kinds = {str(events.get_row_at(i)[1]) for i in range(events.row_count)}
        assert "run_started" in kinds
        await pilot.press("escape")  # type: ignore[attr-defined]
        assert not isinstance(app.screen, DetailScreen)

    _drive(home, body)


def test_answering_a_parked_gate_resumes_the_run_to_its_terminal(home: Path,
                                                                  tmp_path: Path) -> None:
    flow, responses = gate_flow(tmp_path / "flows", hostile=False)
    parked = run_podium(home, "run", flow, "--responses", responses)
    assert parked.returncode == 5, parked.stderr
    rid = run_id_of(parked)

    async def body(app: FleetApp, pilot: object) -> None:
        _select(app, rid)
        await pilot.press("enter", "a")  # type: ignore[attr-defined]
        await pilot.pause()  # type: ignore[attr-defined]
        app.screen.query_one("#answer-value", Input).value = "approved"
        await pilot.press("enter")  # type: ignore[attr-defined]
        await _until(pilot, lambda: app.store.get_run(rid).status == "success")
        assert "resuming run" in str(app.query_one("#message").render())
        assert app.store.get_run(rid).terminal == "released"
        answered = [e for e in app.store.events(rid) if e["type"] == "gate_answered"]
        assert answered[0]["answered_by"] == "fleet"

    _drive(home, body)
    assert (home / "logs" / f"{rid}.log").is_file()


def test_stop_asks_a_live_run_to_stop(home: Path, tmp_path: Path) -> None:
    proc = start_podium(home, "run", block_flow(tmp_path / "flows"))
    try:
        async def body(app: FleetApp, pilot: object) -> None:
            await _until(pilot, lambda: any(r.status == "running" and r.live
                                            for r in app.rows))
            rid = next(r.id for r in app.rows if r.live)
            _select(app, rid)
            await pilot.press("s")  # type: ignore[attr-defined]
            await _until(pilot, lambda: proc.poll() is not None)
            await _until(pilot, lambda: _statuses(app).get(rid) == "interrupted")

        _drive(home, body)
        assert proc.wait(timeout=10) == 130
    finally:
        stop_process(proc)


def test_the_new_run_form_starts_a_run(home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "work"
    write_flow(folder, "looper.yaml", LOOP_FLOW.replace("max_iterations: 3",
                                                         "max_iterations: 10"))

    async def body(app: FleetApp, pilot: object) -> None:
        await pilot.press("n")  # type: ignore[attr-defined]
        await pilot.pause()  # type: ignore[attr-defined]
        app.screen.query_one("#new-file", Input).value = "looper.yaml"
        app.screen.query_one("#new-cwd", Input).value = str(folder)
        await pilot.click("#new-ok")  # type: ignore[attr-defined]
        await _until(pilot, lambda: _statuses(app) != {}
                     and set(_statuses(app).values()) == {"success"})
        assert "started looper.yaml" in str(app.query_one("#message").render())

    _drive(home, body)


def test_fleet_list_and_prune_without_the_tui(home: Path, tmp_path: Path) -> None:
    done = run_podium(home, "run", EXAMPLES / "review-counter" / "workflow.yaml")
    flow, responses = gate_flow(tmp_path / "flows")
    parked = run_podium(home, "run", flow, "--responses", responses)
    ok, wait, dead = run_id_of(done), run_id_of(parked), _interrupted_run(home)

    listed = run_podium(home, "fleet", "list", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    runs = {r["id"]: r for r in json.loads(listed.stdout)["runs"]}
    assert {k: r["status"] for k, r in runs.items()} == {ok: "success", wait: "waiting",
                                                       dead: "interrupted"}
    assert runs[wait]["gate"] == "approval"
    text = run_podium(home, "fleet", "list", "--status", "waiting")
    assert wait in text.stdout
    assert ok not in text.stdout
    assert "GATE" in text.stdout

    assert run_podium(home, "fleet", "prune", "--older-than", "soon").returncode == 2
    kept = run_podium(home, "fleet", "prune", "--older-than", "30d", "--yes")
    assert kept.returncode == 0
    assert "nothing removed" in kept.stdout
    dry = run_podium(home, "fleet", "prune", "--older-than", "0s")  # no --yes, no terminal
    assert f"would remove {ok}" in dry.stdout
    assert "pass --yes" in dry.stderr
    gone = run_podium(home, "fleet", "prune", "--older-than", "0s", "--yes")
    assert gone.returncode == 0, gone.stderr
    assert f"removed {ok}" in gone.stdout
    assert "kept 2 run(s)" in gone.stdout
    store = SQLiteStore(home / "podium.db")
    try:
        assert {r.id for r in store.list_runs()} == {wait, dead}
        assert store.events(ok) == []
        assert store.latest_checkpoint(ok) is None
        assert store.gates(run_id=wait, status="open")
    finally:
        store.close()


def test_podium_fleet_in_a_real_pseudo_terminal(home: Path) -> None:
    done = run_podium(home, "run", EXAMPLES / "review-counter" / "workflow.yaml")
    rid = run_id_of(done)
    master, slave = pty.openpty()
    import fcntl

    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    env = cli_env(home, {"TERM": "xterm-256color"})
    env.pop("NO_COLOR", None)
    env.pop("COLUMNS", None)
    proc = subprocess.Popen(podium_argv("fleet"), stdin=slave, stdout=slave, stderr=slave,
                            env=env, start_new_session=True, close_fds=True)
    os.close(slave)
    seen = b""
    try:
        deadline = time.monotonic() + 30
        while rid[:8].encode() not in seen and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    seen += os.read(master, 65536)
                except OSError:
                    break
        assert rid[:8].encode() in seen, seen[-2000:]
        os.write(master, b"q")
        end = time.monotonic() + 15
        while proc.poll() is None and time.monotonic() < end:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    os.read(master, 65536)
                except OSError:
                    break
        assert proc.wait(timeout=5) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        os.close(master)


def test_fleet_list_never_imports_textual(home: Path) -> None:
    code = ("import sys\nsys.argv = ['podium', 'fleet', 'list']\n"
            "from podium.cli.process import main\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('textual' in sys.modules, 'podium.tui' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], env=cli_env(home), capture_output=True,
                         text=True, timeout=60, check=False)
    assert out.stdout.strip().splitlines()[-1] == "False False", out.stderr


def _parked_twice(home: Path, tmp_path: Path) -> tuple[str, str]:
    """Two runs parked at the release gate: (older, newer)."""
    flow, responses = gate_flow(tmp_path / "flows", hostile=False)
    ids = []
    for _ in range(2):
        parked = run_podium(home, "run", flow, "--responses", responses)
        assert parked.returncode == 5, parked.stderr
        ids.append(run_id_of(parked))
    return ids[0], ids[1]


def _cursor_run(app: FleetApp) -> str | None:
    return app.selected()


def test_a_refused_answer_keeps_the_dialog_open_and_the_cursor_where_it_was(
        home: Path, tmp_path: Path) -> None:
    older, _newer = _parked_twice(home, tmp_path)

    async def body(app: FleetApp, pilot: object) -> None:
        _select(app, older)
        assert [r.id for r in app.rows].index(older) == 1  # not the first row
        await pilot.press("a")  # type: ignore[attr-defined]
        await pilot.pause()  # type: ignore[attr-defined]
        dialog = app.screen
        value = dialog.query_one("#answer-value", Input)
        value.value = "maybe"
        value.focus()
        await pilot.press("enter")  # type: ignore[attr-defined]
        await pilot.pause()  # type: ignore[attr-defined]
        assert app.screen is dialog  # still open, saying why
        shown = str(dialog.query_one("#dialog-error").render())
        assert "refused" in shown, shown
        assert "maybe" in shown, shown
        assert app.store.get_run(older).status == "waiting"
        await pilot.press("escape")  # type: ignore[attr-defined]
        await pilot.pause()  # type: ignore[attr-defined]
        assert _cursor_run(app) == older

    _drive(home, body)


def test_the_gate_dialog_is_answered_by_choosing_an_option_with_the_keys(
        home: Path, tmp_path: Path) -> None:
    """Arrows move through the options, Enter answers with the one chosen (here the third,
    aborted: the run ends at its `aborted` terminate step)."""
    flow, responses = gate_flow(tmp_path / "flows", hostile=False)
    parked = run_podium(home, "run", flow, "--responses", responses)
    assert parked.returncode == 5, parked.stderr
    rid = run_id_of(parked)

    async def body(app: FleetApp, pilot: object) -> None:
        _select(app, rid)
        await pilot.press("a")  # type: ignore[attr-defined]
        await pilot.pause()  # type: ignore[attr-defined]
        await pilot.press("down", "down", "enter")  # type: ignore[attr-defined]
        await _until(pilot, lambda: app.store.get_run(rid).status == "failed")
        assert app.store.get_run(rid).terminal == "aborted"
        assert "answered 'aborted'" in str(app.query_one("#message").render())

    _drive(home, body)


def test_waiting_runs_come_first_then_the_newest(home: Path, tmp_path: Path) -> None:
    flow, responses = gate_flow(tmp_path / "flows", hostile=False)
    parked = run_podium(home, "run", flow, "--responses", responses)
    assert parked.returncode == 5, parked.stderr
    first = run_podium(home, "run", EXAMPLES / "review-counter" / "workflow.yaml")
    second = run_podium(home, "run", EXAMPLES / "review-counter" / "workflow.yaml")
    wait, old, new = run_id_of(parked), run_id_of(first), run_id_of(second)

    async def body(app: FleetApp, pilot: object) -> None:
        table = app.query_one("#runs", DataTable)
        shown = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        assert shown == [wait, new, old]

    _drive(home, body)


def test_a_killed_runs_elapsed_time_stops_at_its_last_update(home: Path) -> None:
    from podium.app.fleet import fleet

    dead = _interrupted_run(home)
    store = SQLiteStore(home / "podium.db")
    try:
        run = store.get_run(dead)
        later = run.created_at + 3600
        row = next(r for r in fleet(store, now=later) if r.id == dead)
        assert row.status == "interrupted"
        assert row.elapsed == max(0.0, run.updated_at - run.created_at) < 3600
    finally:
        store.close()


def test_a_parked_runs_detail_says_what_it_waits_for_not_error(home: Path,
                                                              tmp_path: Path) -> None:
    flow, responses = gate_flow(tmp_path / "flows", hostile=False)
    parked = run_podium(home, "run", flow, "--responses", responses)
    assert parked.returncode == 5, parked.stderr
    rid = run_id_of(parked)

    async def body(app: FleetApp, pilot: object) -> None:
        _select(app, rid)
        await pilot.press("enter")  # type: ignore[attr-defined]
        await pilot.pause()  # type: ignore[attr-defined]
        head = str(app.screen.query_one("#detail-head").render())
        assert "error:" not in head, head
        assert "waiting at gate 'approval'" in head

    _drive(home, body)


def test_a_new_run_with_a_missing_input_shows_the_refusal_in_the_form(
        home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "work"
    write_flow(folder, "needs.yaml", LOOP_FLOW.replace(
        "  limits: {max_iterations: 3}",
        "  limits: {max_iterations: 10}\n  input:\n    topic: {type: string, required: true}"))

    async def body(app: FleetApp, pilot: object) -> None:
        await pilot.press("n")  # type: ignore[attr-defined]
        await pilot.pause()  # type: ignore[attr-defined]
        dialog = app.screen
        dialog.query_one("#new-file", Input).value = "needs.yaml"
        dialog.query_one("#new-cwd", Input).value = str(folder)
        await pilot.click("#new-ok")  # type: ignore[attr-defined]
        await pilot.pause()  # type: ignore[attr-defined]
        assert app.screen is dialog
        shown = str(dialog.query_one("#dialog-error").render())
        assert "missing required input: topic" in shown, shown
        assert "started" not in str(app.query_one("#message").render())
        assert app.store.list_runs(limit=10) == []

    _drive(home, body)


def test_a_new_run_that_fails_says_so_in_the_tui_not_only_in_its_log(
        home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "work"
    write_flow(folder, "broken.yaml", """
workflow:
  name: broken
  entry_point: go
agents:
  - name: go
    type: script
    command: ./no-such-program-here
    routes: [{to: $end}]
""")

    async def body(app: FleetApp, pilot: object) -> None:
        await pilot.press("n")  # type: ignore[attr-defined]
        await pilot.pause()  # type: ignore[attr-defined]
        app.screen.query_one("#new-file", Input).value = "broken.yaml"
        app.screen.query_one("#new-cwd", Input).value = str(folder)
        await pilot.click("#new-ok")  # type: ignore[attr-defined]

        def said() -> str:
            return str(app.query_one("#message").render())

        await _until(pilot, lambda: "ended with exit" in said())
        assert "the new run of broken.yaml ended with exit 3" in said()
        assert "no-such-program-here" in said()

    _drive(home, body)


def test_a_gate_answered_with_the_arrow_keys_in_a_real_pseudo_terminal(
        home: Path, tmp_path: Path) -> None:
    """The keys a terminal really sends (ESC [ B for the down arrow, CR for Enter) choose the
    third option of the gate; the run resumes and ends at its `aborted` step."""
    import fcntl

    from console_helpers import store_row

    flow, responses = gate_flow(tmp_path / "flows", hostile=False)
    parked = run_podium(home, "run", flow, "--responses", responses)
    assert parked.returncode == 5, parked.stderr
    rid = run_id_of(parked)
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    env = cli_env(home, {"TERM": "xterm-256color"})
    env.pop("NO_COLOR", None)
    env.pop("COLUMNS", None)
    proc = subprocess.Popen(podium_argv("fleet"), stdin=slave, stdout=slave, stderr=slave,
                            env=env, start_new_session=True, close_fds=True)
    os.close(slave)
    seen = [b""]

    def read_until(check: Callable[[], bool], timeout: float = 30) -> bool:
        deadline = time.monotonic() + timeout
        while not check() and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    seen[0] += os.read(master, 65536)
                except OSError:
                    break
        return check()

    try:
        assert read_until(lambda: rid[:8].encode() in seen[0]), seen[0][-2000:]
        seen[0] = b""
        os.write(master, b"a")
        assert read_until(lambda: b"aborted" in seen[0]), seen[0][-2000:]
        os.write(master, b"\x1b[B")
        os.write(master, b"\x1b[B")
        os.write(master, b"\r")
        assert read_until(lambda: store_row(home, rid).get("status") == "failed", 60)
        assert store_row(home, rid)["terminal"] == "aborted"
        os.write(master, b"q")
        read_until(lambda: proc.poll() is not None, 15)  # drains the screen until it closes
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        os.close(master)
