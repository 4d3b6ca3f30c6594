"""The typed model of Conductor's workflow language, with its defaults and constraints.

Containers where Conductor rejects unknown keys use `extra="forbid"`; containers where it
silently ignores them use `extra="allow"`, and the loader turns what lands in `model_extra`
into warnings. Steps are a discriminated union on `type`; which keys each step type uses,
ignores or rejects is the table STEP_KEYS below, applied by the loader before validation.
"""

# No `from __future__ import annotations` here: pydantic would have to compile and evaluate
# every annotation string when the classes are built (~4 ms of each cold command).

import re
import warnings
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator
from pydantic_core import PydanticCustomError

Effort = Literal["low", "medium", "high", "xhigh", "max"]
EFFORTS: tuple[str, ...] = ("low", "medium", "high", "xhigh", "max")
FieldType = Literal["string", "number", "boolean", "array", "object"]
FailureMode = Literal["fail_fast", "continue_on_error", "all_or_nothing"]
END = "$end"


# Defaults: a list or dict default is written as `[]` / `{}` (pydantic copies it for each
# instance), not `Field(default_factory=list)`: pydantic parses the signature of every
# default factory, and a builtin's costs a tokenizer pass (~4 ms of each cold command here).


class Strict(BaseModel):
    """A container whose unknown keys are errors (Conductor rejects them)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Lenient(BaseModel):
    """A container whose unknown keys Conductor ignores: podium warns about them."""

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)


def _is_template(text: str) -> bool:
    return "{{" in text or "{%" in text


def located(at: tuple[str | int, ...], message: str) -> PydanticCustomError:
    """A validation error about the key `at` below the container being validated.

    Raised from model-level rules so that the diagnostic points at the offending key rather
    than at the whole mapping; the loader reads the key path from the error's context. The
    message must not contain `{at}` (pydantic formats it with the context).
    """
    return PydanticCustomError("podium_located", message, {"at": at})


# --------------------------------------------------------------------------- output schemas


class OutputField(Strict):
    """One declared output field (Conductor's OutputField)."""

    type: FieldType
    description: str | None = None
    items: "OutputField | None" = None
    properties: "dict[str, OutputField] | None" = None
    enum: list[Any] | None = None
    pattern: str | None = None
    min_length: int | None = Field(default=None, alias="minLength", ge=0)
    max_length: int | None = Field(default=None, alias="maxLength", ge=0)
    minimum: float | None = None
    maximum: float | None = None
    required: bool = True
    nullable: bool = False

    @model_validator(mode="after")
    def _rules(self) -> Self:
        t = self.type
        if self.items is not None and t != "array":
            raise located(("items",), "'items' can only be set when type is 'array'")
        if self.properties is not None and t != "object":
            raise located(("properties",), "'properties' can only be set when type is 'object'")
        set_keys = {k for k, v in (("pattern", self.pattern), ("minLength", self.min_length),
                                   ("maxLength", self.max_length), ("minimum", self.minimum),
                                   ("maximum", self.maximum)) if v is not None}
        for key in sorted(set_keys):
            wanted = "number" if key in ("minimum", "maximum") else "string"
            if t != wanted:
                raise located((key,), f"'{key}' can only be set when type is '{wanted}'")
        if self.enum is not None:
            self._check_enum(t, self.enum)
        if self.pattern is not None:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    re.compile(self.pattern)
            except re.error as exc:
                raise located(("pattern",), f"not a valid regular expression: {exc}") from None
        if (self.min_length is not None and self.max_length is not None
                and self.min_length > self.max_length):
            raise located(("minLength",), "minLength is greater than maxLength")
        if (self.minimum is not None and self.maximum is not None
                and self.minimum > self.maximum):
            raise located(("minimum",), "minimum is greater than maximum")
        return self

    @staticmethod
    def _check_enum(t: str, enum: list[Any]) -> None:
        if t not in ("string", "number", "boolean"):
            raise located(("enum",), "'enum' can only be set when type is string, number or "
                                     "boolean")
        if not enum:
            raise located(("enum",), "'enum' must not be empty")
        for i, v in enumerate(enum):
            if v is None:
                raise located(("enum", i), "'enum' cannot contain null (use nullable: true)")
            if not value_has_type(v, t):
                raise located(("enum", i), f"enum value {v!r} is {json_kind(v)}, but the "
                                           f"field's type is '{t}'")


OutputSchema = dict[str, OutputField]


def value_has_type(value: Any, type_name: str) -> bool:
    """Whether a JSON value has one of the schema types (number excludes booleans)."""
    if type_name == "string":
        return isinstance(value, str)
    if type_name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if type_name == "boolean":
        return isinstance(value, bool)
    if type_name == "array":
        return isinstance(value, list)
    if type_name == "object":
        return isinstance(value, dict)
    return False


def json_kind(value: Any) -> str:
    """How a YAML value reads to a person: 'a string', 'a list', 'nothing', ..."""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _check_root_schema(schema: OutputSchema | None) -> OutputSchema | None:
    if schema:
        for name, fld in schema.items():
            if not fld.required:
                raise located((name, "required"),
                              f"root-level output field '{name}' cannot be optional "
                              "(required: false is only allowed inside 'properties')")
    return schema


# --------------------------------------------------------------------------- routes


class Route(Strict):
    """A rule: go `to` a step when `when` holds (no `when` = default route)."""

    to: str = Field(min_length=1)
    when: str | None = None
    output: dict[str, Any] | None = None

    @field_validator("when", mode="before")
    @classmethod
    def _when_text(cls, v: Any) -> Any:
        if isinstance(v, bool):
            raise ValueError("must be a string condition; write \"{{ true }}\" or leave out 'when'")
        if isinstance(v, (int, float)):
            return str(v)
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


Step = Annotated[
    AgentStep | HumanGateStep | QuestionsStep | ScriptStep | SetStep | WaitStep | TerminateStep
    | WorkflowStep | McpStep,
    Field(discriminator="type"),
]

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


# --------------------------------------------------------------------------- groups


class ParallelGroup(Strict):
    name: str = Field(min_length=1)
    description: str | None = None
    agents: list[str]
    failure_mode: FailureMode = "fail_fast"
    routes: list[Route] = []

    @field_validator("agents")
    @classmethod
    def _two(cls, v: list[str]) -> list[str]:
        if len(v) < 2:
            raise ValueError("a parallel group must contain at least 2 agents")
        return v


_RESERVED_AS = ("workflow", "context", "output", "_index", "_key")


class ForEachGroup(Strict):
    name: str = Field(min_length=1)
    description: str | None = None
    type: Literal["for_each"]
    source: str
    as_: str = Field(alias="as")
    agent: Step
    max_concurrent: int = Field(default=10, ge=1, le=100)
    failure_mode: FailureMode = "fail_fast"
    key_by: str | None = None
    routes: list[Route] = []

    @field_validator("as_")
    @classmethod
    def _as(cls, v: str) -> str:
        if not v.isidentifier():
            raise ValueError(f"'{v}' is not an identifier")
        if v in _RESERVED_AS:
            raise ValueError(f"'{v}' is reserved; choose another name")
        return v

    @field_validator("source")
    @classmethod
    def _source(cls, v: str) -> str:
        if len(v.split(".")) < 3:
            raise ValueError("must be a dotted path of at least 3 parts, e.g. "
                             "'workflow.input.items' or 'step.output.items'")
        return v


# --------------------------------------------------------------------------- workflow block


class InputDef(Lenient):
    type: FieldType
    required: bool = True
    default: Any = None
    description: str | None = None

    @model_validator(mode="after")
    def _default_type(self) -> Self:
        if self.default is not None and not value_has_type(self.default, self.type):
            raise located(("default",), f"default value must be of type '{self.type}', got "
                                        f"{json_kind(self.default)}")
        return self


class AzureConfig(Strict):
    api_version: str


class ProviderConfig(Strict):
    """`runtime.provider` as an object (endpoint, key and runtime-specific fields)."""

    name: str = "copilot"
    type: Literal["openai", "azure", "anthropic"] | None = None
    wire_api: Literal["completions", "responses"] | None = None
    bearer_token: str | None = None
    headers: dict[str, str] | None = None
    azure: AzureConfig | None = None
    runtime_url: str | None = None
    runtime_token: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    api_key_env: str | None = None
    auth_token: str | None = None
    api_version: str | None = None
    hermes_home: str | None = None
    hermes_toolsets: list[str] | None = None
    hermes_skip_memory: bool | None = None
    hermes_skip_context_files: bool | None = None
    pool_endpoint: str | None = None
    inner_provider: str | None = None
    identifier_scope: str | None = None
    egress: Any = None
    lifecycle: Any = None
    auth: Any = None


class McpServerConfig(Lenient):
    type: Literal["stdio", "http", "sse"] = "stdio"
    command: str | None = None
    args: list[str] = []
    env: dict[str, str] = {}
    url: str | None = None
    headers: dict[str, str] = {}
    timeout: float | None = None
    tools: list[str] = Field(default_factory=lambda: ["*"])

    @model_validator(mode="after")
    def _needs(self) -> Self:
        if self.type == "stdio" and not self.command:
            raise ValueError("a stdio MCP server needs 'command'")
        if self.type in ("http", "sse") and not self.url:
            raise ValueError(f"an {self.type} MCP server needs 'url'")
        return self


class CheckpointConfig(Strict):
    every_agent: bool = False
    every_seconds: float | None = Field(default=None, ge=1)
    keep_last: int = Field(default=5, ge=1, le=100)


class ToolOutputConfig(Strict):
    enabled: bool = True
    max_chars: int = Field(default=50000, ge=1000)
    spill_to_file: bool = True
    spill_dir: str | None = None


class SkillInjectionConfig(Strict):
    warn_bytes: int = 65536
    max_bytes: int = 163840


class SkillDiscoveryConfig(Strict):
    sources: list[str] = Field(default_factory=lambda: ["personal", "project"])
    exclude: list[str] = []


class TelemetryConfig(Strict):
    """podium extension (Conductor has no traces): OpenTelemetry export of the run's spans.
    The standard OTEL_* variables win over these keys (docs/decisions/0014-telemetry.md)."""

    enabled: bool = True
    endpoint: str | None = None  # OTLP/HTTP: a base URL (…:4318) or the traces URL (…/v1/traces)
    service_name: str | None = None
    capture_content: bool = False  # prompts, completions, tool arguments and results


class RuntimeConfig(Lenient):
    provider: str | ProviderConfig = "copilot"
    default_model: str | None = None
    mcp_servers: dict[str, McpServerConfig] = {}
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    max_tokens: int | None = Field(default=None, ge=1, le=200000)
    timeout: float | None = Field(default=None, ge=1)
    max_session_seconds: float | None = Field(default=None, ge=1)
    max_agent_iterations: int | None = Field(default=None, ge=1, le=500)
    default_reasoning_effort: Effort | None = None
    default_context_tier: Literal["default", "long_context"] | None = None
    working_dir: str | None = None
    checkpoint: CheckpointConfig | None = None
    tool_output: ToolOutputConfig | None = None
    skills: list[str] | None = None
    skill_injection: SkillInjectionConfig | None = None
    skill_discovery: SkillDiscoveryConfig | None = None
    plugin_sources: Any = None
    plugins: list[Any] | None = None
    telemetry: TelemetryConfig | None = None  # podium extension: OpenTelemetry traces

    @property
    def provider_name(self) -> str:
        return self.provider if isinstance(self.provider, str) else self.provider.name


class ContextConfig(Lenient):
    mode: Literal["accumulate", "last_only", "explicit"] = "accumulate"
    max_tokens: int | None = Field(default=None, ge=1)
    trim_strategy: Literal["drop_oldest", "truncate", "summarize"] = "drop_oldest"


class LimitsConfig(Lenient):
    max_iterations: int = Field(default=10, ge=1, le=500)
    timeout_seconds: int | None = Field(default=None, ge=1)
    budget_usd: float | None = Field(default=None, gt=0)
    budget_mode: Literal["audit", "enforce"] = "audit"


class ModelPricing(Lenient):
    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)
    cache_read_per_mtok: float = Field(default=0.0, ge=0)
    cache_write_per_mtok: float = Field(default=0.0, ge=0)


