"""The GateAnswerer port and the answerers that need no person: scripted and --skip-gates."""

from __future__ import annotations

from dataclasses import field
from typing import Literal, Protocol

from podium.errors import RunError
from podium.language.model import GateOption
from podium.records import record


@record(frozen=True)
class GateRequest:
    """A decision a person must take: a human gate, granting more iterations, or a turn in an
    agent's dialog (its `prompt` is the agent's message)."""

    run_id: str
    step: str
    iteration: int
    prompt: str
    options: tuple[GateOption, ...]
    kind: Literal["human_gate", "iteration_limit", "dialog"] = "human_gate"
    current: int = 0
    maximum: int = 0
    recent_steps: tuple[str, ...] = ()


@record(frozen=True)
class GateAnswer:
    value: str
    additional_input: dict[str, str] = field(default_factory=dict)
    answered_by: str = "terminal"


class GateUnanswerable(RunError):
    """Nobody can answer this decision here: the run parks (with a store) or fails."""

    def __init__(self, message: str, request: GateRequest) -> None:
        super().__init__(message, step=request.step, iteration=request.iteration or None)
        self.request = request


class GateAnswerer(Protocol):
    def answer(self, request: GateRequest) -> GateAnswer | None:
        """The answer, or None when this answerer cannot answer (the next one is asked)."""
        ...


class ChainAnswerer:
    """Asks each answerer in turn; the first that answers wins."""

    def __init__(self, answerers: list[GateAnswerer]) -> None:
        self.answerers = answerers

    def answer(self, request: GateRequest) -> GateAnswer | None:
        for a in self.answerers:
            got = a.answer(request)
            if got is not None:
                return got
        return None


class SkipGatesAnswerer:
    """--skip-gates: a human gate takes its first option; the iteration limit is not raised."""

    def answer(self, request: GateRequest) -> GateAnswer | None:
        if request.kind == "iteration_limit":
            return GateAnswer("0", answered_by="skip-gates")
        if request.kind == "dialog":  # the agent step skips the conversation before asking
            return GateAnswer("best", answered_by="skip-gates")
        return GateAnswer(request.options[0].value, answered_by="skip-gates")


class ScriptedAnswerer:
    """Answers from a responses file: for each gate, one value per visit, in order."""

    def __init__(self, answers: dict[str, list[GateAnswer]]) -> None:
        self.answers = {k: list(v) for k, v in answers.items()}
        self.used: dict[str, int] = {}

    def answer(self, request: GateRequest) -> GateAnswer | None:
        key = "$iteration_limit" if request.kind == "iteration_limit" else request.step
        queue = self.answers.get(key)
        if not queue:
            return None
        self.used[key] = self.used.get(key, 0) + 1
        return queue.pop(0)
