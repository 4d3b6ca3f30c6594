"""`podium run`: validate, build the engine with its sinks and answerers, run, report."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from podium.cli import exitcodes
from podium.errors import PodiumError, UsageError, WorkflowFileError
from podium.language.diagnostics import did_you_mean
from podium.language.model import InputDef, WorkflowFile


def podium_home() -> Path:
    return Path(os.environ.get("PODIUM_HOME") or Path.home() / ".podium")


@dataclass
class RunRequest:
    """Everything `podium run` was asked to do."""

    file: Path
    inputs: list[str] = field(default_factory=list)
    input_file: Path | None = None
    skip_gates: bool = False
    responses: Path | None = None
    json_out: bool = False
    verbosity: int = 1
    provider: str | None = None
    events: Path | None = None
    record: bool = True


def coerce_cli_value(text: str) -> Any:
    """Conductor's --input coercion (spec 11) for inputs the workflow does not type."""
    value = text.strip()
    low = value.lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "null":
        return None
    if value.startswith(("[", "{")):
        try:
            return json.loads(value)
        except ValueError:
            return value
    if "." in value:
        try:
            return float(value)
        except ValueError:
            return value
    try:
        return int(value)
    except ValueError:
        return value


def _typed(name: str, text: str, decl: InputDef) -> Any:
    t = decl.type
    if t == "string":
        return text
    value = coerce_cli_value(text)
    if t == "number" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    if t == "boolean" and isinstance(value, bool):
        return value
    if t == "array" and isinstance(value, list):
        return value
    if t == "object" and isinstance(value, dict):
        return value
    raise UsageError(f"--input {name}: expected a {t}, got {text!r}")


def parse_inputs(wf: WorkflowFile, pairs: list[str], input_file: Path | None) -> dict[str, Any]:
    """Inputs from --input-file then --input (later wins), checked against the declarations,
    with defaults applied as Conductor does (spec 2.4)."""
    declared = wf.workflow.input
    given: dict[str, Any] = {}
    if input_file is not None:
        given.update(_read_input_file(input_file))
    for pair in pairs:
        if "=" not in pair:
            raise UsageError(f"--input {pair!r}: expected NAME=VALUE")
        name, _, text = pair.partition("=")
        name = name.strip()
        if not name:
            raise UsageError(f"--input {pair!r}: the name is empty")
        given[name] = _typed(name, text.strip(), declared[name]) if name in declared \
            else coerce_cli_value(text)
    return resolve_inputs(wf, given)


def resolve_inputs(wf: WorkflowFile, given: Mapping[str, Any]) -> dict[str, Any]:
    """Given inputs checked against the workflow's declarations, with defaults applied."""
    declared = wf.workflow.input
    given = dict(given)
    if declared:
        for name in given:
            if name not in declared:
                hint = did_you_mean(name, declared)
                raise UsageError(f"unknown input '{name}'" + (f" ({hint})" if hint else "")
                                 + f"; the workflow declares: {', '.join(declared)}")
    from podium.engine.inputs import apply_input_defaults

    missing = apply_input_defaults(declared, given)
    if missing:
        raise UsageError("missing required input" + ("s" if len(missing) > 1 else "") + ": "
                         + ", ".join(missing) + f" (pass --input {missing[0]}=VALUE)")
    return given


def _read_input_file(path: Path) -> dict[str, Any]:
    from podium.language.source import FileUnreadable, LoadFailure, load_document

    try:
        doc = load_document(path, environ={})
    except FileUnreadable as exc:
        raise WorkflowFileError(f"--input-file {exc}") from None
    except LoadFailure as exc:
        raise UsageError(exc.diagnostics[0].format()) from None
    if not isinstance(doc.data, dict):
        raise UsageError(f"{doc.shown}:1:1: an input file must be a mapping of name: value")
    return dict(doc.data)


def load_valid(path: Path, warnings: list[str] | None = None
               ) -> tuple[WorkflowFile | None, int]:
    """Validate a workflow for running: diagnostics on stderr; (model, 0) or (None, exit code).

    With `warnings`, warning lines are collected there (to print after the run's first line)
    unless the workflow is invalid."""
    from podium.check.validate import validate_file
    from podium.language.source import FileUnreadable

    try:
        result = validate_file(path)
    except FileUnreadable as exc:
        sys.stderr.write(f"podium: {exc}\n")
        return None, exitcodes.FILE_ERROR
    defer = warnings is not None and not result.sink.errors and result.model is not None
    for d in result.sink.sorted():
        if defer and d.severity == "warning" and warnings is not None:
            warnings.append(d.format())
        else:
            sys.stderr.write(d.format() + "\n")
    if result.sink.errors or result.model is None:
        sys.stderr.write(f"podium: {result.shown} is invalid; nothing was run\n")
        return None, exitcodes.INVALID
    return result.model, exitcodes.OK


class RunHooks(Protocol):
    """Extra behaviour around a run (the console of `podium run --web`)."""

    def started(self, engine: Any, store: Any) -> dict[str, Any]:
        """Called once the engine exists, before the run is recorded; returns extra options
        to record with the run. Raise PodiumError to refuse to run."""
        ...

    def finished(self, engine: Any) -> None: ...

    def close(self) -> None: ...


def run_command(req: RunRequest, hooks: RunHooks | None = None) -> int:
    from podium.cli.launch import LaunchOptions, launch, make_engine, open_store
    from podium.engine.run import file_hash
    from podium.store.base import RunRecord

    warnings: list[str] = []
    wf, code = load_valid(req.file, warnings)
    if wf is None:
        return code
    opts = LaunchOptions(req.skip_gates, req.responses, req.verbosity, req.provider, req.events,
                         req.json_out, req.record)
    try:
        inputs = parse_inputs(wf, req.inputs, req.input_file)
        store = open_store()
    except PodiumError as exc:
        sys.stderr.write(f"podium run: {exc}\n")
        return exc.exit_code
    try:
        try:
            engine = make_engine(wf, req.file, inputs, opts, store, warnings=warnings)
            extra = hooks.started(engine, store) if hooks is not None else {}
            store.create_run(RunRecord(
                engine.run_id, wf.workflow.name, str(req.file.resolve()), file_hash(req.file),
                inputs, options={"responses": str(req.responses.resolve()) if req.responses
                                 else None, "skip_gates": req.skip_gates,
                                 "provider": req.provider, **extra}))
        except PodiumError as exc:
            sys.stderr.write(f"podium run: {exc}\n")
            return exc.exit_code
        code = launch(engine, store, opts)
        if hooks is not None:
            hooks.finished(engine)
        return code
    finally:
        if hooks is not None:
            hooks.close()
        store.close()
