"""`provider: copilot`: the GitHub Copilot CLI, driven by the official Python SDK
(github-copilot-sdk) over JSON-RPC.

One CLI process per run (started on first use, reused by every agent), or an existing runtime
(`runtime_url`); each agent execution is one runtime session, and `send` is one user message
answered by the runtime's own agent loop with its own tools. Custom endpoints (bring your own
key) come from the provider object (`type`, `wire_api`, `base_url`, `api_key`/`api_key_env`,
`bearer_token`, `headers`, `azure.api_version`) or the COPILOT_PROVIDER_* variables; then the
CLI runs offline (COPILOT_OFFLINE): no GitHub, no telemetry, only the endpoint. Without a custom
endpoint the CLI uses its own GitHub sign-in.

`tools:` is enforced (Conductor ignored it for Copilot): `[]` gives the session no tool at all,
a list gives only the runtime tools that correspond to the workspace tool names, the named
MCP tools and the runtime's own tools named directly (`web_search`), omitted leaves the
runtime's defaults. `context_tier`, the `skills:` and `plugins:` folders and
`runtime.tool_output` (the runtime's large-output setting) are passed to the session. Structured output is asked for in the prompt
and corrected in the same session; `session_key` continues one runtime session per (key,
working dir), across `podium resume` too. Sessions stream: the runtime's message, reasoning and
tool-call delta events go out as coalesced `model_delta` events, and the last model call's
tokens are the context gauge. The SDK is imported only when an agent uses this provider.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Mapping
from dataclasses import field
from typing import TYPE_CHECKING, Any

from podium.providers.base import AgentRequest, ProviderError, Reply, TokenUsage
from podium.providers.catalog import COPILOT_CAPABILITIES, COPILOT_TOOLS, RUNTIME_OWN_TOOLS
from podium.providers.loop import DeltaStream
from podium.providers.retry import status_is_retryable
from podium.providers.runtime_common import (
    COPILOT_CLI,
    COPILOT_OFFLINE_ENV,
    COPILOT_QUIET_ENV,
    LoopThread,
    RuntimeMissing,
    clip,
    copilot_login_missing,
    find_cli,
    install_hint,
    podium_home,
    session_table,
    time_left,
)
from podium.providers.settings import PLACEHOLDER_KEY, ProviderSettings
from podium.providers.stream_deltas import copilot_delta
from podium.records import record

if TYPE_CHECKING:
    from podium.providers.runtime_common import SessionTable

CAPABILITIES = COPILOT_CAPABILITIES
START_SECONDS = 60.0
MCP_SEP = "__"


@record(frozen=True)
class CopilotConfig:
    """How to reach the runtime and the model endpoint (resolved once per run)."""

    cli_path: str | None = None  # None with runtime_url
    runtime_url: str | None = None
    runtime_token: str | None = None
    endpoint: dict[str, Any] | None = None  # the SDK's ProviderConfig (BYOK), or None
    environ: Mapping[str, str] = field(default_factory=dict, repr=False)
    mcp_servers: Mapping[str, Any] = field(default_factory=dict, repr=False)
    home: str | None = None  # COPILOT_HOME for the CLI (BYOK runs keep it under PODIUM_HOME)
    large_output: dict[str, Any] | None = None  # runtime.tool_output as the SDK takes it


def large_output(cfg: Any) -> dict[str, Any] | None:
    """`runtime.tool_output` as the SDK's large-output setting, as Conductor maps it: the
    runtime writes results over max_chars to a file (spill_dir, else its temp folder) and
    gives the model the file; it cannot cut without spilling, so `spill_to_file: false`
    (like `enabled: false`) turns the limit off. None: not written, the runtime's default."""
    if cfg is None:
        return None
    if not cfg.enabled or not cfg.spill_to_file:
        return {"enabled": False}
    out: dict[str, Any] = {"enabled": True, "max_size_bytes": cfg.max_chars}
    if cfg.spill_dir and cfg.spill_dir.strip():
        out["output_directory"] = os.path.abspath(os.path.expanduser(cfg.spill_dir.strip()))
    return out


