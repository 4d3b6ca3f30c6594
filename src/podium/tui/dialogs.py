"""The fleet TUI's dialogs: answering a gate and starting a run; each stays open with the
refusal shown when what it was given is refused."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from podium.errors import PodiumError
from podium.store.base import GateRecord

# What a dialog does with what it was given: a message for the status line, or PodiumError
Submit = Callable[..., str]


def short(value: Any, width: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


class _Dialog(ModalScreen[str | None]):
    """A dialog that hands what it was given to `submit`: dismissed with its message, or kept
    open with the refusal in its error line."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, submit: Submit) -> None:
        super().__init__()
        self.submit = submit

    def error_line(self) -> Static:
        return Static("", id="dialog-error", classes="dialog-error")

    def attempt(self, *given: str) -> None:
        try:
            message = self.submit(*given)
        except PodiumError as exc:
            shown = self.query_one("#dialog-error", Static)
            shown.update(f"refused: {exc}")
            shown.display = True
            return
        self.dismiss(message)

    def on_mount(self) -> None:
        self.query_one("#dialog-error", Static).display = False

    def action_cancel(self) -> None:
        self.dismiss(None)


class AnswerScreen(_Dialog):
    """The open gate of a run: its prompt and its options as a list (arrows, Enter) or typed;
    `submit(value, text)` answers it."""

    def __init__(self, gate: GateRecord, submit: Submit) -> None:
        super().__init__(submit)
        self.gate = gate

    def compose(self) -> ComposeResult:
        g = self.gate
        hint = {"iteration_limit": "how many more iterations (0 stops the run)",
                "dialog": "an option, or what to say to the agent"}.get(
            g.kind, "or type an option's value, label or number")
        with Vertical(id="answer-box"):
            yield Label(f"Gate '{g.step}' of run {g.run_id}")
            yield Static(short(g.prompt, 2000), id="gate-prompt")
            if g.options:
                yield OptionList(*(Option(f"{i}. {o.get('value')}  {o.get('label', '')}"
                                          + ("  (asks for text)" if o.get("prompt_for") else ""),
                                          id=str(i - 1))
                                   for i, o in enumerate(g.options, 1)), id="gate-options")
            yield Input(placeholder=hint, id="answer-value")
            yield Input(placeholder="text (for an option that asks for it)", id="answer-text")
            yield self.error_line()
            with Horizontal():
                yield Button("Answer", variant="primary", id="answer-ok")
                yield Button("Cancel", id="answer-cancel")

    def on_mount(self) -> None:
        super().on_mount()
        if self.gate.options:
            self.query_one("#gate-options", OptionList).focus()
        else:
            self.query_one("#answer-value", Input).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        option = self.gate.options[int(event.option_id or 0)]
        self.query_one("#answer-value", Input).value = str(option.get("value", ""))
        text = self.query_one("#answer-text", Input)
        if option.get("prompt_for") and not text.value.strip():
            text.focus()  # this option asks for text: Enter there answers
            return
        self._submit()

    def _submit(self) -> None:
        value = self.query_one("#answer-value", Input).value.strip()
        if not value:
            self.notify("give an answer", severity="warning")
            return
        self.attempt(value, self.query_one("#answer-text", Input).value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "answer-ok":
            self._submit()
        else:
            self.dismiss(None)


class NewRunScreen(_Dialog):
    """A new run: workflow file, inputs (NAME=VALUE ...), working directory;
    `submit(file, inputs, cwd)` checks and starts it."""

    def compose(self) -> ComposeResult:
        with Vertical(id="new-box"):
            yield Label("New run")
            yield Input(placeholder="workflow file (relative to the working directory)",
                        id="new-file")
            yield Input(placeholder="inputs: NAME=VALUE NAME2='two words'", id="new-inputs")
            yield Input(value=str(Path.cwd()), placeholder="working directory", id="new-cwd")
            yield self.error_line()
            with Horizontal():
                yield Button("Start", variant="primary", id="new-ok")
                yield Button("Cancel", id="new-cancel")

    def _submit(self) -> None:
        file = self.query_one("#new-file", Input).value.strip()
        if not file:
            self.notify("give the workflow file", severity="warning")
            return
        self.attempt(file, self.query_one("#new-inputs", Input).value,
                     self.query_one("#new-cwd", Input).value.strip())

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "new-ok":
            self._submit()
        else:
            self.dismiss(None)
