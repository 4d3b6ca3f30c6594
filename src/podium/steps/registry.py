"""Which executor runs which step type: adding a step type is one module and one line here.

Each executor's module is imported the first time the run asks for a step of its type, not
when a run starts: a workflow of set steps loads neither the agent step (its providers,
retries and pricing) nor the MCP, script, gate, questions or wait steps (issue 33's cold
`run`). Looked up, an executor is the module's own function (engine/groups.py compares it
with execute_agent)."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from podium.steps.base import StepCall, StepOutcome

Executor = Callable[["StepCall"], "StepOutcome"]

# step type -> (module, executor function)
_WHERE: dict[str, tuple[str, str]] = {
    "agent": ("podium.steps.agent", "execute_agent"),
    "script": ("podium.steps.script", "execute_script"),
    "set": ("podium.steps.set_step", "execute_set"),
    "terminate": ("podium.steps.terminate", "execute_terminate"),
    "human_gate": ("podium.steps.gate", "execute_gate"),
    "questions": ("podium.steps.questions", "execute_questions"),
    "wait": ("podium.steps.wait", "execute_wait"),
    "mcp": ("podium.steps.mcp_step", "execute_mcp"),
}


class _Deferred:
    """An executor not imported yet: its module and name (callable, for whoever holds it
    without looking it up)."""

    __slots__ = ("module", "name")

    def __init__(self, module: str, name: str) -> None:
        self.module = module
        self.name = name

    def load(self) -> Executor:
        found: Executor = getattr(import_module(self.module), self.name)
        return found

    def __call__(self, call: StepCall) -> StepOutcome:
        return self.load()(call)

    def __repr__(self) -> str:
        return f"<executor {self.module}.{self.name}, not imported yet>"


class Executors(dict[str, Executor]):
    """Executors by step type; each registered one is imported when it is first looked up
    (`executors[kind]`, `executors.get(kind)`), and kept."""

    def __getitem__(self, kind: str) -> Executor:
        found = super().__getitem__(kind)
        if isinstance(found, _Deferred):
            found = found.load()
            self[kind] = found
        return found

    def get(self, kind: str, default: Any = None) -> Any:
        try:
            return self[kind]
        except KeyError:
            return default


def executors() -> Executors:
    """A new table of every registered executor (the engine's, which it may change)."""
    return Executors({kind: _Deferred(module, name) for kind, (module, name) in _WHERE.items()})


EXECUTORS: dict[str, Executor] = executors()
