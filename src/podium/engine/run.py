"""The run loop: execute a node, store its output, count it, route, repeat.

The loop is small on purpose: each step type has its executor (steps/registry.py), routing is
a pure function (routing.py), limits are checked at step boundaries, and every fact is an event
on the bus. A `Checkpointer` (the run store) may observe each committed step. How a run ends
(its final output, `run_finished` and the RunResult) is in endings.py.
"""

from __future__ import annotations

import contextlib
import hashlib
import secrets
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import field
from pathlib import Path
from typing import Any, Literal, Protocol

from podium import __version__, collector
from podium.clock import Clock, SystemClock
from podium.engine.children import ChildRuns
from podium.engine.routing import choose_route
from podium.errors import (
    Interrupted,
    LimitExceeded,
    PodiumError,
    RunError,
    StepError,
    internal_error,
)
from podium.events.bus import EventBus, defer_interrupt
from podium.events.commits import COMMIT_WINDOW, INSTANT
from podium.events.model import (
    BudgetExceeded,
    Checkpointed,
    GateAnswered,
    GateOpened,
    LimitReached,
    LimitResolved,
    RouteTaken,
    RunStarted,
    StepFailed,
    StepFinished,
    StepStarted,
)
from podium.events.redact import secret_values
from podium.events.spend import RunSpend, SpendMeter
from podium.gates.base import GateAnswerer, GateRequest, GateUnanswerable
from podium.language.model import (
    END,
    ForEachGroup,
    ParallelGroup,
    Route,
    StepBase,
    WorkflowFile,
)
from podium.providers.base import ProviderRegistry
from podium.records import record
from podium.steps.base import RunOptions, RunServices, StepCall, StepOutcome, Usage
from podium.steps.budget import BudgetLedger, BudgetReport
from podium.steps.state import ContextBuilder, RunState, StepRecord, WorkflowInfo
from podium.store.base import RunStore
from podium.templating import TemplateEngine

RunStatus = Literal["success", "failed", "error", "limit", "interrupted", "waiting"]


class StepObserver(Protocol):
    """Watches the loop at its decision points (replay compares them with a recording)."""

    def before_node(self, engine: Engine, node: str) -> None: ...

    def after_step(self, engine: Engine, record: StepRecord) -> None: ...

    def after_route(self, engine: Engine, record: StepRecord,
                    evaluated: list[dict[str, Any]]) -> None: ...


@record
class RunResult:
    run_id: str
    status: str  # success | failed | error | limit | interrupted | waiting
    exit_code: int
    output: dict[str, Any] | None
    terminal: str | None = None
    reason: str | None = None
    error: PodiumError | None = None
    path: list[str] = field(default_factory=list)
    elapsed: float = 0.0
    iterations: int = 0
    usage_by_step: dict[str, Usage] = field(default_factory=dict)
    budget: BudgetReport | None = None  # spent against limits.budget_usd, when it is set
    handoff: Next | HandOut | None = None  # status `handoff`: the run goes on elsewhere


@record(frozen=True)
class Next:
    """What `Engine.advance` gives back when the run goes on: the node it goes on at (the
    node was executed, committed and routed)."""

    node: str


@record(frozen=True)
class HandOut:
    """The run's group hands its members not done yet (by label) to other workers (stepping
    fan_out "raise"); once they committed, the group is advanced again ("gather")."""

    group: str
    members: tuple[str, ...]
    max_concurrent: int = 0
    fail_fast: bool = False


@record(frozen=True)
class Ended:
    """The run ended at this node (or parked, or failed): how, as a RunResult."""

    result: RunResult


# what one advance of the run gives: where it goes on, a hand-out, or its end
Advance = Next | HandOut | Ended


def new_run_id() -> str:
    return secrets.token_hex(6)


