"""The cost forecast of a budget: what one model call of each agent costs, what one execution
costs once a validator or a dialog adds its calls, and from those the cost of the shortest and
longest path to each outcome and the ceiling that max_iterations puts on a run.

Prices come from podium.providers.pricing, imported only when a forecast is made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from podium.check.reach import Reach, _Analysis
from podium.language.model import AgentStep
from podium.templating import RenderFailure

if TYPE_CHECKING:
    from jinja2 import nodes
else:  # the trees are lightparse.py's or Jinja's: kinds.py names their nodes in both
    from podium.templating import kinds as nodes

DEFAULT_INPUT_TOKENS = 4000
DEFAULT_OUTPUT_TOKENS = 1000


def _models_of(a: _Analysis, step: AgentStep) -> list[str]:
    model = step.model or a.wf.workflow.runtime.default_model
    if model is None:
        return []
    if "{{" not in model and "{%" not in model:
        return [model]
    try:
        tree = a.parser.parse(model)
    except RenderFailure:
        return []
    found: set[str] = set()

    def results(node: nodes.Node) -> None:
        # only values the template can print: literal strings, or either branch of an `if`
        if isinstance(node, nodes.Const) and isinstance(node.value, str) and node.value.strip():
            found.add(node.value.strip())
        elif isinstance(node, nodes.CondExpr):
            results(node.expr1)
            if node.expr2 is not None:
                results(node.expr2)

    for out in tree.find_all(nodes.Output):
        for n in out.nodes:
            results(n)
    return sorted(found)


def _forecast(a: _Analysis, reached: list[Reach], max_iterations: int) -> dict[str, Any]:
    """The forecast of a budget: the cost of each outcome in `reached` (its shortest path at
    the cheapest, its longest at the dearest) and the ceiling at `max_iterations`."""
    from podium.providers.pricing import cost_usd, find_price

    cost_cfg = a.wf.workflow.cost
    tokens_in = cost_cfg.tokens_per_call or DEFAULT_INPUT_TOKENS
    tokens_out = max(1, tokens_in // 4) if cost_cfg.tokens_per_call else DEFAULT_OUTPUT_TOKENS
    per_step: dict[str, tuple[float, float]] = {}
    unpriced: set[str] = set()

    def call_range(models: list[str]) -> tuple[float, float] | None:
        costs = []
        for m in models:
            c = cost_usd(find_price(m, cost_cfg.pricing), tokens_in, tokens_out)
            if c is None:
                unpriced.add(m)
            else:
                costs.append(c)
        if costs:
            return min(costs), max(costs)
        return (0.0, 0.0) if models else None

    per_exec: dict[str, dict[str, Any]] = {}
    for s in a.wf.agents:
        if not isinstance(s, AgentStep):
            continue
        one = call_range(_models_of(a, s))
        if one is not None:
            per_step[s.name] = one
        checks = _checked_execution(s, one, call_range)
        if checks is not None:
            per_exec[s.name] = checks

    for name, child in a.children.items():  # a sub-workflow costs what its runs cost
        per_exec[name] = child
        unpriced.update(child.get("unpriced_models", []))

    def path_cost(path: list[str], pick: int) -> float:
        key = ("min_usd", "max_usd")[pick]
        return sum(per_exec[n][key] if n in per_exec else per_step[n][pick]
                   for n in path if n in per_step or n in per_exec)

    outcomes = {}
    for r in reached:
        lo = path_cost(r.shortest_path, 0) if r.shortest_path else None
        hi = path_cost(r.longest_path or r.shortest_path, 1) if r.shortest_path else None
        outcomes[r.node] = {"min_usd": round(lo, 4) if lo is not None else None,
                            "max_usd": round(hi, 4) if hi is not None else None}
    worst = max((v["max_usd"] for v in outcomes.values() if v["max_usd"] is not None),
                default=None)
    most = max([hi for _, hi in per_step.values()]
               + [float(v["max_usd"]) for v in per_exec.values()], default=0.0)
    return {"tokens_per_call": {"input": tokens_in, "output": tokens_out,
                                "source": "cost.tokens_per_call" if cost_cfg.tokens_per_call
                                else "podium default"},
            "per_call_usd": {k: {"min": round(v[0], 4), "max": round(v[1], 4)}
                             for k, v in per_step.items()},
            "per_execution": {k: {**v, "min_usd": round(v["min_usd"], 4),
                                  "max_usd": round(v["max_usd"], 4)}
                              for k, v in per_exec.items()},
            "outcomes": outcomes, "worst_usd": worst,
            "ceiling_usd": round(most * max_iterations, 4),
            "unpriced_models": sorted(unpriced),
            "budget_usd": a.wf.workflow.limits.budget_usd}


def _checked_execution(step: AgentStep, one: tuple[float, float] | None,
                       call_range: Any) -> dict[str, Any] | None:
    """The model calls (and their cost) of one execution of an agent with a `validator:` or
    a `dialog:`: the validator adds its verdict and, on a fail, one re-run (and a second
    verdict under on_error: fail); the dialog adds its evaluator and, after a conversation,
    a re-execution (the conversation's own replies depend on the person: not counted)."""
    if step.validator is None and step.dialog is None:
        return None
    own = one or (0.0, 0.0)
    lo, hi = own
    calls_min = calls_max = 1
    extra: list[str] = []
    if step.dialog is not None:
        lo, hi = lo + own[0], hi + own[1] + own[1]
        calls_min, calls_max = calls_min + 1, calls_max + 2
        extra.append("dialog: +1 evaluator call, +1 re-execution after a conversation (plus "
                     "one reply per turn of the person)")
    v = step.validator
    if v is not None:
        verdict = (call_range([v.model]) if v.model else one) or (0.0, 0.0)
        lo, hi = lo + verdict[0], hi + verdict[1]
        calls_min, calls_max = calls_min + 1, calls_max + 1
        what = "validator: +1 verdict"
        if v.max_retries:
            hi += own[1]
            calls_max += 1
            what += ", +1 re-run on a failed verdict"
            if v.on_error == "fail":
                hi += verdict[1]
                calls_max += 1
                what += ", +1 verdict of the re-run (on_error: fail)"
        extra.append(what)
    return {"calls_min": calls_min, "calls_max": calls_max, "min_usd": lo, "max_usd": hi,
            "extra": extra}
