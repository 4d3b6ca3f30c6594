"""The *.test.yaml format: its schema, and reading a file into tests with located diagnostics.

A test file names a workflow and lists tests; each test gives inputs, scripted agent answers
(the responses-file format), gate answers, optional script stubs and expectations. Every
problem (YAML, schema, a step or gate option the workflow does not have, an input it does not
declare) becomes a Diagnostic at file:line:col, and all of them are collected before failing.
"""

from __future__ import annotations

import json
from dataclasses import field
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from podium import jsontext
from podium.events.model import ModelCall
from podium.language.diagnostics import Diagnostic, KeyPath, did_you_mean, format_path
from podium.language.model import END, HumanGateStep, WorkflowFile
from podium.language.source import (
    FileUnreadable,
    LoadFailure,
    SourceMap,
    display_path,
    load_document,
)
from podium.providers.scripted import Entry, ResponsesFile, _GateEntry
from podium.records import record
from podium.replay.recording import Recording

TEST_SUFFIXES = (".test.yaml", ".test.yml")
STATUSES = ("success", "failed", "error", "limit")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ScriptStub(_Strict):
    """What one execution of a stubbed script step returns (the script does not run)."""

    exit_code: int = 0
    stdout: str | None = None
    stderr: str = ""
    output: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _one_stdout(self) -> ScriptStub:
        if self.stdout is not None and self.output is not None:
            raise ValueError("give either 'output' (the JSON object printed on stdout) or "
                             "'stdout' (the raw text), not both")
        return self

    def stdout_text(self) -> str:
        if self.output is not None:
            return json.dumps(self.output)
        return self.stdout or ""


class Expectation(_Strict):
    """What the run must do; every key is optional, at least one is required."""

    steps: list[str] | None = None
    terminal: str | None = None
    status: Literal["success", "failed", "error", "limit"] | None = None
    output: dict[str, Any] | None = None
    model_calls: int | None = Field(default=None, ge=0)
    reason: str | None = None
    error: str | None = None

    @model_validator(mode="after")
    def _something(self) -> Expectation:
        if not self.model_fields_set:
            raise ValueError("expects nothing: give at least one of steps, terminal, status, "
                             "output, model_calls, reason, error")
        return self


class WorkflowTest(_Strict):
    """One test: a scenario and what it must produce."""

    name: str = Field(min_length=1)
    workflow: str | None = None
    inputs: dict[str, Any] = Field(default_factory=dict)
    # agents, gates and iteration_limit are a responses file's: validated by ResponsesFile
    agents: dict[str, Any] = Field(default_factory=dict)
    gates: dict[str, Any] = Field(default_factory=dict)
    iteration_limit: list[Any] = Field(default_factory=list)
    dialogs: dict[str, Any] = Field(default_factory=dict)  # the person's turns, by agent
    scripts: dict[str, list[ScriptStub]] = Field(default_factory=dict)
    max_iterations: int | None = Field(default=None, ge=1)
    # a recorded run (a JSONL event log from `podium events RUN_ID`) replayed as the test
    recording: str | None = None
    expect: Expectation | None = None

    @model_validator(mode="after")
    def _expects_something(self) -> WorkflowTest:
        if self.expect is None and self.recording is None:
            raise ValueError("a test needs 'expect:' (or a 'recording:' to replay)")
        if self.recording is not None and (self.agents or self.gates or self.scripts
                                           or self.iteration_limit):
            raise ValueError("a recorded test takes its answers from the recording: remove "
                             "agents, gates, scripts and iteration_limit")
        return self


class WorkflowTestFile(_Strict):
    """A whole *.test.yaml file (top-level keys starting with `x-` are ignored); each test
    is validated on its own, so that one broken test does not hide the others' problems."""

    workflow: str | None = None
    inputs: dict[str, Any] = Field(default_factory=dict)
    tests: list[dict[str, Any]] = Field(min_length=1)


@record
class LoadedWorkflow:
    """A workflow under test, loaded once however many tests use it."""

    path: Path
    shown: str
    model: WorkflowFile


@record
class LoadedTest:
    """A test ready to run: its workflow resolved and its inputs checked and defaulted."""

    case: WorkflowTest
    index: int
    file: Path
    workflow: LoadedWorkflow
    inputs: dict[str, Any]
    responses: ResponsesFile  # the test's agents, gates and iteration_limit
    where: str = ""  # file:line of the test, for messages
    recording: Recording | None = None  # for a recorded run replayed as a test

    @property
    def name(self) -> str:
        return self.case.name


