"""podium's Jinja2 sandbox: immutable, strict, and bounded in what a template may build and do.

Jinja's sandbox stops a template from reaching Python's internals; it does not stop one from
running for hours or filling the memory. Here every place where a template repeats work or
builds a value goes through a hook that ticks or charges the render's `Budget`:

- a code generator wraps each `for` loop's items (one step per iteration, also for recursive
  loops), each comparison (one step), each `~` concatenation, slice and non-constant
  list/tuple/dict literal (measured and charged), and gives every macro, call block,
  `{% set %}` block and `{% filter %}` block an output buffer that counts what it holds;
- calls, `*`, `**`, `+` and `%`, str.format and str methods that take a width or a count
  (`center`, `ljust`, `zfill`, `expandtabs`, `replace`, `join`, `translate`, `to_bytes`) are
  checked before they run, since C code cannot be interrupted once it started;
- filters and tests are wrapped (filters.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from string import Formatter
from typing import Any

from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame, optimizeconst
from jinja2.filters import FILTERS
from jinja2.runtime import Context, LoopContext, markup_join
from jinja2.sandbox import (
    ImmutableSandboxedEnvironment,
    SandboxedEscapeFormatter,
    SandboxedFormatter,
)
from jinja2.tests import TESTS
from jinja2.utils import Namespace
from markupsafe import Markup

from podium.templating import filters as bf
from podium.templating.budget import (
    MAX_INT_BITS,
    MAX_VALUE_SIZE,
    _local,
    current,
    too_big,
)
from podium.templating.text import RenderFailure

LOOP_FILTER = "podium:loop"  # not a name a template can write: only the code generator uses it


class BoundedNamespace(Namespace):
    """`namespace()`, whose text does not show its attributes: a namespace changes after a
    list holding it was measured, so its text must not grow with it."""

    def __repr__(self) -> str:
        return "<Namespace>"


class _Buffer(list[str]):
    """The output buffer of a macro or block: refuses to hold more than one value may."""

    size = 0

    def append(self, piece: str) -> None:
        self.size += len(piece)
        if self.size > MAX_VALUE_SIZE:
            raise too_big("a macro or block's output")
        super().append(piece)

    def extend(self, pieces: Any) -> None:
        for piece in pieces:
            self.append(piece)


def _loop_items(value: Any) -> Iterator[Any]:
    budget = current()
    for item in value:
        budget.steps += 1
        if budget.steps >= budget.check_at:
            budget.check()
        yield item


class _CodeGenerator(CodeGenerator):
    """Jinja's code generator with the budget's hooks written into the compiled template."""

    def visit_Template(self, node: nodes.Template, frame: Frame | None = None) -> None:
        for loop in node.find_all(nodes.For):
            loop.iter = nodes.Filter(loop.iter, LOOP_FILTER, [], [], None, None,
                                     lineno=loop.iter.lineno)
        super().visit_Template(node, frame)

    def buffer(self, frame: Frame) -> None:
        frame.buffer = self.temporary_identifier()
        self.writeline(f"{frame.buffer} = environment.podium_buffer()")

    @optimizeconst
    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        if frame.eval_ctx.volatile:
            markup = "context.eval_ctx.volatile"
        else:
            markup = "True" if frame.eval_ctx.autoescape else "False"
        self.write("environment.podium_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write(f"), {markup})")

    @optimizeconst
    def visit_Compare(self, node: nodes.Compare, frame: Frame) -> None:
        self.write("environment.podium_tick(")
        super().visit_Compare(node, frame)
        self.write(")")

    @optimizeconst
    def visit_Getitem(self, node: nodes.Getitem, frame: Frame) -> None:
        if not isinstance(node.arg, nodes.Slice):
            super().visit_Getitem(node, frame)
            return
        self.write("environment.podium_sliced(")
        super().visit_Getitem(node, frame)
        self.write(")")

    def visit_List(self, node: nodes.List, frame: Frame) -> None:
        self._literal(node, frame)

    def visit_Tuple(self, node: nodes.Tuple, frame: Frame) -> None:
        self._literal(node, frame)

    def visit_Dict(self, node: nodes.Dict, frame: Frame) -> None:
        self._literal(node, frame)

    def _literal(self, node: nodes.List | nodes.Tuple | nodes.Dict, frame: Frame) -> None:
        visit = getattr(super(), f"visit_{type(node).__name__}")
        if getattr(node, "ctx", "load") != "load" or _constant(node, frame):
            visit(node, frame)
            return
        self.write("environment.podium_literal(")
        visit(node, frame)
        self.write(")")


def _constant(node: nodes.Expr, frame: Frame) -> bool:
    try:
        node.as_const(frame.eval_ctx)
    except nodes.Impossible:
        return False
    except Exception:  # a constant that fails to evaluate is left to fail at run time
        return False
    return True


class _Formatter(SandboxedFormatter):
    """str.format that refuses a field width past what one value may hold."""

    def __init__(self, env: Any, **kwargs: Any) -> None:
        super().__init__(env, **kwargs)
        self.size = 0

    def format_field(self, value: Any, format_spec: str) -> Any:
        room = MAX_VALUE_SIZE - self.size
        bf.check_format_spec(format_spec, room, "str.format")
        text = super().format_field(value, format_spec)
        self.size += len(text)
        if self.size > MAX_VALUE_SIZE:
            raise too_big("str.format")
        return text


class _EscapeFormatter(_Formatter, SandboxedEscapeFormatter):
    pass


class BoundedEnvironment(ImmutableSandboxedEnvironment):
    """Sandboxed, immutable, strict, reading dict keys before methods (`x.items` is key
    'items' when there is one), and bounded (see the module docstring)."""

    code_generator_class = _CodeGenerator
    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.filters = bf.bounded_filters(FILTERS)
        self.filters[LOOP_FILTER] = _loop_items
        self.tests = bf.bounded_tests(TESTS)  # type: ignore[assignment]  # Jinja's narrow type
        self.globals["namespace"] = BoundedNamespace
        self.globals["lipsum"] = bf.lipsum
        self.globals["dict"] = _dict
        self.policies["json.dumps_function"] = bf.bounded_dumps

    # ----------------------------------------------------------------- attribute access

    def getattr(self, obj: Any, attribute: str) -> Any:
        if isinstance(obj, dict) and attribute in obj:
            return obj[attribute]  # a key before a method of that name (`x.items` is 'items')
        # no such key: the sandbox's lookup finds safe methods (`x.items()`, `x.get('k', d)`)
        # and refuses the ones that mutate (`x.update(...)`)
        return super().getattr(obj, attribute)

    def wrap_str_format(self, value: Any) -> Any:
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        owner = value.__self__
        format_map = value.__name__ == "format_map"
        env = self

        def bounded_format(*args: Any, **kwargs: Any) -> str:
            if format_map:
                if kwargs or len(args) != 1:
                    return str(wrapped(*args, **kwargs))  # Jinja's own error
                kwargs, args = args[0], ()
            fmt: Formatter = (_EscapeFormatter(env, escape=owner.escape)
                              if isinstance(owner, Markup) else _Formatter(env))
            text = str(type(owner)(fmt.vformat(owner, args, kwargs)))
            current().charge(len(text), "str.format")
            return text

        bounded_format.__name__ = value.__name__
        return bounded_format

    # ----------------------------------------------------------------- operators and calls

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        budget = current()
        budget.tick()
        what = f"'{operator}'"
        if _int_bits(operator, left, right) > MAX_INT_BITS:
            raise RenderFailure("size", f"{what} would build a number of more than "
                                        f"{MAX_INT_BITS:,} bits (the limit of one template "
                                        "value)", limit="value")
        if operator == "%":
            bf.check_percent(left, right, what)
        size = _result_size(operator, left, right, what)
        result = super().call_binop(context, operator, left, right)
        if size:
            budget.charge(size, what)
            if isinstance(result, (list, tuple)):
                budget.sizes[id(result)] = size
                budget.keep.append(result)
        elif isinstance(result, (str, bytes)) and operator == "%":
            budget.charge(len(result), what)
        return result

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        budget = current()
        budget.tick()
        if isinstance(__obj, LoopContext) and args:  # a recursive loop's next level
            args = (_loop_items(args[0]), *args[1:])
        owner: Any = getattr(__obj, "__self__", None)
        name = getattr(__obj, "__name__", "")
        text_method = isinstance(owner, (str, bytes, bytearray))
        if text_method:
            args = _check_text_method(owner, name, args, kwargs)
        elif isinstance(owner, int) and name == "to_bytes":
            length = args[0] if args else kwargs.get("length", 1)
            if isinstance(length, int) and length > MAX_VALUE_SIZE:
                raise too_big("int.to_bytes")
        result = super().call(__context, __obj, *args, **kwargs)
        if text_method:
            what = f"str.{name}"
            if isinstance(result, (str, bytes)) and result is not owner:
                budget.charge(len(result), what)
            elif isinstance(result, (list, tuple)):  # split and its kin: parts of the text
                size = len(owner) + 4 * len(result) + 2
                budget.charge(size, what)
                budget.sizes[id(result)] = size
                budget.keep.append(result)
        elif name in ("copy", "fromkeys") and (isinstance(owner, (dict, list))
                                               or owner in (dict, list)):
            budget.track(result, f"{name}()")
        return result

    # ----------------------------------------------------------------- code generator hooks

    @staticmethod
    def podium_buffer() -> _Buffer:
        return _Buffer()

    @staticmethod
    def podium_tick(value: Any) -> Any:
        budget = _local.budget or current()
        budget.steps += 1
        if budget.steps >= budget.check_at:
            budget.check()
        return value

    @staticmethod
    def podium_literal(value: Any) -> Any:
        kind = "a list" if isinstance(value, list) else \
            "a tuple" if isinstance(value, tuple) else "a dict"
        return current().track(value, kind)

    @staticmethod
    def podium_sliced(value: Any) -> Any:
        budget = current()
        if isinstance(value, (str, bytes, bytearray)):
            budget.charge(len(value), "a slice")
        elif isinstance(value, (list, tuple)):
            budget.track(value, "a slice")
        return value

    @staticmethod
    def podium_concat(parts: tuple[Any, ...], markup: bool) -> str:
        budget = current()
        total = 0
        for part in parts:
            total += bf.size_of(budget, part, "'~'")
            if total > MAX_VALUE_SIZE:
                raise too_big("'~'")
        text = markup_join(parts) if markup else "".join(map(str, parts))
        budget.charge(len(text), "'~'")
        return text


def _dict(*args: Any, **kwargs: Any) -> dict[Any, Any]:
    return current().track(dict(*args, **kwargs), "dict()")  # type: ignore[no-any-return]


_SCALARS = frozenset({str, int, float, bool, type(None), Markup})


def finalize(value: Any) -> Any:
    """What `{{ value }}` prints: a container the render built is charged for its text."""
    if type(value) in _SCALARS:
        return value
    budget = current()
    size = budget.known(value)
    if size is not None:
        budget.charge(size, "printing a value")
    return value


# --------------------------------------------------------------------------- checks


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_bits(operator: str, left: Any, right: Any) -> int:
    """An upper bound of the bit length of an integer product or power, 0 otherwise."""
    if not (_is_int(left) and _is_int(right)):
        return 0
    if operator == "**":
        return math.ceil(right * math.log2(abs(left))) if right > 0 and abs(left) > 1 else 0
    if operator == "*":
        return int(left.bit_length() + right.bit_length())
    return 0


def _result_size(operator: str, left: Any, right: Any, what: str) -> int:
    """The size of a repeated or concatenated text or sequence, 0 for anything else."""
    budget = current()
    seqs = (str, bytes, bytearray, list, tuple)
    if operator == "*":
        for seq, n in ((left, right), (right, left)):
            if isinstance(seq, seqs) and _is_int(n):
                if n <= 0:
                    return 0
                size = len(seq) if isinstance(seq, (str, bytes, bytearray)) else \
                    budget.measure(seq, what)
                if size * n > MAX_VALUE_SIZE:
                    raise too_big(what)
                return max(int(size * n), 1)
    if operator == "+" and isinstance(left, seqs) and isinstance(right, seqs):
        total = bf.size_of(budget, left, what) if isinstance(left, (str, bytes)) \
            else budget.measure(left, what)
        total += bf.size_of(budget, right, what) if isinstance(right, (str, bytes)) \
            else budget.measure(right, what)
        if total > MAX_VALUE_SIZE:
            raise too_big(what)
        return total
    return 0


_WIDTH_METHODS = frozenset({"center", "ljust", "rjust", "zfill"})


def _check_text_method(owner: Any, name: str, args: tuple[Any, ...],
                       kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """Refuse a str (or bytes) method call that would build a huge value; return the
    arguments to call it with (`join` gets its items as a list)."""
    what = f"str.{name}"
    if name in _WIDTH_METHODS:
        width = args[0] if args else kwargs.get("width", 0)
        if _is_int(width) and width > MAX_VALUE_SIZE:
            raise too_big(what)
    elif name == "expandtabs":
        size = args[0] if args else kwargs.get("tabsize", 8)
        tab = "\t" if isinstance(owner, str) else b"\t"
        if _is_int(size) and len(owner) + owner.count(tab) * max(size, 0) > MAX_VALUE_SIZE:
            raise too_big(what)
    elif name == "replace" and len(args) >= 2:
        old, new = args[0], args[1]
        if isinstance(old, type(owner)) and isinstance(new, type(owner)):
            times = owner.count(old) if old else len(owner) + 1
            count = args[2] if len(args) > 2 else kwargs.get("count", -1)
            if _is_int(count) and count >= 0:
                times = min(times, count)
            if len(owner) + times * (len(new) - len(old)) > MAX_VALUE_SIZE:
                raise too_big(what)
    elif name == "join" and args:
        items = list(args[0])
        current().tick(len(items))
        total = len(owner) * max(len(items) - 1, 0)
        for item in items:
            total += len(item) if isinstance(item, (str, bytes, bytearray)) else 0
            if total > MAX_VALUE_SIZE:
                raise too_big(what)
        return (items, *args[1:])
    elif name == "translate" and args and isinstance(owner, str):
        table = args[0]
        values = table.values() if isinstance(table, dict) else \
            table if isinstance(table, (list, tuple)) else ()
        widest = max((len(v) for v in values if isinstance(v, str)), default=1)
        if len(owner) * widest > MAX_VALUE_SIZE:
            raise too_big(what)
    return args

