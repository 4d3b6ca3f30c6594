"""The typed model of Conductor's workflow language, with its defaults and constraints.

Containers where Conductor rejects unknown keys use `extra="forbid"`; containers where it
silently ignores them use `extra="allow"`, and the loader turns what lands in `model_extra`
into warnings. Steps are a discriminated union on `type`; which keys each step type uses,
ignores or rejects is the table STEP_KEYS, applied by the loader before validation.

This module holds the workflow level (the groups, the `workflow:` block and the whole file)
and is the one importers use: it re-exports the building blocks (podium.language.schema)
and the step models (podium.language.steps), which live in their own modules for size.
"""

# No `from __future__ import annotations` here: pydantic would have to compile and evaluate
# every annotation string when the classes are built (~4 ms of each cold command).

from typing import Any, Literal, Self

from pydantic import Field, PrivateAttr, field_validator, model_validator

from podium.language.schema import (
    EFFORTS,
    END,
    Effort,
    FailureMode,
    FieldType,
    Lenient,
    OutputField,
    OutputSchema,
    Strict,
    json_kind,
    located,
    value_has_type,
)
from podium.language.steps import (
    ALL_STEP_KEYS,
    DEFAULT_SCRIPT_OUTPUT_MB,
    MAX_SCRIPT_OUTPUT_MB,
    STEP_CLASSES,
    STEP_KEYS,
    STEP_TYPES,
    AgentStep,
    DialogConfig,
    GateOption,
    HumanGateStep,
    LoadedStep,
    McpStep,
    Question,
    QuestionsStep,
    ReasoningConfig,
    RetryConfig,
    RetryOn,
    Route,
    SandboxConfig,
    ScriptStep,
    SetOutputType,
    SetStep,
    Step,
    StepBase,
    TerminateStep,
    ValidatorConfig,
    WaitStep,
    WorkflowStep,
    parse_duration,
)

# The step models and the building blocks are re-exported: podium.language.model is the
# module the rest of podium imports the language's names from.
__all__ = [
    "ALL_STEP_KEYS",
    "DEFAULT_SCRIPT_OUTPUT_MB",
    "EFFORTS",
    "END",
    "MAX_SCRIPT_OUTPUT_MB",
    "STEP_CLASSES",
    "STEP_KEYS",
    "STEP_TYPES",
    "AgentStep",
    "AzureConfig",
    "CheckpointConfig",
    "ContextConfig",
    "CostConfig",
    "DialogConfig",
    "Effort",
    "FailureMode",
    "FieldType",
    "ForEachGroup",
    "GateOption",
    "HooksConfig",
    "HumanGateStep",
    "InputDef",
    "Lenient",
    "LimitsConfig",
    "McpServerConfig",
    "McpStep",
    "ModelPricing",
    "OutputField",
    "OutputSchema",
    "ParallelGroup",
    "ProviderConfig",
    "Question",
    "QuestionsStep",
    "ReasoningConfig",
    "RetryConfig",
    "RetryOn",
    "Route",
    "RuntimeConfig",
    "SandboxConfig",
    "ScriptStep",
    "SetOutputType",
    "SetStep",
    "SkillDiscoveryConfig",
    "SkillInjectionConfig",
    "Step",
    "StepBase",
    "Strict",
    "TelemetryConfig",
    "TerminateStep",
    "ToolOutputConfig",
    "ValidatorConfig",
    "WaitStep",
    "WorkflowConfig",
    "WorkflowFile",
    "WorkflowStep",
    "json_kind",
    "located",
    "parse_duration",
    "value_has_type",
]


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
    agent: LoadedStep
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
    agents: list[LoadedStep]
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