@record
class LoadedTestFile:
    path: Path
    shown: str
    tests: list[LoadedTest] = field(default_factory=list)


@record
class LoadReport:
    """Everything read from the test files, and every problem found in them."""

    files: list[LoadedTestFile] = field(default_factory=list)
    problems: list[Diagnostic] = field(default_factory=list)
    workflows: dict[Path, LoadedWorkflow | None] = field(default_factory=dict)


def _diag(smap: SourceMap, path: KeyPath, message: str, hint: str | None = None, *,
          at: str = "value") -> Diagnostic:
    pos = smap.key(path) if at == "key" else smap.value(path)
    return Diagnostic(pos.file, pos.line, pos.col, format_path(path), message, "error", hint,
                      "test")


def _locate(data: Any, loc: tuple[Any, ...]) -> tuple[KeyPath, Any]:
    """The key path of a pydantic error location in the data, without the names of union
    members (`str`, `_GateEntry`) pydantic adds, and the value found there."""
    out: list[str | int] = []
    for part in loc:
        in_map = isinstance(data, dict) and isinstance(part, str) and part in data
        in_list = isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data)
        if not (in_map or in_list):
            continue  # a union member's name, or the missing key itself
        data = data[part]
        out.append(part)
    return tuple(out), data


def _schema_problems(exc: ValidationError, data: Any, smap: SourceMap,
                     base: KeyPath = ()) -> list[Diagnostic]:
    found: dict[KeyPath, Diagnostic] = {}
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        path, value = _locate(data, loc)
        if err["type"] == "string_type" and isinstance(value, dict):
            continue  # a union's other member ({value, text}) reports the real problem
        msg = str(err["msg"]).removeprefix("Value error, ")
        full = (*base, *path)
        if err["type"] == "extra_forbidden":
            key = str(path[-1]) if path else "?"
            allowed = _allowed_keys(full[:-1])
            hint = did_you_mean(key, allowed) if allowed else None
            found.setdefault(full, _diag(smap, full, f"unknown key '{key}'", hint, at="key"))
        elif err["type"] == "missing":
            key = str(loc[-1])
            found.setdefault((*full, key), _diag(smap, full, f"missing required key '{key}'",
                                                 at="key"))
        else:
            found.setdefault(full, _diag(smap, full, msg))
    return list(found.values())


def _allowed_keys(parent: KeyPath) -> list[str]:
    """The keys allowed in the mapping at `parent` (for did-you-mean hints)."""
    from podium.providers.scripted import Answer

    shape = tuple(p if isinstance(p, str) and len(parent) > 2 and i == 2 else
                  ("#" if isinstance(p, int) else "*") for i, p in enumerate(parent))
    table: dict[tuple[str, ...], list[str]] = {
        (): list(WorkflowTestFile.model_fields),
        ("*", "#"): list(WorkflowTest.model_fields),
        ("*", "#", "expect"): list(Expectation.model_fields),
        ("*", "#", "scripts", "*", "#"): list(ScriptStub.model_fields),
        ("*", "#", "agents", "*"): ["every"],
        ("*", "#", "agents", "*", "*"): list(Entry.model_fields),
        ("*", "#", "agents", "*", "#"): list(Entry.model_fields),
        ("*", "#", "agents", "*", "#", "*", "#"): list(Answer.model_fields),
        ("*", "#", "gates", "*", "#"): list(_GateEntry.model_fields),
    }
    return table.get(shape, [])


def discover(paths: list[Path]) -> tuple[list[Path], list[str]]:
    """Test files under `paths` (folders searched recursively, hidden ones skipped), and the
    paths that do not exist."""
    found: list[Path] = []
    missing: list[str] = []
    for p in paths:
        if p.is_file():
            found.append(p)
        elif p.is_dir():
            found.extend(_walk(p))
        else:
            missing.append(str(p))
    unique: dict[Path, Path] = {}
    for f in found:
        unique.setdefault(f.resolve(), f)
    return list(unique.values()), missing


_SKIP_DIRS = frozenset({"node_modules", "__pycache__", "site-packages"})


def _walk(root: Path) -> list[Path]:
    out: list[Path] = []
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            children = sorted(folder.iterdir())
        except OSError:
            continue
        for child in children:
            if child.is_dir():
                if not child.name.startswith(".") and child.name not in _SKIP_DIRS:
                    stack.append(child)
            elif child.name.endswith(TEST_SUFFIXES):
                out.append(child)
    return sorted(out)


def load_test_files(paths: list[Path]) -> LoadReport:
    """Read every test file and the workflows they name; collect every problem."""
    report = LoadReport()
    for path in paths:
        loaded = _load_one(path, report)
        if loaded is not None:
            report.files.append(loaded)
    return report