def file_hash(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


@record(frozen=True)
class Persistence:
    """Where the run is kept: its store (the committer of its steps), whether each completed
    step emits its `checkpoint` commit point, and how a gate nobody answers here parks."""

    store: RunStore | None = None
    checkpoints: bool = False
    # opens a parked gate in the store; None: an unanswerable gate fails the run
    parker: Callable[[GateRequest], None] | None = None
    park_limits: bool = True  # False: an exhausted max_iterations fails, never parks
    # its sub-workflows' child runs (None: kept in `store`, engine/children.py)
    children: ChildRuns | None = None


@record(frozen=True)
class Stepping:
    """A run advanced node by node by an outside executor (podium.temporal, which calls
    `Engine.run(start, once=True)`): hand a group's members out instead of running them
    here (`fan_out`: "raise"; "gather" aggregates the members committed elsewhere and runs
    no other), and emit no run_started when the run only goes on (`announce`)."""

    fan_out: Literal["raise", "gather"] | None = None
    announce: bool = True


@record(frozen=True)
class Hooks:
    """What watches the loop (replay compares it with a recording): the observer of its
    decision points, the hooks a sub-workflow's child run gets (`child(step, iteration,
    slot)`), and `attach(engine)`, which the engine's builder calls once the engine exists
    and its providers were checked (replay puts its recorded answers in front of them)."""

    observer: StepObserver | None = None
    child: Callable[[str, int, str], Hooks | None] | None = None
    attach: Callable[[Engine], None] | None = None


@record(frozen=True)
class RunConfig:
    """How one engine is wired, fixed when it is built (app/launch.py for a kept run,
    engine/subflow.py for a child): nothing sets an engine's attributes afterwards."""

    persistence: Persistence = field(default_factory=Persistence)
    stepping: Stepping = field(default_factory=Stepping)
    hooks: Hooks = field(default_factory=Hooks)
    outer_deadline: float | None = None  # a parent run's (or the run's first start) deadline
    depth: int = 0  # sub-workflow nesting
    owns_providers: bool = True  # a child shares its parent's providers: it closes none
    resumed: bool | None = None  # None: resumed when a state is given
    cancel: threading.Event | None = None  # shared with a parent, or the activity's
    # the workflow files its sub-workflow steps loaded, by path (shared with its children)
    subworkflow_cache: dict[Path, WorkflowFile] | None = None
    # a resumed run's group that was interrupted: its members that had already finished or
    # failed, by member label, from their committed events (engine/history.py)
    carried: dict[str, dict[str, dict[str, Any]]] | None = None
    # a resumed agent's dialog it parked in, by (step, iteration) (steps/agent_checks.py)
    carried_dialogs: dict[tuple[str, int], dict[str, Any]] | None = None
    guidance: tuple[str, ...] = ()  # guidance the run already took in (resume)
    # where queued guidance comes from (app/guidance.py), by (step, iteration)
    guidance_source: Callable[[str, int], list[str]] | None = None
    spent: RunSpend | None = None  # a resumed run's spending so far (events/spend.py)
    # executors that replace the registry's, by step type (tests, `podium test` stubs)
    executors: Mapping[str, Callable[[StepCall], StepOutcome]] | None = None


class Engine:
    """Runs one workflow. Build it with its RunConfig, add sinks to `bus`, call `run()`."""

    def __init__(self, workflow: WorkflowFile, path: Path, *, inputs: dict[str, Any],
                 providers: ProviderRegistry, answerer: GateAnswerer,
                 options: RunOptions | None = None, clock: Clock | None = None,
                 run_id: str | None = None, state: RunState | None = None,
                 start_seq: int = 0, config: RunConfig | None = None) -> None:
        self.config = config = config or RunConfig()
        self.workflow = workflow
        self.path = path.resolve()
        self.clock = clock or SystemClock()
        self.run_id = run_id or new_run_id()
        self.bus = EventBus(self.run_id, self.clock, start_seq=start_seq)
        self.options = options or RunOptions()
        if not self.options.record:
            self.bus.drop = frozenset(UNRECORDED_EVENTS)
        self.bus.redactor.add(secret_values(workflow))  # events/redact.py
        wf = workflow.workflow
        self.state = state or RunState(inputs=inputs, max_iterations=wf.limits.max_iterations)
        self.resumed = state is not None if config.resumed is None else config.resumed
        self.steps: dict[str, StepBase] = {}
        for s in workflow.agents:
            self.steps.setdefault(s.name, s)
        self.parallel = {g.name: g for g in workflow.parallel}
        self.for_each = {g.name: g for g in workflow.for_each}
        groups = frozenset(self.parallel) | frozenset(self.for_each)
        self.group_names = groups
        # (popped by engine/groups.py as each carried group runs again)
        self.carried: dict[str, dict[str, dict[str, Any]]] = dict(config.carried or {})
        info = WorkflowInfo(wf.name, wf.description, str(self.path.parent), str(self.path))
        templates = TemplateEngine(workflow.template_files, self.path.parent)
        self.services = RunServices(workflow, self.path, templates,
                                    ContextBuilder(info, groups), self.state, self.bus,
                                    self.clock, providers, answerer, self.options, self.run_id)
        if config.cancel is not None:
            self.services.cancel = config.cancel
        self.services.carried_dialogs.update(config.carried_dialogs or {})
        self.services.guidance = list(config.guidance)
        if config.guidance_source is not None:
            self.services.guidance_source = config.guidance_source
        # every model call reserves its worst case here first (steps/budget.py)
        self.services.budget = BudgetLedger(wf.limits.budget_usd, wf.limits.budget_mode,
                                            self.bus)
        # what the run spent: the live fold of its model calls (events/spend.py)
        self.meter = SpendMeter(self.run_id)
        self.bus.add(self.meter)
        if config.spent is not None:  # a resumed run's budget keeps counting what was spent
            self.meter.restore(config.spent)
            self.services.budget.sync(config.spent.total.cost_usd)
        self._budget_reported = 0.0
        self.current: str | None = None
        self._started = 0.0
        from podium.steps.registry import executors

        # Executors by step type (the config may replace some: tests, stubs, replay); each
        # registered one is imported when a step of its type first runs.
        self.executors: dict[str, Callable[[StepCall], StepOutcome]] = executors()
        self.executors["workflow"] = self._run_subworkflow
        self.executors.update(config.executors or {})
        self.subworkflow_cache: dict[Path, WorkflowFile] = (
            {} if config.subworkflow_cache is None else config.subworkflow_cache)
        kept = config.persistence
        if kept.children is None and kept.store is not None:
            from podium.engine.children import StoredChildRuns

            self.children: ChildRuns | None = StoredChildRuns(kept.store)
        else:
            self.children = kept.children

    # the parts of the config the loop and the group code read, by their simple names
    @property
    def store(self) -> RunStore | None:
        return self.config.persistence.store

    @property
    def checkpoints(self) -> bool:
        return self.config.persistence.checkpoints

    @property
    def parker(self) -> Callable[[GateRequest], None] | None:
        return self.config.persistence.parker

    @property
    def park_limits(self) -> bool:
        return self.config.persistence.park_limits

    @property
    def fan_out(self) -> str | None:
        return self.config.stepping.fan_out

    @property
    def announce(self) -> bool:
        return self.config.stepping.announce

    @property
    def observer(self) -> StepObserver | None:
        return self.config.hooks.observer

    @property
    def depth(self) -> int:
        return self.config.depth

    @property
    def owns_providers(self) -> bool:
        return self.config.owns_providers

    @property
    def outer_deadline(self) -> float | None:
        return self.config.outer_deadline

    # ----------------------------------------------------------------- public

    def _cli_instructions(self) -> dict[str, str] | None:
        o = self.options
        kept = {k: v for k, v in (("workspace", o.workspace_instructions),
                                  ("cli", o.cli_instructions)) if v}
        return kept or None

    @property
    def spent_usd(self) -> float:
        """What the run's model calls cost so far (the priced ones)."""
        return self.meter.total().cost_usd

    @property
    def usage_by_step(self) -> dict[str, Usage]:
        """What the run spent so far, per agent (the rows of its RunResult)."""
        from podium.engine.history import usage_rows

        return usage_rows(self.meter.spent())

    def run(self, start: str | None = None, *, once: bool = False) -> RunResult:
        """Run from the entry point (or `start`) to a terminal, a limit or an error; `once`:
        advance one node only (an outside executor's step: the result then has status
        `handoff` with where the run goes on, unless it ended)."""
        wf = self.workflow.workflow
        self._started = self.clock.monotonic()
        if wf.limits.timeout_seconds:
            self.services.deadline = self._started + wf.limits.timeout_seconds
        if self.outer_deadline is not None:
            own = self.services.deadline
            self.services.deadline = self.outer_deadline if own is None else min(
                own, self.outer_deadline)
        if self.announce:
            self.bus.emit(RunStarted(workflow=wf.name, workflow_path=str(self.path),
                                     workflow_hash=file_hash(self.path),
                                     entry_point=start or wf.entry_point,
                                     inputs=self.state.inputs, podium_version=__version__,
                                     max_iterations=self.state.max_iterations,
                                     resumed=self.resumed, recorded=self.options.record,
                                     instructions=self._cli_instructions()))
        restore = self._install_sigterm() if self.depth == 0 else (lambda: None)
        try:
            with collector.relaxed():  # a run's objects are hardly ever in a cycle
                return self._loop(start or wf.entry_point, once)
        finally:
            restore()
            if self.owns_providers:
                self.services.providers.close()

    # ----------------------------------------------------------------- loop

    def _loop(self, node: str, once: bool) -> RunResult:
        """Advance node after node: the in-process run, and (`once`) an outside
        executor's one step of it."""
        from podium.engine import endings  # how the run ends (it imports this module)

        try:
            finished = endings.already_finished(self, node)
        except RunError as exc:
            return endings.fail(self, exc)
        if finished is not None:
            return finished
        # an outside executor's step commits before it hands the run on
        held = None if once else _InstantSteps(self.bus)
        ended = False
        try:
            while True:
                if held is not None:
                    held.before(getattr(self.steps.get(node), "type", None) in INSTANT)
                step = self.advance(node)
                if isinstance(step, Ended):
                    ended = True
                    return step.result
                if isinstance(step, HandOut) or once:
                    ended = True
                    return endings.handed_off(self, step)
                node = step.node
                if held is not None:
                    held.after()
        finally:
            if held is not None:
                held.end(quietly=not ended)

    def advance(self, node: str) -> Advance:
        """The run's one operation: execute `node`, commit it, route, and say what comes
        next (the next node, a hand-out of a group's members, or the run's end: a terminal,
        a park, a limit, an error). The in-process loop calls it node after node; a Temporal
        activity calls it once (app/durable.py)."""
        from podium.engine import endings  # how the run ends (it imports this module)

        try:
            self._check_interrupt()
            self._check_timeout(node)
            self.current = node
            step: StepBase | ParallelGroup | ForEachGroup | None = (
                self.steps.get(node) or self.parallel.get(node) or self.for_each.get(node))
            if step is None:
                raise RunError(f"'{node}' is not a step or group of this workflow", step=node)
            if self.observer is not None:
                self.observer.before_node(self, node)
            self.check_iterations(node, len(step.agents)
                                  if isinstance(step, ParallelGroup) else 1)
            self._trim_context(node)
            outcome = self._execute(step)
            if outcome.termination is not None:
                return Ended(endings.terminate(self, step, outcome))
            nxt, last_route = self._route(step, outcome)
            self._commit(nxt)
            # limits are checked once the step is committed: a step that passed the budget
            # or the timeout is kept, never run (and paid for) twice
            self._check_budget(step.name)
            self._check_timeout(None, after=step.name)
            if nxt == END:
                return Ended(endings.finish_end(self, last_route))
            return Next(nxt)
        except Handoff as exc:  # engine/groups.py, deep in a group: a value from here on
            return HandOut(exc.group or node, exc.members, exc.max_concurrent, exc.fail_fast)
        except KeyboardInterrupt:
            return Ended(endings.fail(self, Interrupted("interrupted", step=self.current)))
        except ChildParked as exc:
            return Ended(endings.parked(self, exc.request))
        except GateUnanswerable as exc:
            if self.parker is None:
                if exc.request.kind == "iteration_limit":
                    return Ended(endings.fail(self, LimitExceeded(
                        f"the run reached max_iterations ({self.state.max_iterations}) and "
                        "nobody can grant more here", limit="iterations", step=exc.step)))
                return Ended(endings.fail(self, exc))
            return Ended(endings.park(self, exc.request))
        except RunError as exc:
            return Ended(endings.fail(self, exc))

    def _execute(self, step: StepBase | ParallelGroup | ForEachGroup) -> StepOutcome:
        state = self.state
        step_type = _node_type(step)
        iteration = state.step_counts.get(step.name, 0) + 1
        if self.fan_out is None or step_type not in ("parallel", "for_each") or (
                self.fan_out == "raise" and step.name not in self.carried):
            # (a group gathered, or handed out again, after members ran elsewhere has
            # started already: a second step_started would hide them from its resume)
            self.bus.emit(StepStarted(step=step.name, step_type=step_type,
                                      iteration=iteration,
                                      run_iteration=state.run_iteration + 1))
        started = self.clock.monotonic()
        mark = self.meter.mark()
        try:
            try:
                if isinstance(step, ParallelGroup):
                    from podium.engine.groups import run_parallel

                    outcome = run_parallel(self, step, iteration)
                elif isinstance(step, ForEachGroup):
                    from podium.engine.groups import run_for_each

                    outcome = run_for_each(self, step, iteration)
                else:
                    executor = self.executors.get(step.type)
                    if executor is None:
                        raise RunError(f"'{step.type}' steps are not supported yet",
                                       step=step.name, iteration=iteration)
                    outcome = executor(StepCall(step, iteration, self.services))
            except (RecursionError, MemoryError) as exc:  # data too deep or too big for it
                what = "nesting too deep" if isinstance(exc, RecursionError) else "out of memory"
                raise StepError(f"the step's data is beyond what podium can handle ({what}); "
                                "nothing of this step was kept", step=step.name,
                                iteration=iteration) from None
            except RunError:
                raise
            except Exception as exc:  # anything else is podium's own failure
                raise internal_error(exc, step=step.name, iteration=iteration) from exc
        except (GateUnanswerable, ChildParked, Handoff):
            raise  # not a failure: the run parks (or fails, or goes on elsewhere) in the loop
        except RunError as exc:
            if exc.step is None:
                exc.step = step.name
            if exc.iteration is None:
                exc.iteration = iteration
            # what the step spent: every model call it made (and its members', its
            # sub-workflow's), whatever its error carries
            total = self.meter.since(mark)
            details = {k: v for k, v in exc.details.items() if k != "usage_rows"}
            self.bus.emit(StepFailed(step=step.name, step_type=step_type, iteration=iteration,
                                     elapsed=self.clock.monotonic() - started,
                                     error_type=exc.error_type, message=str(exc),
                                     details=details, input_tokens=total.input_tokens,
                                     output_tokens=total.output_tokens,
                                     cost_usd=total.cost_usd if total.calls >
                                     total.unpriced else None,
                                     priced=total.priced))
            try:
                self._check_budget(step.name)  # and an enforced budget says so first
            except LimitExceeded:
                if not (isinstance(exc, LimitExceeded) and exc.limit == "budget"):
                    raise
                # a call the budget refused (steps/budget.py) names the call: it stands
            raise
        elapsed = self.clock.monotonic() - started
        state.step_counts[step.name] = iteration
        state.run_iteration += outcome.iterations
        state.store(step.name, outcome.output)
        state.records.append(StepRecord(step.name, step_type, iteration, state.run_iteration,
                                        outcome.output, elapsed=elapsed))
        u = outcome.usage
        self.bus.emit(StepFinished(
            step=step.name, step_type=step_type, iteration=iteration, elapsed=elapsed,
            output=outcome.output, model=u.model if u else None,
            input_tokens=u.input_tokens if u else 0, output_tokens=u.output_tokens if u else 0,
            cached_tokens=u.cached_tokens if u else 0, cost_usd=u.cost_usd if u else None,
            priced=u.priced if u else True))
        if self.observer is not None:
            self.observer.after_step(self, state.records[-1])
        return outcome

    def _run_subworkflow(self, call: StepCall) -> StepOutcome:
        from podium.engine.subflow import run_subworkflow

        return run_subworkflow(self, call)

    def _route(self, step: StepBase | ParallelGroup | ForEachGroup,
               outcome: StepOutcome) -> tuple[str, Route | None]:
        state = self.state
        record = state.records[-1]
        if outcome.next_step is not None:
            nxt = outcome.next_step
            self.bus.emit(RouteTaken(from_step=step.name, to_step=nxt,
                                     route_index=outcome.route_index,
                                     kind="option" if outcome.route_kind == "option" else "when"))
            record.route_to = nxt
            self._observe_route(record, [])
            return nxt, None
        if not step.routes:
            self.bus.emit(RouteTaken(from_step=step.name, to_step=END, route_index=-1,
                                     kind="implicit"))
            record.route_to = END
            self._observe_route(record, [])
            return END, None
        scope = self.services.full_context()
        scope["output"] = outcome.output
        decision = choose_route(self.services.templates, step.name, step.routes, scope,
                                record.iteration)
        route = decision.route
        self.bus.emit(RouteTaken(from_step=step.name, to_step=decision.target,
                                 route_index=decision.index,
                                 condition=route.when if route else None,
                                 kind="when" if route and route.when else "default",
                                 evaluated=decision.evaluated))
        record.route_to = decision.target
        self._observe_route(record, decision.evaluated)
        return decision.target, route

    def _commit(self, next_node: str | None) -> None:
        """The commit point after a completed step: where the run stands and goes on."""
        if self.checkpoints:
            last = self.state.records[-1].step if self.state.records else None
            self.bus.emit(Checkpointed(step=last, next_step=next_node,
                                       run_iteration=self.state.run_iteration))

    def _observe_route(self, record: StepRecord, evaluated: list[dict[str, Any]]) -> None:
        if self.observer is not None:
            self.observer.after_route(self, record, evaluated)

    # ----------------------------------------------------------------- limits

    def check_iterations(self, node: str, need: int = 1) -> None:
        """Before running `node` (which counts `need` executions): ask for more iterations
        when the limit would be passed; raise LimitExceeded when none are granted."""
        state = self.state
        while state.run_iteration + need > state.max_iterations:
            self._ask_for_iterations(node, need)

    def _ask_for_iterations(self, node: str, need: int) -> None:
        state = self.state
        recent = [r.step for r in state.records[-5:]]
        loop = len(recent) >= 3 and len(set(recent[-3:])) == 1
        self.bus.emit(LimitReached(limit="iterations", step=node, current=state.run_iteration,
                                   maximum=state.max_iterations, recent_steps=recent,
                                   possible_loop=loop))
        prompt = (f"The run has executed {state.run_iteration} steps, its max_iterations. "
                  f"Grant more iterations to continue with '{node}'?")
        self.bus.emit(GateOpened(step=node, iteration=0, kind="iteration_limit", prompt=prompt,
                                 options=[]))
        answer = self.services.answerer.answer(GateRequest(
            self.run_id, node, 0, prompt, (), "iteration_limit", state.run_iteration,
            state.max_iterations, tuple(recent)))
        if answer is None and self.parker is not None and self.park_limits:
            raise GateUnanswerable("the run reached max_iterations and needs a person to grant "
                                   "more", GateRequest(self.run_id, node, 0, prompt, (),
                                                       "iteration_limit", state.run_iteration,
                                                       state.max_iterations, tuple(recent)))
        granted = 0
        by = "nobody"
        if answer is not None:
            by = answer.answered_by
            try:
                granted = max(0, int(answer.value))
            except ValueError:
                granted = 0
            self.bus.emit(GateAnswered(step=node, iteration=0, kind="iteration_limit",
                                       selected=str(granted), answered_by=by))
        if granted > 0:
            state.max_iterations += granted
        self.bus.emit(LimitResolved(limit="iterations", granted=granted,
                                    new_maximum=state.max_iterations, answered_by=by))
        if granted <= 0:
            what = f"'{node}'" if need == 1 else f"'{node}' ({need} executions)"
            raise LimitExceeded(
                f"the run reached max_iterations ({state.max_iterations}) before {what}; "
                f"last steps: {' → '.join(recent)}", limit="iterations", step=node)

    def _trim_context(self, node: str) -> None:
        """`context.max_tokens`: trim the stored outputs before `node` when the context is
        over it (engine/trim.py), with a `context_trimmed` event."""
        cfg = self.workflow.workflow.context
        if cfg.max_tokens is None:
            return
        from podium.engine.trim import trim_context

        event = trim_context(self.state, node, cfg.max_tokens, cfg.trim_strategy,
                             self.services.contexts.estimate_tokens)
        if event is not None:
            self.bus.emit(event)

    def _check_timeout(self, node: str | None, after: str | None = None) -> None:
        deadline = self.services.deadline
        if deadline is None or self.clock.monotonic() < deadline:
            return
        limit = self.workflow.workflow.limits.timeout_seconds or 0
        where = node or after
        self.bus.emit(LimitReached(limit="timeout", step=where,
                                   current=self.clock.monotonic() - self._started,
                                   maximum=float(limit)))
        raise LimitExceeded(f"the run exceeded its timeout of {limit}s", limit="timeout",
                            step=where)

    def _check_budget(self, step: str) -> None:
        """At a step boundary: the budget counts every model call the run made (the meter's
        fold), whatever became of the steps that made them."""
        limits = self.workflow.workflow.limits
        total = self.meter.total()
        spent = total.cost_usd
        self.services.budget.sync(spent)
        budget = limits.budget_usd
        if budget is None or spent <= budget:
            return
        if spent - self._budget_reported < budget and self._budget_reported:
            return
        self._budget_reported = spent
        self.bus.emit(BudgetExceeded(budget_usd=budget, spent_usd=round(spent, 6),
                                     budget_mode=limits.budget_mode, step=step,
                                     partial=not total.priced))
        if limits.budget_mode == "enforce":
            raise LimitExceeded(f"the run spent ${spent:.4f}, over its budget of "
                                f"${budget:.2f}", limit="budget", step=step)

    def _check_interrupt(self) -> None:
        if self.services.cancel.is_set():
            raise Interrupted("stopped on request", step=self.current)

    def _install_sigterm(self) -> Callable[[], None]:
        if threading.current_thread() is not threading.main_thread():
            return lambda: None

        handling = [False]

        def handler(signum: int, frame: Any) -> None:
            if handling[0]:  # a second signal inside the first one's Event.set(): its lock
                return       # is not reentrant, taking it again would hang the process
            handling[0] = True
            try:
                self.services.cancel.set()
            finally:
                handling[0] = False
            if defer_interrupt():  # inside an emit: raised once the event is recorded
                return
            raise KeyboardInterrupt

        # SIGINT (Ctrl+C) too: Python's own handler would raise anywhere, inside an emit too
        previous: dict[int, Any] = {}
        try:
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, handler)
        except ValueError:
            return lambda: None

        def restore() -> None:
            for sig, before in previous.items():
                signal.signal(sig, before)

        return restore


