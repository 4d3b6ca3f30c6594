"""Step budgets before a run: shortest and longest paths to each outcome, loops and what bounds
them, the margin `max_iterations` leaves, and a cost forecast per outcome.

Loops are bounded by counters found in the workflow itself: a `set` step whose value adds a
constant to its own previous output, and a route condition comparing that output with a
constant. The longest paths are found by a search over (step, counter values), where a path
may come back to a step only when a counter moved, so only counter-bounded loops are unrolled;
loops with no bound of their own are reported as such.

This module is the entry (analyse_budget, format_budget, BudgetReport); the counters and
thresholds found in templates are in check/loops.py, the path search in check/reach.py and the
cost forecast in check/forecast.py. Their public names are re-exported here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from podium.check.forecast import DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS, _forecast
from podium.check.loops import Counter, Loop, Threshold, find_counter, find_threshold, passes_until
from podium.check.reach import MAX_EXPANSIONS, Reach, _Analysis
from podium.language.load import LoadResult
from podium.language.model import END, HumanGateStep, TerminateStep, WorkflowStep
from podium.records import record

__all__ = [
    "DEFAULT_INPUT_TOKENS",
    "DEFAULT_OUTPUT_TOKENS",
    "MAX_EXPANSIONS",
    "BudgetReport",
    "Counter",
    "Loop",
    "Reach",
    "Threshold",
    "analyse_budget",
    "find_counter",
    "find_threshold",
    "format_budget",
    "passes_until",
]


@record
class BudgetReport:
    max_iterations: int
    outcomes: list[Reach]
    gates: list[Reach]
    loops: list[Loop]
    counters: list[Counter]
    complete: bool
    warnings: list[str]
    cost: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        def reach(r: Reach) -> dict[str, Any]:
            return {"node": r.node, "kind": r.kind, "status": r.status,
                    "shortest": r.shortest, "longest": r.longest,
                    "shortest_path": r.shortest_path, "longest_path": r.longest_path}

        happy = min((r for r in self.outcomes if r.status == "success" and r.shortest),
                    key=lambda r: r.shortest or 0, default=None)
        return {
            "max_iterations": self.max_iterations,
            "happy_path": reach(happy) if happy else None,
            "outcomes": [reach(r) for r in self.outcomes],
            "gates": [reach(r) for r in self.gates],
            "loops": [{"nodes": lp.nodes, "steps": lp.size, "bound": lp.bound,
                       "detail": lp.detail, "passes": lp.passes} for lp in self.loops],
            "counters": [{"step": c.step, "start": c.start, "increment": c.increment}
                         for c in self.counters],
            "longest_paths_complete": self.complete,
            "warnings": self.warnings,
            "cost": self.cost,
        }


def analyse_budget(result: LoadResult, _seen: frozenset[Path] = frozenset()) -> BudgetReport:
    """`_seen`: the sub-workflow files above this one (a cycle is not followed)."""
    wf = result.model
    assert wf is not None
    a = _Analysis(wf)
    a.children = _subworkflow_costs(result, _seen | {result.path.resolve()})
    short = a.shortest()
    long_, complete = a.longest()
    loops = a.loops()
    outcomes: list[Reach] = []
    gates: list[Reach] = []
    for name in a.graph.nodes:
        if name not in a.graph.reachable():
            continue
        step = a.steps.get(name)
        s = short.get(name)
        lg = long_.get(name)
        r = Reach(name, step.type if step else a.graph.kinds.get(name, "?"),
                  step.status if isinstance(step, TerminateStep) else None,
                  s[0] if s else None, lg[0] if lg else None,
                  s[1] if s else [], lg[1] if lg else [])
        if isinstance(step, TerminateStep):
            outcomes.append(r)
        elif isinstance(step, HumanGateStep):
            gates.append(r)
    if END in short:
        lg = long_.get(END)
        outcomes.append(Reach(END, "end", "success", short[END][0], lg[0] if lg else None,
                              short[END][1], lg[1] if lg else []))
    limit = wf.workflow.limits.max_iterations
    warnings = _limit_warnings(limit, outcomes, loops, complete)
    report = BudgetReport(limit, outcomes, gates, loops, list(a.counters.values()), complete,
                          warnings, {})
    report.cost = _forecast(a, report.outcomes, report.max_iterations)
    budget = wf.workflow.limits.budget_usd
    worst = report.cost.get("worst_usd")
    if budget is not None and isinstance(worst, float) and worst > budget:
        report.warnings.append(f"budget_usd {budget:.2f} may stop the longest modelled path "
                               f"(estimated up to ${worst:.2f})")
    return report


def _limit_warnings(limit: int, outcomes: list[Reach], loops: list[Loop],
                    complete: bool) -> list[str]:
    out: list[str] = []
    for r in outcomes:
        if r.shortest is not None and r.shortest > limit:
            out.append(f"max_iterations {limit} cuts off outcome '{r.node}': it needs at least "
                       f"{r.shortest} steps")
        elif r.longest is not None and r.longest > limit:
            out.append(f"max_iterations {limit} can cut off outcome '{r.node}': its longest "
                       f"modelled path is {r.longest} steps")
    longest = max((r.longest or r.shortest or 0 for r in outcomes), default=0)
    retry = min((lp.size for lp in loops if lp.bound != "counter"), default=None)
    if complete and retry is not None and longest <= limit and limit - longest < retry:
        out.append(f"max_iterations {limit} leaves {limit - longest} step(s) after the longest "
                   f"modelled path ({longest}): no room for one more pass of a "
                   f"{retry}-step loop")
    return out


def _subworkflow_costs(result: LoadResult, seen: frozenset[Path]) -> dict[str, dict[str, Any]]:
    """What one execution of each `type: workflow` step costs: the cheapest and the dearest
    outcome of its file's own forecast (its agents, and its sub-workflows', recursively)."""
    from podium.check.semantic import resolve_subworkflow
    from podium.check.validate import validate_file
    from podium.language.source import FileUnreadable

    wf = result.model
    assert wf is not None
    out: dict[str, dict[str, Any]] = {}
    for step in wf.agents:
        if not isinstance(step, WorkflowStep):
            continue
        path = resolve_subworkflow(result.path.parent, step.workflow)
        if path is None or path.resolve() in seen or len(seen) > 10:
            continue
        try:
            child = validate_file(path)
        except FileUnreadable:
            continue
        if child.model is None or child.sink.errors:
            continue
        cost = analyse_budget(child, seen).cost
        ranges = [v for v in cost.get("outcomes", {}).values() if v.get("min_usd") is not None]
        if not ranges:
            continue
        lo = min(float(v["min_usd"]) for v in ranges)
        hi = max(float(v["max_usd"]) for v in ranges if v.get("max_usd") is not None)
        out[step.name] = {"kind": "sub-workflow", "workflow": step.workflow,
                          "calls_min": 0, "calls_max": 0, "min_usd": lo, "max_usd": hi,
                          "extra": [f"sub-workflow {step.workflow}, its cheapest to its "
                                    "dearest outcome"],
                          "unpriced_models": cost.get("unpriced_models", [])}
    return out


# --------------------------------------------------------------------------- text


def format_budget(data: dict[str, Any]) -> str:
    lines = [f"step budget (max_iterations {data['max_iterations']}):"]
    happy = data.get("happy_path")
    if happy:
        lines.append(f"  happy path: {happy['shortest']} steps to '{happy['node']}': "
                     + " → ".join(happy["shortest_path"]))
    lines.append("  outcomes (steps, the terminal step included):")
    width = max((len(o["node"]) + len(o["status"] or "") for o in data["outcomes"]), default=10)
    for o in data["outcomes"]:
        label = f"{o['node']} ({o['status']})"
        longest = o["longest"]
        extra = ""
        if o["shortest_path"] and len(o["shortest_path"]) >= 2 and o["node"] != END:
            before = o["shortest_path"][-2]
            extra = f" · ends 1 step after {before}"
        lng = f"longest {longest}" if longest is not None else "longest ?"
        lines.append(f"    {label.ljust(width + 3)} shortest {o['shortest']:>3} · {lng}{extra}")
    if data["gates"]:
        lines.append("  gates (step number at which each is reached):")
        for g in data["gates"]:
            lines.append(f"    {g['node']}: at step {g['shortest']} at the earliest, "
                         f"{g['longest']} at the latest (counter-bounded loops only)")
    if data["loops"]:
        lines.append("  loops (steps each pass adds):")
        for lp in data["loops"]:
            cycle = " → ".join([*lp["nodes"], lp["nodes"][0]])
            lines.append(f"    +{lp['steps']}  {cycle}")
            lines.append(f"        {lp['detail']}")
    if not data["longest_paths_complete"]:
        lines.append("  longest paths: not fully computed (too many paths); figures are lower "
                     "bounds")
    longest = max((o["longest"] or o["shortest"] or 0 for o in data["outcomes"]), default=0)
    margin = data["max_iterations"] - longest
    lines.append(f"  margin: the longest modelled path is {longest} steps; max_iterations "
                 f"{data['max_iterations']} leaves {margin}")
    unbounded = [lp for lp in data["loops"] if lp["bound"] != "counter"]
    for lp in unbounded:
        if margin > 0:
            lines.append(f"    room for {margin // lp['steps']} more pass(es) of the "
                         f"+{lp['steps']} loop at {lp['nodes'][0]}")
    cost = data["cost"]
    if cost.get("per_call_usd"):
        tok = cost["tokens_per_call"]
        lines.append(f"  cost forecast ({tok['input']} input + {tok['output']} output tokens per "
                     f"agent call, {tok['source']}):")
        for name, o in cost["outcomes"].items():
            if o["min_usd"] is not None:
                lines.append(f"    {name}: ${o['min_usd']:.4f} - ${o['max_usd']:.4f}")
        for name, x in cost.get("per_execution", {}).items():
            if x.get("kind") == "sub-workflow":
                lines.append(f"    {name}: ${x['min_usd']:.4f} - ${x['max_usd']:.4f} per "
                             f"execution ({'; '.join(x['extra'])})")
                continue
            lines.append(f"    {name}: {x['calls_min']}-{x['calls_max']} model calls per "
                         f"execution, ${x['min_usd']:.4f} - ${x['max_usd']:.4f} "
                         f"({'; '.join(x['extra'])})")
        lines.append(f"    ceiling at max_iterations: ${cost['ceiling_usd']:.4f}")
        if cost.get("budget_usd") is not None:
            lines.append(f"    budget_usd: ${cost['budget_usd']:.2f}")
        if cost["unpriced_models"]:
            lines.append(f"    unpriced (partial): {', '.join(cost['unpriced_models'])}")
    for w in data["warnings"]:
        lines.append(f"  warning: {w}")
    return "\n".join(lines) + "\n"
