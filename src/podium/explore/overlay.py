"""What explore adds to a drawn route graph: the routes no value can take (greyed) and each
outcome's step range, for `podium graph --explore` and the console's run graph."""

from __future__ import annotations

from dataclasses import field
from typing import Any

from podium.language.load import LoadResult
from podium.records import record

CONSOLE_MAX_STATES = 20_000  # the console explores with this bound; past it, no overlay


@record
class Overlay:
    """Edges as (source node, route or option index, kind) that no trajectory takes, and a
    step range per terminal node ("$end" for the end)."""

    unreachable: set[tuple[str, int]] = field(default_factory=set)
    ranges: dict[str, str] = field(default_factory=dict)
    complete: bool = True

    def to_json(self) -> dict[str, Any]:
        return {"unreachable": sorted(f"{s}#{i}" for s, i in self.unreachable),
                "ranges": self.ranges, "complete": self.complete}


def step_range(o: Any) -> str:
    if not o.reachable:
        return "unreachable"
    if o.unbounded:
        return f"{o.min_steps}+ steps"
    if o.min_steps == o.max_steps:
        return f"{o.min_steps} step{'s' if o.min_steps != 1 else ''}"
    return f"{o.min_steps}-{o.max_steps} steps"


def overlay_of(result: LoadResult, max_states: int | None = None) -> Overlay:
    """Explore the workflow and say which of its drawn edges no value takes."""
    from podium.check.graph import RouteGraph
    from podium.explore import explore

    assert result.model is not None
    found = explore(result, max_states=max_states)
    out = Overlay(complete=found.complete)
    if not found.complete:
        return out  # a partial search would grey routes that are merely unexplored
    space = found.space
    taken: set[tuple[str, int]] = set()
    for sid, edges in space.edges.items():
        node = space.states[sid].node
        taken.update((node, e.route) for e in edges if e.route is not None)
    graph = RouteGraph.build(result.model)
    for name in graph.nodes:
        for edge in graph.succ[name]:
            if (name, edge.index) not in taken and edge.kind != "implicit":
                out.unreachable.add((name, edge.index))
    for o in found.outcomes:
        if o.name in graph.terminates or o.name == "$end":
            out.ranges[o.name] = step_range(o)
    return out