def _blank(value: Any) -> bool:
    return isinstance(value, str) and not value.strip()


def resolve_config(settings: ProviderSettings) -> CopilotConfig:
    """The runtime configuration from the provider object, then COPILOT_PROVIDER_* variables
    (spec 2.6). Raises ProviderError for a configuration that cannot work."""
    opts = dict(settings.options)
    env = settings.environ
    for key in ("api_key", "bearer_token", "runtime_url", "runtime_token", "base_url"):
        if _blank(opts.get(key)):
            raise ProviderError(f"provider 'copilot': runtime.provider.{key} is empty")
    runtime_url = opts.get("runtime_url") or settings.env("COPILOT_PROVIDER_RUNTIME_URL")
    runtime_token = opts.get("runtime_token") or settings.env("COPILOT_PROVIDER_RUNTIME_TOKEN")
    routing_in_yaml = any(opts.get(k) for k in ("type", "wire_api", "bearer_token", "headers",
                                                 "azure", "base_url", "api_key", "api_key_env"))
    base_url = settings.base_url or settings.env("COPILOT_PROVIDER_BASE_URL")
    if base_url is None and routing_in_yaml:
        base_url = settings.env("OPENAI_BASE_URL")
    endpoint: dict[str, Any] | None = None
    if base_url:
        kind = opts.get("type") or settings.env("COPILOT_PROVIDER_TYPE") or "openai"
        endpoint = {"type": kind, "base_url": base_url}
        wire = opts.get("wire_api") or settings.env("COPILOT_PROVIDER_WIRE_API")
        if wire:
            endpoint["wire_api"] = wire
        bearer = opts.get("bearer_token") or settings.env("COPILOT_PROVIDER_BEARER_TOKEN")
        api_key = settings.api_key or settings.env("COPILOT_PROVIDER_API_KEY")
        if bearer:
            endpoint["bearer_token"] = bearer
        endpoint["api_key"] = api_key or PLACEHOLDER_KEY
        if settings.headers:
            endpoint["headers"] = dict(settings.headers)
        azure = opts.get("azure") or {}
        version: str | None = (azure.get("api_version") if isinstance(azure, dict)
                               else None) or settings.env("COPILOT_PROVIDER_AZURE_API_VERSION")
        if kind == "azure" and version:
            endpoint["azure"] = {"api_version": version}
    elif routing_in_yaml:
        raise ProviderError("provider 'copilot': the provider object sets a custom endpoint "
                            "field but no base_url (set runtime.provider.base_url, or "
                            "COPILOT_PROVIDER_BASE_URL)")
    cli_path = None
    if not runtime_url:
        try:
            cli_path = find_cli(COPILOT_CLI, env)
        except RuntimeMissing as exc:
            raise ProviderError(str(exc)) from None
        login = None if endpoint is not None else copilot_login_missing(env)
        if login is not None:  # the runtime would start, then fail at its first call
            raise ProviderError(login)
    home = str(podium_home(env) / "copilot") if endpoint is not None else None
    return CopilotConfig(cli_path, runtime_url, runtime_token, endpoint, env,
                         settings.mcp_servers, home, large_output(settings.tool_output))


