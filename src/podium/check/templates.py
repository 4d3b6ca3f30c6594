"""Template checks: every template in a workflow, parsed (not regex-scanned), with each
reference checked against the steps, inputs and declared output fields it names, and the
declarations of `context.mode: explicit`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from podium.check.base import (
    CONTEXT_ATTRS,
    LOCAL_RENDER,
    STEP_ATTRS,
    WORKFLOW_ATTRS,
    CheckerBase,
    TemplateSite,
)
from podium.check.conditions import analyse_condition, check_condition
from podium.check.conditions import flat_names as condition_names
from podium.check.partials import Partials
from podium.check.references import JINJA_GLOBALS, Ref, UsedName, collect_refs, quick_refs
from podium.language.diagnostics import (
    Diagnostic,
    KeyPath,
    Severity,
    closest,
    did_you_mean,
    format_path,
)
from podium.language.model import (
    AgentStep,
    HumanGateStep,
    McpStep,
    QuestionsStep,
    Route,
    ScriptStep,
    SetStep,
    StepBase,
    TerminateStep,
    WaitStep,
    WorkflowStep,
)
from podium.templating.text import (
    FILTER_NAMES,
    TEST_NAMES,
    RenderFailure,
    is_jinja_condition,
    is_template,
)


def _nested_sites(base: KeyPath, path: KeyPath, text: Any, *, step: str, scope: str,
                  extra: tuple[str, ...]) -> Iterator[TemplateSite]:
    """The templates in a step's field value: a string, or the strings nested in its lists
    and mappings. (Not a recursive closure: a closure that calls itself is a reference
    cycle, and every step's would wait for the cyclic collector.)"""
    if isinstance(text, str):
        yield TemplateSite((*base, *path), text, step, scope, extra_names=extra)
    elif isinstance(text, dict):
        for k, v in text.items():
            yield from _nested_sites(base, (*path, k), v, step=step, scope=scope, extra=extra)
    elif isinstance(text, list):
        for k, v in enumerate(text):
            yield from _nested_sites(base, (*path, k), v, step=step, scope=scope, extra=extra)


class TemplateChecks(CheckerBase):
    """Checks of every template: syntax, names, fields, filters, explicit declarations."""

    def sites(self) -> Iterator[TemplateSite]:
        """Every template of the workflow, and every partial a `!file` template includes
        (checked in its own file, in the context of the template that includes it)."""
        for site in self._own_sites():
            yield site
            if "{%" in site.source:
                yield from self._partials().sites_of(site)

    def _partials(self) -> Partials:
        if self.partials_cache is None:
            self.partials_cache = Partials(self)
        found: Partials = self.partials_cache
        return found

    def check_includes(self) -> None:
        """Report the `{% include %}` / `{% import %}` names that cannot be loaded, at the
        `!file` tag of the prompt (or the template, when it is not read from a file)."""
        for site in self._own_sites():
            if "{%" in site.source:
                self._partials().sites_of(site)
        for site, message in self._partials().problems:
            tag = self.result.smap.tags.get(site.path)
            if tag is not None:
                self.result.sink.add(Diagnostic(tag.file, tag.line, tag.col,
                                                format_path(site.path), message, "error",
                                                None, "include"))
            else:
                self._site_error(site, None, message, code="include")

    def _own_sites(self) -> list[TemplateSite]:
        """The workflow's own templates, in file order: listed once per check (three checks
        go through them)."""
        if self.own_sites_cache is None:
            self.own_sites_cache = list(self._list_own_sites())
        found: list[TemplateSite] = self.own_sites_cache
        return found

    def _list_own_sites(self) -> Iterator[TemplateSite]:
        for i, step in enumerate(self.wf.agents):
            yield from self._step_sites(step, ("agents", i), ())
        for i, g in enumerate(self.wf.parallel):
            yield from self._route_sites(g.name, ("parallel", i), g.routes)
        for i, fe in enumerate(self.wf.for_each):
            extra = (fe.as_, "_index", *(("_key",) if fe.key_by else ()))
            yield from self._step_sites(fe.agent, ("for_each", i, "agent"), extra)
            yield from self._route_sites(fe.name, ("for_each", i), fe.routes)
        for key, value in self.wf.output.items():
            if isinstance(value, str):
                yield TemplateSite(("output", key), value, None, "full")
        hooks = self.wf.workflow.hooks
        if hooks is not None:
            for hook, names in (("on_start", ()), ("on_complete", ("result",)),
                                ("on_error", ("error",))):
                text = getattr(hooks, hook)
                if isinstance(text, str):
                    yield TemplateSite(("workflow", "hooks", hook), text, None, "hook",
                                       extra_names=names)

    def _step_sites(self, step: StepBase, base: KeyPath,
                    extra: tuple[str, ...]) -> Iterator[TemplateSite]:
        n = step.name

        def site(path: KeyPath, text: Any, scope: str = "step") -> Iterator[TemplateSite]:
            return _nested_sites(base, path, text, step=n, scope=scope, extra=extra)

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
        self.check_includes()

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
        """Report a problem in a template, at the template's own line when it has several.

        A hook's template never fails a run (Conductor renders hooks and swallows their
        errors), so its problems are warnings."""
        if site.scope == "hook":
            severity = "warning"
        if site.file is not None:  # a partial: in its own file
            self.result.sink.add(Diagnostic(site.file, lineno or 1, 1, format_path(site.path),
                                            msg, severity, hint, code))
            return
        self.result.add(site.path, msg, hint, severity=severity, code=code, at="value",
                        line=self._locate_line(site, lineno))

    def analyse(self, site: TemplateSite) -> tuple[list[Ref], list[UsedName]]:
        """What a template (or bare condition) reads and uses; RenderFailure when it cannot
        be parsed. Each text is analysed once, however many checks look at it."""
        key = (site.source, site.expression)
        found = self._analysed.get(key)
        if found is None:
            try:
                if site.expression:
                    found = analyse_condition(site.source)
                else:
                    # None: the checks' parser lexes as podium's environment (make_environment)
                    found = (quick_refs(None, site.source)
                             or collect_refs(self.parser.parse(site.source)))
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
            table = FILTER_NAMES if u.kind == "filter" else TEST_NAMES
            if u.name not in table:
                self._site_error(site, u.lineno, f"unknown {u.kind} '{u.name}'",
                                 did_you_mean(u.name, table), code="unknown-filter")
        self._check_refs(site, refs)

    def _check_expression(self, site: TemplateSite) -> None:
        """A condition without `{{ }}`: Conductor's expression language (check/conditions.py)."""
        try:
            refs, used = self.analyse(site)
        except RenderFailure as exc:
            what = "syntax error" if exc.kind == "syntax" else "error"
            self._site_error(site, None, f"condition {what}: {exc}", code="syntax")
            return
        check_condition(self, site, refs, used)

    def flat_names(self, owner: str | None) -> tuple[set[str], bool]:
        """Names a bare condition can use (spec 4.2's one-level flattening), and whether that
        set is closed (False when the owner's output keys are not known statically)."""
        return condition_names(self, owner)

    def _check_refs(self, site: TemplateSite, refs: list[Ref]) -> None:
        # the roots this site may read beside the step and group names (a set of all of them
        # per site would make validate quadratic in the number of steps)
        own_roots = {"workflow", "context", *site.extra_names}
        if site.scope == "route":
            own_roots.add("output")
        owner_step = self.steps.get(site.owner) if site.owner else None
        for ref in refs:
            root = ref.root
            if root in JINJA_GLOBALS:
                continue
            if root not in self.all_names and root not in own_roots:
                if ref.guarded or ref.is_guard:
                    # `x is defined` / `x | default(...)` tolerate a missing name on purpose;
                    # flag it only when it looks like a typo of a name that exists
                    close = did_you_mean(root, self.readable(_attr(ref)))
                    if close:
                        self._site_error(site, ref.lineno, f"'{root}' is not a step or group, "
                                         "so this guard always takes its fallback", close,
                                         code="unknown-name", severity="warning")
                    continue
                if len(ref.chain) > 1 and ref.chain[1] in STEP_ATTRS:
                    what = "step" if ref.chain[1] == "output" else "group"
                    self._site_error(site, ref.lineno, f"unknown {what} '{root}'",
                                     self._name_hint(site, owner_step, root, _attr(ref)),
                                     code="unknown-step")
                    continue
                hint = (f"did you mean 'workflow.input.{root}'?" if root in self.inputs
                        else did_you_mean(root, sorted(own_roots))
                        or self._name_hint(site, owner_step, root, None))
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
                    self._check_field_ref(site, ref, site.owner, 1)
            else:
                self._check_step_ref(site, ref)
            if site.scope == "step" and self.mode == "explicit" and owner_step is not None:
                self._check_explicit(site, owner_step, ref)

    def _name_hint(self, site: TemplateSite, step: StepBase | None, root: str,
                   attr: str | None) -> str | None:
        """"did you mean" for an unknown step or group name: only names that can be read
        there (a step's `output`, a group's `outputs`), and in explicit mode the ones the
        step declares, or else a declarable one with what to add to its `input:`."""
        pool = self.readable(attr)
        explicit = (site.scope == "step" and self.mode == "explicit" and step is not None)
        if explicit:
            assert step is not None
            declared = {d.chain[0] for d in self._declared(step)}
            hint = did_you_mean(root, [n for n in pool if n in declared])
            if hint:
                return hint
            close = closest(root, pool)
            if close is None:
                return None
            group = close in self.parallel or close in self.for_each
            read = f"{close}.{attr or ('outputs' if group else 'output')}"
            return f"did you mean '{close}'? then add '{read}' to its input:"
        return did_you_mean(root, pool)

    def _check_workflow_ref(self, site: TemplateSite, ref: Ref) -> None:
        if len(ref.chain) < 2:
            return
        attr = ref.chain[1]
        if attr not in WORKFLOW_ATTRS and not ref.tolerates(1):
            self._site_error(site, ref.lineno, f"'workflow' has no '{attr}'",
                             did_you_mean(attr, WORKFLOW_ATTRS), code="unknown-name")
            return
        if attr not in WORKFLOW_ATTRS:
            return
        if attr == "input" and len(ref.chain) >= 3 and self.inputs and not ref.tolerates(2):
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
            if ref.is_guard or ref.tolerates(1):
                return
            fields = self.output_fields(root)
            if attr in ("outputs", "errors", "count", "type") or (
                    fields is not None and attr not in fields):
                close = closest(attr, sorted(fields or ()))
                hint = (f"did you mean '{root}.output.{close}'?" if close
                        else f"did you mean '{root}.output'?")
            else:
                hint = f"did you mean '{root}.output.{attr}'?"
            self._site_error(site, ref.lineno, f"'{root}.{attr}': a step exposes only "
                             f"'{root}.output'", hint, code="unknown-field")
            return
        if len(ref.chain) >= 3:
            self._check_field_ref(site, ref, root, 2)

    def _check_field_ref(self, site: TemplateSite, ref: Ref, name: str, start: int) -> None:
        """A read of `name`'s output fields, `ref.chain[start:]`: an error when a link cannot
        be bound and no guard (`| default`, `is defined`, an enclosing `if`, `in`) covers it."""
        problem = self.field_problem_at(name, ref.chain[start:])
        if problem and not ref.tolerates(start + problem[0]):
            self._site_error(site, ref.lineno, problem[1], problem[2], code="unknown-field")

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
        group = root in self.parallel or root in self.for_each
        for d in decls:
            got = d.chain[1:]
            if not got or (not group and got == ("output",)):
                return
            if not group and got[0] != "output":  # shorthand a.f (groups have no shorthand)
                got = ("output", *got)
            if wanted[: len(got)] == got:
                return
            if ref.is_guard and len(wanted) < len(got):
                return
            if group and wanted[:1] == ("type",):  # any declaration of a group brings its type
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


def _attr(ref: Ref) -> str | None:
    """What a reference reads of its root (`output`, `outputs`, ...), when that is a step or
    group attribute."""
    return ref.chain[1] if len(ref.chain) > 1 and ref.chain[1] in STEP_ATTRS else None
