"""What podium knows about each provider name, without importing any SDK: which names exist,
which are installed, which reasoning efforts and provider-object fields each accepts, and the
model rules (which models reason, how Claude thinks). `validate` and the adapters share it."""

from __future__ import annotations

import re

from podium.records import record

ALL_EFFORTS: tuple[str, ...] = ("low", "medium", "high", "xhigh", "max")


@record(frozen=True)
class ProviderInfo:
    """One provider name: its adapter ("module:factory"), or None when podium does not have
    its runtime yet, and what a workflow may ask of it."""

    name: str
    factory: str | None
    efforts: tuple[str, ...]
    fields: tuple[str, ...]  # provider-object keys it takes (besides `name`)
    max_temperature: float
    summary: str


_HTTP_FIELDS = ("base_url", "api_key", "api_key_env", "headers")

PROVIDERS: dict[str, ProviderInfo] = {
    "openai": ProviderInfo(
        "openai", "podium.providers.openai_chat:create_openai", ("low", "medium", "high"),
        _HTTP_FIELDS, 2.0, "OpenAI API, or any OpenAI-compatible endpoint by base_url"),
    "azure": ProviderInfo(
        "azure", "podium.providers.openai_chat:create_azure", ("low", "medium", "high"),
        (*_HTTP_FIELDS, "api_version"), 2.0, "Azure OpenAI (deployment = model)"),
    "claude": ProviderInfo(
        "claude", "podium.providers.anthropic_messages:create_claude", ALL_EFFORTS,
        (*_HTTP_FIELDS, "auth_token"), 1.0, "Anthropic Messages API"),
    # agent runtimes (a CLI driven by its SDK; see providers/runtime_common.py)
    "copilot": ProviderInfo(
        "copilot", "podium.providers.copilot:create_copilot", ALL_EFFORTS,
        ("base_url", "api_key", "api_key_env", "headers", "type", "wire_api", "bearer_token",
         "azure", "runtime_url", "runtime_token"), 1.0,
        "GitHub Copilot CLI through github-copilot-sdk (custom endpoints: bring your own key)"),
    "claude-agent-sdk": ProviderInfo(
        "claude-agent-sdk", "podium.providers.claude_agent:create_claude_agent", ALL_EFFORTS,
        (*_HTTP_FIELDS, "auth_token"), 1.0,
        "Claude Code CLI through claude-agent-sdk (ANTHROPIC_BASE_URL-style endpoints)"),
    "hermes": ProviderInfo(
        "hermes", "podium.providers.hermes:create_hermes", ("low", "medium", "high", "xhigh"),
        (*_HTTP_FIELDS, "hermes_home", "hermes_toolsets", "hermes_skip_memory",
         "hermes_skip_context_files"), 1.0,
        "the Hermes agent through hermes-agent (any OpenAI-compatible endpoint by base_url)"),
}

# Other names podium accepts for a provider.
ALIASES: dict[str, str] = {"anthropic": "claude"}


def canonical(name: str) -> str:
    return ALIASES.get(name, name)


def info(name: str) -> ProviderInfo | None:
    return PROVIDERS.get(canonical(name))


def known_names() -> list[str]:
    """Every name `runtime.provider`, an agent's `provider:` and `--provider` accept."""
    return sorted({*PROVIDERS, *ALIASES})


def describe_known() -> str:
    parts = []
    for name in sorted(PROVIDERS):
        p = PROVIDERS[name]
        alias = [a for a, target in ALIASES.items() if target == name]
        label = name + (f" (alias {', '.join(alias)})" if alias else "")
        parts.append(label + ("" if p.factory else " [not installed]"))
    return ", ".join(parts)


# --------------------------------------------------------------------------- model rules

_OPENAI_CLASSIC = ("gpt-4", "gpt-3.5", "chatgpt-4o", "gpt-35")


def openai_rejects_effort(model: str) -> bool:
    """True for OpenAI models known not to reason (they reject `reasoning_effort`). Unknown
    names (a local model behind a compatible endpoint) get the parameter: the user asked."""
    low = model.lower()
    return low.startswith(_OPENAI_CLASSIC)


_CLAUDE_4 = re.compile(r"^claude-(opus|sonnet|haiku)-4(?:[-.](\d+))?")
_NO_THINKING = ("claude-2", "claude-instant", "claude-3-5", "claude-3.5", "claude-3-opus",
                "claude-3-sonnet", "claude-3-haiku")


def claude_minor(model: str) -> int | None:
    """4 for claude-*-4, 5 for claude-sonnet-4-5, 0 for a dated claude-sonnet-4-20250514;
    None when the model is not a Claude 4 model."""
    m = _CLAUDE_4.match(model.lower())
    if not m:
        return None
    minor = m.group(2)
    return int(minor) if minor is not None and len(minor) <= 2 else 0


