"""The one sandboxed Jinja2 environment: rendering templates, conditions and bare expressions
(`podium.templating` names what this module defines, and imports it at the first use).

Every template in a workflow (prompts, args, conditions, values, reasons, outputs) goes through
`TemplateEngine`, which compiles each source text once and caches it. The environment
(sandbox.py) is Jinja2's ImmutableSandboxedEnvironment (no access to Python internals, no
mutation of the run's state), with StrictUndefined, Conductor's `json` filter and its
None-aware `default` filter, podium's `quote` filter, and bounds (budget.py): each render
may output, build and do only so much, and must finish by a deadline (its caller's, or a few
seconds), else it fails with a RenderFailure that names the limit.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jinja2 import StrictUndefined, TemplateSyntaxError, UndefinedError
from jinja2.exceptions import SecurityError
from jinja2.exceptions import TemplateError as JinjaTemplateError
from jinja2.runtime import Undefined
from jinja2.sandbox import SandboxedEnvironment

from podium import jsontext
from podium.records import record
from podium.templating.budget import (
    MAX_RENDER_CHARS,
    Budget,
    Deadline,
    install,
)
from podium.templating.sandbox import BoundedEnvironment, finalize
from podium.templating.text import TOO_DEEP, RenderFailure


def make_environment() -> SandboxedEnvironment:
    return BoundedEnvironment(undefined=StrictUndefined, autoescape=False,
                              keep_trailing_newline=True, finalize=finalize)


@record(frozen=True)
class Compiled:
    """A compiled template or expression with its source text."""

    source: str
    template: Any
    is_expression: bool


class TemplateEngine:
    """Compiles templates once per text and renders them against a context mapping.

    `files` names the file each `!file` template was read from (text -> absolute path): those
    may include partials from inside `root` (the workflow's folder) or their own folder
    (partials.py)."""

    def __init__(self, files: Mapping[str, str] | None = None, root: Path | None = None
                 ) -> None:
        self.env = make_environment()
        self.files = dict(files or {})
        from podium.templating.partials import enable_partials

        enable_partials(self.env, [*([root] if root else []),
                                   *(Path(f).parent for f in self.files)])
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
                file = self.files.get(source)
                if file is None:
                    template = self.env.from_string(source)
                else:  # named by its file: what it includes resolves relative to it
                    from podium.templating.partials import from_file

                    template = from_file(self.env, source, file)
                # a ChainMap over the environment's globals, which never change once the
                # environment is made: flattened once here, not walked on every render
                template.globals = dict(template.globals)
                hit = Compiled(source, template, False)
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

    def render(self, source: str, context: Mapping[str, Any],
               deadline: Deadline | None = None) -> str:
        """Render a template string; plain strings without markup are returned as they are.

        The render stops with a RenderFailure past its output, value, memory or step limit,
        or at `deadline` (or MAX_RENDER_SECONDS when that comes first or none is given)."""
        if "{" not in source:
            return source
        compiled = self.compile(source)
        parts: list[str] = []
        size = 0
        previous = install(Budget(deadline))
        try:
            for part in compiled.template.generate(context):  # stop a runaway loop early
                size += len(part)
                if size > MAX_RENDER_CHARS:
                    raise RenderFailure("size", f"template output is larger than "
                                                f"{MAX_RENDER_CHARS:,} characters (the limit "
                                                "of one render's output)",
                                        limit="output")
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
            raise RenderFailure("size", "template output is too large to hold in memory",
                                limit="memory") from None
        finally:
            install(previous)
        return "".join(parts)

    def evaluate(self, source: str, context: Mapping[str, Any],
                 deadline: Deadline | None = None) -> Any:
        """Evaluate a bare expression (e.g. `exit_code == 0`) to a Python value."""
        compiled = self.compile_expression(source)
        previous = install(Budget(deadline))
        try:
            value = compiled.template(**context)
            if isinstance(value, Undefined):
                str(value)
        except UndefinedError as exc:
            raise RenderFailure("undefined", _undefined_message(exc)) from None
        except SecurityError as exc:  # e.g. an unsafe attribute, `x.__class__`
            raise RenderFailure("security", f"not allowed in an expression: {exc}") from None
        except JinjaTemplateError as exc:
            raise RenderFailure("error", f"expression failed: {exc}") from None
        except (TypeError, ValueError, ArithmeticError, LookupError, RecursionError) as exc:
            raise RenderFailure("error", f"expression failed: {type(exc).__name__}: {exc}") \
                from None
        except MemoryError:
            raise RenderFailure("size", "expression result is too large to hold in memory",
                                limit="memory") from None
        finally:
            install(previous)
        return value


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
