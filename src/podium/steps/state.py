"""Run state and the template contexts built from it (accumulate, last_only, explicit).

The state keeps the latest output of every step (what templates see), the order of stored
steps (`context.history`), per-step execution counts, and every execution's output (the run's
history, which a re-executed step never overwrites). The engine writes it; steps read it
through their RunServices, which is why it lives here, below the engine.
"""

from __future__ import annotations

import json
from dataclasses import field
from typing import Any

from podium.errors import StepError
from podium.language.model import json_kind
from podium.records import record

SUMMARY_KEY = "_context_summary"  # where `trim_strategy: summarize` keeps older outputs


@record
class StepRecord:
    """One execution of a step, kept in the run's history."""

    step: str
    step_type: str
    iteration: int
    run_iteration: int
    output: Any
    route_to: str | None = None
    elapsed: float = 0.0


@record
class RunState:
    """Everything a run has produced so far; serialisable for checkpoints."""

    inputs: dict[str, Any]
    outputs: dict[str, Any] = field(default_factory=dict)
    history: list[str] = field(default_factory=list)
    step_counts: dict[str, int] = field(default_factory=dict)
    records: list[StepRecord] = field(default_factory=list)
    run_iteration: int = 0
    max_iterations: int = 10

    def store(self, name: str, value: Any) -> None:
        self.outputs[name] = value
        self.history.append(name)

    def apply_trim(self, dropped: list[str], truncated: dict[str, dict[str, str]],
                   summary: dict[str, Any] | None) -> None:
        """What `context.max_tokens` trimming changed (a `context_trimmed` event): dropped
        outputs, cut fields, the summary of older outputs (engine/trim.py)."""
        for name in dropped:
            self.outputs.pop(name, None)
        for name, fields in truncated.items():
            value = self.outputs.get(name)
            if isinstance(value, dict):
                self.outputs[name] = {**value, **fields}  # a copy: records keep the original
        if summary is not None:
            self.outputs[SUMMARY_KEY] = summary

    def to_json(self) -> dict[str, Any]:
        return {
            "inputs": self.inputs, "outputs": self.outputs, "history": self.history,
            "step_counts": self.step_counts, "run_iteration": self.run_iteration,
            "max_iterations": self.max_iterations,
            "records": [r.__dict__ for r in self.records],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunState:
        state = cls(inputs=dict(data.get("inputs", {})))
        state.outputs = dict(data.get("outputs", {}))
        state.history = list(data.get("history", []))
        state.step_counts = {k: int(v) for k, v in data.get("step_counts", {}).items()}
        state.run_iteration = int(data.get("run_iteration", 0))
        state.max_iterations = int(data.get("max_iterations", 10))
        state.records = [StepRecord(**r) for r in data.get("records", [])]
        return state


@record(frozen=True)
class WorkflowInfo:
    """What templates see as `workflow.*`."""

    name: str
    description: str | None
    dir: str
    file: str


class ContextBuilder:
    """Builds the mapping a template renders against, following the context mode."""

    def __init__(self, info: WorkflowInfo, group_names: frozenset[str]) -> None:
        self.info = info
        self.group_names = group_names

    def _workflow(self, inputs: dict[str, Any]) -> dict[str, Any]:
        return {"input": inputs, "dir": self.info.dir, "file": self.info.file,
                "name": self.info.name, "description": self.info.description}

    def _wrap(self, name: str, value: Any) -> Any:
        return value if name in self.group_names else {"output": value}

    def estimate_tokens(self, state: RunState) -> int:
        """Conductor's size of the context in tokens: the JSON of the whole (accumulate)
        context, as Conductor builds it, in characters / 4."""
        ctx = self.full(state)
        ctx["workflow"] = {k: v for k, v in ctx["workflow"].items() if k != "description"}
        try:
            text = json.dumps(ctx)
        except (TypeError, ValueError):
            text = str(ctx)
        return len(text) // 4

    def full(self, state: RunState) -> dict[str, Any]:
        """The accumulate context: every stored step and group."""
        ctx: dict[str, Any] = {name: self._wrap(name, v) for name, v in state.outputs.items()}
        ctx["workflow"] = self._workflow(state.inputs)
        ctx["context"] = {"iteration": len(state.history), "history": list(state.history)}
        return ctx

    def last_only(self, state: RunState) -> dict[str, Any]:
        ctx: dict[str, Any] = {}
        if state.history:
            last = state.history[-1]
            ctx[last] = self._wrap(last, state.outputs[last])
        ctx["workflow"] = self._workflow(state.inputs)
        ctx["context"] = {"iteration": len(state.history), "history": list(state.history)}
        return ctx

    def explicit(self, state: RunState, step: str, declared: list[str],
                 all_inputs: bool) -> dict[str, Any]:
        """Only what `declared` names (plus workflow.dir/file/name and `context`)."""
        inputs: dict[str, Any] = dict(state.inputs) if all_inputs else {}
        ctx: dict[str, Any] = {}
        for raw in declared:
            text = raw.strip()
            optional = text.endswith("?")
            if optional:
                text = text[:-1]
            parts = text.split(".")
            if parts[0] == "workflow":
                if len(parts) >= 3 and parts[1] == "input":
                    key = parts[2]
                    if key in state.inputs:
                        inputs[key] = state.inputs[key]
                    elif optional:
                        inputs[key] = None
                    else:
                        raise StepError(f"'{step}' declares input '{raw}', but the run has no "
                                        f"workflow input '{key}'", step=step)
                continue
            name = parts[0]
            if name not in state.outputs:
                if optional:
                    continue
                raise StepError(f"'{step}' declares input '{raw}', but '{name}' has not run yet "
                                "(mark it optional with '?' if that can happen)", step=step)
            self._project(ctx, state, _Ref(raw, optional, step, name), parts[1:])
        ctx["workflow"] = self._workflow(inputs)
        ctx["context"] = {"iteration": len(state.history), "history": list(state.history)}
        return ctx

    def _project(self, ctx: dict[str, Any], state: RunState, ref: _Ref,
                 rest: list[str]) -> None:
        name = ref.name
        value = state.outputs[name]
        if name in self.group_names:
            if not rest:
                ctx[name] = value
                return
            target = ctx.setdefault(name, {"type": value.get("type")})
            _copy_path(target, value, rest, ref)
            return
        if not rest or rest == ["output"]:
            ctx[name] = {"output": value}
            return
        path = rest[1:] if rest[0] == "output" else rest
        holder = ctx.get(name)
        if holder is not None and holder.get("output") is value:
            return  # the whole output is already declared
        if holder is None:
            holder = ctx[name] = {"output": {}}
        _copy_path(holder["output"], value, path, ref)


@record(frozen=True)
class _Ref:
    """One `input:` declaration being projected: its text, optionality, owner and target."""

    raw: str
    optional: bool
    step: str
    name: str


def _copy_path(target: dict[str, Any], source: Any, path: list[str], ref: _Ref) -> None:
    """Copy the field at `path` of `source` into `target`, creating the dicts on the way."""
    cur_src = source
    cur_dst = target
    for i, part in enumerate(path):
        if not isinstance(cur_src, dict):
            if ref.optional:
                return
            raise StepError(f"'{ref.step}' declares input '{ref.raw}', but '{ref.name}' output "
                            f"is {json_kind(cur_src)}, not a mapping", step=ref.step)
        if part not in cur_src:
            if ref.optional:
                return
            raise StepError(f"'{ref.step}' declares input '{ref.raw}', but '{ref.name}' output "
                            f"has no field '{'.'.join(path[: i + 1])}'", step=ref.step)
        if i == len(path) - 1:
            cur_dst[part] = cur_src[part]
        else:
            nxt = cur_dst.get(part)
            if not isinstance(nxt, dict):
                nxt = {}
                cur_dst[part] = nxt
            cur_dst = nxt
            cur_src = cur_src[part]

