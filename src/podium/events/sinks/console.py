"""The console sink: a line per fact on stderr. Model and script text is printed as plain text,
never interpreted as markup (rich's markup is off, and every value goes in as `Text`)."""

from __future__ import annotations

import json
import os
import sys
from typing import Any, TextIO

from podium.events.model import (
    ActivityRetried,
    BudgetExceeded,
    DialogFinished,
    DialogMessage,
    Event,
    GateAnswered,
    LimitReached,
    LimitResolved,
    ModelDelta,
    ModelExchange,
    ParseRecovery,
    PromptRendered,
    ProviderRetry,
    RouteTaken,
    RunFinished,
    RunStarted,
    ScriptOutput,
    StepFailed,
    StepFinished,
    StepStarted,
    ToolCalled,
    ValidatorFinished,
    Warning_,
)


def _short(value: Any, limit: int = 120) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


_RAW = ("exit_code", "stdout", "stderr")


def parsed_first(step_type: str, output: Any) -> Any:
    """A script step's output with what was parsed from its stdout first, then its exit code,
    stdout and stderr: shortened for a terminal, the raw text would hide the parsed fields."""
    if step_type != "script" or not isinstance(output, dict):
        return output
    ordered = {k: v for k, v in output.items() if k not in _RAW}
    ordered.update({k: output[k] for k in _RAW if k in output})
    return ordered


# events that print nothing at -q (verbosity 0), whatever they hold: most of a run's events,
# let go before the type checks below
_QUIET = frozenset({"step_started", "step_finished", "checkpoint", "prompt_rendered",
                    "model_exchange"})


def _rich_console() -> Any:
    """rich's Console class, imported without attrs when nothing loaded attrs yet.

    rich.console imports rich.pretty, which imports attrs (when installed) only to pretty-print
    attrs classes, which podium never prints: a tenth of rich's import, in every run. attrs
    reads as absent while rich.pretty loads and is importable as usual afterwards."""
    if "attr" in sys.modules or "rich.pretty" in sys.modules:
        from rich.console import Console

        return Console
    sys.modules["attr"] = None  # type: ignore[assignment]  # import attr: ImportError
    try:
        from rich.console import Console
    finally:
        if sys.modules.get("attr") is None and "attr" in sys.modules:
            del sys.modules["attr"]
    return Console

# the control characters rich strips from printed text (bell, backspace, vertical tab, form
# feed, carriage return: rich.control.STRIP_CONTROL_CODES, checked by a test)
_STRIP_CONTROL = dict.fromkeys((7, 8, 11, 12, 13))


def plain_without_rich(stream: TextIO, color: bool | None) -> bool | None:
    """Whether rich would give `stream` no colour system (podium then writes plain lines),
    decided as rich.console.Console decides it, without importing rich: True or False where
    the answer is certain, None where only rich can tell (a terminal, which may be dumb;
    IPython or IDLE loaded; FORCE_COLOR or TTY_COMPATIBLE set)."""
    if color is True:
        return None  # force_terminal: rich reads the terminal's colours (none when dumb)
    if "IPython" in sys.modules or "idlelib" in sys.modules:
        return None  # rich's Jupyter and IDLE rules
    if color is False:
        return True  # force_terminal=False: not a terminal, no colour system
    if os.environ.get("TTY_COMPATIBLE", "") in ("0", "1") or "FORCE_COLOR" in os.environ:
        return None
    isatty = getattr(stream, "isatty", None)
    try:
        return None if isatty is not None and isatty() else True
    except ValueError:  # a closed stream: rich says no terminal
        return True


