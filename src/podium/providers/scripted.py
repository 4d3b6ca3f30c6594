"""The offline ScriptedProvider: answers come from a responses file, keyed by step and execution.

A responses file looks like this::

    agents:
      reviewer:                       # entry i answers the reviewer's i-th execution
        - output: {verdict: approve, findings: []}
        - attempts:                   # successive answers in one conversation
            - text: "Sure! {verdict: approve"     # malformed on purpose
            - output: {verdict: approve, findings: []}
      developer:
        - output: {summary: done, files_changed: [calc.py]}
          files: {calc.py: "def add(a, b):\\n    return a + b\\n"}
    gates:
      escalation: [stop]              # one answer per visit of the gate

A step may instead get one answer for every execution (benchmarks, big for-each groups)::

    agents:
      worker:
        every: {output: {ok: true}, delay: 0.05}   # any execution, after 50 ms

An agent's `validator:` and `dialog:` make model calls of their own, answered under
`<step>.<call>` keys, entry i again for the step's i-th execution::

    agents:
      writer:              [{output: {draft: "v1"}}]
      writer.dialog:       [{output: {trigger: true, reason: "unclear", question: "For whom?"}}]
      writer.conversation: [{attempts: [{text: "Noted."}, {text: "Anything else?"}]}]
      writer.after_dialog: [{output: {draft: "v2, for beginners"}}]
      writer.validator:    [{output: {passed: false, issues: ["no example"]}}]
      writer.rerun:        [{output: {draft: "v3, with an example"}}]
    dialogs:
      writer: ["For beginners, please", done]   # what the person says, turn by turn

`<step>.dialog` answers the dialog evaluator, `<step>.conversation` the agent's replies in the
conversation (one attempt per reply), `<step>.after_dialog` the re-execution with the
transcript, `<step>.validator` the verdict and `<step>.rerun` the re-run with the validation
feedback. Under `dialogs:`, each string is one turn of the person: `best` (let the agent do
its best: keep the output), `done` (end the conversation), or what they write to the agent.

Every request is recorded; a call the file does not answer fails loudly.
"""

from __future__ import annotations

import json
import threading
from dataclasses import field
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from podium.clock import Clock
from podium.errors import UsageError, WorkflowFileError
from podium.gates.base import GateAnswer
from podium.providers.base import AgentRequest, ProviderError, Reply
from podium.providers.catalog import Capabilities
from podium.records import record


class _Usage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cached_tokens: int = Field(default=0, ge=0)


_NO_USAGE = _Usage()


class Answer(BaseModel):
    """One scripted model answer."""

    model_config = ConfigDict(extra="forbid")
    output: Any = None
    text: str | None = None
    files: dict[str, str] = Field(default_factory=dict)
    usage: _Usage | None = None
    model: str | None = None
    delay: float = Field(default=0.0, ge=0)

    @model_validator(mode="after")
    def _one(self) -> Answer:
        if (self.output is None) == (self.text is None):
            raise ValueError("an answer needs exactly one of 'output' or 'text'")
        return self

    def as_text(self) -> str:
        return self.text if self.text is not None else json.dumps(self.output)


class Entry(BaseModel):
    """The answers for one execution of a step: one answer, or several attempts."""

    model_config = ConfigDict(extra="forbid")
    output: Any = None
    text: str | None = None
    files: dict[str, str] = Field(default_factory=dict)
    usage: _Usage | None = None
    model: str | None = None
    delay: float = Field(default=0.0, ge=0)
    attempts: list[Answer] | None = None

    def answers(self) -> list[Answer]:
        if self.attempts is not None:
            return self.attempts
        return [Answer(output=self.output, text=self.text, files=self.files, usage=self.usage,
                       model=self.model, delay=self.delay)]


