"""`podium eval`: many ordinary runs of one workflow over a dataset, per variant, and the
report that compares the variants.

Each run is `podium run` in a process of its own (so it is recorded, replayable and resumable
like any run), tagged `eval=ID`, `variant=NAME`, `row=ROW`, `repeat=K` (`podium runs -m
eval=ID`). A variant that overrides agents runs a copy of the workflow written beside it
(`.<stem>.eval-<variant>.yaml`: the same folder, so `workflow.dir` and relative paths are the
workflow's). The plan is kept in the store's folder (`evals/ID.json`) so that `--resume ID`
runs what is missing and resumes what was interrupted. What each run spent is the one fold of
its model calls (app/spend.py); its steps and outcome are the store's.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from podium.app.eval_spec import EvalSpec, Row, Variant, check_agents
from podium.errors import UsageError
from podium.records import record

if TYPE_CHECKING:
    from podium.store.base import RunRecord, RunStore

FINAL = ("success", "failed", "error", "limit")


@record(frozen=True)
class Task:
    variant: Variant
    row: Row
    repeat: int

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.variant.name, self.row.id, self.repeat)


@record
class EvalOutcome:
    eval_id: str
    started: int = 0
    resumed: int = 0
    skipped: int = 0  # already finished (on --resume)
    stopped_by_budget: bool = False
    spent_usd: float = 0.0
    failures: list[str] = field(default_factory=list)  # runs that could not start


def plan_path(store: RunStore, eval_id: str) -> Path:
    return store.folder / "evals" / f"{eval_id}.json"


def new_eval(store: RunStore, spec: EvalSpec) -> str:
    """Record the eval's plan (check its variants first); return its id."""
    from podium.app.workflows import load_valid

    for variant in spec.variants:
        path = Path(variant.workflow) if variant.workflow else spec.workflow
        wf, code = load_valid(path)
        if wf is None:
            raise UsageError(f"variant {variant.name}: {path} is not a valid workflow "
                             f"(exit {code}; see podium validate {path})")
        check_agents(variant, [s.name for s in wf.agents if s.type == "agent"])
    eval_id = secrets.token_hex(5)
    target = plan_path(store, eval_id)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps({"id": eval_id, "created_at": time.time(),
                                  "spec": spec.to_json()}, indent=2), encoding="utf-8")
    return eval_id


def load_plan(store: RunStore, eval_id: str) -> EvalSpec:
    path = plan_path(store, eval_id)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise UsageError(f"no eval '{eval_id}' in this store ({path} is missing)") from None
    return EvalSpec.from_json(data["spec"])


def tasks(spec: EvalSpec) -> list[Task]:
    """Every run of the eval, row by row (so that an interrupted eval has whole rows)."""
    return [Task(v, r, k) for r in spec.rows for k in range(1, spec.repeat + 1)
            for v in spec.variants]


# ---------------------------------------------------------------------- workflows per variant


def variant_workflow(spec: EvalSpec, variant: Variant, eval_id: str) -> Path:
    """The file a variant runs: its @FILE, the workflow itself, or a copy with its overrides
    written beside the workflow."""
    if variant.workflow:
        return Path(variant.workflow)
    if not variant.overrides:
        return spec.workflow
    from ruamel.yaml import YAML

    yaml = YAML()  # round trip: comments and layout kept, only the overridden keys change
    yaml.preserve_quotes = True
    data = yaml.load(spec.workflow.read_text(encoding="utf-8"))
    for step in data.get("agents") or []:
        if step.get("type", "agent") != "agent":
            continue
        for agent, key, value in variant.overrides:
            if agent in ("*", step.get("name")):
                if key == "reasoning.effort":
                    step.setdefault("reasoning", {})["effort"] = value
                else:
                    step[key] = value
    target = spec.workflow.with_name(f".{spec.workflow.stem}.eval-{variant.name}.yaml")
    with target.open("w", encoding="utf-8") as fh:
        fh.write(f"# Written by podium eval {eval_id}: {spec.workflow.name} with the "
                 f"overrides of variant {variant.name!r}.\n")
        yaml.dump(data, fh)
    return target


# ---------------------------------------------------------------------- running


def _responses(spec: EvalSpec, task: Task) -> Path | None:
    if task.variant.responses:
        return Path(task.variant.responses.replace("{row}", task.row.id))
    mine = task.row.responses_for(task.variant.name)
    if mine:
        return (spec.dataset.parent / mine).resolve()
    return None


def _fresh_copy(source: Path, target: Path) -> Path:
    """A copy of a folder for one run: a git repository with its history, a plain folder
    committed into a new one (an agent's diff is then its own)."""
    import shutil

    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target, symlinks=True)
    if not (target / ".git").exists():
        git = ["git", "-C", str(target), "-c", "user.name=podium",
               "-c", "user.email=eval@podium.invalid"]
        for args in (["init", "--quiet"], ["add", "-A"],
                     ["commit", "--quiet", "--allow-empty", "-m", "podium eval: a fresh copy"]):
            subprocess.run([*git, *args], check=True, capture_output=True)
    return target