def claude_thinking(model: str) -> str | None:
    """How a Claude model reasons: "budget" (extended thinking with budget_tokens), "adaptive"
    (adaptive thinking + output_config.effort: the 4.6 models and every newer one, where
    budget_tokens is deprecated or rejected), or None (the model cannot think)."""
    low = model.lower()
    if low.startswith(_NO_THINKING):
        return None
    if low.startswith(("claude-3-7", "claude-3.7")):
        return "budget"
    minor = claude_minor(low)
    if minor is not None:
        return "adaptive" if minor >= 6 else "budget"
    return "adaptive"


def claude_native_schema(model: str) -> bool:
    """Whether a Claude model supports `output_config.format` (structured outputs): every model
    from Opus 4.1 / Sonnet 4.5 / Haiku 4.5 on. Older ones answer through a forced tool call."""
    low = model.lower()
    if low.startswith(("claude-2", "claude-instant", "claude-3")):
        return False
    minor = claude_minor(low)
    if minor is None:
        return True
    kind = _CLAUDE_4.match(low)
    assert kind is not None
    return minor >= {"opus": 1, "sonnet": 5, "haiku": 5}[kind.group(1)]


# Extended-thinking budgets per effort (spec 10.3); max_tokens becomes budget + 4096, capped.
THINKING_BUDGETS: dict[str, int] = {"low": 2048, "medium": 8192, "high": 16384,
                                    "xhigh": 32768, "max": 59904}
THINKING_MAX_TOKENS_CAP = 64000


def effort_problem(provider: str, model: str | None, effort: str) -> str | None:
    """Why `effort` cannot be used with this provider and model, or None when it can."""
    p = info(provider)
    if p is None:
        return None
    if effort not in p.efforts:
        if not p.efforts:
            return f"provider '{p.name}' does not support reasoning.effort"
        return (f"provider '{p.name}' supports reasoning.effort {', '.join(p.efforts)}, "
                f"not '{effort}'")
    if model and p.name in ("openai", "azure") and openai_rejects_effort(model):
        return f"model '{model}' does not reason, so it takes no reasoning.effort"
    if model and p.name == "claude" and claude_thinking(model) is None:
        return f"model '{model}' has no extended thinking, so it takes no reasoning.effort"
    return None


@record(frozen=True)
class Capabilities:
    """What a provider can do; `validate` compares workflows against it."""

    tools_filter: bool = True
    session_continuity: bool = False
    reasoning_efforts: tuple[str, ...] = ("low", "medium", "high")
    structured_output: str = "native"  # native | prompt
    mcp: bool = False
    working_dir: bool = True
    max_temperature: float = 2.0
    runs_tools: bool = False  # the provider offers the request's toolbox to the model
    skills: bool = False  # loads `skills:` and `plugins:` (given by path) natively
    context_tier: bool = False  # takes `context_tier` / `runtime.default_context_tier`


# --------------------------------------------------------------------------- agent runtimes
# What the runtimes (copilot, claude-agent-sdk; providers/runtime_common.py) can do and which
# of their own tools stand for podium's workspace tools: `validate` reads these tables.

COPILOT_EFFORTS: tuple[str, ...] = ("low", "medium", "high", "xhigh")
CLAUDE_AGENT_EFFORTS: tuple[str, ...] = ("low", "medium", "high", "xhigh", "max")

COPILOT_CAPABILITIES = Capabilities(
    tools_filter=True, session_continuity=True, reasoning_efforts=COPILOT_EFFORTS,
    structured_output="prompt", mcp=True, working_dir=True, max_temperature=1.0,
    runs_tools=False, skills=True, context_tier=True)
CLAUDE_AGENT_CAPABILITIES = Capabilities(
    tools_filter=True, session_continuity=True, reasoning_efforts=CLAUDE_AGENT_EFFORTS,
    structured_output="prompt", mcp=True, working_dir=True, max_temperature=1.0,
    runs_tools=False, skills=True)

HERMES_CAPABILITIES = Capabilities(
    tools_filter=True, session_continuity=False, reasoning_efforts=("low", "medium", "high",
                                                                    "xhigh"),
    structured_output="prompt", mcp=False, working_dir=False, max_temperature=1.0,
    runs_tools=False, skills=False)

RUNTIME_CAPABILITIES: dict[str, Capabilities] = {
    "copilot": COPILOT_CAPABILITIES, "claude-agent-sdk": CLAUDE_AGENT_CAPABILITIES,
    "hermes": HERMES_CAPABILITIES}

