"""What each kind of node can produce, as explore branches on it: the Moves of a node.

An agent or an MCP call: each combination of its fields' classes. A script: exit code 0 and
non-zero (and the codes its conditions name), with its declared fields. A gate: each option.
A `set` step: the one value its real executor computes. A sub-workflow: each outcome the
child can reach (explored the same way). A group: its members' values on success, and its
failure as its `failure_mode` words it. A terminate step ends the run with its outcome.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from podium.errors import PodiumError
from podium.explore.values import Literals, Spec, classes, exit_codes, product
from podium.language.load import LoadResult, load_workflow
from podium.language.model import (
    END,
    AgentStep,
    ForEachGroup,
    HumanGateStep,
    InputDef,
    McpStep,
    OutputField,
    ParallelGroup,
    QuestionsStep,
    ScriptStep,
    SetStep,
    StepBase,
    TerminateStep,
    WaitStep,
    WorkflowStep,
)
from podium.records import record
from podium.steps.base import StepCall
from podium.steps.set_step import execute_set
from podium.steps.state import RunState

if TYPE_CHECKING:
    from podium.explore.space import Explorer

MAX_CHILD_DEPTH = 4


@record(frozen=True)
class Move:
    """One value a node produced: what is stored, and where it leads when not routed."""

    value: Any
    label: str
    target: str | None = None  # a gate option's route (no route evaluation)
    outcome: str | None = None  # the run ends here (a terminate step, a failure)
    detail: str | None = None
    option: int | None = None  # the gate option chosen


def routing_texts(result: LoadResult) -> list[tuple[str | None, str]]:
    """Every text whose value can change where a run goes, with the step it routes."""
    wf = result.model
    assert wf is not None
    texts: list[tuple[str | None, str]] = []
    nodes: list[Any] = [*wf.agents, *wf.parallel, *wf.for_each]
    for node in nodes:
        texts.extend((node.name, r.when) for r in node.routes if r.when)
        if isinstance(node, SetStep):
            texts.extend((None, t) for t in
                         _strings(node.value if node.values is None else node.values))
        if isinstance(node, ForEachGroup):
            texts.append((None, node.source))
    return texts


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


class MoveMaker:
    """The moves of each node of one workflow."""

    def __init__(self, explorer: Explorer, result: LoadResult, depth: int = 0) -> None:
        self.explorer = explorer
        self.literals = Literals(routing_texts(result))
        self.truncated: list[str] = []
        self.depth = depth
        self._children: dict[Path, list[Move]] = {}

    def input_combinations(self) -> list[dict[str, Any]]:
        wf = self.explorer.wf
        fields = {name: self._input(name, d) for name, d in wf.workflow.input.items()}
        combos, cut = product(fields)
        if cut:
            self.truncated.append("the workflow inputs have more classes than explore tries")
        return combos or [{}]

    def _input(self, name: str, d: InputDef) -> list[Any]:
        """An input's classes; one that no routing text reads keeps its default, or "."
        for a string (any value does, and a path such as a `working_dir` must exist)."""
        if self.literals.mentions(name, "workflow"):
            return classes(name, Spec.of_input(d), self.literals, "workflow")
        if d.default is not None:
            return [d.default]
        return ["."] if d.type == "string" else classes(name, Spec.of_input(d), self.literals)

    def of(self, step: StepBase | ParallelGroup | ForEachGroup, rs: RunState) -> list[Move]:
        if isinstance(step, ParallelGroup):
            return self._parallel(step)
        if isinstance(step, ForEachGroup):
            return self._for_each(step)
        return self._step(step, rs)

    def _step(self, step: StepBase, rs: RunState) -> list[Move]:
        if isinstance(step, TerminateStep):
            return [Move({"status": step.status, "reason": step.reason}, step.status,
                         outcome=step.name)]
        if isinstance(step, HumanGateStep):
            return [Move({"selected": o.value,
                          "additional_input": {o.prompt_for: "text"} if o.prompt_for else {}},
                         o.value, target=o.route, option=i) for i, o in enumerate(step.options)]
        if isinstance(step, SetStep):
            return [self._set(step, rs)]
        if isinstance(step, ScriptStep):
            return self._script(step)
        if isinstance(step, QuestionsStep):
            return self._questions(step)
        if isinstance(step, WaitStep):
            return [Move({"waited_seconds": 0.0}, "waited")]
        if isinstance(step, WorkflowStep):
            return self._child(step)
        if isinstance(step, (AgentStep, McpStep)):
            return self._fields(step.name, step.output, raw=getattr(step, "output_mode",
                                                                     None) == "raw")
        return [Move({}, "{}")]

    def _values(self, name: str, schema: dict[str, OutputField] | None,
                raw: bool = False) -> list[dict[str, Any]]:
        if raw or not schema:
            return [{"result": v} for v in classes("result", Spec("string"), self.literals,
                                                   name)]
        fields = {f: classes(f, Spec.of_field(d), self.literals, name)
                  for f, d in schema.items()}
        combos, cut = product(fields)
        if cut:
            self.truncated.append(f"'{name}' has more classes of output than explore tries")
        return combos

    def _fields(self, name: str, schema: dict[str, OutputField] | None,
                raw: bool = False) -> list[Move]:
        return [Move(v, _label(v, self.literals, name)) for v in self._values(name, schema, raw)]

    def _script(self, step: ScriptStep) -> list[Move]:
        codes = exit_codes(self.literals, step.name)
        if step.output:
            extra = self._values(step.name, step.output)
        else:  # lenient: the keys of a JSON object on stdout are merged in; the routes name them
            fields = {name: classes(name, spec, self.literals, step.name) for name, spec in
                      self.literals.compared_by(step.name).items()
                      if name not in ("exit_code", "stdout", "stderr")}
            extra, cut = product(fields)
            if cut:
                self.truncated.append(f"'{step.name}' has more classes of output than "
                                      "explore tries")
        moves = []
        for code in codes:
            for fields in extra:
                value = {"stdout": "text", "stderr": "", "exit_code": code, **fields}
                moves.append(Move(value, _label({"exit_code": code, **fields}, self.literals,
                                                step.name)))
        return moves

    def _set(self, step: SetStep, rs: RunState) -> Move:
        services = self.explorer.services
        services.state = rs
        try:
            outcome = execute_set(StepCall(step, rs.step_counts.get(step.name, 0) + 1, services))
        except PodiumError as exc:
            return Move(None, "error", outcome="$failed", detail=str(exc))
        return Move(outcome.output, repr(outcome.output))

    def _questions(self, step: QuestionsStep) -> list[Move]:
        base = {"answers": {}, "items": [], "transcript": "", "answered_count": 0,
                "skipped_count": 0, "answered_any": False}
        moves = [Move({**base, "outcome": "completed", "answered_any": True}, "completed")]
        if step.allow_skip or step.allow_skip_all:
            moves.append(Move({**base, "outcome": "skipped_remaining"}, "skipped_remaining"))
        if step.allow_abort:
            moves.append(Move({**base, "outcome": "aborted"}, "aborted",
                              target=step.abort_route or END))
        return moves

    def _child(self, step: WorkflowStep) -> list[Move]:
        from podium.explore.space import FAILED, child_path

        path = child_path(self.explorer.path, step.workflow)
        if path is None or self.depth >= MAX_CHILD_DEPTH:
            return [Move({}, "success"), Move(None, "failed", outcome=FAILED,
                                              detail=f"sub-workflow '{step.workflow}' failed")]
        if path not in self._children:
            self._children[path] = self._child_moves(step, path)
        return self._children[path]

    def _child_moves(self, step: WorkflowStep, path: Path) -> list[Move]:
        from podium.explore.report import outcomes_of
        from podium.explore.space import FAILED, Explorer

        result = load_workflow(path)
        if result.model is None or result.sink.errors:
            return [Move({}, "success")]
        child = Explorer(result)
        child.moves.depth = self.depth + 1
        reached = outcomes_of(child, child.search())
        keys = list(result.model.output or {})
        ok = [o for o in reached if o.success]
        moves: list[Move] = []
        if ok:
            for v in self._values(step.name, {k: OutputField(type="string") for k in keys}):
                moves.append(Move(v if keys else {},
                                  f"{ok[0].name}: {_label(v, self.literals, step.name)}"))
        moves.extend(Move(None, o.name, outcome=FAILED,
                          detail=f"sub-workflow '{step.workflow}' ends at {o.name}")
                     for o in reached if not o.success)
        return moves

    def _member_values(self, members: list[StepBase]) -> list[dict[str, Any]]:
        per: dict[str, list[Any]] = {}
        for m in members:
            if isinstance(m, SetStep):
                per[m.name] = [{}]
            else:
                schema = getattr(m, "output", None)
                raw = getattr(m, "output_mode", None) == "raw"
                per[m.name] = self._values(m.name, schema, raw)
        combos, cut = product(per)
        if cut:
            self.truncated.append("a group has more classes of output than explore tries")
        return combos

    def _parallel(self, group: ParallelGroup) -> list[Move]:
        from podium.explore.space import FAILED

        members = [self.explorer.steps[n] for n in group.agents if n in self.explorer.steps]
        moves = [Move({"type": "parallel", "outputs": outs, "errors": {}}, "all succeeded")
                 for outs in self._member_values(members)]
        first = members[0].name if members else "?"
        error = {first: {"agent_name": first, "exception_type": "ExecutionError",
                         "message": "failed", "suggestion": None}}
        if group.failure_mode == "continue_on_error" and len(members) > 1:
            rest = self._member_values(members[1:])[0]
            moves.append(Move({"type": "parallel", "outputs": rest, "errors": error},
                              f"'{first}' failed"))
        moves.append(Move(None, "failed", outcome=FAILED,
                          detail=f"parallel group '{group.name}' failed ({group.failure_mode})"))
        return moves

    def _for_each(self, group: ForEachGroup) -> list[Move]:
        from podium.explore.space import FAILED

        moves = [Move({"type": "for_each", "outputs": [v[group.agent.name]], "errors": {},
                       "count": 1}, "every item succeeded")
                 for v in self._member_values([group.agent])]
        moves.append(Move({"type": "for_each", "outputs": [], "errors": {}, "count": 0},
                          "no items"))
        moves.append(Move(None, "failed", outcome=FAILED,
                          detail=f"for-each group '{group.name}' failed ({group.failure_mode})"))
        return moves


def _label(value: dict[str, Any], lit: Literals, step: str) -> str:
    shown = {k: v for k, v in value.items() if lit.mentions(k, step)}
    return ", ".join(f"{k}={v!r}" for k, v in shown.items()) or "any"
