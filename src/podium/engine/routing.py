"""The router: a pure function from (routes, scope) to the route that wins.

Routes are tried in declaration order; the first without `when`, or whose `when` holds,
wins; later routes are never evaluated. A condition is Jinja when it contains both `{{` and
`}}` (its rendered text is read as a boolean, as Conductor does, except that `None`, `[]`,
`{}` and `0.0` read as false), otherwise an expression of Conductor's bare condition language
over the flattened names of spec 4.2 (`exit_code == 0`, `verdict is None`,
`int(workflow_input['count']) > 2`; podium/conditions.py).
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from podium import conditions
from podium.errors import RouteError
from podium.language.model import Route
from podium.records import record
from podium.templating import RenderFailure, TemplateEngine


@record(frozen=True)
class Decision:
    """The winning route and what each condition tried before it evaluated to."""

    target: str
    index: int
    route: Route | None
    evaluated: list[dict[str, Any]] = field(default_factory=list)


def evaluate_condition(engine: TemplateEngine, when: str, scope: dict[str, Any]) -> tuple[bool, Any]:
    """(holds, raw value) of one condition; raises RenderFailure when it cannot be evaluated."""
    if not conditions.is_bare(when):
        text = engine.render(when, scope)
        return conditions.text_holds(text), text.strip()
    value = conditions.evaluate(when, scope)
    try:
        return bool(value), value
    except Exception as exc:  # a value whose truth cannot be told (none from JSON data)
        raise RenderFailure("error", f"{type(exc).__name__}: {exc}") from None


def choose_route(engine: TemplateEngine, step: str, routes: list[Route],
                 scope: dict[str, Any], iteration: int | None = None) -> Decision:
    """Pick the first route whose condition holds; raise RouteError naming every condition."""
    tried: list[dict[str, Any]] = []
    for i, route in enumerate(routes):
        if route.when is None:
            return Decision(route.to, i, route, tried)
        try:
            holds, raw = evaluate_condition(engine, route.when, scope)
        except RenderFailure as exc:
            raise RouteError(f"route {i} condition {route.when!r} could not be evaluated: {exc}",
                             step=step, iteration=iteration) from None
        tried.append({"index": i, "to": route.to, "when": route.when, "value": _jsonable(raw),
                      "holds": holds})
        if holds:
            return Decision(route.to, i, route, tried)
    lines = "; ".join(f"routes[{t['index']}] {t['when']!r} -> {t['value']!r}" for t in tried)
    raise RouteError(f"no route matched: {lines}. Add a last route without 'when' as the default",
                     step=step, iteration=iteration)


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)
