"""Answering gates at an interactive terminal (stderr for the prompt, stdin for the answer).

Prompt text may come from a model: it is printed as plain text, never read as markup.
"""

from __future__ import annotations

import sys
from typing import TextIO

from podium.gates.base import GateAnswer, GateRequest


class TerminalAnswerer:
    def __init__(self, stdin: TextIO | None = None, stderr: TextIO | None = None) -> None:
        self.stdin = stdin or sys.stdin
        self.stderr = stderr or sys.stderr

    def _ask(self, text: str) -> str | None:
        self.stderr.write(text)
        self.stderr.flush()
        line = self.stdin.readline()
        if not line:
            return None
        return line.rstrip("\n")

    def answer(self, request: GateRequest) -> GateAnswer | None:
        if request.kind == "iteration_limit":
            return self._limit(request)
        if request.kind == "dialog":
            return self._dialog(request)
        w = self.stderr.write
        w("\n" + "─" * 60 + "\n")
        w(f"Decision needed at '{request.step}':\n\n")
        w(request.prompt.rstrip() + "\n\n")
        for i, o in enumerate(request.options, 1):
            w(f"  {i}. {o.label}  [{o.value}]\n")
        while True:
            raw = self._ask(f"Choose 1-{len(request.options)}: ")
            if raw is None:
                return None
            choice = raw.strip()
            option = None
            if choice.isdigit() and 1 <= int(choice) <= len(request.options):
                option = request.options[int(choice) - 1]
            else:
                option = next((o for o in request.options if o.value == choice), None)
            if option is not None:
                break
            w(f"'{choice}' is not one of the options.\n")
        extra: dict[str, str] = {}
        if option.prompt_for:
            text = self._read_text(option.prompt_for, option.multiline)
            extra[option.prompt_for] = text
        return GateAnswer(option.value, extra, "terminal")

    def _read_text(self, name: str, multiline: bool) -> str:
        if not multiline:
            return (self._ask(f"{name}: ") or "").strip()
        self.stderr.write(f"{name} (end with a line holding only '.'):\n")
        lines = []
        while True:
            line = self.stdin.readline()
            if not line or line.rstrip("\n") == ".":
                break
            lines.append(line.rstrip("\n"))
        return "\n".join(lines)

    def _dialog(self, request: GateRequest) -> GateAnswer | None:
        """One turn of an agent's dialog: the agent's message, then a line of the person's
        (the agent step reads it: text to discuss, 'done', or 'best' at the opening)."""
        w = self.stderr.write
        opening = any(o.value == "best" for o in request.options)
        if opening:
            w("\n" + "─" * 60 + "\n")
            w(f"'{request.step}' would like to discuss its output:\n\n")
        w(request.prompt.rstrip() + "\n\n")
        if opening:
            w("Answer to discuss it (the agent replies; 'done' ends the conversation), or "
              "press Enter to let the agent do its best with what it has.\n")
        raw = self._ask("you> ")
        return None if raw is None else GateAnswer(raw.strip(), {}, "terminal")

    def _limit(self, request: GateRequest) -> GateAnswer | None:
        w = self.stderr.write
        w("\n" + "─" * 60 + "\n")
        w(f"The run reached max_iterations ({request.maximum}) before '{request.step}'.\n")
        if request.recent_steps:
            w(f"Last steps: {' → '.join(request.recent_steps)}\n")
        raw = self._ask("How many more iterations? [0 stops the run]: ")
        if raw is None:
            return None
        raw = raw.strip() or "0"
        return GateAnswer(str(int(raw)) if raw.isdigit() else "0", answered_by="terminal")
