"""The step models of the workflow language: routes, the agent's blocks and the step types.

Steps are a discriminated union on `type` (`Step`); which keys each step type uses, ignores
or rejects is the table STEP_KEYS below, applied by the loader before validation.
"""

# No `from __future__ import annotations` here: pydantic would have to compile and evaluate
# every annotation string when the classes are built (~4 ms of each cold command).

import re
from typing import Annotated, Any, Literal, Self

from pydantic import Field, field_validator, model_validator

from podium.language.schema import (
    EFFORTS,
    END,
    Lenient,
    OutputSchema,
    Strict,
    _check_root_schema,
    _is_template,
    located,
)

# --------------------------------------------------------------------------- routes


class Route(Strict):
    """A rule: go `to` a step when `when` holds (no `when` = default route)."""

    to: str = Field(min_length=1)
    when: str | None = None
    output: dict[str, Any] | None = None

    @field_validator("when", mode="before")
    @classmethod
    def _when_text(cls, v: Any) -> Any:
        # Conductor requires a string too: a YAML `true` or `1` is refused, not guessed at
        if isinstance(v, bool):
            raise ValueError("must be a string condition; write \"{{ true }}\" or leave out 'when'")
        if isinstance(v, (int, float)):
            raise ValueError(f"must be a string condition, not the number {v}; quote it "
                             f"(\"{v}\") or write a comparison")
        return v


class GateOption(Lenient):
    label: str
    value: str
    route: str = Field(min_length=1)
    prompt_for: str | None = None
    multiline: bool = False

    @field_validator("value", "label", mode="before")
    @classmethod
    def _scalar_text(cls, v: Any) -> Any:
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return str(v)
        return v


class Question(Strict):
    id: str | None = None
    text: str
    hint: str | None = None
    choices: list[str] | None = None
    allow_free_text: bool = True
    default: Any = None
    required: bool = False
    multiline: bool = True


# --------------------------------------------------------------------------- agent blocks


RetryOn = Literal["provider_error", "timeout"]
_RETRY_ON: tuple[RetryOn, ...] = ("provider_error", "timeout")


class RetryConfig(Lenient):
    max_attempts: int = Field(default=1, ge=1, le=10)
    backoff: Literal["exponential", "fixed"] = "exponential"
    delay_seconds: float = Field(default=2.0, ge=0, le=300)
    retry_on: list[RetryOn] = Field(default_factory=lambda: list(_RETRY_ON))
    max_parse_recovery_attempts: int | None = Field(default=None, ge=0, le=10)


class ReasoningConfig(Lenient):
    effort: str | None = None

    @field_validator("effort")
    @classmethod
    def _effort(cls, v: str | None) -> str | None:
        if v is not None and v not in EFFORTS and not _is_template(v):
            raise ValueError(f"must be one of {', '.join(EFFORTS)} or a template (got '{v}')")
        return v


class DialogConfig(Lenient):
    """After the output, a model call decides (by `trigger_prompt`) whether the agent opens a
    conversation with the person (spec 3.3)."""

    trigger_prompt: str


