"""Filters and tests with bounds: each ticks the render's budget, filters that walk a
container count its items, filters that build text check the size they would build before
building it, and podium's own filters (`json`, `default`, `quote`) live here."""

from __future__ import annotations

import builtins
import functools
import json
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sized
from itertools import chain
from typing import Any

from jinja2 import filters as jf
from jinja2 import pass_environment, pass_eval_context
from jinja2.runtime import Undefined
from jinja2.utils import _PassArg, generate_lorem_ipsum
from markupsafe import soft_str

from podium.templating.budget import (
    LARGE_VALUE,
    MAX_RENDER_BUILT,
    MAX_SLOW_INPUT,
    MAX_VALUE_SIZE,
    Budget,
    _local,
    current,
    too_big,
)
from podium.templating.text import RenderFailure

Filter = Callable[..., Any]

# Filters that go through their input item by item in Python: they count its items as steps.
WALKERS = frozenset({"batch", "dictsort", "groupby", "items", "join", "list", "map", "max",
                     "min", "reject", "rejectattr", "reverse", "select", "selectattr",
                     "slice", "sort", "sum", "unique"})
# Filters that rearrange their input: what they return is as large as what they were given.
REARRANGERS = frozenset({"batch", "dictsort", "groupby", "list", "reverse", "slice", "sort",
                         "unique"})
# Filters that return (a part of) what they were given, or a number: they build nothing.
PASSING = frozenset({"abs", "attr", "count", "d", "default", "filesizeformat", "first",
                     "float", "int", "last", "length", "max", "min", "random", "round",
                     "wordcount"})
# Pure-Python text filters whose time grows fast with their input: they refuse a large one.
SLOW = frozenset({"title", "urlize", "wordwrap"})


def _text(value: Any) -> str:
    return value if isinstance(value, str) else soft_str(value)


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0


# --------------------------------------------------------------------------- size checks


def check_percent(fmt: Any, values: Any, what: str) -> None:
    """Refuse a printf-style format whose widths or precisions would build a huge string."""
    text = fmt.decode("latin-1") if isinstance(fmt, (bytes, bytearray)) else fmt
    if not isinstance(text, str):
        return
    star = False
    for m in _PERCENT.finditer(text):
        for group in m.groups():
            if group == "*":
                star = True
            elif group and int(group) > MAX_VALUE_SIZE:
                raise too_big(what)
    if star:
        given = values if isinstance(values, tuple) else (values,)
        if any(isinstance(v, int) and v > MAX_VALUE_SIZE for v in given):
            raise too_big(what)


_PERCENT = re.compile(r"%%|%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?")
_NUMBER = re.compile(r"\d+")


def check_format_spec(spec: str, room: int, what: str) -> None:
    """Refuse a str.format field whose width or precision passes the room left."""
    for number in _NUMBER.findall(spec):
        if len(number) > 9 or int(number) > room:
            raise too_big(what)


def size_of(budget: Budget, value: Any, what: str) -> int:
    """The length of `value` as text: exact for text, remembered for a built container."""
    if isinstance(value, (str, bytes, bytearray)):
        return len(value)
    known = budget.known(value)
    if known is not None:
        return known
    return len(_text(value))


# --------------------------------------------------------------------------- the wrapper


def bounded(name: str, fn: Filter, *, test: bool = False) -> Filter:
    """`fn` ticking the budget, counting its input's items when it walks them, charging
    the text or container it builds, and refusing a slow filter's large input."""
    skip = 0 if _PassArg.from_obj(fn) is None else 1
    walks = name in WALKERS
    rearranges = name in REARRANGERS
    slow = name in SLOW
    builds = name not in PASSING
    what = f"filter '{name}'"

    if test or not (builds or walks or slow):
        @functools.wraps(fn)
        def tick(*args: Any, **kwargs: Any) -> Any:
            budget = _local.budget or current()
            budget.steps += 1
            if budget.steps >= budget.check_at:
                budget.check()
            return fn(*args, **kwargs)

        return tick

    if not (walks or slow or rearranges):  # the common case, kept short: a text filter
        @functools.wraps(fn)
        def text(*args: Any, **kwargs: Any) -> Any:
            budget = _local.budget or current()
            budget.steps += 1
            if budget.steps >= budget.check_at:
                budget.check()
            result = fn(*args, **kwargs)
            if isinstance(result, str) and result is not args[skip]:
                size = len(result)
                budget.built += size
                if size > LARGE_VALUE or budget.built > MAX_RENDER_BUILT:
                    budget.charge(0, what, size)
            return result

        return text

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        budget = _local.budget or current()
        budget.steps += 1
        value = args[skip] if len(args) > skip else None
        if walks and isinstance(value, Sized) and not isinstance(value, str):
            budget.steps += len(value)
        if budget.steps >= budget.check_at:
            budget.check()
        if slow and isinstance(value, str) and len(value) > MAX_SLOW_INPUT:
            raise RenderFailure("size", f"{what} takes at most {MAX_SLOW_INPUT:,} characters "
                                        f"(it was given {len(value):,}: the limit of a slow "
                                        "filter)", limit="value")
        result = fn(*args, **kwargs)
        if not builds:
            return result
        if isinstance(result, str):
            if result is not value:
                budget.charge(len(result), what)
        elif rearranges and isinstance(result, (list, tuple, dict)) \
                and budget.known(value) is not None:
            budget.track(result, what)
        return result

    return run


