"""Semantic checks of a loaded workflow: names, routes, templates, context and paths.

Each check adds diagnostics to the LoadResult; nothing stops at the first problem. Template
checks work on the Jinja AST (see references.py), so loop variables and string literals are
never mistaken for step names.
"""

from __future__ import annotations

from pathlib import Path

from podium.check.base import Declared
from podium.check.paths import PathChecks
from podium.language.diagnostics import KeyPath, did_you_mean
from podium.language.model import (
    END,
    AgentStep,
    ForEachGroup,
    HumanGateStep,
    InputDef,
    McpStep,
    ParallelGroup,
    QuestionsStep,
    Route,
    ScriptStep,
    SetStep,
    TerminateStep,
    WaitStep,
    WorkflowStep,
)
from podium.language.source import display_path
from podium.records import record


@record
class Checker(PathChecks):
    """Runs every semantic check of one loaded workflow."""

    # ------------------------------------------------------------------ run all

    def run(self) -> None:
        self.check_names()
        self.check_targets()
        self.check_routes()
        self.check_groups()
        self.check_mcp_servers()
        self.check_reachability()
        self.check_inputs_declared()
        self.check_templates()
        self.check_output_paths()
        self.check_subworkflows()
        from podium.check.enums import check_enum_literals
        from podium.check.providers import check_providers
        from podium.check.shell import check_shell_quoting

        check_enum_literals(self)
        check_providers(self)
        check_shell_quoting(self)

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

    # ------------------------------------------------------------------ mcp steps

    def check_mcp_servers(self) -> None:
        servers = self.wf.workflow.runtime.mcp_servers
        for i, step in enumerate(self.wf.agents):
            if isinstance(step, McpStep) and step.server not in servers:
                self.err(("agents", i, "server"), f"unknown MCP server '{step.server}'",
                         did_you_mean(step.server, sorted(servers))
                         or "declare it under workflow.runtime.mcp_servers",
                         code="unknown-server", at="value")

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
                members = sorted(n for n, s in self.steps.items()
                                 if isinstance(s, (AgentStep, SetStep)))
                self.err(path, f"unknown step '{member}'", did_you_mean(member, members),
                         code="unknown-step", at="value")
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
        for name in self.graph.trapped():
            self.err((*self.step_path(name), "name"), f"no terminate step or $end is reachable "
                     f"from '{name}': a run that gets here can only loop until max_iterations",
                     "add a route to $end (or to a terminate step) that some condition takes",
                     code="no-end", at="value")

    # ------------------------------------------------------------------ input declarations

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
        if len(chain) == 1:  # `a` (or `a?`): Conductor rejects it, as `a.output` is meant
            self.err(path, f"'{decl.text}' is not a valid input reference",
                     f"write '{chain[0]}.output' for the whole output of '{chain[0]}'"
                     if chain[0] in self.all_names else "use 'workflow.input.name', "
                     "'step.output', 'step.output.field' or 'group.outputs'",
                     code="input-ref", at="value")
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
            hint = did_you_mean(chain[0], self.readable(chain[1] if len(chain) > 1 else None))
            if decl.optional:
                self.warn(path, msg, hint, code="unknown-step", at="value")
            else:
                self.err(path, msg, hint, code="unknown-step", at="value")
            return
        if len(chain) >= 3 and chain[1] == "output" and not decl.optional:
            # `a.output.f?` is the explicit mode's guard: a missing field is left out
            problem = self.field_problem(chain[0], chain[2:])
            if problem:
                self.err(path, problem[0], problem[1], code="unknown-field", at="value")

    # ------------------------------------------------------------------ sub-workflows

    def check_subworkflows(self) -> None:
        from podium.check.validate import validate_file
        from podium.language.pinned import escapes, outside_message

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
            tree = escapes(here, target)
            if tree is not None:
                self.err(path, outside_message(f"sub-workflow '{step.workflow}'", tree),
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
            elif child.model is not None and step.input_mapping is not None:
                self._check_child_inputs(base, step, child.model.workflow.input)

    def _check_child_inputs(self, base: KeyPath, step: WorkflowStep,
                            declared: dict[str, InputDef]) -> None:
        """An `input_mapping` that leaves out a required input of the child (one without a
        default): the run would fail when it reaches the step, so say it now."""
        assert step.input_mapping is not None
        missing = [n for n, d in declared.items()
                   if d.required and d.default is None and n not in step.input_mapping]
        if missing:
            self.err((*base, "input_mapping"), f"sub-workflow '{step.workflow}' needs input(s) "
                     f"{', '.join(missing)}, which input_mapping does not give",
                     did_you_mean(missing[0], [k for k in step.input_mapping
                                               if k not in declared]) or
                     f"add {missing[0]}: to input_mapping", code="subworkflow-input")


def resolve_subworkflow(folder: Path, ref: str) -> Path | None:
    """The file a `workflow:` reference names: relative to the parent's folder, extension
    optional."""
    base = (folder / ref).resolve()
    for candidate in (base, base.with_name(base.name + ".yaml"),
                      base.with_name(base.name + ".yml")):
        if candidate.is_file():
            return candidate
    return None
