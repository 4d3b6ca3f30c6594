"""The one sandboxed Jinja2 environment: rendering templates, conditions and bare expressions.

Every template in a workflow (prompts, args, conditions, values, reasons, outputs) goes through
`TemplateEngine`, which compiles each source text once and caches it. The environment is
Jinja2's ImmutableSandboxedEnvironment (no access to Python internals, no mutation of the
run's state), with StrictUndefined, Conductor's `json` filter and its None-aware `default`
filter, and a cap on rendered size.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Mapping, Sized
from dataclasses import dataclass
from typing import Any

from jinja2 import StrictUndefined, TemplateSyntaxError, UndefinedError, nodes
from jinja2.exceptions import SecurityError
from jinja2.exceptions import TemplateError as JinjaTemplateError
from jinja2.runtime import Context, Undefined
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEnvironment

from podium import jsontext

MAX_RENDER_CHARS = 2_000_000
TOO_DEEP = "nesting too deep to read"
MAX_INT_BITS = 100_000  # integer results beyond this are refused: they only burn CPU


class RenderFailure(Exception):
    """A template failed; `kind` is 'undefined', 'syntax', 'security', 'size' or 'error'."""

    def __init__(self, kind: str, message: str, name: str | None = None,
                 lineno: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.name = name
        self.lineno = lineno


def _default(value: Any, fallback: Any = "", boolean: bool = False) -> Any:
    if isinstance(value, Undefined) or value is None:
        return fallback
    if boolean and not value:
        return fallback
    return value


def _json_filter(value: Any, indent: int = 2) -> str:
    return json.dumps(value, indent=indent, default=str, ensure_ascii=False)


def _finalize(value: Any) -> Any:
    return value


class _Env(ImmutableSandboxedEnvironment):
    """Sandboxed, strict, and reading dict keys before attributes (`x.items` is key 'items').

    `*`, `**` and `+` are checked before they run, so that `'x' * 10**9` or `2 ** (10**9)`
    fail at once instead of exhausting memory or spinning in C code that no timeout can
    interrupt (and Jinja does not fold them at compile time).
    """

    intercepted_binops = frozenset({"*", "**", "+"})

    def getattr(self, obj: Any, attribute: str) -> Any:
        if isinstance(obj, dict) and attribute in obj:
            return obj[attribute]  # a key before a method of that name (`x.items` is 'items')
        # no such key: the sandbox's lookup finds safe methods (`x.items()`, `x.get('k', d)`)
        # and refuses the ones that mutate (`x.update(...)`)
        return super().getattr(obj, attribute)

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        if _int_bits(operator, left, right) > MAX_INT_BITS:
            raise SecurityError(f"'{operator}' would build a number of more than "
                                f"{MAX_INT_BITS:,} bits")
        if _result_size(operator, left, right) > MAX_RENDER_CHARS:
            raise SecurityError(f"'{operator}' would build a value larger than "
                                f"{MAX_RENDER_CHARS:,} items")
        return super().call_binop(context, operator, left, right)


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


def _result_size(operator: str, left: Any, right: Any) -> int:
    """The length of a repeated or concatenated string/list, 0 for anything else."""
    if operator == "*":
        for seq, n in ((left, right), (right, left)):
            if isinstance(seq, (str, list, tuple)) and isinstance(n, int) \
                    and not isinstance(n, bool):
                return len(seq) * max(n, 0)
    if operator == "+" and isinstance(left, Sized) and isinstance(right, Sized) \
            and not isinstance(left, Mapping):
        return len(left) + len(right)
    return 0


def make_environment() -> SandboxedEnvironment:
    env = _Env(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True,
               finalize=_finalize)
    env.filters["json"] = _json_filter
    env.filters["default"] = _default
    env.filters["d"] = _default
    return env


@dataclass(frozen=True)
class Compiled:
    """A compiled template or expression with its source text."""

    source: str
    template: Any
    is_expression: bool


def is_template(text: str) -> bool:
    return "{{" in text or "{%" in text


def is_jinja_condition(text: str) -> bool:
    """Conductor's rule: a route condition is Jinja when it contains both '{{' and '}}'."""
    return "{{" in text and "}}" in text


def truthy_text(rendered: str) -> bool:
    """Map a rendered condition to a boolean as Conductor does ('None' and '[]' are true)."""
    text = rendered.strip().lower()
    # 'true', '1', 'yes' and anything else non-empty ('None', '[]') are true, as in Conductor
    return text not in ("false", "0", "no", "")


