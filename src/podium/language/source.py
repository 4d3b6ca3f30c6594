"""Reading workflow YAML into plain data plus a source map of file:line:col for every key.

The document is composed from ruamel.yaml's event stream by a small iterative composer, so
that nesting depth and alias expansion are bounded (no recursion, no alias bombs), `!file`
includes are resolved relative to the including file with cycle detection, and every key and
value keeps its position. `${VAR}` / `${VAR:-default}` are substituted in string values after
parsing, as Conductor does; `$${...}` is podium's escape for a literal `${...}`.

The layer under the composer (positions, the source map, the load failures and reading a file
as text) is in language/sourcefile.py; its public names are re-exported here.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, NoReturn

from podium.jsontext import int_digits_limit
from podium.language.diagnostics import Diagnostic, KeyPath, did_you_mean
from podium.language.pinned import escapes, outside_message
from podium.language.sourcefile import (
    MAX_FILE_BYTES,
    At,
    FileUnreadable,
    LoadFailure,
    Pos,
    SourceMap,
    _diag,
    decode_text,
    display_path,
    read_text,
)
from podium.records import record

__all__ = [
    "MAX_ALIAS_CHARS",
    "MAX_DEPTH",
    "MAX_ENV_DEPTH",
    "MAX_FILE_BYTES",
    "MAX_NODES",
    "MAX_TOTAL_BYTES",
    "FileUnreadable",
    "IntegerTooLong",
    "LoadFailure",
    "LoadedDocument",
    "Pos",
    "SourceMap",
    "decode_text",
    "display_path",
    "expand_env",
    "load_document",
    "read_text",
    "resolve_plain",
    "substitute_env",
]

MAX_TOTAL_BYTES = 4 * MAX_FILE_BYTES  # a file plus everything it includes
MAX_DEPTH = 200
MAX_NODES = 500_000
MAX_ALIAS_CHARS = MAX_TOTAL_BYTES  # text that aliases may repeat, in all (characters)
MAX_ENV_DEPTH = 10

_ENV_RE = re.compile(r"\$(\$?)\{([^}:]+)(?::-([^}]*))?\}")


@record
class _Budget:
    """What one load may still spend, shared by a file and everything it includes."""

    nodes: int = 0
    bytes: int = 0
    alias_chars: int = 0  # text repeated by aliases
    env: bool = False  # a string value holds `${`: the load substitutes variables


class _Frame:
    """A mapping or sequence being composed. `key` is a mapping's key read and waiting for its
    value (always text); None when the next scalar is a key."""

    __slots__ = ("anchor", "is_map", "key", "key_pos", "merges", "path", "value")

    def __init__(self, is_map: bool, path: KeyPath, anchor: str | None) -> None:
        self.is_map = is_map
        self.path = path
        self.value: Any = {} if is_map else []
        self.key: str | None = None
        self.key_pos: At | None = None
        self.merges: list[tuple[Any, At]] = []
        self.anchor = anchor


class _Composer:
    """Turns one file's YAML events into plain data, filling the shared source map."""

    def __init__(self, path: Path, shown: str, smap: SourceMap, *, chain: tuple[Path, ...],
                 budget: _Budget, base: KeyPath = ()) -> None:
        self.path = path
        self.shown = shown
        self.smap = smap
        self.chain = chain
        self.budget = budget
        self.base = base
        self.anchors: dict[str, tuple[Any, int, int]] = {}  # value, nodes, characters

    def pos(self, mark: Any) -> Pos:
        return Pos(self.shown, mark.line + 1, mark.column + 1)

    def fail(self, mark: Any, message: str, path: KeyPath = (), hint: str | None = None, *,
             fatal: bool = False) -> NoReturn:
        raise LoadFailure([_diag(self.pos(mark), path, message, hint)], fatal=fatal)

    def count(self, n: int, mark: Any) -> None:
        self.budget.nodes += n
        if self.budget.nodes > MAX_NODES:
            self.fail(mark, f"document expands to more than {MAX_NODES:,} nodes "
                            "(an alias bomb?)", fatal=True)

    def repeat(self, chars: int, mark: Any, path: KeyPath) -> None:
        """An alias repeats `chars` characters of text: bounded like the nodes, so a bomb of
        long strings is an error here and not a MemoryError later in the run."""
        self.budget.alias_chars += chars
        if self.budget.alias_chars > MAX_ALIAS_CHARS:
            self.fail(mark, "aliases repeat more than "
                      f"{MAX_ALIAS_CHARS // (1024 * 1024)} MiB of text (an alias bomb?)",
                      path[:2], fatal=True)

    def compose(self, text: str) -> Any:
        from ruamel.yaml import YAML
        from ruamel.yaml.error import MarkedYAMLError, YAMLError

        start, repeated = self.budget.nodes, self.budget.alias_chars
        try:
            fast = _c_events(text)
            if fast is not None:
                try:
                    return self._build(fast)
                except YAMLError:
                    # read it again with the pure-Python parser, whose messages are the ones
                    # podium reports (the C parser words some problems differently)
                    self.anchors.clear()
                    self.budget.nodes, self.budget.alias_chars = start, repeated
            return self._build(YAML(typ="safe", pure=True).parse(text))
        except MarkedYAMLError as exc:
            raise LoadFailure([self._syntax_error(exc)]) from None
        except YAMLError as exc:
            msg = str(exc).splitlines()[0] if str(exc) else "invalid YAML"
            raise LoadFailure([_diag(Pos(self.shown, 1, 1), (), f"YAML error: {msg}")]) from None
        except RecursionError:
            raise LoadFailure([_diag(Pos(self.shown, 1, 1), (),
                                     "YAML nests too deeply to read")], fatal=True) from None

    def _syntax_error(self, exc: Any) -> Diagnostic:
        """ruamel's problem, where it was found, and what it was reading (when elsewhere)."""
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        context, cmark = exc.context, exc.context_mark
        if exc.problem and context and cmark is not None and cmark.line + 1 != line:
            problem += f" ({context} started at line {cmark.line + 1})"
        hint = "indent with spaces, not tabs" if "'\\t'" in problem else None
        return _diag(Pos(self.shown, line, col), (), f"YAML syntax error: {problem}", hint)

    def _build(self, events: Iterator[Any]) -> Any:
        """The document's value from its events. A scalar, most of the events, is handled in
        the loop itself (a large workflow has tens of thousands); the rest by the methods
        below."""
        from ruamel.yaml import events as ev

        stack: list[_Frame] = []
        root: Any = None
        documents = 0
        scalar = ev.ScalarEvent
        shown, base, budget, anchors = self.shown, self.base, self.budget, self.anchors
        keys, values, styles = self.smap.keys, self.smap.values, self.smap.styles
        text_start = _TEXT_START
        for event in events:
            if type(event) is scalar:  # most events: tested first
                mark = event.start_mark
                budget.nodes += 1
                if budget.nodes > MAX_NODES:
                    self.count(0, mark)
                top = stack[-1] if stack else None
                if top is not None and top.is_map and top.key is None:  # a mapping's key
                    if event.ctag is not None and str(event.ctag) == "!file":
                        self.fail(mark, "'!file' cannot be used on a key", top.path,
                                  fatal=True)
                    key = event.value
                    if event.anchor:
                        anchors[event.anchor] = (key, 1, len(key))
                    top.key = key
                    top.key_pos = (shown, mark.line + 1, mark.column + 1)
                    continue
                key = ""
                if top is None:
                    path = base
                elif top.is_map:
                    key = top.key or ""  # a mapping's value: its key was read before it
                    path = (*top.path, key)
                else:
                    path = (*top.path, len(top.value))
                values.setdefault(path, (shown, mark.line + 1, mark.column + 1))
                style = event.style or None  # libyaml reports a plain scalar's style as ''
                if style is not None:
                    styles[path] = style
                # `ctag`, not the `tag` property that makes a str of it: most scalars have
                # none (the C parser's is a str, the pure parser's a Tag)
                tag = event.ctag
                value: Any
                if tag is not None and (tag := str(tag)) == "!file":
                    value = self._include(event, path)
                elif tag and tag != "!":
                    value = self._tagged_scalar(event, path)
                elif style is not None or not event.implicit[0]:
                    value = event.value
                else:
                    value = event.value
                    if value[:1] not in text_start:
                        try:
                            value = resolve_plain(value)
                        except IntegerTooLong as exc:
                            self.fail(mark, str(exc), path)
                if type(value) is str and "${" in value:
                    budget.env = True
                if event.anchor:
                    anchors[event.anchor] = (value, 1, _chars(value))
                if top is None:
                    root = value
                elif top.is_map:
                    top.key = None
                    if key in top.value:
                        self._duplicate(top, key)
                    top.value[key] = value
                    keys[path] = top.key_pos  # type: ignore[assignment]
                else:
                    top.value.append(value)
                continue
            if isinstance(event, (ev.MappingEndEvent, ev.SequenceEndEvent)):
                frame = stack.pop()
                value = frame.value
                if frame.merges:
                    value = self._apply_merges(frame)
                if frame.anchor:
                    anchors[frame.anchor] = (value, *self._size(value))
                if not stack:
                    root = value
                else:
                    self._attach(stack[-1], value, event.end_mark, merge=True)
                continue
            if isinstance(event, (ev.MappingStartEvent, ev.SequenceStartEvent)):
                path = self._child_path(stack)
                self.count(1, event.start_mark)
                if len(stack) + len(base) >= MAX_DEPTH:
                    # the key path of the top-level entry: the full one is as deep as the bomb
                    self.fail(event.start_mark, f"nesting is deeper than {MAX_DEPTH} levels",
                              path[:1], fatal=True)
                tag = event.tag
                is_map = isinstance(event, ev.MappingStartEvent)
                if tag and tag not in ("tag:yaml.org,2002:map", "tag:yaml.org,2002:seq", "!"):
                    self.fail(event.start_mark, f"unsupported YAML tag '{tag}' on a "
                              f"{'mapping' if is_map else 'sequence'}", path)
                self._record(stack, path, event.start_mark)
                stack.append(_Frame(is_map, path, event.anchor))
                continue
            if isinstance(event, ev.StreamEndEvent):
                break  # the events end here, however the parser signals it afterwards
            if isinstance(event, (ev.StreamStartEvent, ev.DocumentEndEvent)):
                continue
            if isinstance(event, ev.DocumentStartEvent):
                documents += 1
                if documents > 1:
                    self.fail(event.start_mark, "more than one YAML document in the file",
                              hint="remove the '---' separator")
                continue
            if isinstance(event, ev.AliasEvent):
                path = self._child_path(stack)
                if event.anchor not in anchors:
                    self.fail(event.start_mark, f"unknown alias '*{event.anchor}'")
                value, size, chars = anchors[event.anchor]
                self.count(size, event.start_mark)
                self.repeat(chars, event.start_mark, path)
                value = _deep_copy(value)
                self._record(stack, path, event.start_mark)
                if not stack:
                    root = value
                else:
                    self._attach(stack[-1], value, event.start_mark, merge=True)
                continue
        return root

    def _child_path(self, stack: list[_Frame]) -> KeyPath:
        """The key path of the next node: a mapping's own path while it waits for a key."""
        if not stack:
            return self.base
        top = stack[-1]
        if not top.is_map:
            return (*top.path, len(top.value))
        if top.key is not None:
            return (*top.path, top.key)
        return top.path

    def _record(self, stack: list[_Frame], path: KeyPath, mark: Any) -> None:
        """Where a collection or an alias starts (a key is recorded when its value comes)."""
        if stack and stack[-1].is_map and stack[-1].key is None:
            return
        self.smap.values.setdefault(path, (self.shown, mark.line + 1, mark.column + 1))

    def _attach(self, frame: _Frame, value: Any, mark: Any, *, merge: bool) -> None:
        """A collection or an alias's value into `frame`; under `<<`, a merge when `merge`."""
        if not frame.is_map:
            frame.value.append(value)
            return
        key = frame.key
        if key is None:  # a mapping or an alias where a key belongs
            if isinstance(value, (dict, list)):
                self.fail(mark, "a mapping key must be a plain value, not a mapping or list",
                          frame.path)
            frame.key = value if isinstance(value, str) else str(value)
            frame.key_pos = (self.shown, mark.line + 1, mark.column + 1)
            return
        frame.key = None
        key_pos = frame.key_pos
        assert key_pos is not None  # set with the key
        if key == "<<" and merge:
            frame.merges.append((value, key_pos))
            return
        if key in frame.value:
            self._duplicate(frame, key)
        frame.value[key] = value
        self.smap.keys[(*frame.path, key)] = key_pos

    def _duplicate(self, frame: _Frame, key: str) -> NoReturn:
        first = self.smap.keys.get((*frame.path, key))
        where = f" (first at line {first[1]})" if first else ""
        assert frame.key_pos is not None
        raise LoadFailure([_diag(Pos(*frame.key_pos), (*frame.path, key),
                                 f"duplicate key '{key}'{where}", code="duplicate-key")])

    def _apply_merges(self, frame: _Frame) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        for value, pos in frame.merges:
            sources = value if isinstance(value, list) else [value]
            for src in sources:
                if not isinstance(src, dict):
                    raise LoadFailure([_diag(Pos(*pos), (*frame.path, "<<"),
                                             "a '<<' merge needs a mapping or a list of mappings")])
                for k, v in src.items():
                    if k not in merged:
                        merged[k] = v
                        self.smap.keys.setdefault((*frame.path, k), pos)
        merged.update(frame.value)
        return merged

    def _tagged_scalar(self, event: Any, path: KeyPath) -> Any:
        tag = event.tag
        text = event.value
        if tag == "tag:yaml.org,2002:str":
            return text
        if tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float",
                   "tag:yaml.org,2002:bool", "tag:yaml.org,2002:null"):
            try:
                value = resolve_plain(text)
            except IntegerTooLong as exc:
                self.fail(event.start_mark, str(exc), path)
            expected = {"tag:yaml.org,2002:int": int, "tag:yaml.org,2002:float": (int, float),
                        "tag:yaml.org,2002:bool": bool, "tag:yaml.org,2002:null": type(None)}[tag]
            if isinstance(value, expected):  # type: ignore[arg-type]
                return float(value) if tag.endswith("float") else value
            self.fail(event.start_mark, f"'{text}' is not a valid {tag.rsplit(':', 1)[-1]}", path)
        self.fail(event.start_mark, f"unsupported YAML tag '{tag}'", path,
                  hint="podium supports '!file <path>' and the standard YAML tags")

    def _include(self, event: Any, path: KeyPath) -> Any:
        raw = str(event.value).strip()
        if not raw:
            self.fail(event.start_mark, "'!file' needs a path", path, fatal=True)
        target = (self.path.parent / os.path.expanduser(raw)).resolve()
        shown = display_path(target)
        tree = escapes(self.path, target)
        if tree is not None:  # no pin and no hash covers it
            self.fail(event.start_mark, outside_message(f"'!file {raw}' ({shown})", tree),
                      path, fatal=True)
        if target in self.chain:
            cycle = self.chain[self.chain.index(target):]
            names = " → ".join(display_path(p) for p in (*cycle, target))
            self.fail(event.start_mark, f"circular file reference: {names}", path, fatal=True)
        try:
            text = read_text(target, shown)
        except FileUnreadable as exc:
            message = (f"included file not found: '{raw}' (looked for {shown})"
                       if exc.reason == "file not found"
                       else f"cannot include '{raw}': {exc.reason}")
            self.fail(event.start_mark, message, path, fatal=True)
        self.budget.bytes += len(text)
        if self.budget.bytes > MAX_TOTAL_BYTES:
            self.fail(event.start_mark, "the workflow and its included files are larger than "
                      f"{MAX_TOTAL_BYTES // (1024 * 1024)} MiB", path, fatal=True)
        child = _Composer(target, shown, self.smap, chain=(*self.chain, target),
                          budget=self.budget, base=path)
        nodes_before = self.budget.nodes
        try:
            value = child.compose(text)
        except LoadFailure as exc:
            if exc.fatal:
                raise
            self.budget.nodes = nodes_before
            value = None  # not YAML: included as raw text (a Markdown prompt, say)
        if isinstance(value, (dict, list)):
            return value
        # the text's own lines are in the included file: point there, line for line
        at = self.smap.values.get(path)
        self.smap.tags[path] = self.pos(event.start_mark) if at is None else Pos(*at)
        self.smap.values[path] = (shown, 1, 1)
        self.smap.styles[path] = "file"
        self.smap.files[path] = target
        return text

    def _size(self, value: Any) -> tuple[int, int]:
        """The nodes and the characters of text in `value` (each counted up to its limit)."""
        n, chars = 1, 0
        stack = [value]
        while stack:
            v = stack.pop()
            if isinstance(v, dict):
                n += len(v)
                chars += sum(_chars(k) for k in v)
                stack.extend(v.values())
            elif isinstance(v, list):
                n += len(v)
                stack.extend(v)
            else:
                chars += _chars(v)
            if n > MAX_NODES or chars > MAX_ALIAS_CHARS:
                break
        return n, chars


