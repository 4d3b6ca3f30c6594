"""Semantic checks of a loaded workflow: names, routes, templates, context and paths.

Each check adds diagnostics to the LoadResult; nothing stops at the first problem. Template
checks work on the Jinja AST (see references.py), so loop variables and string literals are
never mistaken for step names.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from podium.check.graph import RouteGraph
from podium.check.references import JINJA_GLOBALS, Ref, UsedName, collect_refs
from podium.spec.diagnostics import KeyPath, Severity, closest, did_you_mean
from podium.spec.load import LoadResult
from podium.spec.model import (
    END,
    AgentStep,
    ForEachGroup,
    HumanGateStep,
    McpStep,
    OutputField,
    ParallelGroup,
    QuestionsStep,
    Route,
    ScriptStep,
    SetStep,
    StepBase,
    TerminateStep,
    WaitStep,
    WorkflowStep,
)
from podium.spec.source import display_path
from podium.templating import RenderFailure, TemplateEngine, is_jinja_condition, is_template

WORKFLOW_ATTRS = ("input", "dir", "file", "name", "description")
CONTEXT_ATTRS = ("iteration", "history")
LOCAL_RENDER = (ScriptStep, SetStep, WaitStep, WorkflowStep, McpStep)
GATE_OUTPUT = ("selected", "additional_input")
TERMINATE_OUTPUT = ("status", "reason", "terminated_by")
QUESTIONS_OUTPUT = ("answers", "items", "transcript", "answered_count", "skipped_count",
                    "answered_any", "outcome")
SCRIPT_BUILTINS = ("exit_code", "stdout", "stderr")
STEP_ATTRS = ("output", "outputs", "errors", "count")  # what `X.<attr>` reads of a step/group


@dataclass(frozen=True)
class Declared:
    """One entry of a step's `input:` list, parsed."""

    text: str
    chain: tuple[str, ...]
    optional: bool


@dataclass
class TemplateSite:
    """A template in the workflow: where it is, who owns it and which context renders it."""

    path: KeyPath
    source: str
    owner: str | None  # the step (or group) whose template it is; None for workflow output
    scope: str  # "step" (mode context), "full" (accumulate), "route" (full + output), "hook"
    expression: bool = False  # a bare route condition
    extra_names: tuple[str, ...] = ()