class _InstantSteps:
    """The in-process loop's hold of its run's commits while it runs instant steps
    (events/commits.py INSTANT): their checkpoints wait, and one transaction carries every
    such step of a COMMIT_WINDOW. Before a step that is not instant, and when the loop ends,
    what waits commits: a step with effects, a person or a reader outside never finds the
    steps before it missing from the store."""

    def __init__(self, bus: EventBus) -> None:
        self.bus = bus
        self.holding = False
        self.since: float | None = None  # when the batch's first checkpoint began to wait

    def _woken(self) -> None:  # the store's hold: the first write of a batch waits
        self.since = time.monotonic()

    def before(self, instant: bool) -> None:
        if instant and not self.holding:
            self.since = None
            self.holding = self.bus.hold(self._woken)
        elif not instant and self.holding:
            self.holding = False
            self.bus.release()

    def after(self) -> None:
        since = self.since
        if self.holding and since is not None and time.monotonic() - since >= COMMIT_WINDOW:
            self.since = None
            self.bus.commit_held()

    def end(self, *, quietly: bool) -> None:
        """Commit what waits (`quietly`: while an error unwinds the loop, a second error of
        the store does not hide the first)."""
        if not self.holding:
            return
        self.holding = False
        if not quietly:
            self.bus.release()
            return
        with contextlib.suppress(Exception):  # the error on its way out is the run's story
            self.bus.release()


def _node_type(node: StepBase | ParallelGroup | ForEachGroup) -> str:
    if isinstance(node, ParallelGroup):
        return "parallel"
    if isinstance(node, ForEachGroup):
        return "for_each"
    return node.type


class ChildParked(RunError):
    """A sub-workflow parked at a gate: its parent waits too."""

    def __init__(self, request: GateRequest) -> None:
        super().__init__(f"waiting in sub-workflow run {request.run_id}", step=request.step)
        self.request = request


class Handoff(RunError):
    """Raised deep inside a group (engine/groups.py) whose members not done yet (`members`,
    by label) run on other workers; `Engine.advance` turns it into its HandOut value."""

    def __init__(self, message: str, *, group: str | None = None,
                 members: tuple[str, ...] = (), max_concurrent: int = 0,
                 fail_fast: bool = False) -> None:
        super().__init__(message, step=group)
        self.group = group
        self.members = members
        self.max_concurrent = max_concurrent
        self.fail_fast = fail_fast


# What the outside world gave a run; not kept when recording is off.
# (a model call's `model_exchange` is kept without its content: steps/agent.py `exchange`)
UNRECORDED_EVENTS = ("script_output", "mcp_called")
