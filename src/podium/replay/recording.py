"""A run's recording: what the outside world gave it, read back from its events.

Model exchanges, script results, gate answers, limit grants, waits and MCP calls are keyed by
(step, execution), an agent's validator, dialog and re-run calls by (`step.call`, execution)
(providers/base.py call_key), a dialog's answers by (step, execution); the trajectory is the list of steps the run took with their outputs and
routes, and the final status and output. Sub-workflow runs have recordings of their own.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import field
from typing import TYPE_CHECKING, Any

from podium.events.spend import RunSpend, fold_spend
from podium.providers.base import call_key
from podium.records import record

if TYPE_CHECKING:
    from podium.store.base import RunStore

Key = tuple[str, int]


@record(frozen=True)
class TrajectoryStep:
    step: str
    step_type: str
    iteration: int
    output: Any
    route_to: str | None
    route_index: int | None
    evaluated: tuple[dict[str, Any], ...] = ()


@record
class Recording:
    run_id: str
    workflow: str
    workflow_path: str
    workflow_hash: str
    inputs: dict[str, Any]
    recorded: bool
    exchanges: dict[Key, list[dict[str, Any]]] = field(default_factory=dict)
    prompts: dict[Key, dict[str, Any]] = field(default_factory=dict)
    scripts: dict[Key, dict[str, Any]] = field(default_factory=dict)
    mcp: dict[Key, dict[str, Any]] = field(default_factory=dict)
    waits: dict[Key, Any] = field(default_factory=dict)
    gates: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    dialogs: dict[Key, list[dict[str, Any]]] = field(default_factory=dict)  # the person's turns
    grants: list[int] = field(default_factory=list)
    trajectory: list[TrajectoryStep] = field(default_factory=list)
    final: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, dict[str, Any]] = field(default_factory=dict)  # per agent: spend's rows
    spend: RunSpend = field(default_factory=RunSpend)
    children: dict[tuple[str, int, str], Recording] = field(default_factory=dict)
    instructions: dict[str, str] = field(default_factory=dict)  # run_started's
    guidance: list[tuple[int, str]] = field(default_factory=list)  # (seq, text)

    def guidance_before(self, step: str, iteration: int) -> list[str]:
        """The guidance the run had taken in when it rendered this agent's prompt."""
        prompt = self.prompts.get((step, iteration))
        if prompt is None:
            return [text for _, text in self.guidance]
        return [text for seq, text in self.guidance if seq < int(prompt.get("seq", 0))]


def recording_from_events(events: list[dict[str, Any]],
                          children: dict[tuple[str, int, str], Recording] | None = None
                          ) -> Recording:
    """Build a recording from one run's events (in seq order)."""
    start = next((e for e in events if e["type"] == "run_started"), None)
    if start is None:
        raise ValueError("the events hold no run_started event")
    rec = Recording(start["run_id"], start["workflow"], start["workflow_path"],
                    start["workflow_hash"], dict(start.get("inputs", {})),
                    recorded=bool(start.get("recorded", True)), children=children or {})
    exchanges: dict[Key, list[dict[str, Any]]] = defaultdict(list)
    gates: dict[str, list[dict[str, Any]]] = defaultdict(list)
    pending: dict[str, Any] | None = None
    rec.instructions = dict(start.get("instructions") or {})
    for e in events:
        t = e["type"]
        if t == "guidance_added":
            rec.guidance.append((int(e.get("seq", 0)), str(e.get("text", ""))))
        elif t == "model_exchange" and not e.get("failed"):  # a failed call had no answer
            exchanges[(call_key(e["step"], e.get("call")), int(e["iteration"]))].append(e)
        elif t == "prompt_rendered":
            rec.prompts[(call_key(e["step"], e.get("call")), int(e["iteration"]))] = e
        elif t == "dialog_message" and e.get("role") == "user":
            rec.dialogs.setdefault((e["step"], int(e["iteration"])), []).append(e)
        elif t == "script_output":
            rec.scripts[(e["step"], int(e["iteration"]))] = e
        elif t == "mcp_called":
            rec.mcp[(e["step"], int(e["iteration"]))] = e
        elif t == "gate_answered" and e.get("kind", "human_gate") == "human_gate":
            gates[e["step"]].append(e)
        elif t == "limit_resolved" and e.get("limit") == "iterations":
            rec.grants.append(int(e.get("granted", 0)))
        elif t == "step_finished" and not e.get("group"):
            if e["step_type"] == "wait":
                rec.waits[(e["step"], int(e["iteration"]))] = e.get("output")
            pending = e
            rec.trajectory.append(TrajectoryStep(e["step"], e["step_type"], int(e["iteration"]),
                                                 e.get("output"), None, None))
        elif t == "route_taken" and pending is not None and e["from_step"] == pending["step"]:
            last = rec.trajectory[-1]
            rec.trajectory[-1] = TrajectoryStep(last.step, last.step_type, last.iteration,
                                                last.output, e["to_step"], e.get("route_index"),
                                                tuple(e.get("evaluated", ())))
            pending = None
        elif t == "run_finished":
            rec.final = e
    rec.exchanges = {k: sorted(v, key=lambda x: int(x.get("attempt", 1)))
                     for k, v in exchanges.items()}
    rec.gates = dict(gates)
    # what it spent, per agent: the fold of its model calls and its children's (events/spend.py)
    rec.spend = fold_spend(events, [(key[0], child.spend) for key, child in rec.children.items()])
    rec.usage = {name: s.as_json() for name, s in rec.spend.by_agent.items()}
    return rec


def load_recording(store: RunStore, run_id: str) -> Recording:
    """A stored run's recording, with the recordings of its sub-workflow runs."""
    children: dict[tuple[str, int, str], Recording] = {}
    for child in store.list_runs(parent=run_id, limit=100_000):
        opts = child.options or {}
        key = (str(opts.get("parent_step")), int(opts.get("parent_iteration") or 0),
               str(opts.get("slot")))
        children[key] = load_recording(store, child.id)
    return recording_from_events(store.events(run_id), children)