def _number_text(value: Any) -> Any:
    """Gate option values written as numbers are strings in the workflow model too."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


class _GateEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    value: str
    text: dict[str, str] = Field(default_factory=dict)

    @field_validator("value", mode="before")
    @classmethod
    def _value_text(cls, v: Any) -> Any:
        return _number_text(v)


class EveryEntry(BaseModel):
    """`{every: {...}}`: the same answer for every execution of a step."""

    model_config = ConfigDict(extra="forbid")
    every: Entry


def _answers_kind(value: Any) -> str:
    return "every" if isinstance(value, (dict, EveryEntry)) else "entries"


# A step's answers: a list (one entry per execution) or the `every:` form. The tag is
# dropped from error locations by load_responses.
Answers = Annotated[Annotated[list[Entry], Tag("entries")] | Annotated[EveryEntry, Tag("every")],
                    Discriminator(_answers_kind)]


class ResponsesFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    agents: dict[str, Answers] = Field(default_factory=dict)
    gates: dict[str, list[str | _GateEntry]] = Field(default_factory=dict)
    iteration_limit: list[int] = Field(default_factory=list)
    # the person's turns in an agent's dialog, by agent: best, done, or a message
    dialogs: dict[str, list[str]] = Field(default_factory=dict)

    @field_validator("gates", mode="before")
    @classmethod
    def _gate_values_text(cls, v: Any) -> Any:
        if isinstance(v, dict):
            return {k: [_number_text(i) for i in items] if isinstance(items, list) else items
                    for k, items in v.items()}
        return v

    def gate_answers(self) -> dict[str, list[GateAnswer]]:
        out: dict[str, list[GateAnswer]] = {}
        for step, items in self.gates.items():
            out[step] = [GateAnswer(i, {}, "responses") if isinstance(i, str)
                         else GateAnswer(i.value, dict(i.text), "responses") for i in items]
        if self.iteration_limit:
            out["$iteration_limit"] = [GateAnswer(str(n), {}, "responses")
                                       for n in self.iteration_limit]
        for step, turns in self.dialogs.items():  # an agent's name is no gate's
            out.setdefault(step, []).extend(GateAnswer(t, {}, "responses") for t in turns)
        return out


def load_responses(path: Path) -> ResponsesFile:
    """Read a responses file; any problem is a UsageError naming the file and the place."""
    from podium.language.source import FileUnreadable, LoadFailure, load_document

    try:
        doc = load_document(path, environ={})
    except FileUnreadable as exc:
        raise WorkflowFileError(f"responses file {exc}") from None
    except LoadFailure as exc:
        raise UsageError(exc.diagnostics[0].format()) from None
    if not isinstance(doc.data, dict):
        raise UsageError(f"{doc.shown}:1:1: a responses file must be a mapping with 'agents:' "
                         "and/or 'gates:'")
    try:
        return ResponsesFile.model_validate(doc.data)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        loc = tuple(err["loc"])
        if len(loc) > 2 and loc[0] == "agents" and loc[2] in ("entries", "every"):
            loc = loc[:2] + loc[3:]  # the Answers tag is not a place in the file
        pos = doc.smap.value(loc)
        where = ".".join(str(p) for p in loc)
        msg = str(err["msg"]).removeprefix("Value error, ")
        raise UsageError(f"{pos.file}:{pos.line}:{pos.col}: {where}: {msg}") from None


@record
class ScriptedProvider:
    """Serves scripted answers; `requests` records every request and message it received."""

    responses: ResponsesFile
    name: str = "scripted"
    capabilities: Capabilities = field(default_factory=lambda: Capabilities(
        tools_filter=True, session_continuity=True,
        reasoning_efforts=("low", "medium", "high", "xhigh", "max"), mcp=True))
    requests: list[dict[str, Any]] = field(default_factory=list)
    clock: Clock | None = None

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        # by step: an `every:` entry's answers and their texts, made once (every execution
        # of the step, every member of its fan-out, is served them)
        self._every: dict[str, tuple[EveryEntry, list[Answer], list[str]]] = {}

    def open_session(self, request: AgentRequest) -> _ScriptedSession:
        key = request.key
        entries = self.responses.agents.get(key)
        if entries is None:
            what = f"step '{key}'" if request.call is None else \
                f"'{key}' (the {request.call} call of step '{request.step}')"
            raise ProviderError(f"the responses file has no answers for {what} "
                                "(an unexpected model call)", step=request.step,
                                iteration=request.iteration)
        if isinstance(entries, EveryEntry):  # each member of a fan-out: made once, shared
            made = self._every.get(key)
            if made is None or made[0] is not entries:
                answers = entries.every.answers()
                made = self._every[key] = (entries, answers, [a.as_text() for a in answers])
            return _ScriptedSession(self, request, made[1], made[2])
        if request.iteration > len(entries):
            raise ProviderError(f"the responses file has {len(entries)} answer(s) for "
                                f"'{key}' but this is execution {request.iteration} "
                                "(an unexpected model call)", step=request.step,
                                iteration=request.iteration)
        return _ScriptedSession(self, request, entries[request.iteration - 1].answers())

    def close(self) -> None:
        pass


class _ScriptedSession:
    def __init__(self, provider: ScriptedProvider, request: AgentRequest,
                 answers: list[Answer], texts: list[str] | None = None) -> None:
        self.provider = provider
        self.request = request
        self.answers = answers
        self.texts = texts  # the answers' texts, when made beforehand
        self.sent = 0

    def send(self, message: str) -> Reply:
        answer = self._take(message)
        if answer.delay:
            if self.provider.clock is not None:
                self.provider.clock.sleep(answer.delay)
            else:
                threading.Event().wait(answer.delay)
        return self._reply(answer)

    async def asend(self, message: str) -> Reply:
        """`send` for a group member on the event loop: the delay is the clock's async
        sleep, so the loop answers the other members meanwhile."""
        import asyncio

        from podium.aio import asleep

        answer = self._take(message)
        if answer.delay:
            if self.provider.clock is not None:
                await asleep(self.provider.clock, answer.delay)
            else:
                await asyncio.sleep(answer.delay)
        return self._reply(answer)

    def _take(self, message: str) -> Answer:
        """Record the request and take its answer (the next attempt)."""
        req = self.request
        with self.provider._lock:
            self.provider.requests.append({
                "step": req.key, "call": req.call, "iteration": req.iteration,
                "attempt": self.sent + 1,
                "model": req.model, "provider": req.provider, "message": message,
                "system_prompt": req.system_prompt, "tools": req.tools,
                "output_schema": req.output_schema, "reasoning_effort": req.reasoning_effort,
                "working_dir": req.working_dir, "thread": threading.get_ident()})
        if self.sent >= len(self.answers):
            raise ProviderError(f"the responses file has {len(self.answers)} attempt(s) for "
                                f"'{req.key}' execution {req.iteration}, and attempt "
                                f"{self.sent + 1} was requested", step=req.step,
                                iteration=req.iteration)
        answer = self.answers[self.sent]
        self.sent += 1
        return answer

    def _reply(self, answer: Answer) -> Reply:
        if answer.files:
            self._write_files(answer.files)
        usage = answer.usage or _NO_USAGE
        # `_take` has just served answers[sent - 1]
        text = self.texts[self.sent - 1] if self.texts is not None else answer.as_text()
        return Reply(text, None, usage.input_tokens, usage.output_tokens,
                     usage.cached_tokens, answer.model or self.request.model)

    def _write_files(self, files: dict[str, str]) -> None:
        base = Path(self.request.working_dir or ".").resolve()
        for rel, content in files.items():
            target = (base / rel).resolve()
            if not target.is_relative_to(base):
                raise ProviderError(f"scripted file '{rel}' escapes the working_dir {base}",
                                    step=self.request.step)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")

    def close(self) -> None:
        pass
