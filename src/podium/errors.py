"""The exception tree of podium: every error a user can meet is one of these.

    PodiumError                      base; carries a one-line, actionable message
    ├── WorkflowInvalid              the workflow file cannot be used (exit 2); holds Diagnostics
    ├── WorkflowFileError            the file is missing or unreadable (exit 3)
    ├── UsageError                   bad command-line input (exit 2)
    └── RunError                     a run stopped at run time (exit 3); names run, step, iteration
        ├── TemplateError            a template failed to render
        ├── RouteError               no route matched, or a condition failed
        ├── StepError                a step failed (script, set, agent, ...)
        │   ├── OutputContractError  a step's output broke its declared schema
        │   └── InternalError        podium itself failed inside a step (a bug, not the workflow's)
        ├── LimitExceeded            max_iterations, timeout or budget exhausted (exit 4)
        └── Interrupted              Ctrl+C or SIGTERM (exit 130)

Nothing else should escape the CLI: it maps each class to a documented exit code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from podium.language.diagnostics import Diagnostic


class PodiumError(Exception):
    """Base class: `str(error)` is a message a person can act on."""

    exit_code = 3


class WorkflowFileError(PodiumError):
    """The workflow file (or an included file) is missing or cannot be read."""

    exit_code = 3


class WorkflowInvalid(PodiumError):
    """The workflow has errors; `diagnostics` lists every one, sorted by position."""

    exit_code = 2

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = diagnostics
        first = diagnostics[0].format() if diagnostics else "invalid workflow"
        super().__init__(first)


class UsageError(PodiumError):
    """The command line itself is wrong."""

    exit_code = 2


class RunError(PodiumError):
    """A run stopped with an error; `step` and `iteration` say where."""

    exit_code = 3

    def __init__(self, message: str, *, step: str | None = None, iteration: int | None = None,
                 details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.step = step
        self.iteration = iteration
        self.details: dict[str, Any] = details or {}
        self.run_id: str | None = None

    @property
    def error_type(self) -> str:
        return type(self).__name__

    @property
    def conductor_type(self) -> str:
        """The exception class Conductor raises for this failure: a group's error record
        carries it as `exception_type`, so routes that branch on it work unchanged. A
        failure may name it in its details (a sub-workflow passes on its child's)."""
        named = self.details.get("conductor_type")
        if isinstance(named, str):
            return named
        return CONDUCTOR_TYPES.get(self.error_type, "ExecutionError")

    def located(self) -> str:
        """The message prefixed with run, step and iteration when they are known."""
        where = []
        if self.run_id:
            where.append(f"run {self.run_id}")
        if self.step:
            where.append(f"step '{self.step}'" + (f" (iteration {self.iteration})" if self.iteration else ""))
        prefix = ", ".join(where)
        return f"{prefix}: {self}" if prefix else str(self)


class TemplateError(RunError):
    """A template could not be rendered (undefined name, bad value, sandbox violation)."""


class RouteError(RunError):
    """No route matched, or a route condition could not be evaluated."""


class StepError(RunError):
    """A step failed to execute."""


class OutputContractError(StepError):
    """A step's output does not satisfy its declared `output:` schema."""


class InternalError(StepError):
    """podium itself failed inside a step: an exception none of its checks expected (a bug
    in podium or in a library it calls, not in the workflow). See `internal_error`."""


def internal_error(exc: BaseException, *, step: str | None,
                   iteration: int | None = None) -> InternalError:
    """The step error for an unexpected exception: its class, the first 200 characters of
    its message and the innermost place it was raised, instead of a traceback. The run ends
    as an error (exit 3) with everything before it kept, and can be resumed."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = ""
    if tb is not None:
        code = tb.tb_frame.f_code
        path = code.co_filename.replace("\\", "/")
        short = path[path.rfind("/podium/") + 1:] if "/podium/" in path else path
        where = f" at {short}:{tb.tb_lineno} in {code.co_name}"
    text = str(exc)
    text = text if len(text) <= 200 else text[:200] + "..."
    name = type(exc).__name__
    return InternalError(f"podium failed inside this step: {name}: {text}{where}. This is a "
                         "bug in podium, not in the workflow; the run can be resumed once "
                         "it is fixed", step=step, iteration=iteration,
                         details={"exception": name})


class LimitExceeded(RunError):
    """A run limit (iterations, time, budget) was exhausted: an operational failure."""

    exit_code = 4

    def __init__(self, message: str, *, limit: str, step: str | None = None,
                 iteration: int | None = None, details: dict[str, Any] | None = None) -> None:
        super().__init__(message, step=step, iteration=iteration, details=details)
        self.limit = limit

    @property
    def conductor_type(self) -> str:
        return {"timeout": "TimeoutError", "iterations": "MaxIterationsError",
                "budget": "BudgetExceededError"}.get(self.limit, "ExecutionError")


# podium's failure classes (by name, as events record them) -> Conductor's exception classes
CONDUCTOR_TYPES = {"TemplateError": "TemplateError", "OutputContractError": "ValidationError",
                   "ProviderError": "ProviderError", "RouteError": "ValueError",
                   "Interrupted": "InterruptError"}


class Interrupted(RunError):
    """The run was interrupted by the user or a signal; it is resumable."""

    exit_code = 130
