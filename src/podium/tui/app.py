"""The fleet TUI: a live table of every run, a run's detail, and the actions on runs."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Input, Label, Static

from podium.app.fleet import (
    FILTERS,
    FleetDetail,
    FleetRow,
    cost_text,
    detail,
    elapsed_text,
    fleet,
)
from podium.app.runs import stop_run
from podium.app.spawn import Spawned, answer_and_resume, resume_detached, spawn_run
from podium.errors import PodiumError
from podium.store.base import RunStore
from podium.tui.dialogs import AnswerScreen, NewRunScreen
from podium.tui.dialogs import short as _short

COLUMNS = ("run", "workflow", "status", "step", "elapsed", "cost", "gate")
LIVE_TAIL = 800  # characters of a streaming step's text the detail shows (the end)
FILTER_ORDER = tuple(FILTERS)


def _cells(r: FleetRow) -> tuple[str, ...]:
    return (r.id, r.workflow, r.status, r.step or "-", elapsed_text(r.elapsed), cost_text(r),
            r.gate or "-")


def _gauge(live: dict[str, Any]) -> str:
    used, window = live.get("tokens_used"), live.get("context_window")
    if not isinstance(used, int) or not used:
        return ""
    text = f" · {'≈ ' if live.get('estimated') else ''}{used:,}"
    if isinstance(window, int) and window:
        return text + f" of {window:,} tokens ({used / window:.0%})"
    return text + " tokens"


def live_text(rows: dict[str, dict[str, Any]], tail: int = LIVE_TAIL) -> Text:
    """What the running steps streamed so far: the tail of each one's text, its reasoning
    dimmed, the tools it called and its context gauge. Model text is data: a rich Text,
    never console markup."""
    out = Text()
    for key, live in rows.items():
        out.append(f"streaming {key.replace('#', ' #')}", style="bold")
        out.append(_gauge(live) + "\n")
        tools = live.get("tools") or []
        if tools:
            out.append(f"tool calls: {', '.join(str(t) for t in tools)}\n", style="dim")
        reasoning = str(live.get("reasoning") or "")
        if reasoning:
            out.append(reasoning[-tail // 4:] + "\n", style="dim italic")
        out.append(str(live.get("text") or "")[-tail:] + "\n")
    return out


class Actions:
    """What the TUI does to runs, each through the app layer; messages for the status line."""

    def __init__(self, store: RunStore, home: Path, python: str | None = None) -> None:
        self.store = store
        self.home = home
        self.python = python or sys.executable
        self.started: list[tuple[str, Spawned]] = []  # new runs whose process may still run

    def answer(self, run_id: str, gate_id: int, value: str, text: str | None) -> str:
        done = answer_and_resume(self.store, run_id, value, text or None, home=self.home,
                                 by="fleet", gate_id=gate_id, python=self.python)
        if done.resumed == "live":
            return f"answered '{done.answer}'; run {done.run_id} goes on in its own process"
        assert done.spawned is not None
        return (f"answered '{done.answer}'; resuming run {done.run_id} (pid "
                f"{done.spawned.pid}, log {done.spawned.log})")

    def stop(self, run_id: str) -> str:
        return stop_run(self.store, run_id, wait=0).message

    def resume(self, run_id: str) -> str:
        spawned = resume_detached(self.store, run_id, home=self.home, by="fleet",
                                  python=self.python)
        return f"resuming run {run_id} (pid {spawned.pid}, log {spawned.log})"

    def start(self, file: str, inputs: str, cwd: str) -> str:
        folder = Path(cwd or ".").expanduser()
        if not folder.is_dir():
            raise PodiumError(f"no folder {folder}")
        path = Path(file).expanduser()
        if not (path if path.is_absolute() else folder / path).is_file():
            raise PodiumError(f"no workflow file {file} in {folder}")
        values: dict[str, str] = {}
        try:
            words = shlex.split(inputs)
        except ValueError as exc:
            raise PodiumError(f"inputs: {exc}") from None
        for word in words:
            name, eq, value = word.partition("=")
            if not eq or not name:
                raise PodiumError(f"input '{word}' is not NAME=VALUE")
            values[name] = value
        _check_startable(path if path.is_absolute() else folder / path, values)
        spawned = spawn_run(path, values, home=self.home, cwd=folder.resolve(), by="fleet",
                            python=self.python)
        self.started.append((file, spawned))
        return f"started {file} (pid {spawned.pid}, log {spawned.log})"

    def ended_badly(self) -> list[str]:
        """For each run this TUI started whose process has ended since with an exit code other
        than 0 (success) or 5 (parked at a gate): a line naming it, the code and its log's
        error line (else its last line)."""
        out, still = [], []
        for file, spawned in self.started:
            code = spawned.exit_code()
            if code is None:
                still.append((file, spawned))
            elif code not in (0, 5):
                out.append(f"the new run of {file} ended with exit {code}: "
                           f"{_last_line(spawned.log)} (log {spawned.log})")
        self.started = still
        return out


def _last_line(log: Path) -> str:
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return "(no log)"
    said = [line.strip() for line in lines if line.strip()]
    errors = [line for line in said if line.startswith(("error:", "podium run:", "podium:"))]
    return _short((errors or said or ["(nothing in its log)"])[-1], 200)


def _check_startable(path: Path, values: dict[str, str]) -> None:
    """What `podium run` would refuse before it runs (an invalid workflow, a missing or unknown
    input), refused here, so the TUI shows it instead of a log file."""
    import io

    from podium.app.inputs import parse_inputs
    from podium.app.workflows import load_valid

    said = io.StringIO()
    wf, _code = load_valid(path, [], err=said)
    if wf is None:
        lines = [line for line in said.getvalue().splitlines() if line.strip()]
        raise PodiumError("; ".join(lines[:2]) or f"{path} is invalid")
    parse_inputs(wf, [f"{k}={v}" for k, v in values.items()], None)


class DetailScreen(Screen[None]):
    """One run: its summary, what its running step streams (refreshed with the rest), the path
    it took with each step's output, its latest events."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back"),
        Binding("a", "answer", "Answer gate"),
        Binding("s", "stop", "Stop"),
        Binding("r", "resume", "Resume"),
    ]

    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.run_id = run_id
        self.data: FleetDetail | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="detail-head")
        yield Static(id="detail-live")
        yield Label("Path taken")
        yield DataTable(id="detail-path", cursor_type="row")
        yield Label("Events")
        yield DataTable(id="detail-events", cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#detail-path", DataTable).add_columns(
            "step", "type", "iter", "routed to", "elapsed", "output")
        self.query_one("#detail-events", DataTable).add_columns("seq", "type", "step", "what")
        self.reload()
        self.set_interval(1.0, self.reload)

    @property
    def fleet_app(self) -> FleetApp:
        app = self.app
        assert isinstance(app, FleetApp)
        return app

    def reload(self) -> None:
        try:
            self.data = d = detail(self.fleet_app.store, self.run_id, last_events=100)
        except PodiumError as exc:
            self.query_one("#detail-head", Static).update(str(exc))
            return
        r = d.row
        lines = [f"run {r.id}   {r.workflow}   {r.status}" + ("  (live)" if r.live else ""),
                 f"step {r.step or '-'}   elapsed {elapsed_text(r.elapsed)}   cost "
                 f"{cost_text(r)}   file {d.run.workflow_path}"]
        if d.run.terminal:
            lines.append(f"ended at '{d.run.terminal}': {d.run.reason or ''}")
        if d.run.error and r.status != "waiting":
            lines.append(f"error: {_short(d.run.error, 300)}")
        elif r.status == "waiting" and not d.gates:  # parked; what for, in the run's words
            lines.append(_short(d.run.error or f"waiting: podium resume {r.id}", 300))
        for g in d.gates:
            lines.append(f"waiting at gate '{g.step}' ({g.kind}): {_short(g.prompt, 200)} "
                         "— press a to answer")
        self.query_one("#detail-head", Static).update("\n".join(lines))
        streaming = self.query_one("#detail-live", Static)
        streaming.display = bool(d.live)
        streaming.update(live_text(d.live))
        path = self.query_one("#detail-path", DataTable)
        path.clear()
        for p in d.path:
            path.add_row(p.step, p.step_type, str(p.iteration), p.route_to or "-",
                         "-" if p.elapsed is None else f"{p.elapsed:.2f}s", _short(p.output))
        events = self.query_one("#detail-events", DataTable)
        events.clear()
        for e in reversed(d.events):
            what = e.model_dump(mode="json", exclude={"seq", "type", "step", "run_id", "ts"})
            events.add_row(str(e.seq), e.type, str(getattr(e, "step", None) or "-"),
                           _short(what, 100))

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_answer(self) -> None:
        self.fleet_app.answer_run(self.run_id)

    def action_stop(self) -> None:
        self.fleet_app.stop_run(self.run_id)

    def action_resume(self) -> None:
        self.fleet_app.resume_run(self.run_id)