# --------------------------------------------------------------------------- special filters


def _center(value: Any, width: int = 80) -> str:
    if _int(width) > MAX_VALUE_SIZE:
        raise too_big("filter 'center'")
    return jf.do_center(value, width)


def _indent(s: Any, width: int | str = 4, first: bool = False, blank: bool = False) -> str:
    text = _text(s)
    step = len(width) if isinstance(width, str) else _int(width)
    if len(text) + step * (text.count("\n") + 2) > MAX_VALUE_SIZE:
        raise too_big("filter 'indent'")
    return jf.do_indent(text, width, first, blank)


def _wordwrap(environment: Any, s: Any, width: int = 79, break_long_words: bool = True,  # noqa: PLR0917 (Jinja's signature)
              wrapstring: str | None = None, break_on_hyphens: bool = True) -> str:
    text = _text(s)
    joiner = len(wrapstring) if isinstance(wrapstring, str) else 1
    if len(text) * (1 + joiner) > MAX_VALUE_SIZE:
        raise too_big("filter 'wordwrap'")
    return jf.do_wordwrap(environment, text, width, break_long_words, wrapstring,
                          break_on_hyphens)


def _urlize(eval_ctx: Any, value: Any, trim_url_limit: int | None = None,  # noqa: PLR0917 (Jinja's signature)
            nofollow: bool = False, target: str | None = None, rel: str | None = None,
            extra_schemes: Iterable[str] | None = None) -> str:
    text = _text(value)
    links = text.count(".") + text.count("@") + text.count(":")
    extra = len(_text(target or "")) + len(_text(rel or "")) + 64
    if 3 * len(text) + links * extra > MAX_VALUE_SIZE:
        raise too_big("filter 'urlize'")
    return jf.do_urlize(eval_ctx, value, trim_url_limit, nofollow, target, rel, extra_schemes)


def _replace(eval_ctx: Any, s: Any, old: Any, new: Any, count: int | None = None) -> str:
    text, o, n = _text(s), _text(old), _text(new)
    times = len(text) + 1 if not o else text.count(o)
    if isinstance(count, int) and count >= 0:
        times = min(times, count)
    if len(text) + times * (len(n) - len(o)) > MAX_VALUE_SIZE:
        raise too_big("filter 'replace'")
    return jf.do_replace(eval_ctx, s, old, new, count)


def _join(eval_ctx: Any, value: Any, d: str = "", attribute: Any = None) -> str:
    budget = current()
    items = list(value)
    if attribute is not None:
        items = list(map(jf.make_attrgetter(eval_ctx.environment, attribute), items))
    budget.tick(len(items))
    total = len(_text(d)) * max(len(items) - 1, 0)
    for item in items:
        total += size_of(budget, item, "filter 'join'")
        if total > MAX_VALUE_SIZE:
            raise too_big("filter 'join'")
    return jf.sync_do_join(eval_ctx, items, d)


def _format(value: Any, *args: Any, **kwargs: Any) -> str:
    check_percent(_text(value), kwargs or args, "filter 'format'")
    return jf.do_format(value, *args, **kwargs)


