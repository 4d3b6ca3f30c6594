"""Path sensitivity: a template that reads a step's output on a path where that step may not
have run (found with the route graph's dominators) is reported unless it is guarded. A read
inside a branch of `{% if x is defined %}` (either branch) is checked only against the paths
that branch can be on: in the `else` branch those that skip `x`, inside it those through `x`."""

from __future__ import annotations

from podium.check.base import TemplateSite
from podium.check.references import Ref
from podium.check.templates import TemplateChecks
from podium.language.diagnostics import closest
from podium.language.model import END
from podium.templating.text import RenderFailure


class PathChecks(TemplateChecks):
    """Checks that every step output a template reads was produced on every path there."""

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
                path = self._skipping(ref, owner, owner_runs=True)
                if path is not None:
                    done.add(x)
                    where = (f"e.g. {' → '.join(path)}" if len(path) > 1 else
                             f"'{owner}' is the entry point")
                    self._site_error(
                        site, ref.lineno,
                        f"reads '{_read(ref)}' but '{x}' may not have run when '{owner}' runs: "
                        f"{where}",
                        f"guard it with {{% if {x} is defined %}} or declare '{_read(ref)}?'",
                        code="path", severity="warning")

    def _skipping(self, ref: Ref, target: str, *, owner_runs: bool) -> list[str] | None:
        """A path to `target` on which the step `ref` reads has not run (and that the
        branches around the read allow), or None when it always has run there."""
        x = ref.root
        present = frozenset(n for n in ref.present if n in self.graph.succ)
        absent = frozenset(n for n in ref.absent if n in self.graph.succ)
        if x in present:
            return None
        if not present and not absent:
            if self.graph.dominates(x, target):
                return None
            return self.graph.path_avoiding(x, target) or [target]
        if owner_runs:  # the owner's own earlier runs are not what the branch is about
            absent -= {target}
        elif target in absent:  # the run ended at `target`, so it did run: not this branch
            return None
        return self.graph.path_under(target, absent | {x}, present)

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
                if end == x:
                    continue
                found = self._skipping(ref, end, owner_runs=False)
                if found is None:
                    continue
                done.add(x)
                path = found
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


def _read(ref: Ref) -> str:
    """What a reference reads, for messages: `reviewer.output`, `fan.outputs`."""
    return ".".join(ref.chain[:2])
