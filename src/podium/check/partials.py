"""The partials of file-backed templates, for validate: each `{% include %}`, `{% import %}`
and `{% extends %}` name of a template read with `!file` is resolved as a run resolves it
(templating/partials.py), and the files found are parsed. A name that cannot be loaded, or a
loader tag in a template written inline, is a problem reported at the `!file` tag; a partial
whose text the including template renders with its own context (include, extends, import
`with context`) becomes a template site of its own, checked in its own file.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from podium.check.base import TemplateSite
from podium.check.references import statements
from podium.language.source import display_path
from podium.templating.text import RenderFailure

if TYPE_CHECKING:
    from jinja2 import nodes

    from podium.check.base import CheckerBase
else:  # the trees are lightparse.py's or Jinja's: kinds.py names their nodes in both
    from podium.templating import kinds as nodes

MAX_NESTING = 10
_LOADERS = ("include", "import", "extends")  # the word each of those tags is written with


def _names(node: nodes.Node) -> list[str]:
    """The template names a loader tag names literally (a dynamic name is not checked)."""
    target = getattr(node, "template", None)
    if isinstance(target, nodes.Const) and isinstance(target.value, str):
        return [target.value]
    if isinstance(target, (nodes.List, nodes.Tuple)):
        found = [i.value for i in target.items
                 if isinstance(i, nodes.Const) and isinstance(i.value, str)]
        return found[:1]  # a list includes the first of its names that exists
    return []


def _renders_in_context(node: nodes.Node) -> bool:
    if isinstance(node, (nodes.Include, nodes.Extends)):
        return True
    return bool(getattr(node, "with_context", False))


class Partials:
    """The partial sites and problems of every template, each template read once."""

    def __init__(self, checker: CheckerBase) -> None:
        # what it reads of the checker, not the checker: the checker holds this object, and
        # a cycle between them would keep every template tree of a check alive until the
        # cyclic collector walked them
        self.result = checker.result
        self.parser_slot = checker.parser_slot  # the parser is made when a tag is parsed
        self.problems: list[tuple[TemplateSite, str]] = []
        self._done: dict[tuple[object, ...], list[TemplateSite]] = {}
        smap = checker.result.smap
        self.roots = [checker.result.path.resolve().parent,
                      *(f.parent for f in smap.files.values())]

    def sites_of(self, site: TemplateSite) -> list[TemplateSite]:
        key = (site.path, site.source)
        found = self._done.get(key)
        if found is None:
            found = []
            file = self.result.smap.files.get(site.path)
            self._walk(site, site.source, str(file) if file else None, found, ())
            self._done[key] = found
        return found

    def _walk(self, site: TemplateSite, source: str, parent: str | None,
              out: list[TemplateSite], chain: tuple[Path, ...]) -> None:
        if not any(word in source for word in _LOADERS):
            return  # no tag can load a template: not parsed for this (a prompt's `{% if %}`)
        from podium.templating.partials import PartialError, read_partial, resolve_partial

        parser = self.parser_slot.get()
        tags = _loader_tags()
        try:
            tree = parser.parse(source)
        except RenderFailure:
            return  # reported where the text is checked
        for node in statements(tree.body):  # the tags are statements
            if not isinstance(node, tags):
                continue
            for name in _names(node):
                try:
                    path = resolve_partial(name, parent, self.roots)
                except PartialError as exc:
                    self.problems.append((site, f"{_tag(node)}: {exc}"))
                    continue
                if path in chain or len(chain) >= MAX_NESTING:
                    continue  # a cycle, or too deep: Jinja stops it at run time
                try:
                    text = read_partial(path)
                except PartialError as exc:
                    self.problems.append((site, f"{_tag(node)}: {exc}"))
                    continue
                shown = display_path(path)
                sub = replace(site, source=text, file=shown, expression=False)
                try:
                    parser.parse(text)
                except RenderFailure:
                    out.append(sub)  # its syntax error is reported in its own file
                    continue
                if _renders_in_context(node):
                    out.append(sub)
                self._walk(site, text, str(path), out, (*chain, path))


def _loader_tags() -> tuple[type[nodes.Node], ...]:
    return (nodes.Include, nodes.Import, nodes.FromImport, nodes.Extends)


_KINDS = {"Include": "include", "Import": "import", "FromImport": "import",
          "Extends": "extends"}  # the word of each loader tag's node class


def _tag(node: nodes.Node) -> str:
    return f"{{% {_KINDS.get(type(node).__name__, 'include')} %}}"
