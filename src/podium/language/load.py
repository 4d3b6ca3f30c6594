"""Loading a workflow file into the typed model, turning every schema problem into a Diagnostic."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from podium.language.diagnostics import (
    Diagnostic,
    DiagnosticSink,
    KeyPath,
    Severity,
    closest,
    did_you_mean,
    format_path,
)
from podium.language.model import (
    ALL_STEP_KEYS,
    STEP_CLASSES,
    STEP_KEYS,
    STEP_TYPES,
    ForEachGroup,
    Lenient,
    StepBase,
    WorkflowFile,
    json_kind,
)
from podium.language.schema import kept_extras
from podium.language.source import (
    FileUnreadable,
    LoadedDocument,
    LoadFailure,
    SourceMap,
    load_document,
)
from podium.records import record

_ROOT_KEYS = ("workflow", "agents", "parallel", "for_each", "output", "tools")

# Keys people write in the wrong place (mostly following Conductor's docs), with where they go.
_MISPLACED: dict[tuple[KeyPath, str], str] = {
    ((), "input"): "workflow inputs are declared under 'workflow:' as 'input:'",
    ((), "context"): "context settings go under 'workflow:'",
    ((), "limits"): "limits go under 'workflow:'",
    ((), "runtime"): "runtime settings go under 'workflow:'",
    (("workflow",), "context_mode"): "the docs' 'context_mode' is written 'context: {mode: ...}' "
                                     "with accumulate, last_only or explicit",
    (("workflow",), "max_iterations"): "write it under 'limits:'",
    (("workflow",), "timeout_seconds"): "write it under 'limits:'",
    (("workflow",), "provider"): "write it under 'runtime:'",
    (("workflow",), "default_model"): "write it under 'runtime:'",
}

# Values people write for an enumeration that has another spelling.
_VALUE_ALIASES = {"integer": "number", "int": "number", "float": "number", "bool": "boolean",
                  "str": "string", "list": "array", "dict": "object", "map": "object"}


def _unknown_key_hint(container: KeyPath, key: str, candidates: list[str] | tuple[str, ...]
                      ) -> str | None:
    return _MISPLACED.get((container, key)) or did_you_mean(key, candidates)


@record
class LoadResult:
    """The outcome of loading: a model when the schema held, and every diagnostic found."""

    path: Path
    shown: str
    model: WorkflowFile | None
    smap: SourceMap
    sink: DiagnosticSink
    document: LoadedDocument | None = None
    raw_step_names: list[str] = field(default_factory=list)
    raw_group_names: list[str] = field(default_factory=list)

    def error(self, path: KeyPath, message: str, hint: str | None = None, *,
              code: str = "invalid", at: str = "key") -> None:
        self.add(path, message, hint, severity="error", code=code, at=at)

    def warning(self, path: KeyPath, message: str, hint: str | None = None, *,
                code: str = "warning", at: str = "key") -> None:
        self.add(path, message, hint, severity="warning", code=code, at=at)

    def add(self, path: KeyPath, message: str, hint: str | None = None, *,
            severity: Severity = "error", code: str = "invalid", at: str = "key",
            line: tuple[int, int] | None = None) -> None:
        """Record a diagnostic at the key (or value) of `path`; `line` overrides the
        line and column (a line inside a multi-line value), keeping the file."""
        pos = self.smap.value(path) if at == "value" else self.smap.key(path)
        ln, col = line if line is not None else (pos.line, pos.col)
        self.sink.add(Diagnostic(pos.file, ln, col, format_path(path), message, severity,
                                 hint, code))


def load_workflow(path: Path, environ: Mapping[str, str] | None = None) -> LoadResult:
    """Load and schema-check one workflow file. Raises FileUnreadable when it cannot be read."""
    shown_guess = str(path)
    try:
        doc = load_document(path, environ)
    except LoadFailure as failure:
        sink = DiagnosticSink()
        for d in failure.diagnostics:
            sink.add(d)
        return LoadResult(path, shown_guess, None, SourceMap(shown_guess), sink)
    result = LoadResult(path, doc.shown, None, doc.smap, DiagnosticSink(), doc)
    data = doc.data
    if not isinstance(data, dict):
        kind = json_kind(data)
        result.error((), f"a workflow must be a mapping with 'workflow:' and 'agents:', got {kind}",
                     code="root")
        return result
    _build(result, data)
    return result


def _build(result: LoadResult, data: dict[str, Any]) -> None:
    extras = kept_extras()
    root = dict(data)
    for key in list(root):
        if key not in _ROOT_KEYS:
            result.error((key,), f"unknown key '{key}'",
                         _unknown_key_hint((), key, _ROOT_KEYS), code="unknown-key")
            del root[key]
    agents_raw = root.get("agents")
    ok = True
    if isinstance(agents_raw, list):  # a non-list is reported by pydantic below
        steps = []
        for i, raw in enumerate(agents_raw):
            step = _load_step(result, raw, ("agents", i))
            if isinstance(raw, dict) and isinstance(raw.get("name"), str):
                result.raw_step_names.append(raw["name"])
            if step is None:
                ok = False
            else:
                steps.append(step)
        root["agents"] = steps
    groups_raw = root.get("for_each")
    if isinstance(groups_raw, list):
        groups: list[Any] = []
        for j, raw in enumerate(groups_raw):
            if isinstance(raw, dict) and isinstance(raw.get("name"), str):
                result.raw_group_names.append(raw["name"])
            group = _load_for_each(result, raw, ("for_each", j))
            if group is None:
                ok = False
            else:
                groups.append(group)
        root["for_each"] = groups
    par_raw = root.get("parallel")
    if isinstance(par_raw, list):
        for raw in par_raw:
            if isinstance(raw, dict) and isinstance(raw.get("name"), str):
                result.raw_group_names.append(raw["name"])
    try:
        model = WorkflowFile.model_validate(root)
    except ValidationError as exc:
        _report(result, exc, (), model=WorkflowFile)
        return
    if kept_extras() != extras:  # each step was walked as it loaded
        _warn_extras(result, model, (), walked=StepBase)
    if ok:
        model._template_files = _template_files(result.smap, data)
        result.model = model


def _template_files(smap: SourceMap, data: Any) -> dict[str, str]:
    """The text of every `!file` include that is a string value, with its file."""
    out: dict[str, str] = {}
    for path, file in smap.files.items():
        value: Any = data
        for part in path:
            try:
                value = value[part]
            except (KeyError, IndexError, TypeError):
                value = None
                break
        if isinstance(value, str):
            out.setdefault(value, str(file))
    return out


def _load_step(result: LoadResult, raw: Any, base: KeyPath) -> StepBase | None:
    if not isinstance(raw, dict):
        result.error(base, f"a step must be a mapping, got {json_kind(raw)}", at="value",
                     code="type")
        return None
    step_type = raw.get("type")
    if step_type is None:
        step_type = "agent"
    if not isinstance(step_type, str) or step_type not in STEP_TYPES:
        hint = did_you_mean(str(step_type), STEP_TYPES)
        if step_type in ("parallel", "for_each"):
            hint = f"{step_type} groups are declared in the top-level '{step_type}:' list"
        result.error((*base, "type"), f"unknown step type '{step_type}'",
                     hint or f"one of: {', '.join(STEP_TYPES)}", at="value", code="step-type")
        return None
    usable = STEP_KEYS[step_type]
    clean: dict[str, Any] = {}
    ok = True
    typos: set[str] = set()  # keys an unknown key probably misspells
    for key, value in raw.items():
        rule = usable.get(key)
        if step_type == "terminate" and key == "routes" and value == []:
            continue  # Conductor accepts an empty list
        if rule == "u":
            clean[key] = value
        elif rule == "i":
            why = ("the chosen option's route decides" if key == "routes" and
                   step_type == "human_gate" else "it has no effect on this step type")
            result.warning((*base, key), f"'{step_type}' steps ignore '{key}' ({why})",
                           code="ignored-key")
        elif key in ALL_STEP_KEYS:
            hint = None
            if step_type == "script" and key == "timeout_seconds":
                hint = "use 'timeout' for scripts"
            elif step_type == "terminate" and key == "output":
                hint = "use 'output_template'"
            elif step_type == "terminate" and key == "routes":
                hint = "a terminate step ends the run; nothing runs after it"
            elif step_type == "agent" and key in ("duration", "value", "status", "command"):
                hint = f"did you forget 'type:'? '{key}' belongs to another step type"
            result.error((*base, key), f"'{step_type}' steps cannot have '{key}'", hint,
                         code="key-not-allowed")
            ok = False
        else:  # a hint names a key this step type uses, not one it would ignore
            guess = closest(key, [k for k, r in usable.items() if r == "u"])
            result.error((*base, key), f"unknown key '{key}'",
                         f"did you mean '{guess}'?" if guess else None, code="unknown-key")
            typos.update([guess] if guess else [])
            ok = False
    clean["type"] = step_type
    cls = STEP_CLASSES[step_type]
    extras = kept_extras()
    try:
        step = cls.model_validate(clean)
    except ValidationError as exc:
        _report(result, exc, base, model=cls, typos={base: typos})
        return None
    if kept_extras() != extras:
        _warn_extras(result, step, base)
    return step if ok else None


def _load_for_each(result: LoadResult, raw: Any, base: KeyPath) -> ForEachGroup | None:
    if not isinstance(raw, dict):
        result.error(base, f"a for_each group must be a mapping, got {json_kind(raw)}", at="value")
        return None
    clean = dict(raw)
    agent = None
    if "agent" in clean:
        agent = _load_step(result, clean["agent"], (*base, "agent"))
        if agent is None:
            return None
        clean["agent"] = agent
    try:
        group = ForEachGroup.model_validate(clean)
    except ValidationError as exc:
        _report(result, exc, base, model=ForEachGroup)
        return None
    return group


_FRIENDLY = {
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be a whole number",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "list_type": "must be a list",
    "dict_type": "must be a mapping",
    "model_type": "must be a mapping",
    "model_attributes_type": "must be a mapping",
}


def _report(result: LoadResult, exc: ValidationError, base: KeyPath, *,
            model: type[BaseModel], typos: dict[KeyPath, set[str]] | None = None) -> None:
    """Turn pydantic's errors for `model` (validated at `base`) into diagnostics."""
    errors = exc.errors(include_url=False)
    # a misspelt key is one mistake: report it as unknown, not also the key it misses
    misspelt: dict[KeyPath, set[str]] = {k: set(v) for k, v in (typos or {}).items()}
    for err in errors:
        if err["type"] == "extra_forbidden":
            where = tuple(err["loc"])
            guess = closest(str(where[-1]), _allowed_keys(model, where[:-1]))
            if guess:
                misspelt.setdefault((*base, *where[:-1]), set()).add(guess)
    for err in errors:
        loc = tuple(err["loc"])
        path: KeyPath = (*base, *loc)
        etype = err["type"]
        given = err.get("input")
        if etype == "missing":
            key = path[-1]
            if key not in misspelt.get(path[:-1], ()):
                result.error(path[:-1], f"missing required key '{key}'", code="missing")
            continue
        if etype == "extra_forbidden":
            key = str(path[-1])
            candidates = _allowed_keys(model, loc[:-1])
            result.error(path, f"unknown key '{key}'",
                         _unknown_key_hint(path[:-1], key, candidates), code="unknown-key")
            continue
        ctx = err.get("ctx") or {}
        if etype == "podium_located":
            result.error((*path, *ctx["at"]), str(err["msg"]), code="schema")
            continue
        if etype in ("literal_error", "enum"):
            expected = ctx.get("expected", "")
            options = [o.strip().strip("'") for o in str(expected).replace(" or ", ",").split(",")]
            hint = None
            if isinstance(given, str):
                alias = _VALUE_ALIASES.get(given.lower())
                hint = did_you_mean(given, options) or (
                    f"use '{alias}'" if alias in options else None)
            result.error(path, f"must be one of {expected} (got {_show(given)})", hint,
                         at="value", code="enum")
            continue
        if etype in ("union_tag_invalid",):
            result.error(path, "unknown step type", at="value", code="step-type")
            continue
        message = _FRIENDLY.get(etype)
        if message:
            message = f"{message} (got {json_kind(given)})"
        else:
            message = str(err["msg"])
            for prefix in ("Value error, ", "Assertion failed, "):
                if message.startswith(prefix):
                    message = message[len(prefix):]
            if message.startswith("Input should be"):
                message = "must be" + message[len("Input should be"):]
                if given is not None and not isinstance(given, (dict, list)):
                    message += f" (got {_show(given)})"
            elif message.startswith(("List should", "String should", "Dictionary should")):
                message = "must" + message.split("should", 1)[1]
        result.error(path, message, at="value", code="schema")