def _chars(value: Any) -> int:
    return len(value) if isinstance(value, str) else 0


def _c_events(text: str) -> Iterator[Any] | None:
    """YAML events from libyaml through ruamel's C parser (about ten times faster than the
    pure-Python one), or None when the C extension is not installed."""
    try:
        from ruamel.yaml.cyaml import CParser  # type: ignore[attr-defined]
    except ImportError:
        return None

    # get_event returns None once the stream has ended: the events come from C with no
    # generator and no check_event between them (8 % of composing a large file). A plain
    # scalar's style is '' here, None in the pure parser.
    return iter(CParser(text).get_event, None)


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


_INT_RE = re.compile(r"^[-+]?(0|[1-9][0-9_]*|0[0-9_]+)$")
_FLOAT_RE = re.compile(r"^[-+]?([0-9][0-9_]*)?(\.[0-9_]*)?([eE][-+]?[0-9]+)?$")


class IntegerTooLong(ValueError):
    """A decimal integer longer than Python converts from text (4,300 digits by default)."""


# first characters of a plain scalar that is text whatever follows: no null, boolean,
# number, infinity or NaN starts with one (those start with n N t T f F ~ . + - or a digit;
# e and E are left out too, where a float's exponent could begin)
_TEXT_START = frozenset("abcdghijklmopqrsuvwxyzABCDGHIJKLMOPQRSUVWXYZ_")


