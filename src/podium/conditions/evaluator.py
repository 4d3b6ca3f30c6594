"""simpleeval's evaluator, as Conductor runs it, inside podium's sandbox and size bounds.

Conductor calls `simple_eval(expr, names=...)`: the default operators (with simpleeval's own
limits: exponents up to 4,000,000, strings of 100,000 characters), the functions int, float,
str, rand and randint, and attribute access that tries an attribute, then a key. podium adds:
integer results of at most MAX_INT_BITS bits, values built by a call of at most MAX_VALUE
characters or items (a padded, replaced or joined string is refused before it is built), no
mutating method (Jinja's immutable sandbox decides), no attribute of a type (`str.join(...)`
would bypass those checks), and a dict's key read before a method of the same name.
"""

from __future__ import annotations

import ast
import math
import re
import types
from collections.abc import Callable
from typing import Any

from jinja2.sandbox import ImmutableSandboxedEnvironment
from simpleeval import (  # type: ignore[import-untyped]
    DEFAULT_FUNCTIONS,
    DEFAULT_OPERATORS,
    DISALLOW_FUNCTIONS,
    DISALLOW_METHODS,
    AttributeDoesNotExist,
    FeatureNotAvailable,
    FunctionNotDefined,
    IterableTooLong,
    NameNotDefined,
    NumberTooHigh,
    SimpleEval,
    safe_mult,
    safe_power,
)

from podium.conditions import FUNCTIONS
from podium.templating import RenderFailure

MAX_VALUE = 10_000_000  # characters or items one value a condition builds may have
MAX_INT_BITS = 100_000  # integer results beyond this are refused: they only burn CPU
MAX_FORMAT_WIDTH = 100_000  # a width or precision in an f-string's format spec

_SANDBOX = ImmutableSandboxedEnvironment()  # its rules of which attributes are safe
_FORMAT_NUMBER = re.compile(r"\d+")


def run(text: str, tree: ast.expr, names: dict[str, Any],
        unknown: Callable[[str], str]) -> Any:
    """Evaluate a parsed condition over `names`; every failure is a RenderFailure
    (`unknown(name)` words the message for a name that is not there)."""
    try:
        return _Evaluator(names).eval(text, previously_parsed=tree)
    except RenderFailure:
        raise
    except NameNotDefined as exc:
        name = str(getattr(exc, "name", "") or "")
        raise RenderFailure("undefined", unknown(name), name=name) from None
    except FunctionNotDefined as exc:
        name = str(getattr(exc, "func_name", ""))
        raise RenderFailure("error", f"unknown function '{name}' (a condition without "
                                     f"{{{{ }}}} has {', '.join(FUNCTIONS)})") from None
    except AttributeDoesNotExist as exc:
        attr = str(getattr(exc, "attr", ""))
        raise RenderFailure("error", f"no attribute or key '{attr}'") from None
    except (NumberTooHigh, IterableTooLong) as exc:
        raise RenderFailure("size", f"{exc}") from None
    except FeatureNotAvailable as exc:
        raise RenderFailure("security", f"not allowed in a condition: {exc}") from None
    except MemoryError:
        raise RenderFailure("size", "the condition built a value too large to hold") \
            from None
    except RecursionError:
        raise RenderFailure("error", "the condition nests too deeply") from None
    except Exception as exc:  # TypeError, KeyError, ZeroDivisionError, ... of the data
        raise RenderFailure("error", f"{type(exc).__name__}: {exc}") from None


def _too_big(what: str) -> RenderFailure:
    return RenderFailure("size", f"{what} would build a value of more than {MAX_VALUE:,} "
                                 "characters or items (the limit of one condition value)")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _power(a: Any, b: Any) -> Any:
    if _is_int(a) and _is_int(b) and b > 0 and abs(a) > 1 \
            and b * math.log2(abs(a)) > MAX_INT_BITS:
        raise RenderFailure("size", f"'{a} ** {b}' would build a number of more than "
                                    f"{MAX_INT_BITS:,} bits")
    return safe_power(a, b)


def _multiply(a: Any, b: Any) -> Any:
    if _is_int(a) and _is_int(b) and a.bit_length() + b.bit_length() > MAX_INT_BITS:
        raise RenderFailure("size", f"'*' would build a number of more than "
                                    f"{MAX_INT_BITS:,} bits")
    return safe_mult(a, b)


_OPERATORS = {**DEFAULT_OPERATORS, ast.Pow: _power, ast.Mult: _multiply}