def _show(value: Any) -> str:
    if isinstance(value, str):
        return f"'{value}'" if len(value) < 60 else f"'{value[:57]}...'"
    if isinstance(value, (dict, list)):
        return json_kind(value)
    return repr(value)


def _allowed_keys(model: type[BaseModel], container: KeyPath) -> list[str]:
    """The keys accepted at `container` below `model`, found by walking the model classes."""
    import types
    import typing

    cls: Any = model
    for part in container:
        cls = _descend(cls, part)
        if cls is None:
            return []
    if typing.get_origin(cls) in (typing.Union, types.UnionType):  # an optional block
        cls = next((a for a in typing.get_args(cls)
                    if isinstance(a, type) and issubclass(a, BaseModel)), None)
    if isinstance(cls, type) and issubclass(cls, BaseModel):
        return [f.alias or n for n, f in cls.model_fields.items()]
    return []


def _descend(cls: Any, part: Any) -> Any:
    import types
    import typing

    origin = typing.get_origin(cls)
    if origin is typing.Annotated:
        return _descend(typing.get_args(cls)[0], part)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(cls):
            found = _descend(arg, part)
            if found is not None:
                return found
        return None
    if origin is list and isinstance(part, int):
        return typing.get_args(cls)[0]
    if origin is dict and isinstance(part, str):
        return typing.get_args(cls)[1]
    if isinstance(cls, type) and issubclass(cls, BaseModel) and isinstance(part, str):
        for name, f in cls.model_fields.items():
            if part in (name, f.alias):
                return f.annotation
    return None


