"""Jinja partials of file-backed prompts (Conductor spec 1): a template read from a `!file`
include may `{% include %}`, `{% import %}` or `{% extends %}` other files. Their names
resolve relative to the including file, must stay inside the workflow's folder (or the
prompt file's own: no absolute paths, no `..` out of it), and their `${VAR}`s are read when
they are loaded. A template written inline has no folder to resolve them in: an error.
`validate` uses the same rules (check/templates.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from jinja2 import BaseLoader, Environment
from jinja2.exceptions import TemplateNotFound, TemplateRuntimeError

MAX_PARTIAL_BYTES = 1024 * 1024
LOADER_TAGS = ("include", "import", "extends")


class PartialError(Exception):
    """An included name that cannot be loaded; the message says why."""


class PartialMissing(PartialError):
    """The included file does not exist."""


def resolve_partial(name: str, parent: str | None, roots: Iterable[Path]) -> Path:
    """The file `{% include name %}` means in the template read from file `parent`: relative
    to parent's folder, inside one of `roots`. Raises PartialError (PartialMissing when the
    file is not there)."""
    from podium.language.source import display_path

    if parent is None or not os.path.isabs(parent):
        raise PartialError(f"'{name}': {{% include %}}, {{% import %}} and {{% extends %}} "
                           "need a prompt read from a file (prompt: !file prompt.md), whose "
                           "folder their names are relative to")
    if os.path.isabs(name) or name.startswith("~"):
        raise PartialError(f"'{name}': give a path relative to the including file, not an "
                           "absolute one")
    target = Path(os.path.normpath(os.path.join(os.path.dirname(parent), name)))
    if not any(target.is_relative_to(r) for r in roots):
        raise PartialError(f"'{name}' is outside the workflow's folder (it would be "
                           f"{display_path(target)})")
    if not target.is_file():
        raise PartialMissing(f"template not found: '{name}' (looked for "
                             f"{display_path(target)})")
    return target


def read_partial(path: Path, environ: Mapping[str, str] | None = None) -> str:
    """The text of an included template, its `${VAR}`s substituted. Raises PartialError."""
    from podium.language.source import expand_env

    try:
        if path.stat().st_size > MAX_PARTIAL_BYTES:
            raise PartialError(f"'{path}' is larger than {MAX_PARTIAL_BYTES:,} bytes")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PartialError(f"cannot read '{path}': {exc}") from None
    try:
        return expand_env(text, os.environ if environ is None else environ)
    except KeyError as exc:
        raise PartialError(f"'{path}': environment variable {exc} is not set (set it, or "
                           f"write ${{{exc.args[0]}:-default}})") from None


class _Loader(BaseLoader):
    """Loads an included template by the absolute name `join_path` gave it."""

    def get_source(self, environment: Environment, template: str
                   ) -> tuple[str, str | None, Callable[[], bool] | None]:
        path = Path(template)
        try:
            mtime = path.stat().st_mtime
            text = read_partial(path)
        except (OSError, PartialError) as exc:
            raise TemplateNotFound(template, str(exc)) from None
        return text, template, lambda: path.is_file() and path.stat().st_mtime == mtime


def enable_partials(env: Environment, roots: Iterable[Path]) -> None:
    """Let templates of `env` load partials (see the module doc) from inside `roots`."""
    allowed = tuple(dict.fromkeys(Path(os.path.normpath(r)) for r in roots))

    def join_path(template: str, parent: str) -> str:
        try:
            return str(resolve_partial(template, parent, allowed))
        except PartialMissing as exc:
            raise TemplateNotFound(template, str(exc)) from None
        except PartialError as exc:
            raise TemplateRuntimeError(str(exc)) from None

    env.loader = _Loader()
    env.join_path = join_path  # type: ignore[method-assign]


def from_file(env: Environment, source: str, file: str) -> Any:
    """A template read from `file`, named by it so that what it includes resolves
    relative to it."""
    code = env.compile(source, name=file, filename=file)
    return env.template_class.from_code(env, code, env.make_globals(None))