class ValidatorConfig(Strict):
    """A second model call that judges the agent's output against `criteria` (spec 3.3)."""

    criteria: str = Field(min_length=1)
    model: str | None = None  # None: the agent's own model
    max_retries: Literal[0, 1] = 1
    # podium extension: what an unreadable verdict, or a failure no re-run can fix, does:
    # `pass` (Conductor's fail-open) keeps the output; `fail` (fail closed) fails the step
    on_error: Literal["pass", "fail"] = "pass"

    @field_validator("criteria")
    @classmethod
    def _criteria(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be blank (the rubric the output is judged against)")
        return v


class SandboxConfig(Strict):
    """Conductor's per-agent block for its `aca` sandbox runtime (podium: not supported)."""

    identifier_scope: Literal["workflow", "agent", "item", "none"] | None = None
    working_dir: str | None = None


# --------------------------------------------------------------------------- steps


class StepBase(Strict):
    """Keys every step type has."""

    type: str
    name: str = Field(min_length=1)
    description: str | None = None
    input: list[str] = []
    routes: list[Route] = []

    @field_validator("input", mode="before")
    @classmethod
    def _input_list(cls, v: Any) -> Any:
        if isinstance(v, dict):
            raise ValueError("must be a list of references such as 'step.output' or "
                             "'workflow.input.name' (a mapping is the docs' old form)")
        return v


class AgentStep(StepBase):
    type: Literal["agent"] = "agent"
    prompt: str = ""
    system_prompt: str | None = None
    provider: str | None = None
    model: str | None = None
    tools: list[str] | None = None
    output: OutputSchema | None = None
    output_mode: Literal["envelope", "raw"] | None = None
    working_dir: str | None = None
    timeout_seconds: float | None = Field(default=None, ge=1)
    max_session_seconds: float | None = Field(default=None, ge=1)
    max_agent_iterations: int | None = Field(default=None, ge=1, le=500)
    retry: RetryConfig | None = None
    dialog: DialogConfig | None = None
    validator: ValidatorConfig | None = None
    sandbox: SandboxConfig | None = None
    reasoning: ReasoningConfig | None = None
    context_tier: str | None = None
    skills: list[str] | None = None
    plugins: list[Any] | None = None
    session_key: str | None = None

    @field_validator("output")
    @classmethod
    def _root_fields(cls, v: OutputSchema | None) -> OutputSchema | None:
        return _check_root_schema(v)

    @field_validator("session_key")
    @classmethod
    def _session_key(cls, v: str | None) -> str | None:
        if v is None:
            return v
        v = v.strip()
        if not v:
            raise ValueError("must not be empty")
        if _is_template(v):
            raise ValueError("must be a static label, not a template")
        return v

    @model_validator(mode="after")
    def _raw_mode(self) -> Self:
        if self.output_mode == "raw" and self.output:
            raise located(("output_mode",), "'raw' cannot be combined with an 'output' schema "
                                            "(raw output is always {result: text})")
        return self

    @property
    def has_schema(self) -> bool:
        return bool(self.output) and self.output_mode != "raw"

    def wanted_tools(self, root: list[str]) -> list[str] | None:
        """The tool names this agent asks for: its own `tools:`, else the workflow's root
        list; None for "everything" (tools/select.py says what each means)."""
        if self.tools is not None:
            return list(self.tools)
        return list(root) or None


class HumanGateStep(StepBase):
    type: Literal["human_gate"]
    prompt: str = Field(min_length=1)
    options: list[GateOption] = Field(min_length=1)


class QuestionsStep(StepBase):
    type: Literal["questions"]
    prompt: str = ""
    questions: list[Question] | None = None
    source: str | None = None
    allow_back: bool = True
    allow_skip: bool = True
    allow_skip_all: bool = True
    allow_abort: bool = False
    abort_route: str = END

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if (self.questions is None) == (self.source is None):
            raise ValueError("needs exactly one of 'questions' or 'source'")
        if self.source is not None and len(self.source.split(".")) < 3:
            raise located(("source",), "'source' must be a dotted path of at least 3 parts")
        if self.abort_route != END and not self.allow_abort:
            raise located(("abort_route",), "'abort_route' needs allow_abort: true")
        for i, q in enumerate(self.questions or []):
            if not q.choices and not q.allow_free_text:
                raise located(("questions", i), "a question needs 'choices' or "
                                                "allow_free_text: true")
        return self


DEFAULT_SCRIPT_OUTPUT_MB = 64
MAX_SCRIPT_OUTPUT_MB = 1024


class ScriptStep(StepBase):
    type: Literal["script"]
    command: str = Field(min_length=1)
    args: list[str] = []
    env: dict[str, str] = {}
    stdin: str | None = None
    timeout: int | None = Field(default=None, gt=0)
    working_dir: str | None = None
    output: OutputSchema | None = None
    # podium extension: how much stdout (MB) the step may return; past it the step fails
    max_output_mb: int = Field(default=DEFAULT_SCRIPT_OUTPUT_MB, ge=1,
                               le=MAX_SCRIPT_OUTPUT_MB)

    @field_validator("args", mode="before")
    @classmethod
    def _args_text(cls, v: Any) -> Any:
        if isinstance(v, list):
            return [str(a).lower() if isinstance(a, bool) else
                    (str(a) if isinstance(a, (int, float)) else a) for a in v]
        return v

    @field_validator("env", mode="before")
    @classmethod
    def _env_text(cls, v: Any) -> Any:
        if isinstance(v, dict):
            return {k: (str(x) if isinstance(x, (int, float)) and not isinstance(x, bool)
                        else x) for k, x in v.items()}
        return v

    @field_validator("output")
    @classmethod
    def _root_fields(cls, v: OutputSchema | None) -> OutputSchema | None:
        return _check_root_schema(v)

    @field_validator("max_output_mb", mode="before")
    @classmethod
    def _megabytes(cls, v: Any) -> Any:
        if isinstance(v, bool):
            raise ValueError("must be a whole number of megabytes, not a boolean")
        return v


SetOutputType = Literal["auto", "string", "integer", "number", "boolean", "list", "dict"]


class SetStep(StepBase):
    type: Literal["set"]
    value: Any = None
    values: dict[str, Any] | None = None
    output_type: SetOutputType | None = None
    output: OutputSchema | None = None

    @model_validator(mode="before")
    @classmethod
    def _exactly_one(cls, data: Any) -> Any:
        if isinstance(data, dict):
            has_value = "value" in data
            has_values = "values" in data
            if has_value and has_values:
                raise located(("values",), "'value' and 'values' cannot both be set; keep one")
            if not has_value and not has_values:
                raise ValueError("a set step needs 'value' or 'values'")
            if has_values and "output_type" in data:
                raise located(("output_type",), "'output_type' can only be used with 'value'")
        return data


_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")


def parse_duration(value: Any) -> float:
    """Seconds in a wait `duration` (number or '<n>[ms|s|m|h]'); ValueError when invalid."""
    if isinstance(value, bool):
        raise ValueError("must be a number of seconds or a string like '30s', not a boolean")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        m = _DURATION_RE.match(value)
        if not m:
            raise ValueError(f"'{value}' is not a duration (use a number of seconds or "
                             "'<n>ms', '<n>s', '<n>m', '<n>h')")
        n = float(m.group(1))
        seconds = n * {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}[m.group(2) or "s"]
    else:
        raise ValueError("must be a number of seconds or a duration string")
    if not 0 < seconds <= 86400:
        raise ValueError(f"must be more than 0 and at most 86400 seconds (got {seconds:g})")
    return seconds


class WaitStep(StepBase):
    type: Literal["wait"]
    duration: float | str
    reason: str | None = None

    @field_validator("duration", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> Any:
        if isinstance(v, str) and "{{" in v:
            return v
        parse_duration(v)
        return v


class TerminateStep(StepBase):
    type: Literal["terminate"]
    status: Literal["success", "failed"]
    reason: str
    output_template: dict[str, Any] | None = None

    @field_validator("reason")
    @classmethod
    def _reason(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be blank")
        return v

    @field_validator("routes")
    @classmethod
    def _no_routes(cls, v: list[Route]) -> list[Route]:
        if v:
            raise ValueError("a terminate step ends the run and cannot have routes")
        return v


class WorkflowStep(StepBase):
    type: Literal["workflow"]
    workflow: str = Field(min_length=1)
    input_mapping: dict[str, Any] | None = None
    max_depth: int | None = Field(default=None, ge=1, le=10)
    output: OutputSchema | None = None


class McpStep(StepBase):
    """podium's `mcp` step: call one tool of a declared MCP server, no model involved."""

    type: Literal["mcp"]
    server: str = Field(min_length=1)
    tool: str = Field(min_length=1)
    arguments: dict[str, Any] = {}
    output: OutputSchema | None = None
    timeout: float | None = Field(default=None, gt=0)


AnyStep = (AgentStep | HumanGateStep | QuestionsStep | ScriptStep | SetStep | WaitStep
           | TerminateStep | WorkflowStep | McpStep)
Step = Annotated[AnyStep, Field(discriminator="type")]


class _Validated:
    """The schema of a step the loader has validated already (language/load.py validates each
    step by its own class, to report its errors at its own path): a check of its class. The
    models that hold steps (the workflow file, a for-each group) then build no validator for
    the union of every step type, which a cold `validate` or `run` paid for each time (~4 ms)
    although no step is validated through it."""

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.is_instance_schema(StepBase)


# a step in a model the loader builds from steps it validated (see _Validated)
LoadedStep = Annotated[AnyStep, _Validated()]

STEP_CLASSES: dict[str, type[StepBase]] = {
    "agent": AgentStep, "human_gate": HumanGateStep, "questions": QuestionsStep,
    "script": ScriptStep, "set": SetStep, "wait": WaitStep, "terminate": TerminateStep,
    "workflow": WorkflowStep, "mcp": McpStep,
}
STEP_TYPES = tuple(STEP_CLASSES)

# Which keys each step type uses (u), accepts but ignores (i) or rejects (anything missing).
# Order of the letters: agent, human_gate, questions, script, set, wait, terminate, workflow, mcp.
_KEY_TABLE = {
    "name": "uuuuuuuuu", "type": "uuuuuuuuu", "description": "uuuuuuuuu", "input": "uuuuuuuuu",
    "routes": "uiuuuu-uu", "prompt": "uuu------", "system_prompt": "uii------",
    "provider": "ui-------", "model": "ui-------", "tools": "ui-------",
    "output": "ui-uu--uu", "output_mode": "u--------", "options": "iu-------",
    "questions": "--u------", "source": "--u------", "allow_back": "--u------",
    "allow_skip": "--u------", "allow_skip_all": "--u------", "allow_abort": "--u------",
    "abort_route": "--u------", "command": "iiiu-----", "args": "iiiu---i-", "env": "iiiu---i-",
    "stdin": "---u-----", "timeout": "iiiu---iu", "working_dir": "u--u-----",
    "duration": "-----u---", "reason": "-----uu--", "value": "----u----", "values": "----u----",
    "output_type": "----u----", "status": "------u--", "output_template": "------u--",
    "workflow": "iiii---u-", "input_mapping": "-------u-", "max_depth": "-------u-",
    "timeout_seconds": "u--------", "max_session_seconds": "uii------",
    "max_agent_iterations": "uii------", "retry": "uii------", "dialog": "u--------",
    "validator": "u--------", "sandbox": "u--------", "reasoning": "u--------",
    "context_tier": "u--------", "skills": "u--------", "plugins": "u--------",
    "session_key": "u--------", "server": "--------u", "tool": "--------u",
    "arguments": "--------u", "max_output_mb": "---u-----",
}
STEP_KEYS: dict[str, dict[str, str]] = {
    t: {k: row[i] for k, row in _KEY_TABLE.items() if row[i] != "-"}
    for i, t in enumerate(STEP_TYPES)
}
ALL_STEP_KEYS: tuple[str, ...] = tuple(_KEY_TABLE)