def _load_one(path: Path, report: LoadReport) -> LoadedTestFile | None:
    shown = display_path(path)
    try:
        doc = load_document(path, environ={})
    except FileUnreadable as exc:
        report.problems.append(Diagnostic(shown, 1, 1, "<root>", exc.reason, "error", None,
                                          "file"))
        return None
    except LoadFailure as exc:
        report.problems.extend(exc.diagnostics)
        return None
    data, smap = doc.data, doc.smap
    if not isinstance(data, dict):
        report.problems.append(_diag(smap, (), "a test file must be a mapping with 'workflow:' "
                                     "and 'tests:'"))
        return None
    data = {k: v for k, v in data.items() if not str(k).startswith("x-")}
    try:
        model = WorkflowTestFile.model_validate(data)
    except ValidationError as exc:
        report.problems.extend(_schema_problems(exc, data, smap))
        return None
    reader = _FileReader(path, model, smap, report)
    out = LoadedTestFile(path, shown, reader.tests())
    report.problems.extend(sorted(set(reader.problems)))
    return out


class _FileReader:
    """Turns one schema-valid test file into runnable tests, collecting its problems."""

    def __init__(self, path: Path, model: WorkflowTestFile, smap: SourceMap,
                 report: LoadReport) -> None:
        self.path = path
        self.model = model
        self.smap = smap
        self.report = report
        self.problems: list[Diagnostic] = []

    def problem(self, path: KeyPath, message: str, hint: str | None = None, *,
                at: str = "value") -> None:
        self.problems.append(_diag(self.smap, path, message, hint, at=at))

    def tests(self) -> list[LoadedTest]:
        out: list[LoadedTest] = []
        seen: dict[str, int] = {}
        for i, raw in enumerate(self.model.tests):
            name = raw.get("name")
            if isinstance(name, str) and name in seen:
                self.problem(("tests", i, "name"), f"duplicate test name '{name}' (also "
                             f"tests[{seen[name]}])")
            elif isinstance(name, str):
                seen[name] = i
            case, responses = self.validate(raw, i)
            if case is None or responses is None:
                continue
            wf = self.workflow_for(case, i)
            if wf is None:
                continue
            pos = self.smap.value(("tests", i))
            if case.recording is not None:
                recording = self.recording(case.recording, i)
                if recording is not None:
                    out.append(LoadedTest(case, i, self.path, wf, dict(recording.inputs),
                                          responses, f"{pos.file}:{pos.line}", recording))
                continue
            before = len(self.problems)
            self.check_against(case, responses, i, wf.model)
            inputs = self.inputs(wf.model, case, i)
            if len(self.problems) == before and inputs is not None:
                out.append(LoadedTest(case, i, self.path, wf, inputs, responses,
                                      f"{pos.file}:{pos.line}"))
        return out

    def validate(self, raw: dict[str, Any], i: int
                 ) -> tuple[WorkflowTest | None, ResponsesFile | None]:
        """The test and its scripted answers (a responses file's format), each validated."""
        case = responses = None
        try:
            case = WorkflowTest.model_validate(raw)
        except ValidationError as exc:
            self.problems.extend(_schema_problems(exc, raw, self.smap, ("tests", i)))
        try:
            responses = ResponsesFile.model_validate(
                {k: raw[k] for k in ("agents", "gates", "iteration_limit", "dialogs")
                 if k in raw})
        except ValidationError as exc:
            self.problems.extend(_schema_problems(exc, raw, self.smap, ("tests", i)))
        return case, responses

    def workflow_for(self, case: WorkflowTest, i: int) -> LoadedWorkflow | None:
        """The workflow a test runs, loaded and checked once; its own diagnostics go first."""
        name = case.workflow or self.model.workflow
        where: KeyPath = ("tests", i, "workflow") if case.workflow else ("workflow",)
        if not name:
            self.problem(("tests", i), "no workflow to test: give 'workflow:' at the top of "
                         "the file or in the test")
            return None
        target = (self.path.parent / name).resolve()
        shown = display_path(target)
        known = self.report.workflows
        if target in known:
            if known[target] is None:
                self.problem(where, f"the workflow {shown} cannot be tested (see its "
                             "problems above)")
            return known[target]
        from podium.check.validate import validate_file

        known[target] = None
        try:
            result = validate_file(target)
        except FileUnreadable as exc:
            self.problem(where, f"workflow {shown}: {exc.reason}")
            return None
        errors = [d for d in result.sink.sorted() if d.severity == "error"]
        if errors or result.model is None:
            self.report.problems.extend(errors)
            self.problem(where, f"the workflow {shown} is invalid ({len(errors)} error(s) "
                         "above)")
            return None
        known[target] = LoadedWorkflow(target, shown, result.model)
        return known[target]

    def check_against(self, case: WorkflowTest, responses: ResponsesFile, i: int,
                      wf: WorkflowFile) -> None:
        """Step names, step types and gate answers must exist in the workflow."""
        steps = {s.name: s for s in wf.agents}
        kinds = (("agents", "agent", "an agent"), ("scripts", "script", "a script"),
                 ("gates", "human_gate", "a human gate"))
        for key, step_type, what in kinds:
            for name in getattr(case, key):
                step = steps.get(name)
                base, _, call = name.rpartition(".")
                if step is None and key == "agents" and call in get_args(ModelCall):
                    step = steps.get(base)  # `writer.validator`: a call of agent writer
                if step is None:
                    same = [s.name for s in wf.agents if s.type == step_type]
                    self.problem(("tests", i, key, name), f"the workflow has no step "
                                 f"'{name}'", did_you_mean(name, same), at="key")
                elif step.type != step_type:
                    self.problem(("tests", i, key, name), f"'{name}' is a {step.type} step, "
                                 f"not {what}", at="key")
        for name, answers in responses.gates.items():
            gate = steps.get(name)
            if not isinstance(gate, HumanGateStep):
                continue
            values = [o.value for o in gate.options]
            for j, answer in enumerate(answers):
                value = answer if isinstance(answer, str) else answer.value
                if value not in values:
                    self.problem(("tests", i, "gates", name, j), f"'{value}' is not an option "
                                 f"of gate '{name}'",
                                 did_you_mean(value, values) or f"options: {', '.join(values)}")
        self.check_expect(case, i, wf)

    def check_expect(self, case: WorkflowTest, i: int, wf: WorkflowFile) -> None:
        if case.expect is None:
            return
        known = [s.name for s in wf.agents] + [g.name for g in wf.parallel] + \
            [g.name for g in wf.for_each]
        for j, name in enumerate(case.expect.steps or []):
            if name not in known:
                self.problem(("tests", i, "expect", "steps", j), f"the workflow has no step "
                             f"'{name}'", did_you_mean(name, known))
        terminal = case.expect.terminal
        ends = [s.name for s in wf.agents if s.type == "terminate"]
        if terminal is not None and terminal != END and terminal not in ends:
            hint = did_you_mean(terminal, ends) or (
                f"terminals are: {', '.join(ends) or 'none'}; a run that ends through routes "
                f"ends at '{END}'")
            self.problem(("tests", i, "expect", "terminal"), f"'{terminal}' is not a "
                         "terminate step of the workflow", hint)

    def recording(self, ref: str, i: int) -> Recording | None:
        """A recorded run's event log (JSONL), relative to the test file."""
        from podium.replay.recording import recording_from_events

        path = (self.path.parent / ref).resolve()
        where: KeyPath = ("tests", i, "recording")
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
            return recording_from_events([jsontext.loads(x, max_depth=jsontext.RECORD_MAX_DEPTH)
                                          for x in lines if x.strip()])
        except OSError as exc:
            self.problem(where, f"cannot read the recording '{ref}': {exc.strerror or exc}",
                         "export one with: podium events RUN_ID > FILE.jsonl", at="value")
        except (ValueError, KeyError) as exc:
            self.problem(where, f"'{ref}' is not a podium event log: {exc}", at="value")
        return None

    def inputs(self, wf: WorkflowFile, case: WorkflowTest, i: int) -> dict[str, Any] | None:
        """Inputs checked and defaulted exactly as `podium run --input-file` does."""
        from podium.app.inputs import resolve_inputs
        from podium.errors import UsageError

        shared, own = self.model.inputs, case.inputs
        given = {**shared, **own}
        declared = wf.workflow.input
        unknown = [n for n in given if n not in declared] if declared else []
        for name in unknown:
            where: KeyPath = ("tests", i, "inputs", name) if name in own else ("inputs", name)
            self.problem(where, f"the workflow has no input '{name}'",
                         did_you_mean(name, declared) or f"it declares: {', '.join(declared)}",
                         at="key")
        if unknown:
            return None
        try:
            return resolve_inputs(wf, given)
        except UsageError as exc:
            message = str(exc).split(" (pass --input ")[0]
            self.problem(("tests", i), message, "add it under 'inputs:', in the test or "
                         "at the top of the file", at="key")
            return None