def mcp_config(servers: Mapping[str, Any], working_dir: str | None,
               wanted: dict[str, list[str]] | None) -> dict[str, Any]:
    """The workflow's MCP servers in the SDK's form; `wanted` limits servers and their tools
    (None: every server, every tool)."""
    out: dict[str, Any] = {}
    for name, cfg in servers.items():
        if wanted is not None and name not in wanted:
            continue
        tools = ["*"] if wanted is None else wanted[name]
        own = list(getattr(cfg, "tools", None) or ["*"])
        if own != ["*"]:
            tools = own if tools == ["*"] else [t for t in tools if t in own]
        timeout = getattr(cfg, "timeout", None)
        if getattr(cfg, "type", "stdio") == "stdio":
            entry: dict[str, Any] = {"type": "stdio", "command": cfg.command,
                                     "args": list(cfg.args), "tools": tools}
            if cfg.env:
                entry["env"] = {k: os.path.expandvars(v) for k, v in cfg.env.items()}
            if working_dir:
                entry["working_directory"] = working_dir
        else:
            entry = {"type": cfg.type, "url": cfg.url, "tools": tools}
            if cfg.headers:
                entry["headers"] = dict(cfg.headers)
        if timeout:
            entry["timeout"] = int(timeout)
        out[name] = entry
    return out


def tool_selection(names: tuple[str, ...] | None, servers: Mapping[str, Any]
                   ) -> tuple[list[str] | None, dict[str, list[str]] | None]:
    """(available_tools for the session, MCP servers and tools to start) for `tools:`."""
    if names is None:
        return None, None
    available: list[str] = []
    wanted: dict[str, list[str]] = {}
    for name in names:
        if name in COPILOT_TOOLS:
            available += [f"builtin:{t}" for t in COPILOT_TOOLS[name]]
            continue
        server, sep, tool = name.partition(MCP_SEP)
        if sep and server in servers:
            wanted.setdefault(server, [])
            if "*" not in wanted[server]:
                wanted[server] = ["*"] if tool == "*" else [*wanted[server], tool]
            continue
        if sep:
            raise ProviderError(f"provider 'copilot' has no tool for '{name}': no MCP server "
                                f"'{server}' is declared")
        # a tool of the runtime's own (`web_search`): the runtime offers it when it has it
        available.append(f"builtin:{name}" if name in RUNTIME_OWN_TOOLS["copilot"] else name)
    if wanted:
        available.append("mcp:*")  # the servers started are limited to the named tools
    return list(dict.fromkeys(available)), wanted


@record
class _Turn:
    """What one `send` collects from the session's events; `deltas` streams its output."""

    deltas: DeltaStream
    usage: list[Any] = field(default_factory=list)
    errors: list[Any] = field(default_factory=list)
    started: dict[str, tuple[float, Any]] = field(default_factory=dict)