class ConsoleSink:
    """Verbosity: 0 quiet (lifecycle and routes), 1 normal, 2 verbose (prompts, script output)."""

    def __init__(self, stream: TextIO, verbosity: int = 1, color: bool | None = None,
                 after_start: list[str] | None = None) -> None:
        self._file = stream
        self._color = color
        self._console: Any = None
        # no colour (a file, a pipe, NO_COLOR): a line is its text as rich would lay it out,
        # written without rich's rendering (segments, styles, buffer), which cost a `set`
        # step a fifth of its time at -q (docs/performance.md); checked against rich by
        # tests/test_console_plain.py. Where that is plain without asking rich, rich is not
        # imported at all (~35 ms of a short `podium run -q` here).
        plain = plain_without_rich(stream, color)
        if plain is None:
            plain = self.console.color_system is None and not self.console.is_jupyter
        self._plain = plain
        self.verbosity = verbosity
        self._nested = False
        self.after_start = list(after_start or [])  # lines printed after the run's first line
        self._streaming: tuple[str, str, str | None] | None = None  # (step, kind, tool) open
        self._scripts: dict[str, ScriptOutput] = {}  # a script's return, until its step ends

    @property
    def console(self) -> Any:
        """rich's Console on the stream, built the first time a line needs rich."""
        if self._console is None:
            Console = _rich_console()
            color = self._color
            self._console = Console(file=self._file, markup=False, highlight=False,
                                    emoji=False, force_terminal=color,
                                    no_color=color is False, soft_wrap=True)
        return self._console

    def _stream(self, event: ModelDelta) -> None:
        """Streamed model text as it arrives (verbose): a line opens per step and kind, the
        pieces follow on it, and the next other line ends it."""
        from rich.text import Text

        key = (event.step, event.kind, event.tool)
        if self._streaming != key:
            self._end_stream()
            label = {"text": "", "reasoning": "thinking ",
                     "tool_call": f"tool {event.tool or ''} "}[event.kind]
            self.console.print(Text(f"    ⋯ {event.step}: {label}", style="dim"), end="")
            self._streaming = key
        self.console.print(Text(event.text, style="dim" if event.kind != "text" else ""),
                           end="")

    def _end_stream(self) -> None:
        if self._streaming is not None:
            self._streaming = None
            self.console.print()

    def _line(self, *parts: tuple[str, str | None]) -> None:
        if self._nested:
            parts = (("  │ ", "dim"), *parts)
        if self._plain:
            plain = "".join(content for content, _ in parts).translate(_STRIP_CONTROL)
            # as rich lays it out (soft wrap): tabs expand, and whitespace past the width is
            # trimmed at a line's end; a line with neither is its text
            if "\t" not in plain and not any(line[-1:].isspace() for line in plain.split("\n")):
                self._file.write(plain + "\n")
                self._file.flush()
                return
        from rich.text import Text

        text = Text()
        for content, style in parts:
            text.append(content, style=style)
        if not self._plain:
            self.console.print(text)
            return
        console = self.console
        lines = text.wrap(console, console.width, justify="default", overflow="ignore",
                          no_wrap=True, tab_size=console.tab_size or 8)
        console.file.write("\n".join(line.plain for line in lines) + "\n")
        console.file.flush()

    def handle(self, event: Event) -> None:
        v = self.verbosity
        if v == 0 and event.type in _QUIET:
            return
        self._nested = event.parent_run_id is not None
        if isinstance(event, ModelDelta):
            if v >= 2:
                self._stream(event)
            return
        self._end_stream()
        if self._nested and isinstance(event, RunStarted):
            what = "resumed" if event.resumed else "started"
            self._line(("sub-workflow run ", None), (event.run_id, "cyan"),
                       (f" {what} · workflow {event.workflow}", None))
            return
        if isinstance(event, RunStarted):
            what = "resumed" if event.resumed else "started"
            self._line(("podium: run ", None), (event.run_id, "bold cyan"),
                       (f" {what} · workflow {event.workflow}", None))
            for line in self.after_start:
                self._line((line, "yellow"))
            self.after_start = []
        elif isinstance(event, (StepStarted, StepFinished)) and event.group is not None:
            self._scripts.pop(event.step, None)
            if v >= 2 and isinstance(event, StepFinished):
                self._line(("    · ", "dim"), (event.step, None),
                           (f" ✓ {event.elapsed:.2f}s", "dim"))
        elif isinstance(event, StepFailed) and event.group is not None:
            self._line(("    ✗ ", "red"), (f"{event.step}: {event.message}", "red"))
        elif isinstance(event, StepStarted) and v >= 1:
            self._line((f"[{event.run_iteration}] ", "dim"), (event.step, "bold"),
                       (f" ({event.step_type}", "dim"),
                       ((f", iteration {event.iteration}" if event.iteration > 1 else ""), "dim"),
                       (")", "dim"))
        elif isinstance(event, StepFinished) and v >= 1 and self._nonzero(event):
            self._script_failed(event, self._scripts.pop(event.step))
        elif isinstance(event, StepFinished) and v >= 1:
            self._scripts.pop(event.step, None)
            extra = ""
            if event.input_tokens or event.output_tokens:
                cost = "unpriced" if event.cost_usd is None else f"${event.cost_usd:.4f}"
                extra = (f" · {event.model} · {event.input_tokens} in / {event.output_tokens} "
                         f"out · {cost}")
            self._line(("    ✓ ", "green"), (f"{event.elapsed:.2f}s{extra}", "dim"))
            if v >= 2:
                self._line(("    output: ", "dim"),
                           (_short(parsed_first(event.step_type, event.output), 400), None))
        elif isinstance(event, StepFailed):
            self._line(("    ✗ ", "red"), (f"{event.step}: {event.message}", "red"))
            done = self._scripts.pop(event.step, None)
            if done is not None and v == 1:
                self._stderr_tail(done)
        elif isinstance(event, RouteTaken):
            cond = f" (when {event.condition})" if event.condition else ""
            if event.kind == "option":
                cond = " (option chosen)"
            self._line(("    → ", "cyan"), (event.to_step, "cyan"), (cond, "dim"))
        elif isinstance(event, GateAnswered):
            self._line(("    gate ", "magenta"), (f"{event.step}: ", None),
                       (event.selected, "bold"), (f" (by {event.answered_by})", "dim"))
        elif isinstance(event, ParseRecovery) and v >= 1:
            self._line(("    ↻ ", "yellow"),
                       (f"answer rejected ({event.reason}), asking for a correction "
                        f"{event.attempt}/{event.max_attempts}: {_short(event.error)}", "yellow"))
        elif isinstance(event, ProviderRetry) and v >= 1:
            status = f" (HTTP {event.status})" if event.status else ""
            self._line(("    ↻ ", "yellow"),
                       (f"{event.step}: provider call failed{status}, retry {event.attempt}/"
                        f"{event.max_attempts} in {event.delay:.1f}s: {_short(event.error)}",
                        "yellow"))
        elif isinstance(event, ActivityRetried) and v >= 1:
            what = "reused what it had committed" if event.reused else "runs again"
            self._line(("    ↻ ", "yellow"),
                       (f"{event.step}: {what} (attempt {event.attempt}): {event.reason}",
                        "yellow"))
        elif isinstance(event, ToolCalled) and v >= 2:
            mark = "✗" if event.is_error else "⚙"
            self._line((f"    {mark} ", "dim"), (event.tool, None),
                       (f" {_short(event.arguments, 160)}", "dim"))
        elif isinstance(event, ScriptOutput) and v == 1:
            self._scripts[event.step] = event
        elif isinstance(event, ScriptOutput) and v >= 2:
            self._line(("    $ ", "dim"), (" ".join(event.argv), "dim"),
                       (f" → exit {event.exit_code}", "dim"))
            for label, text in (("stdout", event.stdout), ("stderr", event.stderr)):
                if text.strip():
                    self._line((f"    {label}: ", "dim"), (_short(text, 400), None))
        elif isinstance(event, ModelExchange) and v >= 2 and event.context_tokens is not None:
            window = event.context_window
            share = f" of {window:,} ({event.context_tokens / window:.0%})" if window else ""
            self._line(("    context: ", "dim"),
                       (f"{event.context_tokens:,} tokens{share}", "dim"))
        elif isinstance(event, PromptRendered) and v >= 2:
            self._line(("    prompt: ", "dim"), (_short(event.prompt, 400), None))
        elif isinstance(event, LimitReached):
            self._line(("    ! ", "yellow"), (f"limit reached: {event.limit} "
                                             f"({event.current:g} of {event.maximum:g})",
                                             "yellow"))
        elif isinstance(event, LimitResolved) and event.granted:
            self._line(("    + ", "yellow"), (f"granted {event.granted} more iterations "
                                             f"(now {event.new_maximum})", "yellow"))
        elif isinstance(event, BudgetExceeded):
            self._line(("    $ ", "yellow"), (f"budget exceeded: ${event.spent_usd:.4f} of "
                                             f"${event.budget_usd:.2f} ({event.budget_mode})",
                                             "yellow"))
        elif isinstance(event, ValidatorFinished) and v >= 1 and not event.errored:
            verdict = "passed" if event.passed else f"failed: {_short('; '.join(event.issues))}"
            self._line(("    ✓ " if event.passed else "    ✗ ",
                        "green" if event.passed else "yellow"), (f"validator {verdict}", "dim"))
        elif isinstance(event, DialogMessage) and v >= 2:
            self._line((f"    {event.role}: ", "magenta"), (_short(event.content, 400), None))
        elif isinstance(event, DialogFinished) and v >= 1:
            self._line(("    dialog ", "magenta"), (event.outcome, "bold"),
                       (f" ({event.turns} turn(s))" if event.turns else "", "dim"))
        elif isinstance(event, Warning_):
            self._line(("    warning: ", "yellow"), (event.message, None))
        elif isinstance(event, RunFinished):
            self._finished(event)

    def _nonzero(self, event: StepFinished) -> bool:
        done = self._scripts.get(event.step)
        return done is not None and done.exit_code != 0

    def _script_failed(self, event: StepFinished, done: ScriptOutput) -> None:
        """A script that exited non-zero: its exit code (data its routes read, as in Conductor,
        so the run goes on) and the end of its stderr, in place of a green mark."""
        self._line(("    ✗ ", "yellow"), (f"exit {done.exit_code}", "yellow"),
                   (f" · {event.elapsed:.2f}s", "dim"))
        self._stderr_tail(done)

    def _stderr_tail(self, done: ScriptOutput, lines: int = 5) -> None:
        tail = [line for line in done.stderr.rstrip().splitlines() if line.strip()][-lines:]
        for line in tail:
            self._line(("    stderr: ", "dim"), (_short(line, 200), None))

    def _finished(self, event: RunFinished) -> None:
        style = {"success": "bold green", "failed": "bold red", "waiting": "bold yellow"}.get(
            event.status, "bold red")
        if event.status in ("success", "failed"):
            where = f" at '{event.terminal}'" if event.terminal and event.terminal != "$end" \
                else ""
            why = f": {event.reason}" if event.reason else ""
            self._line((f"run {event.status}", style), (f"{where}{why}", None))
        elif event.status == "waiting":
            self._line(("run waiting", style), (f": {event.message}", None))
        elif event.parent_run_id is not None:  # a sub-workflow: its parent says the rest
            self._line((f"sub-workflow run {event.status}", style),
                       (f" ({event.error_type}): {event.message}", None))
        elif event.status == "interrupted":  # one line; the summary adds how to resume
            where = f" at '{event.step}'" if event.step else ""
            steps = f"{event.iterations} step{'s' if event.iterations != 1 else ''}"
            self._line((f"run {event.run_id} interrupted", style),
                       (f"{where} after {event.elapsed:.2f}s · {steps}", None))
        else:  # the summary that follows names the error once, with the command to go on
            where = f" at '{event.step}'" if event.step else ""
            self._line((f"run {event.status}", style), (where, None))

    def close(self) -> None:
        pass
