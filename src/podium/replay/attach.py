"""Running a workflow against a recording instead of the outside world.

`replay_hooks` gives the Hooks (engine/run.py) that make an engine, built with them, answer
every non-deterministic input from a recording (model replies, script results, gate answers,
limit grants, waits, MCP results) and compare each decision with the recorded trajectory: the first difference stops the run with a `Divergence`
that says where and why. With `live_from`, the engine switches to its own live providers,
executors and answerers when it reaches that step (a fork).

The recording holds `<secret:NAME>` where the run saw a secret. What it feeds back (a model's
reply, a script's stdout, an answer, an MCP result) gets the values back from the environment
first, as the recorded run had them, so the steps compute what they computed then (a length,
a hash, a comparison); what it compares (prompts, argv, outputs, routes) is redacted first, so
like is compared with like.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from dataclasses import field
from typing import TYPE_CHECKING, Any

from podium.errors import RunError
from podium.events.redact import Redactor
from podium.gates.base import GateAnswer, GateAnswerer, GateRequest
from podium.language.model import ScriptStep
from podium.providers.base import AgentRequest, ProviderRegistry, Reply, Session
from podium.providers.catalog import Capabilities
from podium.records import record
from podium.replay.recording import Recording
from podium.steps.base import StepCall, StepOutcome
from podium.steps.state import StepRecord

if TYPE_CHECKING:
    from podium.engine.run import Engine, Hooks


class Divergence(RunError):
    """The re-executed run differs from its recording; `kind` says what differed."""

    exit_code = 6

    def __init__(self, message: str, *, kind: str, step: str | None, iteration: int | None,
                 index: int | None = None, details: dict[str, Any] | None = None) -> None:
        super().__init__(message, step=step, iteration=iteration, details=details)
        self.kind = kind
        self.index = index


@record
class ReplayControl:
    """Shared switch: replaying (recorded answers) until `live_from` is reached."""

    live_from: tuple[str, int] | None = None
    live: bool = False
    divergence: Divergence | None = None
    replayed_steps: int = 0
    notes: list[str] = field(default_factory=list)


def _short_diff(old: str, new: str, limit: int = 12) -> str:
    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), "recorded", "now",
                                      lineterm="", n=1))
    if len(lines) > limit:
        lines = [*lines[:limit], f"... ({len(lines) - limit} more diff lines)"]
    return "\n".join(lines)


def _restored(redactor: Redactor, value: Any) -> Any:
    """`value` from the recording with the secrets the run knows put back (a secret not set
    now stays `<secret:NAME>`: the replay then differs where the run used it)."""
    from podium.events.redact import restore_secrets

    return restore_secrets(value, set(redactor.secrets), redactor.secrets)


def _diverge(control: ReplayControl, exc: Divergence) -> Divergence:
    if control.divergence is None:
        control.divergence = exc
    return exc


class ReplayProvider:
    """Answers agent sessions with the recorded replies; a changed prompt is a divergence."""

    name = "replay"

    def __init__(self, recording: Recording, control: ReplayControl,
                 live: ProviderRegistry, redactor: Redactor | None = None) -> None:
        self.recording = recording
        self.control = control
        self.live = live
        # the recording holds `<secret:NAME>` where a secret was: compare like with like
        self.redactor = redactor or Redactor()
        self.capabilities = Capabilities(session_continuity=True,
                                         reasoning_efforts=("low", "medium", "high", "xhigh",
                                                            "max"), mcp=True)

    def open_session(self, request: AgentRequest) -> Session:
        if self.control.live:
            return self.live.get(request.provider).open_session(request)
        key = (request.key, request.iteration)
        if not self.recording.recorded:
            raise _diverge(self.control, Divergence(
                f"run {self.recording.run_id} was made with recording off: there is no model "
                "answer to replay", kind="unrecorded", step=request.step,
                iteration=request.iteration))
        exchanges = self.recording.exchanges.get(key)
        if not exchanges:
            raise _diverge(self.control, Divergence(
                f"the recording has no model answer for '{request.key}' execution "
                f"{request.iteration}: the run took a path the recorded run did not",
                kind="missing", step=request.step, iteration=request.iteration))
        recorded = self.recording.prompts.get(key, {})
        hide = self.redactor.text
        for what, then, now in (("prompt", recorded.get("prompt"), hide(request.prompt)),
                                ("system prompt", recorded.get("system_prompt"),
                                 hide(request.system_prompt or ""))):
            if (then or "") != (now or ""):
                raise _diverge(self.control, Divergence(
                    f"a different {what} was rendered for '{request.key}' (execution "
                    f"{request.iteration}):\n{_short_diff(then or '', now or '')}",
                    kind="prompt", step=request.step, iteration=request.iteration,
                    details={"recorded": then, "now": now}))
        return _ReplaySession(self.control, request, exchanges, self.redactor)

    def close(self) -> None:
        self.live.close()


class _ReplaySession:
    def __init__(self, control: ReplayControl, request: AgentRequest,
                 exchanges: list[dict[str, Any]], redactor: Redactor) -> None:
        self.control = control
        self.request = request
        self.exchanges = exchanges
        self.redactor = redactor
        self.sent = 0

    def send(self, message: str) -> Reply:
        req = self.request
        if self.sent >= len(self.exchanges):
            raise _diverge(self.control, Divergence(
                f"'{req.step}' asked the model {self.sent + 1} time(s); the recording has "
                f"{len(self.exchanges)} answer(s)", kind="missing", step=req.step,
                iteration=req.iteration))
        ex = self.exchanges[self.sent]
        self.sent += 1
        return Reply(_restored(self.redactor, str(ex.get("response_text", ""))), None, int(ex.get("input_tokens", 0)),
                     int(ex.get("output_tokens", 0)), int(ex.get("cached_tokens", 0)),
                     ex.get("model") or req.model,
                     {"stop": ex.get("finish_reason"),
                      "context_tokens": ex.get("context_tokens")})

    def close(self) -> None:
        pass


def _replay_script(recording: Recording, control: ReplayControl,
                   live: Callable[[StepCall], StepOutcome],
                   redactor: Redactor) -> Callable[[StepCall], StepOutcome]:
    from podium.events.model import ScriptOutput
    from podium.steps.script import render_argv, script_outcome

    def run(call: StepCall) -> StepOutcome:
        if control.live:
            return live(call)
        step = call.step
        assert isinstance(step, ScriptStep)
        key = (step.name, call.iteration)
        got = recording.scripts.get(key)
        if got is None:
            raise _diverge(control, Divergence(
                f"the recording has no result for script '{step.name}' execution "
                f"{call.iteration}", kind="missing", step=step.name, iteration=call.iteration))
        argv = redactor.value(render_argv(call))
        if argv != list(got.get("argv", [])):
            raise _diverge(control, Divergence(
                f"script '{step.name}' would run {argv} but the recording ran "
                f"{got.get('argv')}", kind="script", step=step.name, iteration=call.iteration))
        stdout = _restored(redactor, str(got.get("stdout", "")))
        stderr = _restored(redactor, str(got.get("stderr", "")))
        call.run.bus.emit(ScriptOutput(
            step=step.name, iteration=call.iteration, argv=argv,
            working_dir=got.get("working_dir"), exit_code=int(got["exit_code"]),
            stdout=stdout, stderr=stderr,
            stdout_truncated=bool(got.get("stdout_truncated")),
            stderr_truncated=bool(got.get("stderr_truncated")), elapsed=0.0))
        return script_outcome(step, call.iteration, int(got["exit_code"]), stdout, stderr,
                              stdout_truncated=bool(got.get("stdout_truncated")))

    return run


def _replay_recorded(kind: str, table: dict[tuple[str, int], Any], control: ReplayControl,
                     live: Callable[[StepCall], StepOutcome] | None,
                     make: Callable[[Any], Any]) -> Callable[[StepCall], StepOutcome]:
    def run(call: StepCall) -> StepOutcome:
        if control.live and live is not None:
            return live(call)
        key = (call.step.name, call.iteration)
        if key not in table:
            raise _diverge(control, Divergence(
                f"the recording has no result for {kind} step '{call.step.name}' execution "
                f"{call.iteration}", kind="missing", step=call.step.name,
                iteration=call.iteration))
        return StepOutcome(make(table[key]))

    return run


class ReplayAnswerer:
    """Gate answers and iteration grants from the recording, in the order they were given."""

    def __init__(self, recording: Recording, control: ReplayControl,
                 live: GateAnswerer, redactor: Redactor | None = None) -> None:
        self.control = control
        self.live = live
        self.redactor = redactor or Redactor()
        self.gates = {k: list(v) for k, v in recording.gates.items()}
        self.dialogs = {k: list(v) for k, v in recording.dialogs.items()}
        self.grants = list(recording.grants)

    def answer(self, request: GateRequest) -> GateAnswer | None:
        if self.control.live:
            return self.live.answer(request)
        if request.kind == "iteration_limit":
            if not self.grants:
                raise _diverge(self.control, Divergence(
                    f"the run reached max_iterations before '{request.step}', which the "
                    "recorded run did not", kind="limit", step=request.step, iteration=None))
            return GateAnswer(str(self.grants.pop(0)), answered_by="recording")
        if request.kind == "dialog":
            turns = self.dialogs.get((request.step, request.iteration))
            if not turns and not any(o.value == "best" for o in request.options):
                return None  # the recorded conversation ended here: nobody answered
            if not turns:
                raise _diverge(self.control, Divergence(
                    f"agent '{request.step}' (execution {request.iteration}) asks the person "
                    "in its dialog more often than the recorded run did", kind="missing",
                    step=request.step, iteration=request.iteration))
            turn = turns.pop(0)
            return GateAnswer(str(turn.get("choice") or "discuss"),
                              {"message": _restored(self.redactor, str(turn.get("content", "")))},
                              "recording")
        queue = self.gates.get(request.step)
        if not queue:
            raise _diverge(self.control, Divergence(
                f"the recording has no answer for gate '{request.step}' visit "
                f"{request.iteration}", kind="missing", step=request.step,
                iteration=request.iteration))
        got = queue.pop(0)
        return GateAnswer(str(got["selected"]),
                          _restored(self.redactor, dict(got.get("additional_input") or {})),
                          "recording")


class ReplayObserver:
    """Compares each step and route with the recorded trajectory, in order."""

    def __init__(self, recording: Recording, control: ReplayControl) -> None:
        self.recording = recording
        self.control = control
        self.index = 0

    def _expected(self) -> Any:
        traj = self.recording.trajectory
        return traj[self.index] if self.index < len(traj) else None

    def before_node(self, engine: Engine, node: str) -> None:
        live_from = self.control.live_from
        if live_from is not None and not self.control.live and live_from[0] == node and \
                engine.state.step_counts.get(node, 0) + 1 == live_from[1]:
            self.control.live = True
        if self.control.live:
            return
        expected = self._expected()
        if expected is None:
            raise _diverge(self.control, Divergence(
                f"the run goes on to '{node}' after the point where the recorded run ended "
                f"({self.recording.final.get('status')})", kind="route", step=node,
                iteration=None, index=self.index))

    def after_step(self, engine: Engine, record: StepRecord) -> None:
        if self.control.live:
            return
        expected = self._expected()
        if expected is None or expected.step != record.step:
            return  # reported by after_route of the step before
        output = engine.bus.redactor.value(record.output)
        if _canon(expected.output) != _canon(output):
            why = _why_output(self.recording, record)
            raise _diverge(self.control, Divergence(
                f"'{record.step}' (execution {record.iteration}) gave a different output"
                f"{why}:\n{_short_diff(_pretty(expected.output), _pretty(output))}",
                kind="output", step=record.step, iteration=record.iteration, index=self.index))

    def after_route(self, engine: Engine, record: StepRecord,
                    evaluated: list[dict[str, Any]]) -> None:
        if self.control.live:
            return
        expected = self._expected()
        self.index += 1
        self.control.replayed_steps = self.index
        if expected is None or expected.route_to == record.route_to:
            return
        now = engine.bus.redactor.text("; ".join(f"routes[{e['index']}] {e['when']!r} -> "
                                           f"{e['value']!r}" for e in evaluated)
                                 or "no condition evaluated")
        then = "; ".join(f"routes[{e['index']}] {e['when']!r} -> {e['value']!r}"
                         for e in expected.evaluated) or "no condition evaluated"
        raise _diverge(self.control, Divergence(
            f"after '{record.step}' (execution {record.iteration}) the run goes to "
            f"'{record.route_to}' where the recording went to '{expected.route_to}': a route "
            f"condition changed its value. Now: {now}. Recorded: {then}", kind="route",
            step=record.step, iteration=record.iteration, index=self.index - 1))


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _pretty(value: Any) -> str:
    return json.dumps(value, sort_keys=True, indent=2, default=str)


def _why_output(recording: Recording, record: StepRecord) -> str:
    if record.step_type == "set":
        return " (its value template now renders differently)"
    if record.step_type == "agent":
        return " (the same answer was read differently: the output declaration changed?)"
    if record.step_type == "script":
        return " (the same stdout was read differently: the output declaration changed?)"
    return ""


def replay_hooks(recording: Recording, control: ReplayControl) -> Hooks:
    """The hooks that make an engine replay `recording` (until `control.live_from`, when
    given): its observer compares each step and route with the recording, `attach` puts the
    recorded answers in front of its providers, answerer, scripts, waits and MCP calls, and
    each sub-workflow child the recording has replays its own recording."""
    from podium.engine.run import Hooks

    def attach(engine: Engine) -> None:
        services = engine.services
        redactor = engine.bus.redactor
        services.providers = ProviderRegistry(
            override=ReplayProvider(recording, control, services.providers, redactor))
        services.answerer = ReplayAnswerer(recording, control, services.answerer, redactor)
        ex = engine.executors
        ex["script"] = _replay_script(recording, control, ex["script"], redactor)
        ex["wait"] = _replay_recorded("wait", recording.waits, control, ex.get("wait"),
                                      lambda out: _restored(redactor, out))
        if "mcp" in ex:
            ex["mcp"] = _replay_recorded("mcp", {k: v.get("output", v.get("result"))
                                                for k, v in recording.mcp.items()},
                                         control, ex["mcp"], lambda out: _restored(redactor, out))

    def child(step: str, iteration: int, slot: str) -> Hooks | None:
        sub = recording.children.get((step, iteration, slot))
        if sub is None or control.live:
            return None
        return replay_hooks(sub, ReplayControl())

    return Hooks(ReplayObserver(recording, control), child, attach)
