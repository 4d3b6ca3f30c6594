"""An eval's report, read from the store: per variant its runs, outcomes, pass rate, cost
(mean and 95% interval), cost per agent, tokens, steps and latency; and the differences
between variants, with the test that says whether each is larger than chance."""

from __future__ import annotations

import statistics
from collections import Counter
from typing import TYPE_CHECKING, Any

from podium.app.eval_spec import Assertion, EvalSpec
from podium.app.eval_stats import fisher_exact, mean_interval, percentile, permutation_test
from podium.records import record

if TYPE_CHECKING:
    from podium.store.base import RunRecord, RunStore

ALPHA = 0.05


@record
class RunFacts:
    """One run of the eval, as the report uses it."""

    run_id: str
    variant: str
    row: str
    repeat: int
    outcome: str
    status: str
    cost_usd: float
    by_agent: dict[str, float]
    tokens: int
    steps: int
    latency_s: float | None
    output: dict[str, Any] | None
    passed: bool | None  # against the row's expect; None when the row has none
    assertions_failed: list[str]


def outcome_of(run: RunRecord, status: str) -> str:
    """A terminate step's name, `$end` for a run that succeeded without one, else the run's
    state (error, limit, waiting, interrupted)."""
    if run.terminal:
        return run.terminal
    return "$end" if status == "success" else status


def _facts(store: RunStore, run: RunRecord, spec: EvalSpec) -> RunFacts | None:
    from podium.app.evals import _key_of
    from podium.app.owners import liveness
    from podium.app.spend import run_spend
    from podium.engine.history import fold_events

    key = _key_of(run)
    if key is None:
        return None
    variant, row_id, repeat = key
    status = liveness(store, run).status
    events = store.events(run.id)
    spent = run_spend(store, run.id, events)
    steps = len(fold_events(events).records)
    outcome = outcome_of(run, status)
    rows = {r.id: r for r in spec.rows}
    row = rows.get(row_id)
    expect = row.expect if row is not None else None
    latency = (run.finished_at - run.created_at) if run.finished_at else None
    facts = RunFacts(run.id, variant, row_id, repeat, outcome, status,
                     spent.total.cost_usd, {a: s.cost_usd for a, s in spent.by_agent.items()},
                     spent.total.tokens, steps, latency, run.output,
                     None if expect is None else outcome == expect, [])
    facts.assertions_failed = [a.text() for a in spec.assertions if not _holds(a, facts)]
    return facts


def _holds(a: Assertion, f: RunFacts) -> bool:
    if a.kind == "outcome":
        return f.outcome == str(a.value)
    if a.kind == "steps_at_most":
        return f.steps <= int(a.value)
    if a.kind == "cost_at_most":
        return f.cost_usd <= float(a.value)
    out = f.output or {}
    return all(out.get(k) == v for k, v in a.value.items())


def collect(store: RunStore, eval_id: str, spec: EvalSpec) -> list[RunFacts]:
    from podium.app.evals import eval_runs

    found = [_facts(store, r, spec) for r in eval_runs(store, eval_id) if r.parent_run_id is None]
    return sorted((f for f in found if f is not None), key=lambda f: (f.row, f.variant, f.repeat))


def _variant(name: str, runs: list[RunFacts]) -> dict[str, Any]:
    costs = [r.cost_usd for r in runs]
    judged = [r for r in runs if r.passed is not None]
    agents = sorted({a for r in runs for a in r.by_agent})
    steps = [float(r.steps) for r in runs]
    latencies = [r.latency_s for r in runs if r.latency_s is not None]
    return {
        "name": name, "runs": len(runs),
        "outcomes": dict(sorted(Counter(r.outcome for r in runs).items())),
        "pass_rate": (sum(1 for r in judged if r.passed) / len(judged)) if judged else None,
        "judged": len(judged),
        "assertions_passed": sum(1 for r in runs if not r.assertions_failed),
        "cost_usd": mean_interval(costs),
        "cost_by_agent": {a: statistics.fmean(r.by_agent.get(a, 0.0) for r in runs)
                          for a in agents},
        "tokens": {"mean": statistics.fmean(r.tokens for r in runs) if runs else None,
                   "total": sum(r.tokens for r in runs)},
        "steps": {"mean": statistics.fmean(steps) if steps else None,
                  "median": statistics.median(steps) if steps else None,
                  "p90": percentile(steps, 90)},
        "latency_s": {"mean": statistics.fmean(latencies) if latencies else None,
                      "p90": percentile(latencies, 90)},
    }


def _row_outcome(runs: list[RunFacts]) -> str:
    return Counter(r.outcome for r in runs).most_common(1)[0][0]