class CopilotSession:
    """One runtime session (one conversation); it keeps its history between sends."""

    def __init__(self, provider: CopilotProvider, request: AgentRequest, sdk_session: Any,
                 keyed: bool) -> None:
        self.provider = provider
        self.request = request
        self.sdk = sdk_session
        self.keyed = keyed
        self.turn: _Turn | None = None
        self.deadline = (time.monotonic() + request.timeout) if request.timeout else None
        self.closed = False

    @property
    def session_id(self) -> str:
        return str(self.sdk.session_id)

    # ------------------------------------------------------------------ events

    def on_event(self, event: Any) -> None:
        """Runs on the provider's loop for every event of the session."""
        turn = self.turn
        if turn is None or getattr(event, "agent_id", None):
            return
        kind = getattr(getattr(event, "type", None), "value", "")
        data = event.data
        if copilot_delta(kind, data, turn.deltas):
            return
        if kind == "assistant.message":
            turn.deltas.flush()  # the streamed call is over: its tools run next
        if kind == "assistant.usage":
            turn.usage.append(data)
        elif kind == "session.error":
            turn.errors.append(data)
        elif kind == "tool.execution_start":
            turn.started[data.tool_call_id] = (time.monotonic(), data)
        elif kind == "tool.execution_complete":
            began, start = turn.started.pop(data.tool_call_id, (time.monotonic(), None))
            self._emit_tool(start, data, time.monotonic() - began)

    def _emit_tool(self, start: Any, done: Any, elapsed: float) -> None:
        emit = self.request.emit
        if emit is None:
            return
        from podium.events.model import ToolCalled

        name = getattr(start, "tool_name", None) or "tool"
        server = getattr(start, "mcp_server_name", None)
        args = getattr(start, "arguments", None)
        if not isinstance(args, dict):
            args = {} if args is None else {"_raw": args}
        if done.success:
            output = done.result.content if done.result is not None else ""
        else:
            output = done.error.message if done.error is not None else "failed"
        emit(ToolCalled(step=self.request.step, iteration=self.request.iteration, tool=name,
                        source=f"mcp:{server}" if server else "copilot", arguments=clip(args),
                        output=clip(output or ""), is_error=not done.success, elapsed=elapsed))

    # ------------------------------------------------------------------ send

    def send(self, message: str) -> Reply:
        left = time_left(self.request.timeout, self.deadline)
        self.turn = _Turn(DeltaStream(self.request))
        try:
            event = self.provider.loop.run(self._send(message, left))
        finally:
            turn, self.turn = self.turn, None
        usage = _usage(turn.usage)
        if turn.errors and event is None:
            raise _session_error(turn.errors[-1], usage)
        text = getattr(getattr(event, "data", None), "content", None) or ""
        return Reply(text, None, usage.input_tokens, usage.output_tokens, usage.cached_tokens,
                     usage.model or self.request.model,
                     {"session_id": self.session_id, "api_calls": len(turn.usage),
                      "runtime": "copilot", "context_tokens": _context(turn.usage),
                      "stop": _finish(turn.usage)},
                     usage.cache_write_tokens)

    async def _send(self, message: str, timeout: float) -> Any:
        try:
            return await self.sdk.send_and_wait(message, timeout=timeout)
        except TimeoutError:
            with contextlib.suppress(Exception):
                await self.sdk.abort()
            raise ProviderError(f"copilot: no answer within {timeout:g}s (the agent's "
                                "timeout)", category="timeout") from None
        except ProviderError:
            raise
        except Exception as exc:
            turn = self.turn
            if turn is not None and turn.errors:
                raise _session_error(turn.errors[-1], _usage(turn.usage)) from None
            raise ProviderError(f"copilot: {exc}", retryable=_transient(str(exc))) from None
        finally:
            if self.turn is not None:  # the last pieces, on the loop that streamed them
                self.turn.deltas.flush()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if not self.keyed:
            self.provider.discard(self)


def _transient(message: str) -> bool:
    low = message.lower()
    return any(w in low for w in ("timeout", "timed out", "connection", "econnrefused",
                                  "socket", "temporarily"))


def _usage(events: list[Any]) -> TokenUsage:
    inp = out = read = write = 0
    model = None
    for u in events:
        inp += u.input_tokens or 0
        out += u.output_tokens or 0
        read += u.cache_read_tokens or 0
        write += u.cache_write_tokens or 0
        model = u.model or model
    return TokenUsage(inp, out, read, write, model)


def _finish(usage: list[Any]) -> str | None:
    """Why the turn's last API call stopped (its usage record's finish reason)."""
    for data in reversed(usage):
        reason = getattr(data, "finish_reason", None)
        if isinstance(reason, str) and reason:
            return reason
    return None


def _context(events: list[Any]) -> int | None:
    """The context gauge: the tokens the last model call used (its input and output)."""
    if not events:
        return None
    return (events[-1].input_tokens or 0) + (events[-1].output_tokens or 0)


def _session_error(data: Any, spent: TokenUsage) -> ProviderError:
    status = getattr(data, "status_code", None)
    message = getattr(data, "message", None) or "the session failed"
    text = f"copilot: HTTP {status}: {message}" if status else f"copilot: {message}"
    retryable = status_is_retryable(status) if status else _transient(message)
    return ProviderError(text, retryable=retryable, status=status,
                         category="timeout" if status == 408 else "provider_error",
                         spent=[spent] if spent.input_tokens or spent.output_tokens else None)