def _sum(environment: Any, iterable: Any, attribute: Any = None, start: Any = 0) -> Any:
    budget = current()
    items = list(iterable)
    if attribute is not None:
        items = list(map(jf.make_attrgetter(environment, attribute), items))
    budget.tick(len(items))
    kind = type(start)
    if kind in (list, tuple) and all(type(i) is kind for i in items):
        total = sum(budget.measure(i, "filter 'sum'") for i in [start, *items])
        if total > MAX_VALUE_SIZE:
            raise too_big("filter 'sum'")
        joined = list(chain(start, *items))  # linear, where sum() of lists is quadratic
        return budget.track(joined if kind is list else tuple(joined), "filter 'sum'")
    return sum(items, start)


def _fill_check(fill_with: Any, times: int, what: str) -> None:
    if fill_with is None or times <= 0:
        return
    if current().measure(fill_with, what) * times > MAX_VALUE_SIZE:
        raise too_big(what)


def _batch(value: Any, linecount: int, fill_with: Any = None) -> Any:
    _fill_check(fill_with, _int(linecount), "filter 'batch'")
    return jf.do_batch(value, linecount, fill_with)


def _slice(value: Any, slices: int, fill_with: Any = None) -> Any:
    if _int(slices) > 100_000:
        raise RenderFailure("size", "filter 'slice' makes at most 100,000 slices (the limit "
                                    "of one template value)", limit="value")
    _fill_check(fill_with, _int(slices), "filter 'slice'")
    return jf.sync_do_slice(value, slices, fill_with)


def _pprint(value: Any) -> str:
    current().measure(value, "filter 'pprint'", MAX_SLOW_INPUT)
    return jf.do_pprint(value)


def bounded_dumps(obj: Any, **kwargs: Any) -> str:
    """json.dumps that stops once the text passes the value limit (with an indent, the
    encoder is pure Python anyway: count its chunks as they come)."""
    if kwargs.get("indent") is None:
        return json.dumps(obj, **kwargs)
    budget = current()
    parts: list[str] = []
    size = 0
    for n, chunk in enumerate(json.JSONEncoder(**kwargs).iterencode(obj)):
        size += len(chunk)
        if size > MAX_VALUE_SIZE:
            raise too_big("JSON encoding")
        if n % 4096 == 4095:
            budget.tick()
        parts.append(chunk)
    return "".join(parts)


def json_filter(value: Any, indent: int = 2) -> str:
    """Conductor's `json` filter: JSON with an indent of 2, non-ASCII kept, str() for the rest."""
    return bounded_dumps(value, indent=indent, default=str, ensure_ascii=False)


def default_filter(value: Any, fallback: Any = "", boolean: bool = False) -> Any:
    """Conductor's `default`: None counts as missing, like an undefined name."""
    if isinstance(value, Undefined) or value is None:
        return fallback
    if boolean and not value:
        return fallback
    return value


def quote(value: Any) -> str:
    """POSIX shell quoting (Python's shlex.quote, Ansible's `quote`): the value as one shell
    word. None is '', a list or tuple is each item quoted and joined by spaces (one word per
    item), anything else is converted with str() first."""
    if value is None:
        return "''"
    if isinstance(value, (list, tuple)):
        return " ".join(shlex.quote(_text(v)) for v in value)
    return shlex.quote(_text(value))


def lipsum(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:
    """Jinja's lorem ipsum, for at most 100,000 words."""
    if _int(n) * _int(builtins.max(min, max)) > 100_000:
        raise too_big("lipsum()")
    return generate_lorem_ipsum(n, html, min, max)


SPECIAL: dict[str, Filter] = {
    "center": _center, "indent": _indent, "wordwrap": pass_environment(_wordwrap),
    "urlize": pass_eval_context(_urlize), "replace": pass_eval_context(_replace),
    "join": pass_eval_context(_join), "format": _format,
    "sum": pass_environment(_sum), "batch": _batch, "slice": _slice, "pprint": _pprint,
    "json": json_filter, "default": default_filter, "d": default_filter, "quote": quote,
}


def bounded_filters(builtin: Mapping[str, Filter]) -> dict[str, Filter]:
    """Every filter of `builtin` plus podium's, each wrapped by `bounded`."""
    table = {**builtin, **SPECIAL}
    return {name: bounded(name, fn) for name, fn in table.items()}


def bounded_tests(builtin: Mapping[str, Any]) -> dict[str, Filter]:
    return {name: bounded(name, fn, test=True) for name, fn in builtin.items()}