# podium's workspace tool names -> the runtime's own built-in tools that do the same work (a
# runtime tool may do a little more: Copilot's `view` lists directories and reads files).
COPILOT_TOOLS: dict[str, tuple[str, ...]] = {
    "read_file": ("view",),
    "list_dir": ("view", "glob"),
    "search": ("grep", "glob"),
    "write_file": ("create", "edit"),
    "edit_file": ("edit",),
    "run_command": ("bash", "read_bash", "write_bash", "stop_bash", "list_bash"),
}
CLAUDE_TOOLS: dict[str, tuple[str, ...]] = {
    "read_file": ("Read",),
    "list_dir": ("Glob",),
    "search": ("Grep", "Glob"),
    "write_file": ("Write", "Edit"),
    "edit_file": ("Edit",),
    "run_command": ("Bash",),
}
# Hermes enables tools by toolset: the workspace tools are in its `file` and `terminal` sets.
HERMES_TOOLS: dict[str, tuple[str, ...]] = {
    "read_file": ("file",), "list_dir": ("file",), "search": ("file",),
    "write_file": ("file",), "edit_file": ("file",), "run_command": ("terminal",),
}
RUNTIME_TOOLS: dict[str, dict[str, tuple[str, ...]]] = {
    "copilot": COPILOT_TOOLS, "claude-agent-sdk": CLAUDE_TOOLS, "hermes": HERMES_TOOLS}

# Every tool a runtime has of its own, by its own name: a `tools:` entry may name one directly
# (Conductor's examples list Copilot's `web_search`), and it is then passed to the runtime as
# is. From the runtimes' tool catalogues (Copilot CLI 1.0, Claude Code 2.x), online tools
# included; a name outside these lists is passed on too, with a validate warning.
RUNTIME_OWN_TOOLS: dict[str, tuple[str, ...]] = {
    "copilot": (
        "ask_user", "bash", "context_board", "create", "edit", "exit_plan_mode",
        "fetch_copilot_cli_documentation", "glob", "grep", "list_agents", "list_bash",
        "read_agent", "read_bash", "report_intent", "send_inbox", "skill", "sql", "stop_bash",
        "task", "task_complete", "update_todo", "view", "web_fetch", "web_search", "write_agent",
        "write_bash"),
    "claude-agent-sdk": (
        "Agent", "AskUserQuestion", "Bash", "BashOutput", "Edit", "ExitPlanMode", "Glob", "Grep",
        "KillShell", "ListAgents", "MultiEdit", "NotebookEdit", "Read", "Skill", "SlashCommand",
        "Task", "TodoWrite", "ToolSearch", "WebFetch", "WebSearch", "Write"),
    # Hermes's toolsets (hermes-agent 0.19 toolsets.py), named in `tools:` as they are
    "hermes": (
        "browser", "clarify", "code_execution", "computer_use", "context_engine", "cronjob",
        "debugging", "delegation", "file", "image_gen", "memory", "project", "safe", "search",
        "session_search", "skills", "terminal", "todo", "tts", "video", "video_gen", "vision",
        "web", "x_search", "coding"),
}

# Conductor provider names podium recognises but does not run (validate: "not supported").
NOT_SUPPORTED: dict[str, str] = {
    "aca": "Conductor's Azure Container Apps sandbox runtime",
}


def runtime_tool_owner(name: str) -> str | None:
    """The runtime that has a tool by this name of its own, or None."""
    for provider, names in RUNTIME_OWN_TOOLS.items():
        if name in names:
            return provider
    return None
# the runtime's tool name -> podium's name, for the `tool_called` events
_BACK: dict[str, dict[str, str]] = {
    p: {rt: name for name, rts in reversed(m.items()) for rt in rts}
    for p, m in RUNTIME_TOOLS.items()}


def podium_tool_name(provider: str, runtime_tool: str) -> str:
    """The workspace tool name a runtime tool corresponds to, or the runtime's own name."""
    return _BACK.get(provider, {}).get(runtime_tool, runtime_tool)


def tool_problem(provider: str, name: str, servers: list[str]) -> str | None:
    """Why `tools:` entry `name` cannot be honoured by runtime `provider` (None when it can).
    Unknown names are reported by the generic tool check; this is what a runtime adds."""
    if name in RUNTIME_TOOLS.get(provider, {}):
        return None
    server, sep, tool = name.partition("__")
    if sep and server in servers and provider == "hermes":
        return f"provider 'hermes' cannot use MCP servers, so not '{name}'"
    if sep and server in servers and provider == "claude-agent-sdk" and tool != "*":
        return (f"provider 'claude-agent-sdk' offers an MCP server's tools all together: use "
                f"'{server}__*', not '{name}'")
    return None
