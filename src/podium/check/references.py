"""What a template reads: name chains found in the Jinja AST, with the guards around them.

`collect_refs` walks a parsed template (not its text) and returns each reference to a free
name as a chain (`reviewer.output.findings` -> ("reviewer", "output", "findings")), skipping
loop variables, `{% set %}` targets and macro parameters, and marking a reference as guarded
when it sits under an `X is defined` test or a `default` filter. Each reference also carries
what the branch it sits in knows about other names: on the `else` branch of
`{% if fix is defined %}` the step `fix` has not run (`absent`), inside it it has (`present`);
path checks use that to tell which steps must have run there.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from podium.records import record
from podium.templating.quickparse import EXPR, OPEN, TEXT, scan
from podium.templating.text import TOO_DEEP, WALK_FROM, RenderFailure

if TYPE_CHECKING:
    from jinja2 import nodes
    from jinja2.environment import Environment
else:  # the trees are lightparse.py's or Jinja's: kinds.py names their nodes in both
    from podium.templating import kinds as nodes

GUARD_FILTERS = frozenset({"default", "d"})
JINJA_GLOBALS = frozenset({"range", "lipsum", "dict", "cycler", "joiner", "namespace",
                           "true", "false", "none", "True", "False", "None", "loop"})


@record(frozen=True)
class Ref:
    """One read of a free name: its attribute chain, guard status and template line."""

    chain: tuple[str, ...]
    guarded: bool
    lineno: int
    is_guard: bool = False  # the reference is itself an `is defined` test
    present: frozenset[str] = frozenset()  # names the enclosing branches know are defined
    absent: frozenset[str] = frozenset()  # ... and names they know are not
    last_safe: bool = False  # `| default(...)` or `is defined` right on it: its last link may
    # be missing (Jinja tolerates only that one: `a.zz.w | default(1)` fails when `zz` is)

    @property
    def root(self) -> str:
        return self.chain[0]

    def tolerates(self, index: int) -> bool:
        """Whether a missing link at `index` of the chain is guarded: the filter or test on the
        reference covers its last link, and an enclosing `{% if a.b.c is defined %}` (or
        `'c' in a.b`) covers every link up to `c`."""
        if self.last_safe and index == len(self.chain) - 1:
            return True
        return any(".".join(self.chain[:k]) in self.present
                   for k in range(index + 1, len(self.chain) + 1))

    def dotted(self) -> str:
        return ".".join(self.chain)


@record(frozen=True)
class UsedName:
    """A filter or test used by a template (checked against the environment)."""

    kind: str  # "filter" or "test"
    name: str
    lineno: int


def _chain(node: nodes.Node) -> tuple[nodes.Name, tuple[str, ...]] | None:
    parts: list[str] = []
    cur: nodes.Node = node
    while True:
        if isinstance(cur, nodes.Getattr):
            parts.append(cur.attr)
            cur = cur.node
        elif isinstance(cur, nodes.Getitem):
            arg = cur.arg
            if isinstance(arg, nodes.Const) and isinstance(arg.value, (str, int)):
                parts.append(str(arg.value))
                cur = cur.node
            else:
                parts.clear()
                cur = cur.node
        elif isinstance(cur, nodes.Name):
            return cur, (cur.name, *reversed(parts))
        else:
            return None


def _target_names(target: nodes.Node) -> set[str]:
    """Names bound by an assignment or loop target (`x`, or `a, b`)."""
    if isinstance(target, nodes.Name):
        return {target.name}
    return {n.name for n in target.find_all(nodes.Name)}


def _defined_tests(node: nodes.Node) -> set[str]:
    """Roots tested with `is defined` (or `is not undefined`) anywhere inside `node`."""
    found: set[str] = set()
    tests = [node] if isinstance(node, nodes.Test) else []  # find_all skips the node itself
    for test in [*tests, *node.find_all(nodes.Test)]:
        if test.name in ("defined", "undefined"):
            got = _chain(test.node)
            if got:
                found.add(".".join(got[1][:1]))
                found.add(".".join(got[1]))
    return found


Facts = tuple[frozenset[str], frozenset[str]]  # (names defined, names not defined)
_NO_FACTS: Facts = (frozenset(), frozenset())


def _join(*facts: Facts) -> Facts:
    return (frozenset().union(*(f[0] for f in facts)),
            frozenset().union(*(f[1] for f in facts)))


def _branch_facts(test: nodes.Node) -> tuple[Facts, Facts]:
    """What holds about step names when `test` is true, and when it is false: `x is defined`
    true means `x` ran; false (for `x`, `x.output`, `x.outputs`) means it did not."""
    if isinstance(test, nodes.Test) and test.name in ("defined", "undefined"):
        got = _chain(test.node)
        if got is None:
            return _NO_FACTS, _NO_FACTS
        chain = got[1]
        root = frozenset({chain[0]})
        whole = len(chain) == 1 or (len(chain) == 2 and chain[1] in ("output", "outputs"))
        # the dotted chain too: the fields under it are known there (`present` is otherwise
        # read for step names, which hold no dot)
        yes: Facts = (root | {".".join(chain)}, frozenset())
        no: Facts = (frozenset(), root if whole else frozenset())
        return (yes, no) if test.name == "defined" else (no, yes)
    if isinstance(test, nodes.Compare) and len(test.ops) == 1 and test.ops[0].op in ("in", "notin"):
        key = test.expr  # `'k' in a.output`: `a.output.k` exists when it holds
        got = _chain(test.ops[0].expr)
        if got is None or not isinstance(key, nodes.Const) or not isinstance(key.value, str):
            return _NO_FACTS, _NO_FACTS
        known: Facts = (frozenset({".".join((*got[1], key.value))}), frozenset())
        return (known, _NO_FACTS) if test.ops[0].op == "in" else (_NO_FACTS, known)
    if isinstance(test, nodes.Not):
        true, false = _branch_facts(test.node)
        return false, true
    if isinstance(test, nodes.And):
        (lt, _), (rt, _) = _branch_facts(test.left), _branch_facts(test.right)
        return _join(lt, rt), _NO_FACTS
    if isinstance(test, nodes.Or):
        (_, lf), (_, rf) = _branch_facts(test.left), _branch_facts(test.right)
        return _NO_FACTS, _join(lf, rf)
    return _NO_FACTS, _NO_FACTS


class _Collector:
    def __init__(self) -> None:
        self.refs: list[Ref] = []
        self.used: list[UsedName] = []
        self.facts: Facts = _NO_FACTS  # what the branch being walked knows

    def _under(self, facts: Facts, node: nodes.Node, local: frozenset[str],
               guards: frozenset[str]) -> None:
        """Visit `node` with `facts` added to what the enclosing branches know."""
        saved = self.facts
        self.facts = _join(saved, facts)
        try:
            self.visit(node, local, guards)
        finally:
            self.facts = saved

    def visit(self, node: nodes.Node, local: frozenset[str], guards: frozenset[str]) -> None:
        kind = type(node).__name__  # Jinja's class or lightparse.py's: the same names
        if kind in ("TemplateData", "Const"):
            return  # no child, no name: most nodes of a template, walked the long way before
        if kind in ("Output", "Template"):  # their children, as _generic does
            for child in getattr(node, "nodes" if kind == "Output" else "body"):
                self.visit(child, local, guards)
            return
        if isinstance(node, (nodes.For,)):
            self.visit(node.iter, local, guards)
            names = _target_names(node.target)
            inner = local | names | {"loop"}
            for child in node.body + node.else_:
                self.visit(child, inner, guards)
            if node.test is not None:
                self.visit(node.test, inner, guards)
            return
        if isinstance(node, nodes.With):
            for value in node.values:
                self.visit(value, local, guards)
            inner = local | {n for t in node.targets for n in _target_names(t)}
            for child in node.body:
                self.visit(child, inner, guards)
            return
        if isinstance(node, (nodes.Macro, nodes.CallBlock)):
            params = {a.name for a in node.args}
            inner = local | params | {"caller", "varargs", "kwargs"}
            for child in node.body:
                self.visit(child, inner, guards)
            for d in node.defaults:
                self.visit(d, local, guards)
            return
        if isinstance(node, nodes.Assign):
            self.visit(node.node, local, guards)
            return  # target names are added by the enclosing scope pass
        if isinstance(node, nodes.AssignBlock):
            for child in node.body:
                self.visit(child, local, guards)
            return
        if isinstance(node, nodes.If):
            g = guards | _defined_tests(node.test)
            self.visit(node.test, local, g)
            true, false = _branch_facts(node.test)
            for child in node.body:
                self._under(true, child, local, g)
            # an `elif` is an If of its own, walked knowing that this test was false
            for elif_ in node.elif_:
                self._under(false, elif_, local, g)
                false = _join(false, _branch_facts(elif_.test)[1])
            for child in node.else_:
                self._under(false, child, local, g)
            return
        if isinstance(node, nodes.CondExpr):
            g = guards | _defined_tests(node.test)
            self.visit(node.test, local, g)
            true, false = _branch_facts(node.test)
            self._under(true, node.expr1, local, g)
            if node.expr2 is not None:
                self._under(false, node.expr2, local, g)
            return
        if isinstance(node, nodes.And):
            g = guards | _defined_tests(node.left)
            self.visit(node.left, local, g)
            self._under(_branch_facts(node.left)[0], node.right, local, g)
            return
        if isinstance(node, nodes.Or):
            self.visit(node.left, local, guards)
            self._under(_branch_facts(node.left)[1], node.right, local, guards)
            return
        if isinstance(node, nodes.Test):
            self.used.append(UsedName("test", node.name, node.lineno))
            if node.name in ("defined", "undefined"):
                got = _chain(node.node)
                if got and got[0].name not in local:
                    self.refs.append(Ref(got[1], True, node.lineno, is_guard=True,
                                         present=self.facts[0], absent=self.facts[1],
                                         last_safe=True))
                    return
            self._generic(node, local, guards)
            return
        if isinstance(node, nodes.Filter):
            self.used.append(UsedName("filter", node.name, node.lineno))
            if node.name in GUARD_FILTERS and node.node is not None:
                got = _chain(node.node)
                if got and got[0].name not in local:
                    self.refs.append(Ref(got[1], True, node.lineno, present=self.facts[0],
                                         absent=self.facts[1], last_safe=True))
                    for child in [*node.args, *[k.value for k in node.kwargs]]:
                        self.visit(child, local, guards)
                    return
            self._generic(node, local, guards)
            return
        if isinstance(node, nodes.Call) and isinstance(node.node, nodes.Getattr):
            # a method call (`x.items()`, `d.get('k', 0)`) reads `x`, not a field 'items'
            parts: list[nodes.Node | None] = [node.node.node, *node.args,
                                              *[k.value for k in node.kwargs],
                                              node.dyn_args, node.dyn_kwargs]
            for part in parts:
                if part is not None:
                    self.visit(part, local, guards)
            return
        if isinstance(node, (nodes.Getattr, nodes.Getitem, nodes.Name)):
            got = _chain(node)
            if got is not None:
                name, chain = got
                if name.ctx == "load" and name.name not in local:
                    guarded = chain[0] in guards or ".".join(chain[:2]) in guards
                    self.refs.append(Ref(chain, guarded, node.lineno, present=self.facts[0],
                                         absent=self.facts[1]))
                if isinstance(node, nodes.Getitem):
                    self._visit_subscripts(node, local, guards)
                return
        self._generic(node, local, guards)

    def _visit_subscripts(self, node: nodes.Node, local: frozenset[str],
                          guards: frozenset[str]) -> None:
        cur = node
        while isinstance(cur, (nodes.Getattr, nodes.Getitem)):
            if isinstance(cur, nodes.Getitem) and not isinstance(cur.arg, nodes.Const):
                self.visit(cur.arg, local, guards)
            cur = cur.node

    def _generic(self, node: nodes.Node, local: frozenset[str], guards: frozenset[str]) -> None:
        for child in node.iter_child_nodes():
            self.visit(child, local, guards)


def collect_refs(tree: nodes.Node) -> tuple[list[Ref], list[UsedName]]:
    """All free-name references and filter/test uses in a template or expression AST.

    Raises RenderFailure when the tree nests too deeply to walk.
    """
    try:
        return _collect(tree)
    except RecursionError:
        raise RenderFailure("syntax", TOO_DEEP) from None


def _binders() -> tuple[type[nodes.Node], ...]:
    return (nodes.Assign, nodes.AssignBlock, nodes.Import, nodes.FromImport, nodes.Macro)


def _bound(tree: nodes.Node) -> frozenset[str]:
    """Names the template binds anywhere (set, import, from-import, macro): one walk, and
    none for a tree without statements (an expression, or a template of text and `{{ }}`
    only: an expression holds no statement)."""
    if not isinstance(tree, nodes.Template) or all(isinstance(n, nodes.Output)
                                                    for n in tree.body):
        return frozenset()
    names: set[str] = set()
    binders = _binders()
    for node in statements(tree.body):
        if not isinstance(node, binders):
            continue
        if isinstance(node, (nodes.Assign, nodes.AssignBlock)):
            names.update(_target_names(node.target))
        elif isinstance(node, nodes.Import):
            names.add(node.target)
        elif isinstance(node, nodes.FromImport):
            names.update(n if isinstance(n, str) else n[1] for n in node.names)
        elif isinstance(node, nodes.Macro):
            names.add(node.name)
    return frozenset(names)


def statements(body: list[nodes.Node]) -> Iterator[nodes.Node]:
    """Every statement under `body`, at any depth, in the order `find_all` visits them. Only
    a statement holds statements (in its list fields: a body, an `else`, the `elif`s), never
    an expression, so the walk skips every expression (`find_all` visits each of their
    nodes)."""
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        inner: list[nodes.Node] = []
        for name in node.fields:
            value = getattr(node, name)
            if type(value) is list:
                inner.extend(v for v in value if isinstance(v, nodes.Stmt))
        stack.extend(reversed(inner))


def _collect(tree: nodes.Node) -> tuple[list[Ref], list[UsedName]]:
    collector = _Collector()
    collector.visit(tree, _bound(tree), frozenset())
    return collector.refs, collector.used


_NOTHING: frozenset[str] = frozenset()


def quick_refs(env: Environment | None, source: str) -> tuple[list[Ref], list[UsedName]] | None:
    """What `collect_refs(env.parse(source))` finds, for a template of the shapes
    podium.templating.quickparse takes, read from its parts with no tree made or walked (most
    of a large workflow's templates: half of what checking them cost); None for any other
    template, and for one longer than WALK_FROM: TemplateParser.parse refuses those that nest
    too deep to compile. tests/test_quickparse.py compares the two on every template it has."""
    if len(source) > WALK_FROM:
        return None
    parts = scan(env, source)
    if parts is None:
        return None
    refs: list[Ref] = []
    used: list[UsedName] = []
    # inside `{% if a.b is defined %}`: what `_Collector.visit` knows there (the test guards
    # every read of `a`, and `a` and `a.b` are present), nothing outside
    guards = present = _NOTHING
    for kind, part, line in parts:
        if kind == TEXT:
            continue
        if kind == EXPR:
            names, filters = part.names, part.filters
            used.extend(UsedName("filter", name, line) for name in reversed(filters))
            if filters and filters[0] in GUARD_FILTERS:  # `a.b | default`, right on the name
                refs.append(Ref(names, True, line, present=present, last_safe=True))
            else:
                refs.append(Ref(names, names[0] in guards, line, present=present))
            if part.right is not None and not part.right[0]:  # compared with a dotted name
                right = part.right[1]
                refs.append(Ref(right, right[0] in guards, line, present=present))
        elif kind == OPEN:
            used.append(UsedName("test", "defined", line))
            refs.append(Ref(part, True, line, is_guard=True, last_safe=True))
            guards = present = frozenset({part[0], ".".join(part)})
        else:  # the block's end
            guards = present = _NOTHING
    return refs, used
