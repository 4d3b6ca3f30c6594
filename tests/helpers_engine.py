"""Shared helpers for the engine, step, example and CLI tests.

Workflows are written as YAML into tmp_path and run through the real loader, the real semantic
checks (as `podium run` does) and the real engine, with fakes that implement the real
Protocols: ScriptedProvider (model answers), ScriptedAnswerer / SkipGatesAnswerer (gates) and
FakeClock (time). `run_cli` runs `python -m podium run ...` as a subprocess.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from podium.clock import Clock, FakeClock
from podium.engine.run import Engine, RunResult
from podium.errors import RunError
from podium.events.model import Event, ModelExchange, RouteTaken, StepStarted
from podium.events.sinks.jsonl import MemorySink
from podium.gates.base import (
    ChainAnswerer,
    GateAnswer,
    GateAnswerer,
    ScriptedAnswerer,
    SkipGatesAnswerer,
)
from podium.language.model import WorkflowFile
from podium.providers.base import Provider, ProviderRegistry
from podium.providers.scripted import ResponsesFile, ScriptedProvider, load_responses
from podium.steps.base import RunOptions

REPO_ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = REPO_ROOT / "examples"
VENV_BIN = str(Path(sys.executable).parent)


def write(tmp_path: Path, text: str, name: str = "wf.yaml") -> Path:
    """Write a (dedented) text file into tmp_path and return its path."""
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


class InvalidWorkflow(AssertionError):
    """The workflow did not load (or did not pass the checks `podium run` applies)."""


def load(path: Path, *, check: bool = True) -> WorkflowFile:
    """Load a workflow like `podium run` does: schema, then semantic checks (unless
    `check=False`, which keeps only the loader, as Conductor's `run` does)."""
    if check:
        from podium.check.validate import validate_file

        result = validate_file(path)
    else:
        from podium.language.load import load_workflow

        result = load_workflow(path)
    if result.sink.errors or result.model is None:
        lines = [d.format() for d in result.sink.sorted()]
        raise InvalidWorkflow("\n".join(lines) or "invalid workflow")
    return result.model


def diagnostics(path: Path, *, check: bool = True) -> list[str]:
    """Every diagnostic (errors and warnings) for a workflow file, formatted."""
    if check:
        from podium.check.validate import validate_file

        result = validate_file(path)
    else:
        from podium.language.load import load_workflow

        result = load_workflow(path)
    return [d.format() for d in result.sink.sorted()]


@dataclass
class Run:
    """The result of one in-process run and everything observed during it."""

    engine: Engine
    result: RunResult
    sink: MemorySink
    provider: ScriptedProvider
    clock: Clock

    @property
    def events(self) -> list[Event]:
        return self.sink.events

    @property
    def output(self) -> dict[str, Any] | None:
        return self.result.output

    @property
    def exit_code(self) -> int:
        return self.result.exit_code

    @property
    def outputs(self) -> dict[str, Any]:
        """The latest stored output of every step."""
        return self.engine.state.outputs

    def of(self, cls: type[Any]) -> list[Any]:
        return [e for e in self.events if isinstance(e, cls)]

    def types(self) -> list[str]:
        return self.sink.types()

    def steps(self) -> list[str]:
        """Steps in the order they started (from step_started events)."""
        return [e.step for e in self.of(StepStarted)]

    def routes(self) -> list[tuple[str, str]]:
        return [(e.from_step, e.to_step) for e in self.of(RouteTaken)]

    def model_calls(self) -> list[ModelExchange]:
        return self.of(ModelExchange)

    def error_text(self) -> str:
        err = self.result.error
        if err is None:
            return ""
        return err.located() if isinstance(err, RunError) else str(err)


@dataclass
class Scenario:
    """How to run a workflow in-process (all optional)."""

    inputs: dict[str, Any] | None = None
    raw_inputs: bool = False
    responses: dict[str, Any] | ResponsesFile | Path | None = None
    answers: dict[str, list[GateAnswer]] = field(default_factory=dict)
    skip_gates: bool = False
    clock: Clock | None = None
    options: RunOptions | None = None
    check: bool = True
    sinks: list[Any] = field(default_factory=list)
    # wraps the ScriptedProvider (e.g. to observe sessions); must implement Provider
    wrap_provider: Callable[[ScriptedProvider], Provider] | None = None


def _inputs(wf: WorkflowFile, tmp: Path, inputs: dict[str, Any] | None) -> dict[str, Any]:
    """Inputs checked and defaulted by the CLI's own code (through an --input-file)."""
    from podium.app.inputs import parse_inputs

    input_file = None
    if inputs:
        input_file = tmp / f"inputs-{os.urandom(4).hex()}.json"
        input_file.write_text(json.dumps(inputs), encoding="utf-8")
    return parse_inputs(wf, [], input_file)


def _responses(value: dict[str, Any] | ResponsesFile | Path | None) -> ResponsesFile:
    if value is None:
        return ResponsesFile()
    if isinstance(value, ResponsesFile):
        return value
    if isinstance(value, Path):
        return load_responses(value)
    return ResponsesFile.model_validate(value)


def run_workflow(path: Path, scenario: Scenario | None = None, **kwargs: Any) -> Run:
    """Load and run a workflow in-process, the way `podium run` builds its engine."""
    sc = scenario or Scenario(**kwargs)
    wf = load(path, check=sc.check)
    inputs = dict(sc.inputs or {}) if sc.raw_inputs else _inputs(wf, path.parent, sc.inputs)
    responses = _responses(sc.responses)
    provider = ScriptedProvider(responses)
    answer_map = responses.gate_answers()
    for key, values in sc.answers.items():
        answer_map.setdefault(key, []).extend(values)
    answerers: list[GateAnswerer] = [ScriptedAnswerer(answer_map)]
    if sc.skip_gates:
        answerers.append(SkipGatesAnswerer())
    clock = sc.clock or FakeClock()
    options = sc.options or RunOptions(skip_gates=sc.skip_gates)
    served: Provider = sc.wrap_provider(provider) if sc.wrap_provider else provider
    engine = Engine(wf, path, inputs=inputs, providers=ProviderRegistry(served),
                    answerer=ChainAnswerer(answerers), options=options, clock=clock)
    sink = MemorySink()
    engine.bus.add(sink)
    for extra in sc.sinks:
        engine.bus.add(extra)
    with venv_first_on_path():
        result = engine.run()
    return Run(engine, result, sink, provider, clock)


@contextlib.contextmanager
def venv_first_on_path() -> Iterator[None]:
    """Scripts that run `python` get this venv's interpreter, however pytest was started."""
    saved = os.environ.get("PATH")
    os.environ["PATH"] = VENV_BIN + os.pathsep + (saved or os.defpath)
    try:
        yield
    finally:
        if saved is None:
            del os.environ["PATH"]
        else:
            os.environ["PATH"] = saved


def run_yaml(tmp_path: Path, text: str, **kwargs: Any) -> Run:
    """Write `text` as a workflow in tmp_path and run it."""
    return run_workflow(write(tmp_path, text), **kwargs)


# --------------------------------------------------------------------------- subprocesses


_KEPT_ENV = ("PATH", "HOME", "SYSTEMROOT", "TMPDIR", "TEMP", "TMP")


def cli_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """A small, predictable environment for a `podium` subprocess: PODIUM_HOME in tmp and the
    venv's bin first on PATH (so `python` and `pytest` in workflows resolve to it)."""
    env = {k: os.environ[k] for k in _KEPT_ENV if k in os.environ}
    env.update({"PYTHONIOENCODING": "utf-8", "PYTHONUTF8": "1", "LC_ALL": "C.UTF-8",
                "NO_COLOR": "1", "COLUMNS": "200", "PODIUM_HOME": str(home)})
    env["PATH"] = VENV_BIN + os.pathsep + env.get("PATH", os.defpath)
    env.update(extra or {})
    return env


def podium_argv(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "podium", *(str(a) for a in args)]


# `python -m podium`, and the module list at exit written to a file: -X importtime does not
# list a module loaded by importlib.import_module (the step registry loads executors so)
AT_EXIT = ("import atexit, os, runpy, sys\n"
           "atexit.register(lambda: open(os.environ['MODULES_OUT'], 'w').write("
           "'\\n'.join(sorted(sys.modules))))\n"
           "runpy.run_module('podium', run_name='__main__', alter_sys=True)\n")


def imported(tmp_path: Path, *args: str | Path) -> set[str]:
    """Every module `python -m podium ARGS` imports (full dotted names): what -X importtime
    lists, and what sys.modules holds at exit."""
    argv = podium_argv(*args)
    assert argv[1:3] == ["-m", "podium"]
    out = tmp_path / f"modules-{len(list(tmp_path.glob('modules-*')))}.txt"
    proc = subprocess.run([argv[0], "-X", "importtime", "-c", AT_EXIT, *argv[3:]],
                          env={**cli_env(tmp_path / "home"), "MODULES_OUT": str(out)},
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    names = set(out.read_text(encoding="utf-8").split())
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line and "self [us]" not in line:
            names.add(line.rsplit("|", 1)[1].strip())
    assert "podium" in names
    return names


def run_cli(home: Path, *args: str | Path, cwd: Path | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run `python -m podium ARGS` to completion; stdin is /dev/null."""
    return subprocess.run(podium_argv(*args), cwd=cwd or REPO_ROOT, env=cli_env(home),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          encoding="utf-8", errors="replace", timeout=timeout, check=False)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0,
               poll: Callable[[float], Any] | None = None) -> bool:
    """Re-check `predicate` until it holds or `timeout` passes (bounded; returns the last
    verdict). `poll(seconds)` waits between checks; by default on a never-set Event."""
    import time

    waiter = poll or threading.Event().wait
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return predicate()
        waiter(0.02)


def process_gone(pid: int) -> bool:
    """True when `pid` no longer runs (absent, or a zombie waiting to be reaped)."""
    if Path("/proc/self/stat").exists():
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return True
        return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def git_repo_copy(src: Path, dest: Path) -> Path:
    """Copy `src` to `dest` and make it a git repository with one commit."""
    import shutil

    shutil.copytree(src, dest)
    git = ["git", "-c", "user.name=podium-tests", "-c", "user.email=tests@example.com",
           "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "sample repo"]):
        subprocess.run([*git, *args], cwd=dest, check=True, stdin=subprocess.DEVNULL,
                       capture_output=True)
    return dest
