"""`podium eval`: read the spec (a `*.eval.yaml`, or a workflow and flags), run it through
the application layer, print the report.

Exit codes: 0 the eval ran and every assertion held; 1 an assertion failed in some run; 2 an
invalid spec, dataset, variant or usage; 4 the budget stopped the eval before its last run.
"""

from __future__ import annotations

import json
import sys
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING

from podium import exitcodes
from podium.errors import UsageError
from podium.records import record

if TYPE_CHECKING:
    from podium.app.eval_spec import EvalSpec


@record
class EvalRequest:
    target: Path | None
    dataset: Path | None = None
    variants: list[str] = field(default_factory=list)
    repeat: int | None = None
    concurrency: int | None = None
    budget: float | None = None
    output_format: str = "text"
    resume: str | None = None


def _spec(req: EvalRequest) -> EvalSpec:
    from podium.app.eval_spec import build_spec, parse_variant, read_spec

    if req.target is None:
        raise UsageError("podium eval: give a spec (*.eval.yaml) or a workflow with --dataset")
    if req.target.name.endswith((".eval.yaml", ".eval.yml")):
        if req.dataset is not None or req.variants:
            raise UsageError("podium eval: a spec file holds the dataset and the variants; "
                             "give flags with a workflow file instead")
        spec = read_spec(req.target)
        for name in ("repeat", "concurrency", "budget"):  # flags win over the file
            value = getattr(req, name)
            if value is not None:
                setattr(spec, name, value)
        return spec
    if req.dataset is None:
        raise UsageError("podium eval WORKFLOW needs --dataset ROWS (or give a *.eval.yaml)")
    variants = [parse_variant(v) for v in req.variants]
    if not variants:
        from podium.app.eval_spec import Variant

        variants = [Variant("baseline")]
    return build_spec(req.target, req.dataset, variants, repeat=req.repeat or 1,
                      concurrency=req.concurrency or 2, budget=req.budget)


def _progress(line: str) -> None:
    sys.stderr.write(f"  {line}\n")


def eval_command(req: EvalRequest) -> int:
    if req.output_format not in ("text", "json"):
        sys.stderr.write(f"podium eval: --format must be 'text' or 'json' "
                         f"(got '{req.output_format}')\n")
        return exitcodes.INVALID
    from podium.app.eval_report import build_report, format_report
    from podium.app.evals import load_plan, new_eval, run_eval
    from podium.app.home import open_store

    store = open_store()
    try:
        try:
            if req.resume:
                if req.target is not None or req.dataset is not None or req.variants \
                        or req.repeat is not None:
                    raise UsageError("podium eval --resume ID takes no spec, dataset, variant "
                                     "or repeat (only --budget, --concurrency, --format)")
                eval_id = req.resume
                spec = load_plan(store, eval_id)
                if req.budget is not None:
                    spec.budget = req.budget
                if req.concurrency is not None:
                    spec.concurrency = req.concurrency
            else:
                spec = _spec(req)
                eval_id = new_eval(store, spec)
        except UsageError as exc:
            sys.stderr.write(f"podium eval: {exc}\n")
            return exitcodes.INVALID
        total = len(spec.rows) * spec.repeat * len(spec.variants)
        sys.stderr.write(f"eval {eval_id}: {total} runs ({len(spec.variants)} variants × "
                         f"{len(spec.rows)} rows × {spec.repeat}), {spec.concurrency} at a "
                         f"time; its runs: podium runs -m eval={eval_id}\n")
        done = run_eval(store, eval_id, spec,
                        progress=None if req.output_format == "json" else _progress)
        report = build_report(store, eval_id, spec)
    finally:
        store.close()
    report["stopped_by_budget"] = done.stopped_by_budget
    for failure in done.failures:
        sys.stderr.write(f"podium eval: a run could not start: {failure}\n")
    if req.output_format == "json":
        sys.stdout.write(json.dumps(report, indent=2, default=str) + "\n")
    else:
        sys.stdout.write(format_report(report))
        if done.stopped_by_budget:
            sys.stdout.write(f"stopped: the budget of ${spec.budget:.4f} is spent "
                             f"(${done.spent_usd:.4f}); more runs with podium eval --resume "
                             f"{eval_id} and a larger --budget\n")
        sys.stdout.write(f"the report in the console: podium serve, then /evals/{eval_id}\n")
    if done.stopped_by_budget:
        return exitcodes.LIMIT
    if any(r["assertions_failed"] for r in report["runs"]):
        return exitcodes.TERMINATED_FAILED
    return exitcodes.OK