def _warn_extras(result: LoadResult, model: BaseModel, base: KeyPath,
                 walked: type[BaseModel] | None = None) -> None:
    """Warn of each unknown key a lenient model below `model` kept; models of the class
    `walked` (below the first) are skipped, their keys already warned of."""
    stack: list[tuple[Any, KeyPath]] = [(model, base)]
    while stack:
        obj, path = stack.pop()
        if isinstance(obj, BaseModel):
            if walked is not None and obj is not model and isinstance(obj, walked):
                continue
            if isinstance(obj, Lenient) and obj.model_extra:
                known = [f.alias or n for n, f in type(obj).model_fields.items()]
                for key in obj.model_extra:
                    result.warning((*path, key), f"unknown key '{key}' is ignored",
                                   did_you_mean(key, known), code="unknown-key")
            # only what can hold a model is walked: scalars (most fields) are skipped here
            # rather than pushed with a path of their own. A model's __dict__ holds its
            # fields' values (extras and private attributes live elsewhere)
            shown = _shown_names(type(obj))
            for name, value in obj.__dict__.items():
                if isinstance(value, _NESTS) and name in shown:
                    stack.append((value, (*path, shown[name])))
        elif isinstance(obj, dict):
            stack.extend((v, (*path, k)) for k, v in obj.items() if isinstance(v, _NESTS))
        elif isinstance(obj, list):
            stack.extend((v, (*path, i)) for i, v in enumerate(obj) if isinstance(v, _NESTS))


_NESTS = (BaseModel, dict, list)
_SHOWN: dict[type[BaseModel], dict[str, str]] = {}


def _shown_names(cls: type[BaseModel]) -> dict[str, str]:
    """Each field's name -> the key it is written with in a workflow (its alias, if any)."""
    names = _SHOWN.get(cls)
    if names is None:
        names = _SHOWN[cls] = {n: f.alias or n for n, f in cls.model_fields.items()}
    return names


__all__ = ["FileUnreadable", "LoadResult", "load_workflow"]