@dataclass
class Checker:
    result: LoadResult
    engine: TemplateEngine = field(default_factory=TemplateEngine)
    visited_files: tuple[Path, ...] = ()

    def __post_init__(self) -> None:
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
        # set when a route, option or member names an unknown step: the graph then has holes,
        # and reachability or path warnings would only repeat that error
        self.graph_broken = False
        self._analysed: dict[tuple[str, bool], tuple[list[Ref], list[UsedName]]
                             | RenderFailure] = {}

    # ------------------------------------------------------------------ helpers

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

    # ------------------------------------------------------------------ run all

    def run(self) -> None:
        self.check_names()
        self.check_targets()
        self.check_routes()
        self.check_groups()
        self.check_reachability()
        self.check_inputs_declared()
        self.check_templates()
        self.check_output_paths()
        self.check_subworkflows()

    # ------------------------------------------------------------------ names and targets

    def check_names(self) -> None:
        seen: dict[str, KeyPath] = {}
        items: list[tuple[str, KeyPath]] = [(s.name, ("agents", i, "name"))
                                            for i, s in enumerate(self.wf.agents)]
        items += [(g.name, ("parallel", i, "name")) for i, g in enumerate(self.wf.parallel)]
        items += [(g.name, ("for_each", i, "name")) for i, g in enumerate(self.wf.for_each)]
        reserved = {"workflow", "context", "output", END}
        for name, path in items:
            if name in seen:
                self.graph_broken = True  # which of the two do routes mean?
                first = self.result.smap.key(seen[name])
                self.err(path, f"duplicate name '{name}' (first defined at line {first.line})",
                         "every step and group needs its own name", code="duplicate-name",
                         at="value")
            else:
                seen[name] = path
            if name in reserved:
                self.err(path, f"'{name}' is a reserved name", code="reserved-name", at="value")
            elif not name.replace("-", "_").isidentifier():
                self.warn(path, f"'{name}' is not a valid template identifier; templates "
                          f"cannot refer to it as {name}.output", code="name", at="value")

    def _check_target(self, path: KeyPath, target: str) -> None:
        if target != END and target not in self.all_names:
            self.graph_broken = True
            names = self.target_names()
            listed = (f"one of: {', '.join(names)}" if len(names) <= 8
                      else f"targets are step or group names, or {END}")
            self.err(path, f"unknown step '{target}'", did_you_mean(target, names) or listed,
                     code="unknown-step", at="value")

    def check_targets(self) -> None:
        entry = self.wf.workflow.entry_point
        if entry not in self.all_names:
            self.graph_broken = True
            self.err(("workflow", "entry_point"), f"entry point '{entry}' is not a step or group",
                     did_you_mean(entry, sorted(self.all_names)), code="unknown-step",
                     at="value")
        for i, step in enumerate(self.wf.agents):
            for j, r in enumerate(step.routes):
                self._check_target(("agents", i, "routes", j, "to"), r.to)
            if isinstance(step, HumanGateStep):
                values: set[str] = set()
                for j, o in enumerate(step.options):
                    self._check_target(("agents", i, "options", j, "route"), o.route)
                    if o.value in values:
                        self.warn(("agents", i, "options", j, "value"),
                                  f"option value '{o.value}' is used twice in this gate",
                                  code="duplicate-option", at="value")
                    values.add(o.value)
            if isinstance(step, QuestionsStep) and step.abort_route != END:
                self._check_target(("agents", i, "abort_route"), step.abort_route)
        group_routes = [(("parallel", i), g.routes) for i, g in enumerate(self.wf.parallel)]
        group_routes += [(("for_each", i), g.routes) for i, g in enumerate(self.wf.for_each)]
        for base, routes in group_routes:
            for j, r in enumerate(routes):
                self._check_target((*base, "routes", j, "to"), r.to)

    # ------------------------------------------------------------------ route rules

    def check_routes(self) -> None:
        owners: list[tuple[str, KeyPath, list[Route]]] = [
            (s.name, ("agents", i), s.routes) for i, s in enumerate(self.wf.agents)
            if not isinstance(s, (HumanGateStep, TerminateStep))]
        owners += [(g.name, ("parallel", i), g.routes) for i, g in enumerate(self.wf.parallel)]
        owners += [(g.name, ("for_each", i), g.routes) for i, g in enumerate(self.wf.for_each)]
        members = {m for g in self.wf.parallel for m in g.agents}
        for name, base, routes in owners:
            if name in members:
                continue
            default_at: int | None = None
            conditions: dict[str, int] = {}
            for j, r in enumerate(routes):
                path = (*base, "routes", j)
                if default_at is not None:
                    self.warn(path, f"route to '{r.to}' is never taken: routes[{default_at}] "
                              "has no condition and always wins", "move the default route last",
                              code="shadowed-route")
                if r.when is None:
                    if default_at is None:
                        default_at = j
                    continue
                norm = " ".join(r.when.split())
                if norm in conditions:
                    k = conditions[norm]
                    self.warn((*path, "when"), f"same condition as routes[{k}]; this route is "
                              "never taken", code="duplicate-condition", at="value")
                else:
                    conditions[norm] = j
                if r.output and r.to != END:
                    self.warn((*path, "output"), f"route 'output' is only used when the route "
                              f"goes to {END}", code="route-output")
            if routes and default_at is None:
                self.warn((*base, "routes"), f"every route of '{name}' has a condition: when "
                          "none holds, the run stops with a 'no matching route' error",
                          "add a last route without 'when'", code="no-default-route")

    # ------------------------------------------------------------------ groups

    def check_groups(self) -> None:
        for i, g in enumerate(self.wf.parallel):
            self._check_parallel(i, g)
        for i, fe in enumerate(self.wf.for_each):
            self._check_for_each(i, fe)

    def _check_parallel(self, i: int, g: ParallelGroup) -> None:
        if g.name in self.steps:
            self.err(("parallel", i, "name"), f"'{g.name}' is both a step and a parallel group",
                     code="duplicate-name", at="value")
        for j, member in enumerate(g.agents):
            path: KeyPath = ("parallel", i, "agents", j)
            step = self.steps.get(member)
            if step is None:
                self.graph_broken = True
                self.err(path, f"unknown step '{member}'",
                         did_you_mean(member, sorted(self.steps)), code="unknown-step",
                         at="value")
                continue
            if not isinstance(step, (AgentStep, SetStep)):
                self.err(path, f"'{member}' is a {step.type} step; parallel members must be "
                         "agent or set steps", code="group-member", at="value")
            if step.routes:
                self.err((*self.step_path(member), "routes"),
                         f"'{member}' is a member of parallel group '{g.name}' and cannot have "
                         "routes", f"give the routes to '{g.name}'", code="group-member")
            siblings = set(g.agents) - {member}
            for decl in self._declared(step):
                if decl.chain[0] in siblings:
                    self.err((*self.step_path(member), "input"),
                             f"'{member}' reads its sibling '{decl.chain[0]}' in parallel group "
                             f"'{g.name}'; members run at the same time", code="group-member")

    def _check_for_each(self, i: int, fe: ForEachGroup) -> None:
        step = fe.agent
        if isinstance(step, (ScriptStep, WaitStep, TerminateStep, QuestionsStep, HumanGateStep)):
            self.err(("for_each", i, "agent", "type"), f"a for_each item step cannot be a "
                     f"{step.type} step", "use an agent, set or workflow step",
                     code="group-member", at="value")
        if step.name in self.for_each:
            self.err(("for_each", i, "agent", "name"), "nested for-each groups are not allowed",
                     code="group-member", at="value")
        root = fe.source.split(".")[0]
        if root != "workflow" and root not in self.all_names:
            self.err(("for_each", i, "source"), f"unknown step '{root}' in source",
                     did_you_mean(root, sorted(self.all_names)), code="unknown-step",
                     at="value")
        elif root == "workflow":
            parts = fe.source.split(".")
            if parts[1] != "input":
                self.err(("for_each", i, "source"), "a workflow source must be "
                         "'workflow.input.<name>'", code="source", at="value")
            elif self.inputs and parts[2] not in self.inputs:
                self.err(("for_each", i, "source"), f"unknown workflow input '{parts[2]}'",
                         did_you_mean(parts[2], self.inputs), code="unknown-input", at="value")

    # ------------------------------------------------------------------ reachability

    def check_reachability(self) -> None:
        if self.graph_broken or self.wf.workflow.entry_point not in self.graph.succ:
            return
        reach = self.graph.reachable()
        members = {m for g in self.wf.parallel if g.name in reach for m in g.agents}
        for name in self.graph.nodes:
            if name not in reach and name not in members:
                self.warn((*self.step_path(name), "name"), f"'{name}' is unreachable: no route "
                          "from the entry point leads to it", code="unreachable", at="value")

    # ------------------------------------------------------------------ input declarations

    def _declared(self, step: StepBase) -> list[Declared]:
        out = []
        for raw in step.input:
            text = raw.strip()
            optional = text.endswith("?")
            if optional:
                text = text[:-1]
            out.append(Declared(raw, tuple(text.split(".")), optional))
        return out

    def check_inputs_declared(self) -> None:
        for i, step in enumerate(self.wf.agents):
            for j, decl in enumerate(self._declared(step)):
                self._check_declaration(("agents", i, "input", j), decl)
        for i, fe in enumerate(self.wf.for_each):
            for j, decl in enumerate(self._declared(fe.agent)):
                self._check_declaration(("for_each", i, "agent", "input", j), decl)

    def _check_declaration(self, path: KeyPath, decl: Declared) -> None:
        chain = decl.chain
        if not chain or any(not p for p in chain):
            self.err(path, f"'{decl.text}' is not a valid input reference",
                     "use 'workflow.input.name', 'step.output', 'step.output.field' or "
                     "'group.outputs'", code="input-ref", at="value")
            return
        if chain[0] == "workflow":
            if len(chain) != 3 or chain[1] != "input":
                self.err(path, f"'{decl.text}' is not a valid input reference",
                         "workflow inputs are referenced as 'workflow.input.name'",
                         code="input-ref", at="value")
            elif self.inputs and chain[2] not in self.inputs:
                msg = f"unknown workflow input '{chain[2]}'"
                hint = did_you_mean(chain[2], self.inputs)
                if decl.optional:
                    self.warn(path, msg, hint, code="unknown-input", at="value")
                else:
                    self.err(path, msg, hint, code="unknown-input", at="value")
            return
        if chain[0] not in self.all_names:
            msg = f"unknown step '{chain[0]}'"
            hint = did_you_mean(chain[0], sorted(self.all_names))
            if decl.optional:
                self.warn(path, msg, hint, code="unknown-step", at="value")
            else:
                self.err(path, msg, hint, code="unknown-step", at="value")
            return
        if len(chain) >= 3 and chain[1] == "output":
            problem = self.field_problem(chain[0], chain[2:])
            if problem:
                self.err(path, problem[0], problem[1], code="unknown-field", at="value")

    # ------------------------------------------------------------------ output fields

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
        if name in self.parallel or name in self.for_each:
            return None
        fields = self.output_fields(name)
        if fields is None or not rest or rest[0].isdigit():
            return None
        if rest[0] not in fields:
            hint = did_you_mean(rest[0], sorted(fields)) or (
                f"its fields: {', '.join(sorted(fields))}" if fields else None)
            return f"'{name}' has no output field '{rest[0]}'", hint
        schema = self._schema_of(name)
        fld = schema.get(rest[0]) if schema else None
        for i, part in enumerate(rest[1:], start=1):
            if fld is None or fld.properties is None or part.isdigit():
                return None
            if part not in fld.properties:
                where = ".".join((name, "output", *rest[:i]))
                return (f"'{where}' has no property '{part}'",
                        did_you_mean(part, sorted(fld.properties)))
            fld = fld.properties[part]
        return None

    # ------------------------------------------------------------------ templates

    def sites(self) -> Iterator[TemplateSite]:
        for i, step in enumerate(self.wf.agents):
            yield from self._step_sites(step, ("agents", i), ())
        for i, g in enumerate(self.wf.parallel):
            yield from self._route_sites(g.name, ("parallel", i), g.routes)
        for i, fe in enumerate(self.wf.for_each):
            extra = (fe.as_, "_index", "_key")
            yield from self._step_sites(fe.agent, ("for_each", i, "agent"), extra)
            yield from self._route_sites(fe.name, ("for_each", i), fe.routes)
        for key, value in self.wf.output.items():
            if isinstance(value, str):
                yield TemplateSite(("output", key), value, None, "full")
        hooks = self.wf.workflow.hooks
        if hooks is not None:
            for hook in ("on_start", "on_complete", "on_error"):
                text = getattr(hooks, hook)
                if isinstance(text, str):
                    yield TemplateSite(("workflow", "hooks", hook), text, None, "hook",
                                       extra_names=("result", "error"))

    def _step_sites(self, step: StepBase, base: KeyPath,
                    extra: tuple[str, ...]) -> Iterator[TemplateSite]:
        n = step.name

        def site(path: KeyPath, text: Any, scope: str = "step") -> Iterator[TemplateSite]:
            if isinstance(text, str):
                yield TemplateSite((*base, *path), text, n, scope, extra_names=extra)
            elif isinstance(text, dict):
                for k, v in text.items():
                    yield from site((*path, k), v, scope)
            elif isinstance(text, list):
                for k, v in enumerate(text):
                    yield from site((*path, k), v, scope)

        if isinstance(step, AgentStep):
            yield from site(("prompt",), step.prompt)
            yield from site(("system_prompt",), step.system_prompt)
            if step.model and is_template(step.model):
                yield from site(("model",), step.model)
            if step.reasoning and step.reasoning.effort and is_template(step.reasoning.effort):
                yield from site(("reasoning", "effort"), step.reasoning.effort)
            yield from site(("working_dir",), step.working_dir)
            if step.context_tier and is_template(step.context_tier):
                yield from site(("context_tier",), step.context_tier)
        elif isinstance(step, ScriptStep):
            yield from site(("command",), step.command)
            yield from site(("args",), step.args)
            yield from site(("working_dir",), step.working_dir)
            yield from site(("stdin",), step.stdin)
        elif isinstance(step, SetStep):
            if step.values is not None:
                yield from site(("values",), step.values)
            else:
                yield from site(("value",), step.value)
        elif isinstance(step, WaitStep):
            if isinstance(step.duration, str):
                yield from site(("duration",), step.duration)
            yield from site(("reason",), step.reason)
        elif isinstance(step, TerminateStep):
            yield from site(("reason",), step.reason)
            yield from site(("output_template",), step.output_template, "full")
        elif isinstance(step, WorkflowStep):
            yield from site(("input_mapping",), step.input_mapping)
        elif isinstance(step, HumanGateStep):
            yield from site(("prompt",), step.prompt, "full")
        elif isinstance(step, QuestionsStep):
            yield from site(("prompt",), step.prompt, "full")
            for j, q in enumerate(step.questions or []):
                yield from site(("questions", j, "text"), q.text, "full")
                yield from site(("questions", j, "hint"), q.hint, "full")
                yield from site(("questions", j, "choices"), q.choices, "full")
        elif isinstance(step, McpStep):
            yield from site(("arguments",), step.arguments)
        if not isinstance(step, HumanGateStep):
            yield from self._route_sites(n, base, step.routes, extra)

    def _route_sites(self, owner: str, base: KeyPath, routes: list[Route],
                     extra: tuple[str, ...] = ()) -> Iterator[TemplateSite]:
        for j, r in enumerate(routes):
            if r.when is not None:
                expr = not is_jinja_condition(r.when)
                yield TemplateSite((*base, "routes", j, "when"), r.when, owner, "route",
                                   expression=expr, extra_names=extra)
            for k, v in (r.output or {}).items():
                if isinstance(v, str):
                    yield TemplateSite((*base, "routes", j, "output", k), v, owner, "route",
                                       extra_names=extra)

    def check_templates(self) -> None:
        for site in self.sites():
            if site.expression:
                self._check_expression(site)
            elif "{" in site.source:
                self._check_template(site)

    def _locate_line(self, site: TemplateSite, lineno: int | None) -> tuple[int, int] | None:
        """The file line and column of line `lineno` of a template, when it can be known.

        Only a literal block (`|`) and an included file keep the template's lines as they are
        in the file; plain, quoted and folded (`>`) scalars fold line breaks, so an error in
        them is reported where the value starts.
        """
        if not lineno or lineno <= 1:
            return None
        pos = self.result.smap.value(site.path)
        style = self.result.smap.style(site.path)
        if style == "file":
            return lineno, 1
        if style != "|":
            return None
        line = pos.line + lineno
        doc = self.result.document
        col = 1
        if doc is not None and pos.file == doc.shown:
            lines = doc.text.splitlines()
            if 0 < line <= len(lines):
                text = lines[line - 1]
                col = len(text) - len(text.lstrip()) + 1
        return line, col

    def _site_error(self, site: TemplateSite, lineno: int | None, msg: str,
                    hint: str | None = None, *, code: str = "template",
                    severity: Severity = "error") -> None:
        """Report a problem in a template, at the template's own line when it has several."""
        self.result.add(site.path, msg, hint, severity=severity, code=code, at="value",
                        line=self._locate_line(site, lineno))

    def analyse(self, site: TemplateSite) -> tuple[list[Ref], list[UsedName]]:
        """What a template (or bare condition) reads and uses; RenderFailure when it cannot
        be parsed. Each text is analysed once, however many checks look at it."""
        key = (site.source, site.expression)
        found = self._analysed.get(key)
        if found is None:
            try:
                tree = (self.engine.parse_expression(site.source) if site.expression
                        else self.engine.parse(site.source))
                found = collect_refs(tree)
            except RenderFailure as exc:
                found = exc
            self._analysed[key] = found
        if isinstance(found, RenderFailure):
            raise found
        return found

    def _check_template(self, site: TemplateSite) -> None:
        try:
            refs, used = self.analyse(site)
        except RenderFailure as exc:
            self._site_error(site, exc.lineno, f"template syntax error: {exc}", code="syntax")
            return
        for u in used:
            table = self.engine.env.filters if u.kind == "filter" else self.engine.env.tests
            if u.name not in table:
                self._site_error(site, u.lineno, f"unknown {u.kind} '{u.name}'",
                                 did_you_mean(u.name, table), code="unknown-filter")
        self._check_refs(site, refs)

    def _check_expression(self, site: TemplateSite) -> None:
        try:
            refs, used = self.analyse(site)
        except RenderFailure as exc:
            self._site_error(site, None, f"condition syntax error: {exc}", code="syntax")
            return
        for u in used:
            table = self.engine.env.filters if u.kind == "filter" else self.engine.env.tests
            if u.name not in table:
                self._site_error(site, None, f"unknown {u.kind} '{u.name}'",
                                 did_you_mean(u.name, table), code="unknown-filter")
        names, closed = self.flat_names(site.owner)
        for ref in refs:
            root = ref.root
            if root in JINJA_GLOBALS or root in site.extra_names or root in names or ref.guarded:
                continue
            hint = did_you_mean(root, sorted(names))
            if closed:
                self._site_error(site, None, f"unknown name '{root}' in condition", hint,
                                 code="unknown-name")
            elif hint:  # the output's keys are not known statically: flag only likely typos
                self._site_error(site, None, f"unknown name '{root}' in condition, unless "
                                 f"'{site.owner}' outputs it", hint, code="unknown-name",
                                 severity="warning")

    def flat_names(self, owner: str | None) -> tuple[set[str], bool]:
        """Names a bare condition can use (spec 4.2's one-level flattening), and whether that
        set is closed (False when the owner's output keys are not known statically)."""
        names = {f"workflow_{a}" for a in WORKFLOW_ATTRS} | {"workflow", "context", "output"}
        names |= {f"context_{a}" for a in CONTEXT_ATTRS}
        for s in self.all_names:
            names |= {s, f"{s}_output"}
        for g in self.parallel:
            names |= {f"{g}_{k}" for k in ("type", "outputs", "errors")}
        for g in self.for_each:
            names |= {f"{g}_{k}" for k in ("type", "outputs", "errors", "count")}
        if owner is None:
            return names, True
        fields = self.output_fields(owner)
        if owner in self.parallel:
            fields = {"type", "outputs", "errors"}
        elif owner in self.for_each:
            fields = {"type", "outputs", "errors", "count"}
        closed = fields is not None
        if fields is None:
            fields = set(SCRIPT_BUILTINS) if isinstance(self.steps.get(owner), ScriptStep) \
                else set()
        names |= fields | {f"output_{f}" for f in fields}
        return names, closed

    def _check_refs(self, site: TemplateSite, refs: list[Ref]) -> None:
        allowed_roots = set(self.all_names) | {"workflow", "context"} | set(site.extra_names)
        if site.scope == "route":
            allowed_roots.add("output")
        owner_step = self.steps.get(site.owner) if site.owner else None
        for ref in refs:
            root = ref.root
            if root in JINJA_GLOBALS:
                continue
            if root not in allowed_roots:
                if ref.guarded or ref.is_guard:
                    # `x is defined` / `x | default(...)` tolerate a missing name on purpose;
                    # flag it only when it looks like a typo of a name that exists
                    close = did_you_mean(root, sorted(self.all_names))
                    if close:
                        self._site_error(site, ref.lineno, f"'{root}' is not a step or group, "
                                         "so this guard always takes its fallback", close,
                                         code="unknown-name", severity="warning")
                    continue
                if len(ref.chain) > 1 and ref.chain[1] in STEP_ATTRS:
                    self._site_error(site, ref.lineno, f"unknown step '{root}'",
                                     did_you_mean(root, sorted(self.all_names)),
                                     code="unknown-step")
                    continue
                hint = did_you_mean(root, sorted(allowed_roots))
                extra = ""
                if root == "output" and site.scope != "route":
                    extra = " ('output' exists only in route conditions and route outputs)"
                self._site_error(site, ref.lineno, f"unknown name '{root}'{extra}", hint,
                                 code="unknown-name")
                continue
            if root == "workflow":
                self._check_workflow_ref(site, ref)
            elif root == "context":
                if len(ref.chain) > 1 and ref.chain[1] not in CONTEXT_ATTRS:
                    self._site_error(site, ref.lineno, f"'context' has no '{ref.chain[1]}'",
                                     did_you_mean(ref.chain[1], CONTEXT_ATTRS),
                                     code="unknown-name")
            elif root == "output" or root in site.extra_names:
                if root == "output" and site.owner and len(ref.chain) > 1:
                    self._check_field_ref(site, ref, site.owner, ref.chain[1:])
            else:
                self._check_step_ref(site, ref)
            if site.scope == "step" and self.mode == "explicit" and owner_step is not None:
                self._check_explicit(site, owner_step, ref)

    def _check_workflow_ref(self, site: TemplateSite, ref: Ref) -> None:
        if len(ref.chain) < 2:
            return
        attr = ref.chain[1]
        if attr not in WORKFLOW_ATTRS:
            self._site_error(site, ref.lineno, f"'workflow' has no '{attr}'",
                             did_you_mean(attr, WORKFLOW_ATTRS), code="unknown-name")
            return
        if attr == "input" and len(ref.chain) >= 3 and self.inputs and not ref.is_guard:
            name = ref.chain[2]
            if name not in self.inputs:
                self._site_error(site, ref.lineno, f"unknown workflow input '{name}'",
                                 did_you_mean(name, self.inputs) or
                                 "declare it under workflow.input", code="unknown-input")

    def _check_step_ref(self, site: TemplateSite, ref: Ref) -> None:
        root = ref.root
        if len(ref.chain) < 2:
            return
        attr = ref.chain[1]
        if root in self.parallel or root in self.for_each:
            allowed = ("type", "outputs", "errors") + (("count",) if root in self.for_each else ())
            if attr not in allowed:
                self._site_error(site, ref.lineno, f"group '{root}' has no '{attr}'",
                                 did_you_mean(attr, allowed), code="unknown-field")
            elif attr == "outputs" and root in self.parallel and len(ref.chain) >= 3:
                members = self.parallel[root].agents
                if ref.chain[2] not in members and not ref.chain[2].isdigit():
                    self._site_error(site, ref.lineno,
                                     f"'{ref.chain[2]}' is not a member of '{root}'",
                                     did_you_mean(ref.chain[2], members), code="unknown-field")
            return
        if attr != "output":
            if ref.is_guard:
                return
            self._site_error(site, ref.lineno, f"'{root}.{attr}': a step exposes only "
                             f"'{root}.output'", f"did you mean '{root}.output.{attr}'?",
                             code="unknown-field")
            return
        if len(ref.chain) >= 3 and not ref.is_guard:
            self._check_field_ref(site, ref, root, ref.chain[2:])

    def _check_field_ref(self, site: TemplateSite, ref: Ref, name: str,
                         rest: tuple[str, ...]) -> None:
        problem = self.field_problem(name, rest)
        if problem:
            self._site_error(site, ref.lineno, problem[0], problem[1], code="unknown-field")

    def _check_explicit(self, site: TemplateSite, step: StepBase, ref: Ref) -> None:
        root = ref.root
        if root == "workflow":
            if len(ref.chain) < 3 or ref.chain[1] != "input":
                return
            if isinstance(step, LOCAL_RENDER):
                return
            declared = {d.chain for d in self._declared(step)}
            if ("workflow", "input", ref.chain[2]) in declared:
                return
            self._site_error(site, ref.lineno, f"'workflow.input.{ref.chain[2]}' is not in the "
                             f"input: list of '{step.name}' (context mode is explicit)",
                             f"add 'workflow.input.{ref.chain[2]}' to its input:",
                             code="undeclared", severity="warning")
            return
        if (root in ("context", "output") or root in site.extra_names
                or (root == step.name and ref.is_guard)):
            return
        if root not in self.all_names:
            return
        decls = [d for d in self._declared(step) if d.chain[0] == root]
        wanted = ref.chain[1:]
        for d in decls:
            got = d.chain[1:]
            if not got or got == ("output",):
                return
            if got[0] != "output":  # shorthand a.f
                got = ("output", *got)
            if wanted[: len(got)] == got:
                return
            if ref.is_guard and len(wanted) < len(got):
                return
        if ref.is_guard and not decls:
            self._site_error(site, ref.lineno, f"'{root}' is never defined here: it is not in "
                             f"the input: list of '{step.name}' (context mode is explicit)",
                             f"add '{root}.output?' to its input:", code="undeclared",
                             severity="warning")
            return
        if ref.is_guard:
            return
        shown = ".".join(ref.chain[:3])
        msg = f"'{shown}' is not in the input: list of '{step.name}'"
        if decls:
            msg += f", which has only {', '.join(d.text for d in decls)}"
        self._site_error(site, ref.lineno, f"{msg} (context mode is explicit)",
                         f"add '{shown}' to its input:", code="undeclared", severity="warning")

    # ------------------------------------------------------------------ path sensitivity

    def check_output_paths(self) -> None:
        if self.graph_broken or self.wf.workflow.entry_point not in self.graph.succ:
            return
        reach = self.graph.reachable()
        for site in self.sites():
            if "{" not in site.source and not site.expression:
                continue
            try:
                refs, _ = self.analyse(site)
            except RenderFailure:
                continue  # reported by check_templates
            if site.expression:
                refs = [r for r in refs if r.root in self.steps]
            if site.owner is None:
                self._check_final_output(site, refs, reach)
                continue
            owner = site.owner
            if owner not in reach:
                continue
            optional = {d.chain[0] for d in self._declared(self.steps[owner])
                        if d.optional} if owner in self.steps else set()
            done = self._typo_guarded(refs)
            for ref in refs:
                x = ref.root
                if (x not in self.graph.succ or x == owner or ref.guarded or x in optional
                        or x in done):
                    continue
                if not self.graph.dominates(x, owner):
                    done.add(x)
                    path = self.graph.path_avoiding(x, owner) or [owner]
                    where = (f"e.g. {' → '.join(path)}" if len(path) > 1 else
                             f"'{owner}' is the entry point")
                    self._site_error(
                        site, ref.lineno,
                        f"reads '{_read(ref)}' but '{x}' may not have run when '{owner}' runs: "
                        f"{where}",
                        f"guard it with {{% if {x} is defined %}} or declare '{_read(ref)}?'",
                        code="path", severity="warning")

    def _typo_guarded(self, refs: list[Ref]) -> set[str]:
        """Names a guard on a misspelt name was meant for (the typo is reported already)."""
        return {closest(r.root, self.all_names) or "" for r in refs
                if (r.guarded or r.is_guard) and r.root not in self.all_names}

    def _check_final_output(self, site: TemplateSite, refs: list[Ref], reach: set[str]) -> None:
        ends = [e for e in self.graph.end_points()
                if not (e in self.graph.terminates and self.graph.terminates[e].output_template)]
        done = self._typo_guarded(refs)
        for ref in refs:
            x = ref.root
            if x not in self.graph.succ or ref.guarded or x in done:
                continue
            for end in ends:
                if end == x or self.graph.dominates(x, end):
                    continue
                done.add(x)
                path = self.graph.path_avoiding(x, end) or [end]
                if end not in self.graph.terminates:
                    path.append(END)
                hint = (f"give '{end}' an output_template, or guard with "
                        f"{{% if {x} is defined %}}" if end in self.graph.terminates
                        else f"guard with {{% if {x} is defined %}}")
                self._site_error(
                    site, ref.lineno,
                    f"reads '{_read(ref)}' but '{x}' does not run on every path to the end: "
                    f"e.g. {' → '.join(path)}", hint, code="path", severity="warning")
                break

    # ------------------------------------------------------------------ sub-workflows

    def check_subworkflows(self) -> None:
        from podium.check.validate import validate_file

        items: list[tuple[KeyPath, WorkflowStep]] = [
            (("agents", i), s) for i, s in enumerate(self.wf.agents)
            if isinstance(s, WorkflowStep)]
        items += [(("for_each", i, "agent"), g.agent) for i, g in enumerate(self.wf.for_each)
                  if isinstance(g.agent, WorkflowStep)]
        here = self.result.path.resolve()
        chain = (*self.visited_files, here)
        for base, step in items:
            target = resolve_subworkflow(here.parent, step.workflow)
            path = (*base, "workflow")
            if target is None:
                looked = display_path(here.parent / step.workflow)
                self.err(path, f"sub-workflow file not found: '{step.workflow}'",
                         f"looked for {looked}, relative to the workflow's folder",
                         code="subworkflow", at="value")
                continue
            if target in chain:
                cycle = chain[chain.index(target):]
                names = " → ".join(display_path(p) for p in (*cycle, target))
                self.err(path, f"circular sub-workflow reference: {names}",
                         code="subworkflow-cycle", at="value")
                continue
            if len(chain) >= 10:
                self.warn(path, "sub-workflows nest more than 10 deep; not checked further",
                          code="subworkflow", at="value")
                continue
            child = validate_file(target, visited=chain)
            for d in child.sink.items:
                self.result.sink.add(d)
            # a cycle is reported once, where it closes; anything else also marks this step
            errors = [d for d in child.sink.errors if d.code != "subworkflow-cycle"]
            if errors:
                count = f"{len(errors)} error{'s' if len(errors) != 1 else ''}"
                self.err(path, f"sub-workflow '{step.workflow}' is invalid ({count}, listed "
                         "with its file)", code="subworkflow", at="value")


def _read(ref: Ref) -> str:
    """What a reference reads, for messages: `reviewer.output`, `fan.outputs`."""
    return ".".join(ref.chain[:2])


def resolve_subworkflow(folder: Path, ref: str) -> Path | None:
    """The file a `workflow:` reference names: relative to the parent's folder, extension
    optional."""
    base = (folder / ref).resolve()
    for candidate in (base, base.with_name(base.name + ".yaml"),
                      base.with_name(base.name + ".yml")):
        if candidate.is_file():
            return candidate
    return None
