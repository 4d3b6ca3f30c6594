"""What a run spent: the one fold of its `model_exchange` events (and its sub-workflow runs').

Every figure of spend podium shows or acts on (the store's run row, `show`, `runs`, `diff`,
the end-of-run summary, the budget, a resumed run's budget, the traces) is the sum of the
model calls a run recorded, folded here: per step (the node of the run's graph that paid: a
group for its members, a `workflow` step for its sub-workflow's calls), per agent, per model
and in total, whatever became of the step (finished, failed, retried, a group member, a
validator, dialog or parse-recovery call). docs/decisions/0023-one-fold-of-spend.md.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import field, replace
from functools import partial
from typing import Any

from podium.records import record


@record(frozen=True)
class Spend:
    """Tokens and cost of some model calls; `unpriced` counts those with no known price
    (their tokens count, their cost cannot)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0
    calls: int = 0  # model_exchange events: answers (an answer may take several requests)
    unpriced: int = 0
    models: tuple[str, ...] = ()

    @property
    def priced(self) -> bool:
        return self.unpriced == 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Spend) -> Spend:
        models = self.models + tuple(m for m in other.models if m not in self.models)
        return Spend(self.input_tokens + other.input_tokens,
                     self.output_tokens + other.output_tokens,
                     self.cached_tokens + other.cached_tokens,
                     self.cost_usd + other.cost_usd, self.calls + other.calls,
                     self.unpriced + other.unpriced, models)

    def as_json(self) -> dict[str, Any]:
        """The row shape `show` and `runs` have always written."""
        return {"model": ", ".join(self.models) or None, "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens, "cost_usd": round(self.cost_usd, 6),
                "priced": self.priced}


@record(frozen=True)
class Call:
    """One recorded model call (a `model_exchange`): where it belongs and what it spent."""

    step: str  # the node of the run's graph: the group of a member, else the step
    agent: str  # the agent that made it (a sub-workflow's agents as `<workflow step>/<agent>`)
    spend: Spend
    iteration: int = 0
    kind: str | None = None  # the event's `call`: None for the agent's own execution
    attempt: int = 1


# A checked agent's rows, as Conductor names them: `<agent>` is the execution whose output
# stands; its validator's calls (and an execution a validator's re-run replaced) are
# `<agent> (validator)`, its dialog's (and the execution the dialog replaced) `<agent> (dialog)`.
_PART = {"validator": "validator", "rerun": "validator", "dialog": "dialog",
         "conversation": "dialog", "after_dialog": "dialog"}
_EXECUTIONS = (None, "rerun", "after_dialog")


class _Sum:
    """Spend added up in place: a fold of thousands of calls builds one Spend per row at its
    end, not one per call (`Spend.__add__` makes a frozen dataclass each time). The sums are
    taken in the calls' order, so they equal the chained `+` exactly."""

    __slots__ = ("cached", "calls", "cost", "inp", "models", "out", "unpriced")

    def __init__(self) -> None:
        self.inp = self.out = self.cached = self.calls = self.unpriced = 0
        self.cost = 0.0
        self.models: dict[str, None] = {}  # an ordered set: first seen first

    def add(self, s: Spend) -> None:
        self.inp += s.input_tokens
        self.out += s.output_tokens
        self.cached += s.cached_tokens
        self.cost += s.cost_usd
        self.calls += s.calls
        self.unpriced += s.unpriced
        for m in s.models:
            self.models.setdefault(m)

    def spend(self) -> Spend:
        return Spend(self.inp, self.out, self.cached, self.cost, self.calls, self.unpriced,
                     tuple(self.models))


def _sum(rows: dict[Any, _Sum], key: Any) -> _Sum:
    row = rows.get(key)
    if row is None:
        row = rows[key] = _Sum()
    return row


def _agent_rows(calls: Iterable[Call]) -> dict[str, Spend]:
    rows: dict[str, _Sum] = {}
    standing: dict[tuple[str, int], _Sum] = {}  # the execution whose output stands, so far
    for c in calls:
        key = (c.agent, c.iteration)
        if c.kind in _EXECUTIONS:
            if c.attempt == 1 and c.kind is not None and key in standing:
                part = f"{c.agent} ({_PART[c.kind]})"  # replaced: it counts in that part
                _sum(rows, part).add(standing.pop(key).spend())
            _sum(standing, key).add(c.spend)
        else:
            _sum(rows, f"{c.agent} ({_PART.get(c.kind or '', c.kind)})").add(c.spend)
    for (agent, _), row in standing.items():
        _sum(rows, agent).add(row.spend())
    return {k: row.spend() for k, row in rows.items()}


@record(frozen=True)
class RunSpend:
    """A run's spend, every view of it from the same calls."""

    calls: tuple[Call, ...] = ()
    total: Spend = Spend()
    by_step: Mapping[str, Spend] = field(default_factory=dict)
    by_agent: Mapping[str, Spend] = field(default_factory=dict)  # the agents' rows (_PART)
    by_model: Mapping[str, Spend] = field(default_factory=dict)