class CostConfig(Lenient):
    show_per_agent: bool = True
    show_summary: bool = True
    pricing: dict[str, ModelPricing] = {}
    tokens_per_call: int | None = Field(default=None, ge=1)


class HooksConfig(Lenient):
    on_start: str | None = None
    on_complete: str | None = None
    on_error: str | None = None


class WorkflowConfig(Strict):
    name: str = Field(min_length=1)
    description: str | None = None
    version: str | None = None
    entry_point: str = Field(min_length=1)
    input: dict[str, InputDef] = {}
    runtime: RuntimeConfig = Field(default_factory=RuntimeConfig)
    context: ContextConfig = Field(default_factory=ContextConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    cost: CostConfig = Field(default_factory=CostConfig)
    hooks: HooksConfig | None = None
    metadata: dict[str, Any] = {}
    instructions: list[str] = []
    secrets: list[str] = []

    @field_validator("version", mode="before")
    @classmethod
    def _version_text(cls, v: Any) -> Any:
        return str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v


class WorkflowFile(Strict):
    """A whole workflow file."""

    workflow: WorkflowConfig
    agents: list[Step]
    parallel: list[ParallelGroup] = []
    for_each: list[ForEachGroup] = []
    output: dict[str, Any] = {}
    tools: list[str] = []
    # Templates read from `!file` includes (their text -> the file, an absolute path): their
    # `{% include %}` / `{% import %}` names resolve relative to that file. Set by the loader.
    _template_files: dict[str, str] = PrivateAttr(default={})

    @property
    def template_files(self) -> dict[str, str]:
        return self._template_files