def _differences(spec: EvalSpec, facts: list[RunFacts]) -> dict[str, Any]:
    names = [v.name for v in spec.variants]
    rows = []
    for row in spec.rows:
        per = {n: [f for f in facts if f.row == row.id and f.variant == n] for n in names}
        seen = {n: _row_outcome(rs) for n, rs in per.items() if rs}
        if len(set(seen.values())) > 1:
            rows.append({"row": row.id, "expect": row.expect, "outcomes": seen})
    tests = []
    base = names[0]
    for other in names[1:]:
        a = [f for f in facts if f.variant == base]
        b = [f for f in facts if f.variant == other]
        ja = [f for f in a if f.passed is not None]
        jb = [f for f in b if f.passed is not None]
        pa, pb = sum(1 for f in ja if f.passed), sum(1 for f in jb if f.passed)
        p_pass = fisher_exact(pa, len(ja), pb, len(jb))
        p_cost = permutation_test([f.cost_usd for f in a], [f.cost_usd for f in b])
        tests.append({
            "a": base, "b": other,
            "pass_rate": {"a": pa / len(ja) if ja else None, "b": pb / len(jb) if jb else None,
                          "test": "Fisher's exact test", "p_value": p_pass,
                          "significant": p_pass < ALPHA},
            "cost_usd": {"a": statistics.fmean(f.cost_usd for f in a) if a else None,
                         "b": statistics.fmean(f.cost_usd for f in b) if b else None,
                         "test": "permutation test on the mean (10,000 shuffles, seeded)",
                         "p_value": p_cost, "significant": p_cost < ALPHA},
        })
    return {"rows": rows, "tests": tests, "alpha": ALPHA}


def build_report(store: RunStore, eval_id: str, spec: EvalSpec) -> dict[str, Any]:
    facts = collect(store, eval_id, spec)
    expected = len(spec.rows) * spec.repeat
    variants = []
    for v in spec.variants:
        mine = [f for f in facts if f.variant == v.name]
        rep = _variant(v.name, mine)
        rep["planned"] = expected
        variants.append(rep)
    return {"eval_id": eval_id, "workflow": str(spec.workflow), "dataset": str(spec.dataset),
            "rows": len(spec.rows), "repeat": spec.repeat, "budget": spec.budget,
            "spent_usd": sum(f.cost_usd for f in facts),
            "complete": all(v["runs"] >= expected for v in variants),
            "variants": variants, "differences": _differences(spec, facts),
            "runs": [{"run_id": f.run_id, "variant": f.variant, "row": f.row,
                      "repeat": f.repeat, "outcome": f.outcome, "passed": f.passed,
                      "cost_usd": f.cost_usd, "steps": f.steps,
                      "assertions_failed": f.assertions_failed} for f in facts]}


def format_report(report: dict[str, Any]) -> str:
    lines = [f"eval {report['eval_id']} · {report['workflow']} · {report['rows']} rows × "
             f"{report['repeat']} · spent ${report['spent_usd']:.4f}"
             + ("" if report["complete"] else " · incomplete (podium eval --resume "
                f"{report['eval_id']})")]
    for v in report["variants"]:
        cost = v["cost_usd"]
        ci = (f" (95% {_usd(cost['low'])}-{_usd(cost['high'])})"
              if cost["low"] is not None else "")
        rate = "-" if v["pass_rate"] is None else f"{v['pass_rate']:.0%} of {v['judged']}"
        lines.append(f"variant {v['name']}: {v['runs']}/{v['planned']} runs · pass {rate} · "
                     f"cost {_usd(cost['mean'])}{ci} · steps {_num(v['steps']['mean'])} "
                     f"(p90 {_num(v['steps']['p90'])})")
        lines.append("  outcomes: " + ", ".join(f"{k} {n}" for k, n in v["outcomes"].items()))
        if v["cost_by_agent"]:
            lines.append("  cost by agent: " + ", ".join(
                f"{a} {_usd(c)}" for a, c in v["cost_by_agent"].items()))
    diff = report["differences"]
    for row in diff["rows"]:
        lines.append(f"row {row['row']} differs: " + ", ".join(
            f"{k}: {o}" for k, o in row["outcomes"].items())
            + (f" (expected {row['expect']})" if row["expect"] else ""))
    for t in diff["tests"]:
        for what in ("pass_rate", "cost_usd"):
            x = t[what]
            verdict = "larger than chance" if x["significant"] else "within chance"
            label = "pass rate" if what == "pass_rate" else "cost"
            lines.append(f"{t['a']} vs {t['b']}, {label}: "
                         f"{_fmt(x['a'], what)} vs {_fmt(x['b'], what)}: {verdict} "
                         f"({x['test']}, p = {x['p_value']:.3g})")
    return "\n".join(lines) + "\n"


def _usd(v: float | None) -> str:
    return "-" if v is None else f"${v:.4f}"


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def _fmt(v: float | None, what: str) -> str:
    if v is None:
        return "-"
    return f"{v:.0%}" if what == "pass_rate" else f"${v:.4f}"