def _guard_call(func: Callable[..., Any], args: list[Any],
                kwargs: dict[str, Any]) -> list[Any]:
    """Refuse a method call that would build a huge value (a string padded to a billion
    characters, a replace or join that multiplies its input); return the arguments to call
    it with (`join` gets its items as a list, measured)."""
    owner: Any = getattr(func, "__self__", None)
    name = getattr(func, "__name__", "")
    if not isinstance(owner, (str, bytes, bytearray, int)) or isinstance(owner, bool):
        return args
    numbers = [v for v in [*args, *kwargs.values()] if _is_int(v)]
    if any(abs(n) > MAX_VALUE for n in numbers):
        raise _too_big(f"'.{name}()'")
    if isinstance(owner, int):
        return args
    text: Any = owner  # str, bytes or bytearray
    size = len(text)
    if name == "expandtabs":
        tab = numbers[0] if numbers else 8
        size += text.count("\t" if isinstance(text, str) else b"\t") * max(tab, 0)
    elif name == "replace" and len(args) >= 2:
        old, new = args[0], args[1]
        if isinstance(old, type(text)) and isinstance(new, type(text)):
            hits = size + 1 if not old else text.count(old)
            if len(args) > 2 and _is_int(args[2]) and args[2] >= 0:
                hits = min(hits, args[2])
            size += hits * max(len(new) - len(old), 0)
    elif name == "join" and args:
        items = list(args[0])
        size = len(text) * max(len(items) - 1, 0) + sum(
            len(i) for i in items if isinstance(i, (str, bytes, bytearray)))
        args = [items, *args[1:]]
    elif name == "translate" and args:
        table = args[0]
        longest = max((len(v) for v in table.values() if isinstance(v, (str, bytes))),
                      default=1) if isinstance(table, dict) else 1
        size *= max(longest, 1)
    if size > MAX_VALUE:
        raise _too_big(f"'.{name}()'")
    return args


def _forbidden(value: Any) -> bool:
    if not callable(value) or isinstance(value, type):
        return False
    try:
        return bool(value in DISALLOW_FUNCTIONS)
    except TypeError:  # unhashable
        return False


class _Evaluator(SimpleEval):  # type: ignore[misc]
    def __init__(self, names: dict[str, Any]) -> None:
        super().__init__(operators=_OPERATORS, functions=dict(DEFAULT_FUNCTIONS), names=names)

    def _check_disallowed_items(self, item: Any) -> None:
        # names hold JSON data and no literal builds a container: only the value itself can
        # be a module or a forbidden function (no need to walk every output on every node)
        if isinstance(item, types.ModuleType):
            raise FeatureNotAvailable("Sorry, modules are not allowed")
        if _forbidden(item):
            raise FeatureNotAvailable("This function is forbidden")

    def _eval_attribute(self, node: ast.Attribute) -> Any:
        attr = node.attr
        if attr.startswith(("_", "func_")) or attr in DISALLOW_METHODS:
            raise FeatureNotAvailable(f"access to '.{attr}' is not available")
        obj = self._eval(node.value)
        if isinstance(obj, dict) and attr in obj:  # a key before a method of that name
            return obj[attr]
        if isinstance(obj, type):  # `str.join(...)` would call past the guards
            raise FeatureNotAvailable(f"attributes of '{obj.__name__}' are not available "
                                      "in a condition")
        try:
            value = getattr(obj, attr)
        except (AttributeError, TypeError):
            try:
                return obj[attr]
            except (KeyError, TypeError, IndexError):
                raise AttributeDoesNotExist(attr, self.expr) from None
        if not _SANDBOX.is_safe_attribute(obj, attr, value):
            raise RenderFailure("security", f"not allowed in a condition: '.{attr}' would "
                                            "change the run's state")
        if isinstance(value, types.ModuleType) or _forbidden(value):
            raise FeatureNotAvailable(f"'.{attr}' is forbidden")
        return value

    def _eval_call(self, node: ast.Call) -> Any:
        if isinstance(node.func, ast.Attribute):
            func = self._eval(node.func)
        elif isinstance(node.func, ast.Name):
            try:
                func = self.functions[node.func.id]
            except KeyError:
                raise FunctionNotDefined(node.func.id, self.expr) from None
        else:
            func = self._eval(node.func)
        if not callable(func):
            raise TypeError(f"'{type(func).__name__}' object is not callable")
        args = [self._eval(a) for a in node.args]
        kwargs = dict(self._eval(k) for k in node.keywords)
        args = _guard_call(func, args, kwargs)
        result = func(*args, **kwargs)
        if isinstance(result, (str, bytes, bytearray, list, tuple)) and len(result) > MAX_VALUE:
            raise _too_big("a call")
        return result

    def _eval_formattedvalue(self, node: ast.FormattedValue) -> Any:
        if node.format_spec is not None:
            spec = self._eval(node.format_spec)
            if any(int(m) > MAX_FORMAT_WIDTH for m in _FORMAT_NUMBER.findall(str(spec))):
                raise _too_big("an f-string format")
        return super()._eval_formattedvalue(node)