class TemplateEngine:
    """Compiles templates once per text and renders them against a context mapping."""

    def __init__(self) -> None:
        self.env = make_environment()
        self._cache: dict[tuple[str, bool], Compiled] = {}
        self._compiling = threading.Lock()

    def compile(self, source: str) -> Compiled:
        key = (source, False)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        with self._compiling:  # group members compile a shared template once, not per thread
            hit = self._cache.get(key)
            if hit is not None:
                return hit
            try:
                hit = Compiled(source, self.env.from_string(source), False)
            except TemplateSyntaxError as exc:
                raise RenderFailure("syntax", f"template syntax error: {exc.message}",
                                    lineno=exc.lineno) from None
            except RecursionError:
                raise RenderFailure("syntax", TOO_DEEP) from None
            self._cache[key] = hit
        return hit

    def compile_expression(self, source: str) -> Compiled:
        key = (source, True)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        with self._compiling:
            hit = self._cache.get(key)
            if hit is not None:
                return hit
            try:
                hit = Compiled(source, self.env.compile_expression(source,
                                                                   undefined_to_none=False), True)
            except TemplateSyntaxError as exc:
                raise RenderFailure("syntax", f"expression syntax error: {exc.message}",
                                    lineno=exc.lineno) from None
            except RecursionError:
                raise RenderFailure("syntax", TOO_DEEP) from None
            self._cache[key] = hit
        return hit

    def render(self, source: str, context: Mapping[str, Any]) -> str:
        """Render a template string; plain strings without markup are returned as they are."""
        if "{" not in source:
            return source
        compiled = self.compile(source)
        too_large = RenderFailure("size", f"template output is larger than "
                                          f"{MAX_RENDER_CHARS:,} characters")
        parts: list[str] = []
        size = 0
        try:
            for part in compiled.template.generate(context):  # stop a runaway loop early
                size += len(part)
                if size > MAX_RENDER_CHARS:
                    raise too_large
                parts.append(part)
        except UndefinedError as exc:
            raise RenderFailure("undefined", _undefined_message(exc)) from None
        except SecurityError as exc:
            raise RenderFailure("security", f"not allowed in a template: {exc}") from None
        except JinjaTemplateError as exc:
            raise RenderFailure("error", f"template failed: {exc}") from None
        except (TypeError, ValueError, ArithmeticError, LookupError, RecursionError) as exc:
            raise RenderFailure("error", f"template failed: {type(exc).__name__}: {exc}") from None
        except MemoryError:
            raise too_large from None
        return "".join(parts)

    def evaluate(self, source: str, context: Mapping[str, Any]) -> Any:
        """Evaluate a bare expression (e.g. `exit_code == 0`) to a Python value."""
        compiled = self.compile_expression(source)
        try:
            value = compiled.template(**context)
        except UndefinedError as exc:
            raise RenderFailure("undefined", _undefined_message(exc)) from None
        except SecurityError as exc:
            raise RenderFailure("security", f"not allowed in an expression: {exc}") from None
        except JinjaTemplateError as exc:
            raise RenderFailure("error", f"expression failed: {exc}") from None
        except (TypeError, ValueError, ArithmeticError, LookupError, RecursionError) as exc:
            raise RenderFailure("error", f"expression failed: {type(exc).__name__}: {exc}") \
                from None
        except MemoryError:
            raise RenderFailure("size", "expression result is too large") from None
        if isinstance(value, Undefined):
            try:
                str(value)
            except UndefinedError as exc:
                raise RenderFailure("undefined", _undefined_message(exc)) from None
            except SecurityError as exc:  # an unsafe attribute, e.g. `x.__class__`
                raise RenderFailure("security", f"not allowed in an expression: {exc}") \
                    from None
        return value

    def parse(self, source: str) -> nodes.Template:
        """The Jinja AST of a template (for static checks); raises RenderFailure on syntax."""
        try:
            return self.env.parse(source)
        except TemplateSyntaxError as exc:
            raise RenderFailure("syntax", exc.message or "syntax error", lineno=exc.lineno) \
                from None
        except RecursionError:
            raise RenderFailure("syntax", TOO_DEEP) from None

    def parse_expression(self, source: str) -> nodes.Expr:
        """The Jinja AST of a bare expression."""
        try:
            template = self.env.parse("{{ " + source + " }}")
        except TemplateSyntaxError as exc:
            raise RenderFailure("syntax", exc.message or "syntax error", lineno=exc.lineno) \
                from None
        except RecursionError:
            raise RenderFailure("syntax", TOO_DEEP) from None
        body = template.body
        if len(body) != 1 or not isinstance(body[0], nodes.Output) or len(body[0].nodes) != 1:
            raise RenderFailure("syntax", "not a single expression")
        node = body[0].nodes[0]
        assert isinstance(node, nodes.Expr)
        return node


def _undefined_message(exc: UndefinedError) -> str:
    msg = str(exc.message or exc)
    return f"undefined: {msg}"


def coerce_output_value(text: str) -> Any:
    """Conductor's JSON coercion of a rendered output template value (spec 4.4)."""
    stripped = text.strip()
    if stripped == "True":
        return True
    if stripped == "False":
        return False
    if stripped == "None":
        return None
    if stripped.startswith(("{", "[", '"')) or stripped in ("true", "false", "null"):
        try:  # bounded: a rendered value may hold hostile data (podium/jsontext.py)
            return jsontext.loads(stripped)
        except ValueError:
            return text
    if "." in stripped:
        try:
            value = float(stripped)
        except ValueError:
            return text
        return value if math.isfinite(value) else text
    try:
        return int(stripped)
    except ValueError:
        return text
