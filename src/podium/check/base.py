"""Shared state of the semantic checks: the workflow, its graph, declared inputs and output
fields, and how diagnostics are added."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from podium.check.graph import RouteGraph
from podium.check.references import Ref, UsedName
from podium.language.diagnostics import KeyPath, did_you_mean
from podium.language.load import LoadResult
from podium.language.model import (
    END,
    AgentStep,
    HumanGateStep,
    McpStep,
    OutputField,
    QuestionsStep,
    ScriptStep,
    SetStep,
    StepBase,
    TerminateStep,
    WaitStep,
    WorkflowStep,
)
from podium.records import record
from podium.templating.text import RenderFailure

if TYPE_CHECKING:
    from podium.templating.trees import TemplateParser

WORKFLOW_ATTRS = ("input", "dir", "file", "name", "description")
CONTEXT_ATTRS = ("iteration", "history")
LOCAL_RENDER = (ScriptStep, SetStep, WaitStep, WorkflowStep, McpStep)
GATE_OUTPUT = ("selected", "additional_input")
TERMINATE_OUTPUT = ("status", "reason", "terminated_by")
QUESTIONS_OUTPUT = ("answers", "items", "transcript", "answered_count", "skipped_count",
                    "answered_any", "outcome")
SCRIPT_BUILTINS = ("exit_code", "stdout", "stderr")
STEP_ATTRS = ("output", "outputs", "errors", "count")  # what `X.<attr>` reads of a step/group


@record(frozen=True)
class Declared:
    """One entry of a step's `input:` list, parsed."""

    text: str
    chain: tuple[str, ...]
    optional: bool


@record
class TemplateSite:
    """A template in the workflow: where it is, who owns it and which context renders it."""

    path: KeyPath
    source: str
    owner: str | None  # the step (or group) whose template it is; None for workflow output
    scope: str  # "step" (mode context), "full" (accumulate), "route" (full + output), "hook"
    expression: bool = False  # a bare route condition
    extra_names: tuple[str, ...] = ()
    file: str | None = None  # a partial the template includes: its file, as shown


class ParserSlot:
    """The checks' template parser (podium/templating/trees.py), made when a check first needs
    the tree of a template: most templates are read from their parts (quickparse.py) or
    parsed by lightparse.py without Jinja2; only the others import Jinja's parser, and never
    the engine that renders."""

    __slots__ = ("_parser",)

    def __init__(self) -> None:
        self._parser: TemplateParser | None = None

    def get(self) -> TemplateParser:
        if self._parser is None:
            from podium.templating.trees import TemplateParser

            self._parser = TemplateParser()
        return self._parser