class CopilotProvider:
    """One Copilot runtime for the run; a runtime session per agent execution (or per
    session_key)."""

    name = "copilot"
    capabilities = CAPABILITIES

    def __init__(self, config: CopilotConfig, table: SessionTable | None = None) -> None:
        self.config = config
        self.table = table if table is not None else session_table(config.environ)
        self.loop = LoopThread("podium-copilot")
        self.client: Any = None
        self.keyed: dict[str, CopilotSession] = {}
        self.open: set[CopilotSession] = set()
        self._stderr = ""

    # ------------------------------------------------------------------ the runtime

    def _client_env(self) -> dict[str, str]:
        env = dict(self.config.environ)
        env.update(COPILOT_QUIET_ENV)
        env.setdefault("COPILOT_SKIP_CLI_DOWNLOAD", "1")
        endpoint = self.config.endpoint
        if endpoint is not None:
            env.update(COPILOT_OFFLINE_ENV)
            env["COPILOT_PROVIDER_BASE_URL"] = endpoint["base_url"]
            env["COPILOT_PROVIDER_TYPE"] = endpoint["type"]
            env.setdefault("COPILOT_MODEL", "podium-default")  # each session names its own
        return env

    async def _start(self) -> Any:
        from copilot import CopilotClient, RuntimeConnection

        cfg = self.config
        if cfg.runtime_url:
            client = CopilotClient(connection=RuntimeConnection.for_uri(
                cfg.runtime_url, connection_token=cfg.runtime_token))
        else:
            assert cfg.cli_path is not None
            client = CopilotClient(
                connection=RuntimeConnection.for_stdio(path=cfg.cli_path),
                env=self._client_env(), base_directory=cfg.home, log_level="error",
                use_logged_in_user=cfg.endpoint is None)
        try:
            await client.start()
        except BaseException:
            procs = _processes(client)
            with contextlib.suppress(Exception):
                await client.force_stop()
            _reap(procs)
            raise
        return client

    def _ensure_client(self) -> Any:
        if self.client is not None:
            return self.client
        what = (f"the Copilot runtime at {self.config.runtime_url}" if self.config.runtime_url
                else f"the Copilot CLI ({self.config.cli_path})")
        try:
            self.client = self.loop.run(self._start(), START_SECONDS)
        except TimeoutError:
            raise ProviderError(f"provider 'copilot': {what} did not start within "
                                f"{START_SECONDS:g}s") from None
        except Exception as exc:
            detail = " ".join(str(exc).split())[:800]
            hint = "" if self.config.runtime_url else f"; {install_hint(COPILOT_CLI)}"
            raise ProviderError(f"provider 'copilot': {what} failed to start: {detail}{hint}",
                                retryable=bool(self.config.runtime_url)) from None
        return self.client

    # ------------------------------------------------------------------ sessions

    def open_session(self, request: AgentRequest) -> CopilotSession:
        if not request.model and self.config.endpoint is not None:
            raise ProviderError(f"agent '{request.step}' has no model: set its `model:` or "
                                "runtime.default_model (a custom endpoint needs one)")
        key = None
        if request.session_key:
            key = self.table.key(request.run_id, self.name, request.session_key,
                                 request.working_dir)
            live = self.keyed.get(key)
            if live is not None:
                live.request = request
                live.deadline = (time.monotonic() + request.timeout) if request.timeout \
                    else None
                live.closed = False
                return live
        client = self._ensure_client()
        holder: list[CopilotSession] = []

        def on_event(event: Any) -> None:
            if holder:
                holder[0].on_event(event)

        kwargs = self._session_kwargs(request, on_event)
        previous = self.table.get(key) if key else None
        try:
            sdk = None
            if previous:
                with contextlib.suppress(Exception):
                    sdk = self.loop.run(client.resume_session(previous, **kwargs), START_SECONDS)
                if sdk is None and request.emit is not None:
                    from podium.events.model import Warning_

                    request.emit(Warning_(step=request.step, message=(
                        f"session_key '{request.session_key}': the Copilot session {previous} "
                        "could not be resumed; a fresh session starts")))
            if sdk is None:
                sdk = self.loop.run(client.create_session(**kwargs), START_SECONDS)
        except TimeoutError:
            raise ProviderError("copilot: the runtime did not open a session within "
                                f"{START_SECONDS:g}s", retryable=True) from None
        except ProviderError:
            raise
        except Exception as exc:
            raise ProviderError(f"copilot: cannot open a session: {exc}") from None
        session = CopilotSession(self, request, sdk, keyed=key is not None)
        holder.append(session)
        if key is not None:
            self.keyed[key] = session
            self.table.put(key, session.session_id)
        else:
            self.open.add(session)
        return session

    def _session_kwargs(self, request: AgentRequest, on_event: Any) -> dict[str, Any]:
        from copilot.session import PermissionHandler

        kwargs: dict[str, Any] = {
            "on_permission_request": PermissionHandler.approve_all,
            "working_directory": request.working_dir or os.getcwd(),
            "on_event": on_event,
            "streaming": True,  # delta events, as model_delta (the wire streams too)
        }
        if request.model:
            kwargs["model"] = request.model
        if self.config.endpoint is not None:
            kwargs["provider"] = dict(self.config.endpoint)
        if request.reasoning_effort:
            kwargs["reasoning_effort"] = request.reasoning_effort
        if request.system_prompt:
            kwargs["system_message"] = {"mode": "append", "content": request.system_prompt}
        names = _effective_tools(request)
        available, wanted = tool_selection(names, self.config.mcp_servers)
        if available is not None:
            kwargs["available_tools"] = available
        servers = mcp_config(self.config.mcp_servers, request.working_dir, wanted)
        if servers:
            kwargs["mcp_servers"] = servers
        if request.context_tier:
            kwargs["context_tier"] = request.context_tier
        if request.skill_dirs is not None:
            kwargs["skill_directories"] = list(request.skill_dirs)
            if not request.skill_dirs and not request.plugin_dirs:
                kwargs["enable_skills"] = False  # `skills: []`: none, not even installed ones
        if request.plugin_dirs is not None:
            kwargs["plugin_directories"] = list(request.plugin_dirs)
        if self.config.large_output is not None:
            kwargs["large_output"] = dict(self.config.large_output)
        return kwargs

    def discard(self, session: CopilotSession) -> None:
        self.open.discard(session)
        with contextlib.suppress(Exception):
            self.loop.run(session.sdk.disconnect(), 15)

    def close(self) -> None:
        for session in [*self.open, *self.keyed.values()]:
            with contextlib.suppress(Exception):
                self.loop.run(session.sdk.disconnect(), 15)
        self.open.clear()
        self.keyed.clear()
        if self.client is not None:
            procs = _processes(self.client)
            with contextlib.suppress(Exception):
                self.loop.run(self.client.stop(), 20)
            _reap(procs)
            self.client = None
        self.loop.close()


def _processes(client: Any) -> list[Any]:
    """The CLI process the SDK started (taken before `stop`, which forgets it)."""
    procs = {id(p): p for p in (getattr(client, "_cli_process", None),
                                getattr(client, "_process", None)) if p is not None}
    return list(procs.values())


def _reap(procs: list[Any]) -> None:
    """Wait for the CLI processes and close their pipes (the SDK leaves them open, and an
    unreaped child stays a zombie until podium exits)."""
    for proc in procs:
        try:
            proc.wait(10)
        except Exception:
            with contextlib.suppress(Exception):
                proc.kill()
                proc.wait(5)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                with contextlib.suppress(Exception):
                    stream.close()


def _effective_tools(request: AgentRequest) -> tuple[str, ...] | None:
    """The agent's `tools:` with the workflow's root list applied when it is omitted (when
    the engine supplies it as `effective_tools`)."""
    effective = getattr(request, "effective_tools", None)
    if effective is not None:
        return tuple(effective)
    return request.tools


def create_copilot(settings: ProviderSettings) -> CopilotProvider:
    return CopilotProvider(resolve_config(settings))