def _get(event: Any, key: str) -> Any:
    if type(event) is dict:  # a committed event's body (checked first: ABCs are slow)
        return event.get(key)
    return event.get(key) if isinstance(event, Mapping) else getattr(event, key, None)


def _attribute(obj: Any, key: str) -> Any:
    return getattr(obj, key, None)


def call_of(event: Any) -> Call:
    """The figures of one `model_exchange` (a committed event's dict, the fields of one as
    the bus hands them, or the event itself)."""
    get: Callable[[str], Any] = event.get if type(event) is dict or \
        isinstance(event, Mapping) else partial(_attribute, event)
    cost, model, step = get("cost_usd"), get("model"), str(get("step"))
    inp, out = int(get("input_tokens") or 0), int(get("output_tokens") or 0)
    unpriced = cost is None and bool(inp or out)
    spend = Spend(inp, out, int(get("cached_tokens") or 0), float(cost or 0.0), 1,
                  int(unpriced), (str(model),) if model else ())
    return Call(str(get("group") or step), step, spend, int(get("iteration") or 0),
                get("call"), int(get("attempt") or 1))


def fold_calls(calls: Iterable[Call]) -> RunSpend:
    kept = tuple(calls)
    total = _Sum()
    by_step: dict[str, _Sum] = {}
    by_model: dict[str, _Sum] = {}
    for c in kept:
        total.add(c.spend)
        _sum(by_step, c.step).add(c.spend)
        _sum(by_model, ", ".join(c.spend.models) or "?").add(c.spend)
    return RunSpend(kept, total.spend(), {k: v.spend() for k, v in by_step.items()},
                    _agent_rows(kept), {k: v.spend() for k, v in by_model.items()})


def nested(step: str, calls: Iterable[Call], node: str | None = None) -> tuple[Call, ...]:
    """A sub-workflow's calls as its parent counts them: its agents under the `workflow`
    step `step`, paid by `node` (the step, or the group the step is a member of)."""
    return tuple(replace(c, step=node or step, agent=f"{step}/{c.agent}") for c in calls)


def fold_spend(events: Iterable[Any],
               children: Iterable[tuple[str, RunSpend]] = ()) -> RunSpend:
    """A run's spend from its events (in any order) and its sub-workflow runs' spend, each
    with the name of the `workflow` step that ran it."""
    calls = [call_of(e) for e in events if _get(e, "type") == "model_exchange"]
    for step, child in children:
        calls.extend(nested(step, child.calls))
    return fold_calls(calls)


class SpendMeter:
    """The live fold of a running run: an observer of its bus that takes in its own
    `model_exchange` events as they are emitted (group members' from their threads), plus
    what its sub-workflow runs spent once they end. Reads give the same RunSpend the stored
    events fold to."""

    reads = frozenset({"model_exchange"})  # what the bus hands it (events/bus.py Sink)

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self._calls: list[Call] = []
        self._sum = _Sum()  # the total, added up in place
        self._total: Spend | None = Spend()  # the total as a Spend, made when asked
        self._lock = threading.Lock()

    def handle(self, event: Any) -> None:
        # a bus hands events, whose values are their __dict__: read as a dict, every event of
        # the run is asked its type without the Mapping ABC's check
        fields = event if type(event) is dict else getattr(event, "__dict__", event)
        if _get(fields, "type") == "model_exchange" and _get(fields, "run_id") == self.run_id:
            call = call_of(fields)
            with self._lock:
                self._calls.append(call)
                self._sum.add(call.spend)
                self._total = None

    def close(self) -> None:
        """Nothing to release (the Sink protocol)."""

    def restore(self, spent: RunSpend) -> None:
        """A resumed run goes on counting from what its committed events say it spent."""
        with self._lock:
            self._calls = list(spent.calls)
            self._sum = _Sum()
            self._sum.add(spent.total)
            self._total = spent.total

    def add_child(self, step: str, calls: Iterable[Call], node: str | None = None) -> None:
        """A sub-workflow run's calls (made while its `workflow` step ran) count here too."""
        added = nested(step, calls, node)
        with self._lock:
            self._calls.extend(added)
            self._sum.add(fold_calls(added).total)
            self._total = None

    def mark(self) -> int:
        """Where the count stands now (what a step spent is `since(mark)` at its end)."""
        with self._lock:
            return len(self._calls)

    def calls_since(self, mark: int) -> tuple[Call, ...]:
        with self._lock:
            return tuple(self._calls[mark:])

    def since(self, mark: int) -> Spend:
        return fold_calls(self.calls_since(mark)).total

    def total(self) -> Spend:
        with self._lock:
            if self._total is None:
                self._total = self._sum.spend()
            return self._total

    def spent(self) -> RunSpend:
        with self._lock:
            return fold_calls(self._calls)
