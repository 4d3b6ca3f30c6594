"""`podium explore`: every trajectory a workflow can take, computed before it runs.

Routes are rules over data of a known shape, so the only way a model, a script or a person
moves a run is through the values its step can produce. explore branches on each class of
those values (space.py, values.py, moves.py), evaluates every condition with the engine's own
router, and reports each outcome's reach, step range and shortest witness, the findings that
follow from the data, and the properties given with `--require` (report.py).
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from podium.language.diagnostics import Diagnostic
from podium.language.load import LoadResult
from podium.records import record


@record
class Exploration:
    """The result of exploring one workflow."""

    file: str
    states: int
    complete: bool
    truncated: list[str]
    outcomes: list[Any]  # report.Outcome
    findings: list[Diagnostic]
    properties: list[Any] = field(default_factory=list)  # report.Property
    max_iterations: int = 0
    space: Any = None  # space.Space, for --emit-tests
    explorer: Any = None

    @property
    def ok(self) -> bool:
        return all(p.holds for p in self.properties) and not any(
            d.severity == "error" for d in self.findings)

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "states": self.states, "complete": self.complete,
                "stopped_early": self.truncated, "max_iterations": self.max_iterations,
                "outcomes": [o.to_json() for o in self.outcomes],
                "findings": [d.to_json() for d in self.findings],
                "properties": [p.to_json() for p in self.properties]}


def explore(result: LoadResult, requires: list[str] | None = None,
            max_states: int | None = None) -> Exploration:
    """Explore a loaded, valid workflow; `requires` are property texts (a PropertyError
    for one that cannot be read, raised before the search)."""
    from podium.explore.report import Findings, check_property, outcomes_of
    from podium.explore.space import MAX_STATES, Explorer, Space

    explorer = Explorer(result, max_states=max_states or MAX_STATES)
    for text in requires or []:  # read them all before searching: a typo costs nothing
        check_property(text, explorer, Space([], {}, {}, {}, set(), complete=True))
    space = explorer.search()
    outcomes = outcomes_of(explorer, space)
    findings = Findings(explorer, result, space, outcomes).collect()
    props = [check_property(t, explorer, space) for t in requires or []]
    return Exploration(result.shown, len(space.states), space.complete, space.truncated,
                       outcomes, findings, props, explorer.max_iterations, space, explorer)