def _inputs(spec: EvalSpec, task: Task, folder: Path) -> Path:
    """The run's inputs file; each of `copy_inputs` points at a fresh copy of its folder."""
    values = dict(task.row.inputs)
    tag = f"{task.variant.name}-{task.row.id}-{task.repeat}"
    for name in spec.copy_inputs:
        if name not in values:
            raise UsageError(f"copy_inputs: row {task.row.id} has no input '{name}'")
        source = (spec.dataset.parent / str(values[name])).resolve()
        if not source.is_dir():
            raise UsageError(f"copy_inputs: row {task.row.id}: {name} = {values[name]!r} is "
                             "not a folder")
        values[name] = str(_fresh_copy(source, folder / "work" / tag / name))
    path = folder / f"inputs-{tag}.json"
    path.write_text(json.dumps(values), encoding="utf-8")
    return path


def _argv(spec: EvalSpec, task: Task, eval_id: str, workflow: Path, folder: Path) -> list[str]:
    inputs = _inputs(spec, task, folder)
    argv = [sys.executable, "-m", "podium", "--silent", "run", str(workflow),
            "--input-file", str(inputs), "--no-interactive",
            "-m", f"eval={eval_id}", "-m", f"variant={task.variant.name}",
            "-m", f"row={task.row.id}", "-m", f"repeat={task.repeat}"]
    responses = _responses(spec, task)
    if responses is not None:
        argv += ["--responses", str(responses)]
    return argv


def eval_runs(store: RunStore, eval_id: str) -> list[RunRecord]:
    from podium.app.runs import list_runs

    return [r for r, _ in list_runs(store, metadata={"eval": eval_id}, limit=1_000_000)]


def _key_of(run: RunRecord) -> tuple[str, str, int] | None:
    from podium.app.runs import run_metadata

    meta = run_metadata(run)
    try:
        return (meta["variant"], meta["row"], int(meta["repeat"]))
    except (KeyError, ValueError):
        return None


def run_eval(store: RunStore, eval_id: str, spec: EvalSpec,
             progress: Callable[[str], None] | None = None) -> EvalOutcome:
    """Run every task that has no finished run yet (resuming those a killed eval left
    interrupted), `spec.concurrency` at a time, until the budget is spent."""
    from podium.app.owners import liveness

    out = EvalOutcome(eval_id)
    existing: dict[tuple[str, str, int], RunRecord] = {}
    for run in eval_runs(store, eval_id):
        key = _key_of(run)
        if key is not None and run.parent_run_id is None:
            existing[key] = run
    folder = plan_path(store, eval_id).with_suffix("")
    folder.mkdir(parents=True, exist_ok=True)
    files = {v.name: variant_workflow(spec, v, eval_id) for v in spec.variants}
    todo: list[tuple[Task, list[str]]] = []
    for task in tasks(spec):
        found = existing.get(task.key)
        if found is not None and liveness(store, found).status in FINAL:
            out.skipped += 1
            continue
        if found is not None:  # interrupted, or parked at a gate: go on with it
            argv = [sys.executable, "-m", "podium", "--silent", "resume", found.id,
                    "--no-interactive"]
            responses = _responses(spec, task)
            if responses is not None:
                argv += ["--responses", str(responses)]
            todo.append((task, argv))
        else:
            todo.append((task, _argv(spec, task, eval_id, files[task.variant.name], folder)))
    finished: dict[str, float] = {}  # the cost of the runs that ended, folded once
    out.spent_usd = spent(store, eval_id, finished)
    lock = threading.Lock()

    def one(item: tuple[Task, list[str]]) -> None:
        task, argv = item
        with lock:
            if spec.budget is not None and out.spent_usd >= spec.budget:
                out.stopped_by_budget = True
                return
            if argv[4] == "resume":
                out.resumed += 1
            else:
                out.started += 1
        # a run starts in the dataset's folder: the rows' relative paths are relative to it
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              errors="replace", env={**os.environ}, check=False,
                              cwd=spec.dataset.parent)
        if done.returncode == 2:
            with lock:
                out.failures.append(f"{task.variant.name} / row {task.row.id}: "
                                    f"{done.stderr.strip().splitlines()[-1:] or ['?']}")
        with lock:  # one reader of the cache at a time
            out.spent_usd = spent(store, eval_id, finished)
        if progress is not None:
            progress(f"{task.variant.name} · row {task.row.id} · #{task.repeat}: "
                     f"exit {done.returncode}")

    with ThreadPoolExecutor(max_workers=spec.concurrency) as pool:
        list(pool.map(one, todo))
    return out


def spent(store: RunStore, eval_id: str, finished: dict[str, float] | None = None) -> float:
    """What the eval's runs spent so far: the fold of their model calls. `finished` keeps
    the cost of runs that ended (it cannot change), so that asking after every run does not
    fold every earlier run's events again."""
    from podium.app.spend import run_spend

    known = {} if finished is None else finished
    total = 0.0
    for r in eval_runs(store, eval_id):
        if r.parent_run_id is not None:
            continue
        cost = known.get(r.id)
        if cost is None:
            cost = run_spend(store, r.id).total.cost_usd
            if r.status in FINAL:
                known[r.id] = cost
        total += cost
    return total


def eval_report(store: RunStore, eval_id: str) -> dict[str, Any] | None:
    """The report of a recorded eval (None when the store has no eval of that id)."""
    from podium.app.eval_report import build_report

    if not plan_path(store, eval_id).is_file():
        return None
    return build_report(store, eval_id, load_plan(store, eval_id))