@record
class CheckerBase:
    """What every group of checks reads: the loaded workflow and its route graph."""

    result: LoadResult
    visited_files: tuple[Path, ...] = ()

    @property
    def parser(self) -> TemplateParser:
        return self.parser_slot.get()

    def __post_init__(self) -> None:
        self.parser_slot = ParserSlot()
        model = self.result.model
        assert model is not None
        self.wf = model
        self.steps: dict[str, StepBase] = {}
        for s in model.agents:
            self.steps.setdefault(s.name, s)
        self.parallel = {g.name: g for g in model.parallel}
        self.for_each = {g.name: g for g in model.for_each}
        self.graph = RouteGraph.build(model)
        self.all_names = (set(self.steps) | set(self.parallel) | set(self.for_each)
                          | set(self.result.raw_step_names) | set(self.result.raw_group_names))
        self.inputs = model.workflow.input
        self.mode = model.workflow.context.mode
        self.step_index = {s.name: i for i, s in reversed(list(enumerate(model.agents)))}
        # parallel members no route leads to: they run only inside their group, whose output
        # holds theirs, so no template can read `member.output` (hints never offer them)
        targets = {e.dst for edges in self.graph.succ.values() for e in edges}
        self.member_only = {m for g in model.parallel for m in g.agents} - targets - {
            model.workflow.entry_point}
        # set when a route, option or member names an unknown step: the graph then has holes,
        # and reachability or path warnings would only repeat that error
        self.graph_broken = False
        self._analysed: dict[tuple[str, bool], tuple[list[Ref], list[UsedName]]
                             | RenderFailure] = {}
        self.partials_cache: Any = None  # check/partials.py's Partials, made when needed
        self.own_sites_cache: Any = None  # check/templates.py's list of the own templates
        self._inputs_of: dict[int, list[Declared]] = {}  # id(step) -> its input: parsed

    def err(self, path: KeyPath, msg: str, hint: str | None = None, *, code: str = "invalid",
            at: str = "key") -> None:
        self.result.error(path, msg, hint, code=code, at=at)

    def warn(self, path: KeyPath, msg: str, hint: str | None = None, *, code: str = "warning",
             at: str = "key") -> None:
        self.result.warning(path, msg, hint, code=code, at=at)

    def step_path(self, name: str) -> KeyPath:
        if name in self.step_index:
            return ("agents", self.step_index[name])
        for i, pg in enumerate(self.wf.parallel):
            if pg.name == name:
                return ("parallel", i)
        for i, fe in enumerate(self.wf.for_each):
            if fe.name == name:
                return ("for_each", i)
        return ()

    def target_names(self) -> list[str]:
        return [*sorted(self.all_names), END]

    def readable(self, attr: str | None = None) -> list[str]:
        """The step and group names a template can read at the top level, narrowed by what is
        read of them: `output` belongs to steps, `outputs`/`errors` to groups, `count` to
        for-each groups (the pool of "did you mean" hints for a name)."""
        groups = set(self.parallel) | set(self.for_each)
        steps = self.all_names - groups - self.member_only
        if attr == "output":
            names = steps
        elif attr in ("outputs", "errors", "type"):
            names = groups
        elif attr == "count":
            names = set(self.for_each)
        else:
            names = steps | groups
        return sorted(names)

    def _declared(self, step: StepBase) -> list[Declared]:
        """The step's `input:` list, parsed (once: every template of the step asks)."""
        known = self._inputs_of.get(id(step))
        if known is not None:
            return known
        out = self._inputs_of[id(step)] = []
        for raw in step.input:
            text = raw.strip()
            optional = text.endswith("?")
            if optional:
                text = text[:-1]
            out.append(Declared(raw, tuple(text.split(".")), optional))
        return out

    def output_fields(self, name: str) -> set[str] | None:
        """Fields a step's output has, or None when they cannot be known statically."""
        step = self.steps.get(name)
        if step is None:
            return None
        if isinstance(step, AgentStep):
            return set(step.output) if step.has_schema and step.output else {"result"}
        if isinstance(step, ScriptStep):
            return (set(step.output) | set(SCRIPT_BUILTINS)) if step.output is not None else None
        if isinstance(step, SetStep):
            if step.values is not None:
                return set(step.values)
            return set(step.output) if step.output else None
        if isinstance(step, HumanGateStep):
            return set(GATE_OUTPUT)
        if isinstance(step, TerminateStep):
            return set(TERMINATE_OUTPUT)
        if isinstance(step, WaitStep):
            return {"waited_seconds"}
        if isinstance(step, QuestionsStep):
            return set(QUESTIONS_OUTPUT)
        if isinstance(step, McpStep):
            return set(step.output) if step.output else None
        return None

    def _schema_of(self, name: str) -> dict[str, OutputField] | None:
        step = self.steps.get(name)
        schema = getattr(step, "output", None)
        return schema if isinstance(schema, dict) else None

    def field_problem(self, name: str, rest: tuple[str, ...]) -> tuple[str, str | None] | None:
        """What is wrong with reading `name.output.<rest>`, as (message, hint), or None."""
        found = self.field_problem_at(name, rest)
        return None if found is None else (found[1], found[2])

    def field_problem_at(self, name: str,
                         rest: tuple[str, ...]) -> tuple[int, str, str | None] | None:
        """As field_problem, with the index in `rest` of the link that cannot be bound (so a
        guard on that link can excuse it)."""
        if name in self.parallel or name in self.for_each:
            return None
        fields = self.output_fields(name)
        if fields is None or not rest or rest[0].isdigit():
            return None
        if rest[0] not in fields:
            if isinstance(self.steps.get(name), ScriptStep):
                return None  # every key of a script's stdout JSON is merged in (spec 3.6)
            hint = did_you_mean(rest[0], sorted(fields)) or (
                f"its fields: {', '.join(sorted(fields))}" if fields else None)
            return 0, f"'{name}' has no output field '{rest[0]}'", hint
        schema = self._schema_of(name)
        fld = schema.get(rest[0]) if schema else None
        for i, part in enumerate(rest[1:], start=1):
            if fld is None or fld.properties is None or part.isdigit():
                return None
            if part not in fld.properties:
                where = ".".join((name, "output", *rest[:i]))
                return (i, f"'{where}' has no property '{part}'",
                        did_you_mean(part, sorted(fld.properties)))
            fld = fld.properties[part]
        return None