def resolve_plain(text: str) -> Any:
    """YAML 1.2 core-schema resolution of a plain scalar, as ruamel.yaml does it.
    IntegerTooLong for a decimal integer past Python's digit limit."""
    if text[:1] in _TEXT_START:  # most plain scalars: names, step types, references
        return text
    if text in ("", "~", "null", "Null", "NULL"):
        return None
    if text in ("true", "True", "TRUE"):
        return True
    if text in ("false", "False", "FALSE"):
        return False
    if _INT_RE.match(text):
        digits = text.replace("_", "")
        limit = int_digits_limit()
        if limit and len(digits.lstrip("+-")) > limit:
            raise IntegerTooLong(f"an integer of {len(digits.lstrip('+-')):,} digits is "
                                 f"longer than podium reads (at most {limit:,} digits); "
                                 "quote it to keep it as text")
        return int(digits, 10)
    low = text.lower()
    if low.startswith(("0x", "+0x", "-0x")):
        try:
            return int(text.replace("_", ""), 16)
        except ValueError:
            return text
    if low.startswith(("0o", "+0o", "-0o")):
        try:
            return int(text.replace("_", ""), 8)
        except ValueError:
            return text
    if low in (".inf", "+.inf"):
        return float("inf")
    if low == "-.inf":
        return float("-inf")
    if low == ".nan":
        return float("nan")
    if any(c.isdigit() for c in text) and _FLOAT_RE.match(text) and ("." in text or "e" in low):
        try:
            return float(text.replace("_", ""))
        except ValueError:
            return text
    return text


