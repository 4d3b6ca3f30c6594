"""`podium doctor`'s "temporal runs" check: top-level runs on Temporal workers that the store
says are running or waiting while their workflow has closed (terminated or failed outside
podium, timed out): nothing will ever advance or end them. temporalio is imported only when
some run is on Temporal."""

from __future__ import annotations

from typing import TYPE_CHECKING

from podium.app.owners import runs_on_temporal

if TYPE_CHECKING:
    from podium.app.doctor import Finding
    from podium.store.base import RunRecord, RunStore

TEMPORAL = "temporal runs"
_EVERY = 1_000_000


def check_temporal_runs(store: RunStore) -> list[Finding]:
    """One problem per run whose workflow is closed or unknown to its server, one per server
    that does not answer; an ok line when every such run's workflow runs; nothing at all when
    no run in progress is on Temporal."""
    runs = [r for r in store.list_runs(status=("running", "waiting"), limit=_EVERY)
            if not r.parent_run_id and runs_on_temporal(r)]
    if not runs:
        return []
    from podium.app.doctor import Finding
    from podium.app.remote import TemporalUnreachable, on_temporal, workflow_status

    findings: list[Finding] = []
    unreachable: set[str] = set()
    live = 0
    for run in runs:
        where = str((on_temporal(run) or {}).get("address") or "")
        if where and where in unreachable:
            continue
        try:
            status = workflow_status(run)
        except TemporalUnreachable as exc:
            unreachable.add(where)
            findings.append(Finding("problem", TEMPORAL, f"{exc}; its runs there were not "
                                    "checked", "start the Temporal server (or check its "
                                    "address), then run podium doctor again"))
            continue
        if status == "running":
            live += 1
        else:
            findings.append(_closed(run, status))
    if live and not findings:
        findings.append(Finding("ok", TEMPORAL, f"{live} run{'s' * (live != 1)} on Temporal, "
                                "each with its workflow running"))
    return findings


def _closed(run: RunRecord, status: str | None) -> Finding:
    from podium.app.doctor import Finding

    said = f"its workflow is {status}" if status else "its server does not know its workflow"
    return Finding("problem", TEMPORAL,
                   f"run {run.id} ({run.workflow_name}) is marked {run.status}, but {said} on "
                   "Temporal: nothing will advance it",
                   f"podium stop {run.id} marks it interrupted")
