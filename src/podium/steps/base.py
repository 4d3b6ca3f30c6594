"""What a step executor receives and returns, and the services the engine lends it."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from dataclasses import field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from podium.errors import LimitExceeded, TemplateError
from podium.language.model import StepBase, WorkflowFile
from podium.records import record
from podium.steps.budget import BudgetLedger
from podium.steps.state import ContextBuilder, RunState
from podium.templating import Deadline, RenderFailure, TemplateEngine

# Steps whose templates always see every workflow input, even in explicit mode (spec 5.2).
LOCAL_RENDER_TYPES = frozenset({"script", "set", "wait", "workflow", "mcp"})

if TYPE_CHECKING:
    from podium.clock import Clock
    from podium.events.bus import EventBus
    from podium.gates.base import GateAnswerer
    from podium.providers.base import ProviderRegistry


@record(frozen=True)
class Usage:
    """Tokens a step spent and what they cost (None = unpriced)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = None
    model: str | None = None
    priced: bool = True

    def __add__(self, other: Usage) -> Usage:
        return self.plus(other, model=other.model or self.model)

    def plus(self, other: Usage, *, model: str | None) -> Usage:
        """`self + other` naming `model` (one Usage made, not two with `replace`)."""
        cost = None if self.cost_usd is None and other.cost_usd is None else \
            (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        return Usage(self.input_tokens + other.input_tokens,
                     self.output_tokens + other.output_tokens,
                     self.cached_tokens + other.cached_tokens, cost, model,
                     self.priced and other.priced)


@record(frozen=True)
class Termination:
    status: str  # success | failed
    reason: str
    output: dict[str, Any] | None  # output_template result, when declared


@record
class StepOutcome:
    """The result of one execution: the output to store and, for gates and terminate steps,
    where to go instead of evaluating routes."""

    output: Any
    next_step: str | None = None
    route_kind: str | None = None
    route_index: int = -1
    termination: Termination | None = None
    usage: Usage | None = None
    details: dict[str, Any] = field(default_factory=dict)
    # How many executions this node counts for (a parallel group: one per member).
    iterations: int = 1
    # Usage of nested work (group members, a sub-workflow's agents), by row name.
    usage_rows: dict[str, Usage] = field(default_factory=dict)


@record
class RunOptions:
    skip_gates: bool = False
    interactive: bool = False
    provider_override: str | None = None
    record: bool = True
    # workspace instructions given on the command line (--workspace-instructions, found from
    # the working directory; --instructions FILE): before and after the workflow's own
    # `instructions`, as Conductor orders them (spec 2.9)
    workspace_instructions: str | None = None
    cli_instructions: str | None = None


# what the member of a group running in this context (a task of the group's event loop, or a
# thread) is: (the MemberLocal it belongs to, its item variables, its group)
_MEMBER: contextvars.ContextVar[tuple[MemberLocal, dict[str, Any] | None, str | None] | None] = \
    contextvars.ContextVar("podium_member", default=None)


class MemberLocal:
    """Per-member context of one run's services: the for-each item variables (`extra`) and
    the group (`group`) of the member running in the current context. It lives in a
    contextvar, so each asyncio task of a group (and each thread) sees its own member; the
    owner check keeps a sub-workflow's services from seeing its parent's member."""

    def _get(self) -> tuple[dict[str, Any] | None, str | None]:
        found = _MEMBER.get()
        if found is None or found[0] is not self:
            return None, None
        return found[1], found[2]

    @property
    def extra(self) -> dict[str, Any] | None:
        return self._get()[0]

    @extra.setter
    def extra(self, value: dict[str, Any] | None) -> None:
        _MEMBER.set((self, value, self._get()[1]))

    @property
    def group(self) -> str | None:
        return self._get()[1]

    @group.setter
    def group(self, value: str | None) -> None:
        _MEMBER.set((self, self._get()[0], value))


@record
class RunServices:
    """The engine's services for executors: templates, contexts, events, time, providers."""

    workflow: WorkflowFile
    path: Path
    templates: TemplateEngine
    contexts: ContextBuilder
    state: RunState
    bus: EventBus
    clock: Clock
    providers: ProviderRegistry
    answerer: GateAnswerer
    options: RunOptions
    run_id: str
    deadline: float | None = None  # monotonic time when the run's timeout expires
    cancel: threading.Event = field(default_factory=threading.Event)
    local: MemberLocal = field(default_factory=MemberLocal)
    # the dialog a parked run waited in, by (step, iteration), from its dialog_started event:
    # the resumed execution goes on from there instead of asking the model again
    carried_dialogs: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    # what the run spent and what its calls in flight reserved (steps/budget.py); every
    # model call reserves its worst case here first
    budget: BudgetLedger = field(default_factory=BudgetLedger)
    # mid-run guidance (spec 5.4): the texts every later agent prompt lists, and where new
    # ones come from (the run store, `podium guide`; the recording, in a replay), asked
    # before each agent prompt with the step and its execution
    guidance: list[str] = field(default_factory=list)
    guidance_source: Callable[[str, int], list[str]] | None = None
    guidance_lock: threading.Lock = field(default_factory=threading.Lock)
    # the workspaces agents' tools work in, kept for the run's next executions
    # (tools/select.py build_toolbox)
    workspaces: dict[Any, Any] = field(default_factory=dict)

    @property
    def mode(self) -> str:
        return self.workflow.workflow.context.mode

    @property
    def group(self) -> str | None:
        """The group whose member runs on this thread (None outside a group)."""
        return self.local.group

    def step_context(self, step: StepBase) -> dict[str, Any]:
        """The context a step's own templates see (depends on the context mode), plus the
        item variables when the step runs for a for-each item (set per member: MemberLocal)."""
        if self.mode == "explicit":
            ctx = self.contexts.explicit(self.state, step.name, step.input,
                                         all_inputs=step.type in LOCAL_RENDER_TYPES)
        elif self.mode == "last_only":
            ctx = self.contexts.last_only(self.state)
        else:
            ctx = self.contexts.full(self.state)
        extra = self.local.extra
        if extra:
            ctx.update(extra)
        return ctx

    def full_context(self) -> dict[str, Any]:
        return self.contexts.full(self.state)

    def render(self, text: str, context: dict[str, Any], *, step: str, what: str,
               iteration: int | None = None) -> str:
        try:
            return self.templates.render(text, context, self.render_deadline(step))
        except RenderFailure as exc:
            if exc.limit == "run-timeout":
                raise LimitExceeded(f"the run's timeout expired while rendering {what}",
                                    limit="timeout", step=step, iteration=iteration) from None
            raise TemplateError(f"{what}: {exc}", step=step, iteration=iteration) from None

    @cached_property
    def step_timeouts(self) -> dict[str, float]:
        """Each step's own timeout (`timeout_seconds` of an agent, `timeout` of a script or
        an MCP call), by name."""
        found: dict[str, float] = {}
        for s in [*self.workflow.agents, *(g.agent for g in self.workflow.for_each)]:
            limit = getattr(s, "timeout_seconds", None) or getattr(s, "timeout", None)
            if isinstance(limit, (int, float)) and not isinstance(limit, bool):
                found.setdefault(s.name, float(limit))
        return found

    def render_deadline(self, step: str) -> Deadline | None:
        """What bounds the rendering of a step's templates beside podium's own time limit:
        the run's remaining time or the step's own timeout, whichever comes first."""
        own = self.step_timeouts.get(step)
        left = self.remaining()
        if left is not None and (own is None or left <= own):
            return Deadline(max(left, 0.0), "the run's timeout", "run-timeout")
        if own is not None:
            return Deadline(own, f"the step's timeout of {own:g}s")
        return None

    def remaining(self) -> float | None:
        if self.deadline is None:
            return None
        return self.deadline - self.clock.monotonic()


@record
class StepCall:
    step: StepBase
    iteration: int
    run: RunServices


class StepExecutor(Protocol):
    def __call__(self, call: StepCall) -> StepOutcome: ...
