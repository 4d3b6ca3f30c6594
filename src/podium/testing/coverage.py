"""Route coverage: which routes and gate options of a workflow the tests took, and which none did.

Every route of every step (and group) and every option of every human gate is one item; an
item is taken when some test's run emitted the RouteTaken event that chose it (same step,
same index, a route or an option). Steps without routes (terminate steps, steps that simply
end the run) have nothing to cover.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import field
from typing import Any

from podium.events.model import RouteTaken
from podium.language.model import HumanGateStep, Route, WorkflowFile
from podium.records import record


@record
class CoverageItem:
    """One route or gate option, and the tests that took it."""

    step: str
    kind: str  # route | option
    index: int
    to: str
    when: str | None = None
    value: str | None = None
    label: str | None = None
    default: str | None = None  # for a route without `when`: "always" or "otherwise"
    tests: list[str] = field(default_factory=list)

    @property
    def taken(self) -> bool:
        return bool(self.tests)

    @property
    def ref(self) -> str:
        """`routes[1]` or `options[0]`, as written in the workflow."""
        return f"{self.kind}s[{self.index}]"

    def describe(self, to_width: int = 0) -> str:
        """The item in a few words: where it goes and when (`to_width` aligns the when)."""
        if self.kind == "option":
            label = f" ({self.label})" if self.label and self.label != self.value else ""
            return f"{self.ref} -> {self.to.ljust(to_width)}  option '{self.value}'{label}"
        cond = f"when {_one_line(self.when)}" if self.when else (self.default or "")
        return f"{self.ref} -> {self.to.ljust(to_width)}  {cond}".rstrip()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "index": self.index, "to": self.to,
                               "taken": self.taken, "tests": list(self.tests)}
        if self.kind == "option":
            out["value"], out["label"] = self.value, self.label
        else:
            out["when"] = self.when
        return out


@record
class StepCoverage:
    step: str
    type: str
    items: list[CoverageItem]


@record
class WorkflowCoverage:
    """Coverage of one workflow over every test that ran it."""

    workflow: str
    steps: list[StepCoverage]
    tests: int = 0

    @property
    def items(self) -> list[CoverageItem]:
        return [i for s in self.steps for i in s.items]

    @property
    def taken(self) -> int:
        return sum(1 for i in self.items if i.taken)

    @property
    def total(self) -> int:
        return len(self.items)

    @property
    def percent(self) -> int:
        """Rounded, but never 100 while something is untaken (nor 0 once something is taken)."""
        if not self.total:
            return 100
        pct = round(100 * self.taken / self.total)
        if self.taken < self.total:
            pct = min(pct, 99)
        if self.taken:
            pct = max(pct, 1)
        return pct

    def untaken(self) -> list[CoverageItem]:
        return [i for i in self.items if not i.taken]

    def to_json(self) -> dict[str, Any]:
        return {"workflow": self.workflow, "tests": self.tests, "taken": self.taken,
                "total": self.total, "percent": self.percent,
                "steps": [{"step": s.step, "type": s.type,
                           "items": [i.to_json() for i in s.items]} for s in self.steps]}


def _one_line(text: str | None, width: int = 72) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def _route_items(step: str, routes: list[Route]) -> list[CoverageItem]:
    items = []
    for i, r in enumerate(routes):
        default = None
        if r.when is None:
            default = "always" if i == 0 else "otherwise"
        items.append(CoverageItem(step, "route", i, r.to, when=r.when, default=default))
    return items


def coverage_items(wf: WorkflowFile) -> list[StepCoverage]:
    """Every route and gate option of a workflow, in the order they are written."""
    out: list[StepCoverage] = []
    for step in wf.agents:
        items = _route_items(step.name, step.routes)
        if isinstance(step, HumanGateStep):
            items += [CoverageItem(step.name, "option", i, o.route, value=o.value,
                                   label=o.label) for i, o in enumerate(step.options)]
        if items:
            out.append(StepCoverage(step.name, step.type, items))
    groups: list[tuple[str, str, list[Route]]] = [
        *((g.name, "parallel", g.routes) for g in wf.parallel),
        *((g.name, "for_each", g.routes) for g in wf.for_each)]
    for name, kind, routes in groups:
        items = _route_items(name, routes)
        if items:
            out.append(StepCoverage(name, kind, items))
    return out


def compute_coverage(wf: WorkflowFile, shown: str,
                     runs: Iterable[tuple[str, Iterable[RouteTaken]]]) -> WorkflowCoverage:
    """Coverage of `wf` from the route events of each (test name, events) run."""
    steps = coverage_items(wf)
    index: dict[tuple[str, str, int], CoverageItem] = {
        (i.step, i.kind, i.index): i for s in steps for i in s.items}
    count = 0
    for name, events in runs:
        count += 1
        for e in events:
            if e.kind == "implicit":
                continue
            kind = "option" if e.kind == "option" else "route"
            item = index.get((e.from_step, kind, e.route_index))
            if item is not None and name not in item.tests:
                item.tests.append(name)
    return WorkflowCoverage(shown, steps, count)
