"""Checks of route conditions without `{{ }}`: Conductor's expression language (see
podium/conditions.py), parsed with Python's `ast`, each name it reads checked against the
flattened names of spec 4.2 (`output_score`, `score`, `review_output`, `workflow_input`...),
each function against the language's five, and each `<step>_output.<field>` against the
step's declared output fields."""

from __future__ import annotations

from typing import TYPE_CHECKING

from podium import conditions
from podium.check.base import CONTEXT_ATTRS, SCRIPT_BUILTINS, WORKFLOW_ATTRS, TemplateSite
from podium.check.references import Ref, UsedName
from podium.language.diagnostics import did_you_mean
from podium.language.model import McpStep, ScriptStep, SetStep

if TYPE_CHECKING:
    from podium.check.templates import TemplateChecks

GROUP_FIELDS = ("type", "outputs", "errors")
FOR_EACH_FIELDS = (*GROUP_FIELDS, "count")


def analyse_condition(text: str) -> tuple[list[Ref], list[UsedName]]:
    """What a condition reads (one chain per name it uses) and the functions it calls;
    RenderFailure when it is not an expression of the language."""
    tree = conditions.parse(text)
    refs = [Ref(chain, False, 1) for chain in conditions.references(tree)]
    used = [UsedName("function", name, 1) for name in conditions.functions_called(tree)]
    return refs, used


def output_may_be_scalar(checks: TemplateChecks, owner: str) -> bool:
    """Whether a node's output may be something other than a mapping (a set step's `value:`,
    an MCP tool's result): only then is `output` itself a name in its conditions."""
    step = checks.steps.get(owner)
    if owner in checks.parallel or owner in checks.for_each or step is None:
        return False
    return (isinstance(step, SetStep) and step.values is None) or isinstance(step, McpStep)


def flat_names(checks: TemplateChecks, owner: str | None) -> tuple[set[str], bool]:
    """Names a condition of `owner`'s routes can use, and whether that set is closed (False
    when the owner's output keys are not known statically)."""
    names = {f"workflow_{a}" for a in WORKFLOW_ATTRS} | {f"context_{a}" for a in CONTEXT_ATTRS}
    names |= set(conditions.FUNCTIONS)
    groups = set(checks.parallel) | set(checks.for_each)
    # parallel members that no route leads to run only inside their group: never stored
    member_only: set[str] = getattr(checks, "member_only", set())
    for s in checks.all_names - member_only - groups:
        names.add(f"{s}_output")
    for g in checks.parallel:
        names |= {f"{g}_{k}" for k in GROUP_FIELDS}
    for g in checks.for_each:
        names |= {f"{g}_{k}" for k in FOR_EACH_FIELDS}
    if owner is None:
        return names, True
    fields = checks.output_fields(owner)
    if owner in checks.parallel:
        fields = set(GROUP_FIELDS)
    elif owner in checks.for_each:
        fields = set(FOR_EACH_FIELDS)
    # a script's stdout JSON is merged whole into its output: its schema lists only some keys
    closed = fields is not None and not isinstance(checks.steps.get(owner), ScriptStep)
    if fields is None:
        fields = set(SCRIPT_BUILTINS) if isinstance(checks.steps.get(owner), ScriptStep) \
            else set()
    names |= fields | {f"output_{f}" for f in fields}
    if output_may_be_scalar(checks, owner):
        names.add("output")
    return names, closed


def check_condition(checks: TemplateChecks, site: TemplateSite, refs: list[Ref],
                    used: list[UsedName]) -> None:
    """Report unknown functions, unknown names and unknown output fields of a condition."""
    for u in used:
        if u.name not in conditions.FUNCTIONS:
            hint = did_you_mean(u.name, conditions.FUNCTIONS) or (
                f"a condition without {{{{ }}}} has only {', '.join(conditions.FUNCTIONS)}; "
                f"write it as {{{{ ... }}}} to use filters such as | length")
            checks._site_error(site, None, f"unknown function '{u.name}' in condition", hint,
                               code="unknown-name")
    names, closed = flat_names(checks, site.owner)
    reported: set[str] = set()
    for ref in refs:
        root = ref.root
        if root in site.extra_names or root in reported:
            continue
        if root in names:
            _check_field(checks, site, ref)
            continue
        reported.add(root)
        dotted = _dotted_root(checks, root, site.owner)
        if dotted is not None:  # `output.score`, `review.output.x`, `workflow.input.y`
            msg = (f"'{root}' is not a name in a condition without {{{{ }}}}: it reads "
                   f"'{root}_<key>' names ({dotted})")
            alt = "or write the condition as {{ ... }}"
            if closed:
                checks._site_error(site, None, msg, alt, code="unknown-name")
            else:
                checks._site_error(site, None, f"{msg}, unless '{site.owner}' outputs a "
                                   f"'{root}' field", alt, code="unknown-name",
                                   severity="warning")
            continue
        if closed:
            checks._site_error(site, None, f"unknown name '{root}' in condition",
                               did_you_mean(root, sorted(names)), code="unknown-name")
            continue
        # the output's keys are not known statically, so the name is probably one of them:
        # flag only a near-certain typo of a name that exists
        close = did_you_mean(root, sorted(names), cutoff=0.8)
        if close:
            checks._site_error(site, None, f"unknown name '{root}' in condition, unless "
                               f"'{site.owner}' outputs it", close, code="unknown-name",
                               severity="warning")


def _dotted_root(checks: TemplateChecks, root: str, owner: str | None) -> str | None:
    """For a name that is a mapping in templates but not a name in conditions, an example of
    what to write instead; None for any other name."""
    if root == "workflow":
        return "'workflow_input', 'workflow_name'"
    if root == "context":
        return "'context_iteration', 'context_history'"
    if root == "output" and owner is not None:
        fields = sorted(checks.output_fields(owner) or ())
        return (f"'output_{fields[0]}' or just '{fields[0]}'" if fields
                else "'output_<field>', or the field's own name")
    if root in checks.parallel or root in checks.for_each:
        return f"'{root}_outputs', '{root}_errors'"
    if root in checks.all_names:
        return f"'{root}_output'"
    return None


def _check_field(checks: TemplateChecks, site: TemplateSite, ref: Ref) -> None:
    """`review_output.verdct` when `review` declares its output fields."""
    root = ref.root
    if len(ref.chain) < 2 or not root.endswith("_output"):
        return
    step = root[: -len("_output")]
    if step not in checks.steps or step in checks.parallel or step in checks.for_each:
        return
    problem = checks.field_problem(step, ref.chain[1:])
    if problem:
        checks._site_error(site, None, problem[0], problem[1], code="unknown-field")