class FleetApp(App[None]):
    """Every run on this machine, refreshed every second."""

    TITLE = "podium fleet"
    CSS = """
    #answer-box, #new-box { width: 90; height: auto; padding: 1 2; border: thick $accent;
                            background: $surface; }
    AnswerScreen, NewRunScreen { align: center middle; }
    #filters { height: 1; }
    #search { width: 40; }
    #message { height: auto; max-height: 3; }
    .dialog-error { color: $error; height: auto; }
    #gate-options { height: auto; max-height: 10; }
    #detail-live { height: auto; max-height: 16; border: round $accent; padding: 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("f", "next_filter", "Filter"),
        Binding("slash", "search", "Search"),
        Binding("enter", "open", "Detail", show=False),
        Binding("a", "answer", "Answer gate"),
        Binding("s", "stop", "Stop"),
        Binding("r", "resume", "Resume"),
        Binding("n", "new_run", "New run"),
    ]

    def __init__(self, store: RunStore, home: Path, *, interval: float = 1.0,
                 python: str | None = None) -> None:
        super().__init__()
        self.store = store
        self.ops = Actions(store, home, python)
        self.refresh_every = interval
        self.status_filter = "all"
        self.search_text = ""
        self.rows: list[FleetRow] = []

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="filters"):
            yield Label("filter: all", id="filter-label")
            yield Input(placeholder="/ search id, workflow, step", id="search")
        yield DataTable(id="runs", cursor_type="row", zebra_stripes=True)
        yield Static("", id="message")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#runs", DataTable)
        table.add_columns(*COLUMNS)
        self.reload()
        table.focus()
        self.set_interval(self.refresh_every, self.reload)

    # ------------------------------------------------------------------ the table

    def reload(self, force: bool = False) -> None:
        """Read the runs again; redraw the table when they changed (or `force`), the cursor
        staying on the run it was on."""
        try:
            rows = fleet(self.store, status=self.status_filter, search=self.search_text)
        except PodiumError as exc:
            self.say(f"cannot read the run store: {exc}")
            return
        for line in self.ops.ended_badly():
            self.say(line)
        found = self.query("#runs").results(DataTable)
        table = next(found, None)
        if table is None:  # the app is closing: its widgets are gone
            return
        current = self.selected()
        if (not force and table.row_count
                and [_cells(r) for r in rows] == [_cells(r) for r in self.rows]):
            return
        self.rows = rows
        table.clear()
        for r in rows:
            table.add_row(*_cells(r), key=r.id)
        ids = [r.id for r in rows]
        if current in ids:
            table.move_cursor(row=ids.index(current))

    def selected(self) -> str | None:
        table = self.query_one("#runs", DataTable)
        if not table.row_count:
            return None
        row = table.cursor_row
        if 0 <= row < len(self.rows):
            return self.rows[row].id
        return None

    def say(self, text: str) -> None:
        self.query_one("#message", Static).update(text)

    def _target(self) -> str | None:
        screen = self.screen
        if isinstance(screen, DetailScreen):
            return screen.run_id
        run = self.selected()
        if run is None:
            self.say("no run selected")
        return run

    def action_next_filter(self) -> None:
        self.set_filter(FILTER_ORDER[(FILTER_ORDER.index(self.status_filter) + 1) % len(FILTER_ORDER)])

    def set_filter(self, name: str) -> None:
        self.status_filter = name
        self.query_one("#filter-label", Label).update(f"filter: {name}")
        self.reload(force=True)

    def action_search(self) -> None:
        self.query_one("#search", Input).focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "search":
            self.search_text = event.value
            self.reload(force=True)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "search":
            self.query_one("#runs", DataTable).focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "runs":
            self.action_open()

    def action_open(self) -> None:
        run = self._target()
        if run is not None and not isinstance(self.screen, DetailScreen):
            self.push_screen(DetailScreen(run))

    # ------------------------------------------------------------------ actions

    def _do(self, fn: Any, *args: Any) -> None:
        try:
            self.say(str(fn(*args)))
        except PodiumError as exc:
            self.say(f"refused: {exc}")
        self.reload(force=True)

    def answer_run(self, run_id: str) -> None:
        try:
            gates = detail(self.store, run_id, last_events=0).gates
        except PodiumError as exc:
            self.say(str(exc))
            return
        if not gates:
            self.say(f"run {run_id} waits at no gate")
            return
        gate = gates[-1]
        self.push_screen(AnswerScreen(gate, lambda value, text: self.ops.answer(
            run_id, gate.id, value, text)), self._done)

    def _done(self, message: str | None) -> None:
        """A dialog's action was taken (its message), or it was cancelled (None)."""
        if message is not None:
            self.say(message)
            self.reload(force=True)

    def stop_run(self, run_id: str) -> None:
        self._do(self.ops.stop, run_id)

    def resume_run(self, run_id: str) -> None:
        self._do(self.ops.resume, run_id)

    def action_answer(self) -> None:
        run = self._target()
        if run is not None:
            self.answer_run(run)

    def action_stop(self) -> None:
        run = self._target()
        if run is not None:
            self.stop_run(run)

    def action_resume(self) -> None:
        run = self._target()
        if run is not None:
            self.resume_run(run)

    def action_new_run(self) -> None:
        self.push_screen(NewRunScreen(self.ops.start), self._done)
