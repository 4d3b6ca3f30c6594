"""The typed, versioned events of a run: the facts every console, log and store consumes.

Every event carries `v` (the schema version), `type`, `run_id`, `seq` (1, 2, ... within a run,
continuous across resumes) and `ts` (seconds since the epoch, from the run's clock). The JSON
Schema of the union is exported by `event_json_schema()` and shipped as
docs/events.schema.json.
"""

# No `from __future__ import annotations`, and `[]`/`{}` defaults rather than builtin default
# factories: both cost pydantic time at every class (docs/decisions/0010-cold-start.md).

from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1


class Event(BaseModel):
    """Fields common to every event."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    v: int = SCHEMA_VERSION
    type: str
    run_id: str = ""
    seq: int = 0
    ts: float = 0.0
    parent_run_id: str | None = None


# The model calls of an agent execution besides its own (None): the validator's verdict, the
# re-run after a failed verdict, the dialog evaluator, the conversation's replies and the
# re-execution after a conversation. Recordings and responses files key them `<step>.<call>`.
ModelCall = Literal["validator", "rerun", "dialog", "conversation", "after_dialog"]


class RunStarted(Event):
    type: Literal["run_started"] = "run_started"
    workflow: str
    workflow_path: str
    workflow_hash: str
    entry_point: str
    inputs: dict[str, Any]
    podium_version: str
    max_iterations: int
    resumed: bool = False
    recorded: bool = True
    replay_of: str | None = None
    forked_from: str | None = None
    # instructions the command line added to every agent prompt (--workspace-instructions,
    # --instructions): `workspace` before the workflow's own, `cli` after; a replay uses them
    instructions: dict[str, str] | None = None


class RunFinished(Event):
    """The run ended: `status` is success, failed (a failed terminate), error, limit,
    interrupted or waiting (parked at a gate)."""

    type: Literal["run_finished"] = "run_finished"
    status: Literal["success", "failed", "error", "limit", "interrupted", "waiting"]
    output: dict[str, Any] | None = None
    terminal: str | None = None
    reason: str | None = None
    error_type: str | None = None
    message: str | None = None
    step: str | None = None
    iteration: int | None = None
    elapsed: float
    iterations: int
    exit_code: int


class StepStarted(Event):
    type: Literal["step_started"] = "step_started"
    step: str
    step_type: str
    iteration: int
    run_iteration: int
    group: str | None = None


class StepFinished(Event):
    type: Literal["step_finished"] = "step_finished"
    step: str
    step_type: str
    iteration: int
    elapsed: float
    output: Any = None
    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = None
    priced: bool = True
    group: str | None = None


class StepFailed(Event):
    type: Literal["step_failed"] = "step_failed"
    step: str
    step_type: str
    iteration: int
    elapsed: float
    error_type: str
    message: str
    details: dict[str, Any] = {}
    group: str | None = None
    # what a failed step still spent (a failed sub-workflow's agents, say)
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    priced: bool = True


class RouteTaken(Event):
    """A routing decision: which rule won and what every rule before it evaluated to."""

    type: Literal["route_taken"] = "route_taken"
    from_step: str
    to_step: str
    route_index: int
    condition: str | None = None
    kind: Literal["when", "default", "option", "implicit"] = "when"
    evaluated: list[dict[str, Any]] = []


class PromptRendered(Event):
    type: Literal["prompt_rendered"] = "prompt_rendered"
    step: str
    iteration: int
    provider: str
    model: str | None = None
    prompt: str
    system_prompt: str | None = None
    reasoning_effort: str | None = None
    tools: list[str] | None = None
    call: ModelCall | None = None  # None: the agent's own execution


class ModelExchange(Event):
    """One request/response with a model (recorded; secrets never included)."""

    type: Literal["model_exchange"] = "model_exchange"
    step: str
    iteration: int
    attempt: int
    provider: str
    model: str | None = None
    request: dict[str, Any]
    response_text: str
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    elapsed: float = 0.0
    api_calls: int = 1  # model calls behind this answer (a tool loop makes several)
    cost_usd: float | None = None  # None when the model has no price
    call: ModelCall | None = None  # None: the agent's own execution
    finish_reason: str | None = None  # why the last API call stopped, as the API says it
    # the context gauge: tokens the last API call used (its input and output) of the model's
    # window (None when the window is unknown)
    context_tokens: int | None = None
    context_window: int | None = None
    group: str | None = None  # a group member's: it commits with the member's end
    # the API requests behind an answer of more than one (a tool loop), each with its tokens
    # and finish_reason; None when the answer took one request (the fields above are it).
    # The tokens and cost above are their sum, with the failed attempts a retry paid for.
    requests: list[dict[str, Any]] | None = None
    # the call failed (a provider error, retries spent): no answer came, but the tokens above
    # were paid for (a tool loop's requests before the failure, failed attempts that still
    # reported usage); replay serves no answer from it
    failed: bool = False


class ModelDelta(Event):
    """Model text, reasoning or a tool call's arguments as they stream in, coalesced. Live only:
    observers see it while the step runs; it is not stored, recorded or written to the JSONL
    log (the `model_exchange` that follows holds the whole answer), and it takes no `seq` of
    its own (it carries the seq of the event before it)."""

    type: Literal["model_delta"] = "model_delta"
    step: str
    iteration: int
    kind: Literal["text", "reasoning", "tool_call"]
    text: str
    tool: str | None = None  # the tool a tool_call delta's arguments are for


# event types observers see but the run store (the committer) and its copies never hold
LIVE_ONLY: frozenset[str] = frozenset({"model_delta"})


def item_agent_names(step: str) -> list[str]:
    """The names a for-each item's agent may carry in its own events (prompts, answers,
    streamed pieces, tools, scripts): the item's step events carry its label `name[key]`
    (engine/groups.py), its agent's events `name`, with the item's own iteration. The names
    before each `[` of a label that ends in `]`, longest first (a name or a key may hold
    brackets of its own); none for any other step."""
    if not step.endswith("]"):
        return []
    names = []
    cut = step.rfind("[", 0, len(step) - 1)
    while cut > 0:
        names.append(step[:cut])
        cut = step.rfind("[", 0, cut)
    return names


class ParseRecovery(Event):
    type: Literal["parse_recovery"] = "parse_recovery"
    step: str
    iteration: int
    attempt: int
    max_attempts: int
    reason: Literal["syntax", "schema"]
    error: str


class ProviderRetry(Event):
    """A provider call failed transiently and is tried again after `delay` seconds."""

    type: Literal["provider_retry"] = "provider_retry"
    step: str
    attempt: int
    max_attempts: int
    error: str
    delay: float
    iteration: int | None = None
    status: int | None = None
    category: str | None = None  # provider_error | timeout


class ToolCalled(Event):
    """The model of an agent called a tool and podium ran it (`source` is "workspace" or
    "mcp:<server>"); long arguments and outputs are cut in the event, not for the model."""

    type: Literal["tool_called"] = "tool_called"
    step: str
    iteration: int
    tool: str
    source: str | None = None
    arguments: dict[str, Any] = {}
    output: str = ""
    is_error: bool = False
    elapsed: float = 0.0


class ScriptOutput(Event):
    """What a script returned (kept whole in the log; the console shows a tail)."""

    type: Literal["script_output"] = "script_output"
    step: str
    iteration: int
    argv: list[str]
    working_dir: str | None = None
    exit_code: int
    stdout: str
    stderr: str
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    elapsed: float = 0.0


class McpCalled(Event):
    """An `mcp` step called a tool: its rendered arguments and what the tool returned (the
    step's output, or the error text when `is_error`)."""

    type: Literal["mcp_called"] = "mcp_called"
    step: str
    iteration: int
    server: str
    tool: str
    arguments: dict[str, Any]
    result: Any = None
    is_error: bool = False
    elapsed: float = 0.0


class GateOpened(Event):
    type: Literal["gate_opened"] = "gate_opened"
    step: str
    iteration: int
    kind: Literal["human_gate", "iteration_limit"] = "human_gate"
    prompt: str
    options: list[dict[str, Any]]


class GateAnswered(Event):
    type: Literal["gate_answered"] = "gate_answered"
    step: str
    iteration: int
    kind: Literal["human_gate", "iteration_limit"] = "human_gate"
    selected: str
    additional_input: dict[str, str] = {}
    route: str | None = None
    answered_by: str = "terminal"


class LimitReached(Event):
    type: Literal["limit_reached"] = "limit_reached"
    limit: Literal["iterations", "timeout", "budget"]
    step: str | None = None
    current: float
    maximum: float
    recent_steps: list[str] = []
    possible_loop: bool = False


class LimitResolved(Event):
    type: Literal["limit_resolved"] = "limit_resolved"
    limit: Literal["iterations", "timeout", "budget"]
    granted: int
    new_maximum: int
    answered_by: str


class BudgetExceeded(Event):
    type: Literal["budget_exceeded"] = "budget_exceeded"
    budget_usd: float
    spent_usd: float
    budget_mode: Literal["audit", "enforce"]
    step: str | None = None
    partial: bool = False


class ValidatorStarted(Event):
    """An agent's `validator:` judges its output (a second model call)."""

    type: Literal["validator_started"] = "validator_started"
    step: str
    iteration: int
    model: str | None = None
    criteria_preview: str = ""  # the rubric's first 200 characters
    round: int = 1  # 2: the re-run's output, judged again under on_error: fail


class ValidatorFinished(Event):
    """The verdict. `errored`: the call failed or its answer was unreadable (then `passed`
    is true under on_error: pass, Conductor's fail-open, and `error` says why)."""

    type: Literal["validator_finished"] = "validator_finished"
    step: str
    iteration: int
    passed: bool
    issues: list[str] = []
    errored: bool = False
    error: str | None = None
    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    elapsed: float = 0.0
    round: int = 1


class ValidationFailed(Event):
    """The verdict failed: `will_retry` when the agent runs once more with the issues;
    `rerun_errored` when that re-run failed (the first output is kept)."""

    type: Literal["validation_failed"] = "validation_failed"
    step: str
    iteration: int
    issues: list[str]
    will_retry: bool
    rerun_errored: bool = False


class DialogEvaluated(Event):
    """The dialog evaluator's decision on an agent's output (`errored`: the call failed or
    its answer was unreadable, which counts as no dialog)."""

    type: Literal["dialog_evaluated"] = "dialog_evaluated"
    step: str
    iteration: int
    trigger: bool
    reason: str = ""
    question: str = ""
    errored: bool = False
    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None


class DialogStarted(Event):
    """The agent opens a conversation with the person about `output`. `spent` is what the
    execution had cost so far (a run parked here resumes with it, without asking again)."""

    type: Literal["dialog_started"] = "dialog_started"
    step: str
    iteration: int
    question: str
    reason: str = ""
    output: Any = None
    spent: dict[str, Any] = {}


class DialogMessage(Event):
    """One turn: the agent's (`role` agent) or the person's (`role` user; `choice` is
    discuss, done or best, and `content` what they wrote)."""

    type: Literal["dialog_message"] = "dialog_message"
    step: str
    iteration: int
    role: Literal["agent", "user"]
    content: str
    choice: Literal["discuss", "done", "best"] | None = None
    answered_by: str | None = None


class DialogFinished(Event):
    """How the dialog ended: `discussed` (the agent re-runs with the transcript),
    `declined` (do your best: the output stays), `skipped` (--skip-gates) or `failed` (the
    output stays; `error` says why)."""

    type: Literal["dialog_finished"] = "dialog_finished"
    step: str
    iteration: int
    outcome: Literal["discussed", "declined", "skipped", "failed"]
    turns: int = 0
    user_dismissed: bool = False
    agent_proposed_continue: bool = False
    error: str | None = None


class Warning_(Event):
    """Something a person should know that does not stop the run."""

    type: Literal["warning"] = "warning"
    message: str
    step: str | None = None


class ContextTrimmed(Event):
    """`context.max_tokens` was passed before `step` (the estimate: the JSON of the whole
    context / 4), so stored outputs were trimmed for good by `strategy`: `dropped` steps'
    outputs removed, `truncated` fields cut (their new text, by step), older outputs replaced
    by `summary` (stored as `_context_summary`). A resume applies the same changes."""

    type: Literal["context_trimmed"] = "context_trimmed"
    step: str
    strategy: Literal["drop_oldest", "truncate", "summarize"]
    max_tokens: int
    tokens_before: int
    tokens_after: int
    dropped: list[str] = []
    truncated: dict[str, dict[str, str]] = {}
    summary: dict[str, Any] | None = None


class GuidanceAdded(Event):
    """Guidance a person gave the run mid-way (`podium guide`, `resume --guidance`): from
    `step` on, every agent prompt lists it under `[User Guidance]` (spec 5.4)."""

    type: Literal["guidance_added"] = "guidance_added"
    text: str
    step: str | None = None
    iteration: int | None = None


class Checkpointed(Event):
    type: Literal["checkpoint"] = "checkpoint"
    step: str | None = None
    next_step: str | None = None
    run_iteration: int


class ActivityRetried(Event):
    """A run on Temporal workers: an activity runs again (its worker died, or its heartbeat
    stopped), `attempt` counting from 1; `reused` when what it was to do had already been
    committed (nothing runs twice)."""

    type: Literal["activity_retried"] = "activity_retried"
    step: str
    activity: str
    attempt: int
    reason: str
    reused: bool = False


AnyEvent = (RunStarted | RunFinished | StepStarted | StepFinished | StepFailed | RouteTaken
            | PromptRendered | ModelExchange | ParseRecovery | ProviderRetry | ToolCalled | ScriptOutput
            | McpCalled | GateOpened | GateAnswered | LimitReached | LimitResolved | BudgetExceeded
            | Warning_ | Checkpointed | ValidatorStarted | ValidatorFinished | ValidationFailed
            | DialogEvaluated | DialogStarted | DialogMessage | DialogFinished | ContextTrimmed
            | GuidanceAdded | ModelDelta | ActivityRetried)

EVENT_CLASSES: dict[str, type[Event]] = {
    c.model_fields["type"].default: c
    for c in (RunStarted, RunFinished, StepStarted, StepFinished, StepFailed, RouteTaken,
              PromptRendered, ModelExchange, ParseRecovery, ProviderRetry, ToolCalled, ScriptOutput,
              McpCalled, GateOpened, GateAnswered, LimitReached, LimitResolved, BudgetExceeded, Warning_,
              Checkpointed, ValidatorStarted, ValidatorFinished, ValidationFailed, DialogEvaluated,
              DialogStarted, DialogMessage, DialogFinished, ContextTrimmed, GuidanceAdded,
              ModelDelta, ActivityRetried)
}


def event_json_schema() -> dict[str, Any]:
    """The JSON Schema of every podium event (a discriminated union on `type`)."""
    from pydantic import TypeAdapter

    adapter: TypeAdapter[Any] = TypeAdapter(
        __import__("typing").Annotated[AnyEvent, Field(discriminator="type")])
    schema = adapter.json_schema()
    schema["title"] = f"podium event (schema version {SCHEMA_VERSION})"
    return schema


def parse_event(data: dict[str, Any]) -> Event:
    """Rebuild a typed event from its JSON form (unknown types are rejected)."""
    cls = EVENT_CLASSES.get(str(data.get("type")))
    if cls is None:
        raise ValueError(f"unknown event type {data.get('type')!r}")
    return cls.model_validate(data)


_set = object.__setattr__
E = TypeVar("E", bound=Event)


def stamped(event: E, update: dict[str, Any]) -> E:
    """`event.model_copy(update=update)`, for the copy the bus makes of every event to give it
    its run, seq and time: the same new model (fields, fields set, equality, JSON), without
    the general cases of pydantic's copy that an event never has (extra fields are forbidden,
    an event has no private attributes); a third of the copy's cost."""
    cls = event.__class__
    new = cls.__new__(cls)
    values = event.__dict__.copy()
    values.update(update)
    _set(new, "__dict__", values)
    _set(new, "__pydantic_fields_set__", event.__pydantic_fields_set__ | update.keys())
    _set(new, "__pydantic_extra__", None)
    _set(new, "__pydantic_private__", None)
    return new


# the last event event_json wrote and its text, as one tuple (swapped whole: threads share it)
_dumped: list[tuple[Event | None, str]] = [(None, "")]


def event_json(event: Event) -> str:
    """The event's JSON text as the run store keeps it. One emit hands the same stamped event
    to the redactor's check, the store and the JSONL copy: the text is made once, for the last
    event asked (by identity: an event is frozen, so its text cannot change)."""
    last = _dumped[0]
    if last[0] is event:
        return last[1]
    text = event.model_dump_json()
    _dumped[0] = (event, text)
    return text