def substitute_env(data: Any, smap: SourceMap, environ: Mapping[str, str],
                   problems: list[Diagnostic]) -> Any:
    """Replace `${VAR}` and `${VAR:-default}` in every string value (not in keys)."""
    return _Substitution(smap, environ, problems).walk(data, ())


class _Substitution:
    """substitute_env's walk. (Methods, not closures that call themselves: such a closure is a
    reference cycle, which only the cyclic collector frees.)"""

    def __init__(self, smap: SourceMap, environ: Mapping[str, str],
                 problems: list[Diagnostic]) -> None:
        self.smap, self.environ, self.problems = smap, environ, problems

    def walk(self, value: Any, path: KeyPath) -> Any:
        if isinstance(value, str):
            return self.string(value, path) if "${" in value else value
        if isinstance(value, dict):
            return {k: self.walk(v, (*path, k)) for k, v in value.items()}
        if isinstance(value, list):
            return [self.walk(v, (*path, i)) for i, v in enumerate(value)]
        return value

    def string(self, text: str, path: KeyPath, depth: int = 0) -> str:
        smap, environ, problems = self.smap, self.environ, self.problems

        def repl(m: re.Match[str]) -> str:
            if m.group(1):
                return m.group(0)[1:]
            name = m.group(2)
            default = m.group(3)
            if name in environ:
                val = environ[name]
            elif default is not None:
                val = default
            else:
                pos = smap.value(path)
                # variable names share prefixes (APP_X, APP_Y): suggest only near-identical ones
                close = did_you_mean(name, environ.keys(), cutoff=0.85)
                problems.append(_diag(pos, path, f"environment variable '{name}' is not set",
                                      close or f"set it, or write ${{{name}:-default}}",
                                      code="env"))
                return m.group(0)
            if "${" in val:
                if depth >= MAX_ENV_DEPTH:
                    problems.append(_diag(smap.value(path), path,
                                          f"environment variable '{name}' expands more than "
                                          f"{MAX_ENV_DEPTH} levels deep", code="env"))
                    return val
                return self.string(val, path, depth + 1)
            return val

        return _ENV_RE.sub(repl, text)


