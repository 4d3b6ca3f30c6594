"""Running one workflow test in-process: the real engine, scripted answers, stubbed scripts.

The engine is the one `podium run` uses, with a ScriptedProvider (model answers), a
ScriptedAnswerer (gate answers, no parker: an unanswered gate ends the run), a FakeClock (no
sleeping) and a MemorySink (the events, for the path and the coverage). Script steps named in
the test's `scripts:` are replaced by their stubs, whose output goes through the script
step's own output contract; other scripts run for real.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import field
from typing import Any

from podium.clock import FakeClock
from podium.engine.run import Engine, RunConfig, RunResult
from podium.errors import PodiumError, RunError, StepError
from podium.events.model import ParseRecovery, RouteTaken, ScriptOutput, StepStarted
from podium.events.redact import Redactor
from podium.events.sinks.jsonl import MemorySink
from podium.gates.base import GateUnanswerable, ScriptedAnswerer
from podium.language.model import HumanGateStep, ScriptStep
from podium.providers.base import ProviderError, ProviderRegistry
from podium.providers.scripted import ScriptedProvider
from podium.records import record
from podium.steps.base import RunOptions, StepCall, StepOutcome
from podium.steps.script import execute_script, script_outcome
from podium.testing.model import LoadedTest, ScriptStub


@record
class Failure:
    """One reason a test failed; `expected`/`actual` hold the values compared, if any."""

    kind: str  # test_data | steps | terminal | status | reason | output | model_calls | error
    #            | unexpected_error | unused | crash
    message: str
    expected: Any = None
    actual: Any = None
    details: list[str] | None = None  # one line per difference, when there are several

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "message": self.message}
        if self.expected is not None or self.actual is not None:
            out["expected"] = self.expected
            out["actual"] = self.actual
        if self.details:
            out["details"] = list(self.details)
        return out


@record
class TestRun:
    """What one test did and whether it met its expectations."""

    __test__ = False  # not a pytest class

    test: LoadedTest
    status: str
    terminal: str | None
    reason: str | None
    output: dict[str, Any] | None
    error: str | None
    steps: list[str]
    model_calls: int
    elapsed: float
    routes: list[RouteTaken] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures


class StubsExhausted(StepError):
    """A stubbed script ran more often than its test gives stubs for."""


class ScriptStubs:
    """The script executor for a test: stubbed steps answer from their list, others run."""

    def __init__(self, stubs: dict[str, list[ScriptStub]]) -> None:
        self.stubs = stubs
        self.used: dict[str, int] = {}

    def __call__(self, call: StepCall) -> StepOutcome:
        step = call.step
        entries = self.stubs.get(step.name)
        if entries is None:
            return execute_script(call)
        assert isinstance(step, ScriptStep)
        n = call.iteration
        if n > len(entries):
            raise StubsExhausted(
                f"script '{step.name}' ran for the {_ordinal(n)} time, but the test stubs "
                f"{_count(len(entries), 'execution')}: add one under scripts.{step.name}",
                step=step.name, iteration=n)
        self.used[step.name] = n
        return stub_outcome(step, entries[n - 1], call)


def stub_outcome(step: ScriptStep, stub: ScriptStub, call: StepCall) -> StepOutcome:
    """The outcome a real script printing this stub's stdout would have had."""
    stdout = stub.stdout_text()
    call.run.bus.emit(ScriptOutput(step=step.name, iteration=call.iteration,
                                   argv=["(stub)", step.command, *step.args], working_dir=None,
                                   exit_code=stub.exit_code, stdout=stdout, stderr=stub.stderr))
    outcome = script_outcome(step, call.iteration, stub.exit_code, stdout, stub.stderr)
    outcome.details["stub"] = True
    return outcome


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _count(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def run_test(test: LoadedTest) -> TestRun:
    """Run one test and compare what happened with what it expects."""
    from podium.testing.expect import compare

    if test.case.recording is not None:
        return run_recorded(test)
    case = test.case
    responses = test.responses
    clock = FakeClock()
    provider = ScriptedProvider(responses, clock=clock)
    answerer = ScriptedAnswerer(responses.gate_answers())
    stubs = ScriptStubs(case.scripts)
    wf = test.workflow
    engine = Engine(wf.model, wf.path, inputs=dict(test.inputs),
                    providers=ProviderRegistry(provider), answerer=answerer,
                    options=RunOptions(), clock=clock, run_id=f"test-{test.index + 1}",
                    config=RunConfig(executors={"script": stubs}))
    if case.max_iterations is not None:
        engine.state.max_iterations = case.max_iterations
    sink = MemorySink()
    engine.bus.add(sink)
    started = time.perf_counter()
    try:
        with contextlib.chdir(test.file.resolve().parent):
            result = engine.run()
    except Exception as exc:  # a podium bug must not hide the other tests
        return _crashed(test, sink, provider, exc, run_id=engine.run_id,
                        elapsed=time.perf_counter() - started)
    elapsed = time.perf_counter() - started
    run = TestRun(test, result.status, result.terminal, result.reason, result.output,
                  _error_text(result.error), _started(sink, engine.run_id),
                  len(provider.requests), elapsed, _routes(sink, engine.run_id))
    data_problem = _test_data_problem(test, result, sink)
    if data_problem is not None:
        run.failures.append(data_problem)
        return _redacted(run, engine.bus.redactor)
    if case.expect is not None:
        run.failures.extend(compare(case.expect, run))
    run.failures.extend(_unused(test, provider, answerer, stubs))
    return _redacted(run, engine.bus.redactor)


def _redacted(run: TestRun, redactor: Redactor) -> TestRun:
    """The run as `podium test` shows it: compared as it was, shown with its secrets as
    `<secret:NAME>` (a failed expectation quotes what the run gave)."""
    if not redactor:
        return run
    hide = redactor.value
    run.output, run.error, run.reason = hide(run.output), hide(run.error), hide(run.reason)
    run.failures = [Failure(f.kind, redactor.text(f.message), hide(f.expected), hide(f.actual),
                            hide(f.details)) for f in run.failures]
    return run


def run_recorded(test: LoadedTest) -> TestRun:
    """A recorded run as a test: replay it against the workflow under test; it passes when
    the trajectory is identical (and meets `expect`, when given)."""
    from podium.app.replay import replay_recording
    from podium.testing.expect import compare

    assert test.recording is not None
    sink = MemorySink()
    started = time.perf_counter()
    with contextlib.chdir(test.file.resolve().parent):
        report = replay_recording(test.recording, workflow_path=test.workflow.path, sink=sink)
    run_id = str(report.get("replay_run_id", ""))
    run = TestRun(test, str(report.get("status")), report.get("terminal"), None,
                  report.get("output"), None, _started(sink, run_id), 0,
                  time.perf_counter() - started, _routes(sink, run_id))
    if not report["identical"]:
        where = f" at step {report['at_index']}" if report.get("at_index") else ""
        run.failures.append(Failure("replay", f"the replay of recorded run "
                                    f"{test.recording.run_id} diverged{where}: {report['why']}"))
    elif test.case.expect is not None:
        run.failures.extend(compare(test.case.expect, run))
    return run


def _started(sink: MemorySink, run_id: str) -> list[str]:
    """The steps and groups the run started, in order (not group members, not the steps of
    a sub-workflow's own run)."""
    return [e.step for e in sink.events
            if isinstance(e, StepStarted) and e.run_id == run_id and e.group is None]


def _routes(sink: MemorySink, run_id: str) -> list[RouteTaken]:
    return [e for e in sink.events if isinstance(e, RouteTaken) and e.run_id == run_id]


def _crashed(test: LoadedTest, sink: MemorySink, provider: ScriptedProvider, exc: Exception,
             *, run_id: str, elapsed: float) -> TestRun:
    run = TestRun(test, "error", None, None, None, f"{type(exc).__name__}: {exc}",
                  _started(sink, run_id), len(provider.requests), elapsed,
                  _routes(sink, run_id))
    run.failures.append(Failure("crash", f"podium crashed while running the test "
                                f"({type(exc).__name__}: {exc}); please report it"))
    return run


def _error_text(error: PodiumError | None) -> str | None:
    if error is None:
        return None
    if isinstance(error, RunError) and error.step:
        it = f" (execution {error.iteration})" if error.iteration else ""
        return f"step '{error.step}'{it}: {error}"
    return str(error)


def _test_data_problem(test: LoadedTest, result: RunResult, sink: MemorySink) -> Failure | None:
    """A failure caused by the test's own data (an answer or stub missing): never expected."""
    err = result.error
    if isinstance(err, StubsExhausted):
        return Failure("test_data", str(err))
    if isinstance(err, GateUnanswerable) and err.request.kind == "human_gate":
        step = err.request.step
        given = len(test.responses.gates.get(step, []))
        gate = next((s for s in test.workflow.model.agents if s.name == step), None)
        options = ", ".join(o.value for o in gate.options) \
            if isinstance(gate, HumanGateStep) else "?"
        if given == 0:
            return Failure("test_data", f"human gate '{step}' was reached, but the test gives "
                           f"it no answer: add gates: {{{step}: [VALUE]}} (options: {options})")
        return Failure("test_data", f"human gate '{step}' was reached for the "
                       f"{_ordinal(given + 1)} time, but the test gives it {_count(given, 'answer')}: add one under "
                       f"gates.{step} (options: {options})")
    if isinstance(err, ProviderError):
        return _provider_problem(test, err, sink)
    return None


def _provider_problem(test: LoadedTest, err: ProviderError, sink: MemorySink) -> Failure:
    step, it = err.step or "?", err.iteration or 0
    entries = test.responses.agents.get(step, [])
    if isinstance(entries, list) and it > len(entries):
        if not entries:
            return Failure("test_data", f"agent '{step}' was called, but the test gives it no "
                           f"answer: add agents: {{{step}: [{{output: ...}}]}}")
        return Failure("test_data", f"agent '{step}' was called for the {_ordinal(it)} time, but the "
                       f"test scripts {_count(len(entries), 'answer')} for it: add one under "
                       f"agents.{step}")
    recoveries = [e for e in sink.events if isinstance(e, ParseRecovery)
                  and e.step == step and e.iteration == it]
    if recoveries:
        last = recoveries[-1]
        return Failure("test_data", f"the scripted answer for agent '{step}' (execution {it}, "
                       f"attempt {last.attempt}) breaks its output contract: {last.error}. Fix "
                       "the answer; to test the correction turn, give it under attempts: "
                       "followed by a valid one")
    return Failure("test_data", f"agent '{step}' execution {it}: {err}")


def _unused(test: LoadedTest, provider: ScriptedProvider, answerer: ScriptedAnswerer,
            stubs: ScriptStubs) -> list[Failure]:
    """Scripted answers and stubs the run never used: the test says more than happened."""
    case = test.case
    leftovers: list[str] = []
    asked: dict[tuple[str, int], int] = {}
    for req in provider.requests:
        key = (req["step"], req["iteration"])
        asked[key] = asked.get(key, 0) + 1
    for step, entries in test.responses.agents.items():
        if not isinstance(entries, list):
            continue  # `every:` answers any number of executions
        for j, entry in enumerate(entries):
            sent = asked.get((step, j + 1), 0)
            if sent == 0:
                leftovers.append(f"agents.{step}[{j}]")
            elif sent < len(entry.answers()):
                leftovers.append(f"agents.{step}[{j}].attempts[{sent}:] (an earlier attempt "
                                 "was accepted)")
    for step, answers in test.responses.gates.items():
        used = answerer.used.get(step, 0)
        leftovers.extend(f"gates.{step}[{j}]" for j in range(used, len(answers)))
    used_limit = answerer.used.get("$iteration_limit", 0)
    leftovers.extend(f"iteration_limit[{j}]"
                     for j in range(used_limit, len(test.responses.iteration_limit)))
    for step, stub_list in case.scripts.items():
        used = stubs.used.get(step, 0)
        leftovers.extend(f"scripts.{step}[{j}]" for j in range(used, len(stub_list)))
    if not leftovers:
        return []
    return [Failure("unused", "scripted but never used: " + ", ".join(leftovers)
                    + " (the run took another path than the test describes, or the test has "
                    "leftovers)", actual=leftovers)]