def expand_env(text: str, environ: Mapping[str, str]) -> str:
    """`${VAR}` and `${VAR:-default}` in one text (a Jinja partial, read at render time);
    `$${...}` stays literal. KeyError naming a variable that is unset and has no default."""

    def repl(m: re.Match[str]) -> str:
        if m.group(1):
            return m.group(0)[1:]
        name, default = m.group(2), m.group(3)
        if name in environ:
            return environ[name]
        if default is not None:
            return default
        raise KeyError(name)

    return _ENV_RE.sub(repl, text) if "${" in text else text


@record
class LoadedDocument:
    """A workflow file read into plain data, with its source map and text."""

    path: Path
    shown: str
    data: Any
    smap: SourceMap
    text: str


def load_document(path: Path, environ: Mapping[str, str] | None = None,
                  text_reader: Callable[[Path, str], str] = read_text) -> LoadedDocument:
    """Read, compose and env-substitute one workflow file.

    Raises FileUnreadable for a missing file and LoadFailure (with diagnostics) for bad content.
    """
    shown = display_path(path)
    text = text_reader(path, shown)
    smap = SourceMap(shown)
    if not text.strip():
        raise LoadFailure([_diag(Pos(shown, 1, 1), (), "the file is empty",
                                 "a workflow needs 'workflow:' and 'agents:'", code="empty")])
    budget = _Budget(bytes=len(text))
    composer = _Composer(path.resolve(), shown, smap, chain=(path.resolve(),), budget=budget)
    data = composer.compose(text)
    if budget.env:  # else no value to substitute in, and the walk would only copy the data
        problems: list[Diagnostic] = []
        data = substitute_env(data, smap, os.environ if environ is None else environ,
                              problems)
        if problems:
            raise LoadFailure(problems)
    return LoadedDocument(path, shown, data, smap, text)
