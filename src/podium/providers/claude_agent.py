"""`provider: claude-agent-sdk`: the Claude Code CLI, driven by the official claude-agent-sdk.

Each agent execution is one Claude Code session (one CLI process, kept for the whole
execution so corrections continue the same conversation); `send` is one user message
answered by Claude Code's own agent loop with its own tools. The endpoint comes from the
provider object (`base_url`, `api_key`/`api_key_env`, `auth_token`, `headers`) or the
ANTHROPIC_BASE_URL / ANTHROPIC_API_KEY / ANTHROPIC_AUTH_TOKEN variables; the CLI runs with its
non-essential traffic, telemetry, error reports and auto-updater off, and its own retries off
(podium's retry policy decides).

`tools:` is enforced: `[]` gives the session no tool at all (built-in or MCP), a list the
Claude Code tools that correspond to the workspace tool names, Claude Code tools named directly
(`WebSearch`) and whole MCP servers (`<server>__*`), omitted Claude Code's defaults and every declared MCP server. The workflow's
MCP servers are passed through (only them: `strict_mcp_config`). `skills:` folders are loaded
through a plugin made for them and `plugins:` folders as plugins (skill_options). Reasoning effort is Claude
Code's `effort`; structured output is asked for in the prompt and corrected in the same
session; `session_key` continues one Claude Code session per (key, working dir), across
`podium resume` too (Claude Code keeps the transcript). Claude Code's partial messages (the raw
Messages stream events) go out as coalesced `model_delta` events, and the last model call's
tokens are the context gauge. The SDK is imported only when an agent uses this provider.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import time
from collections.abc import Mapping
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from podium.providers.base import AgentRequest, ProviderError, Reply, TokenUsage
from podium.providers.catalog import CLAUDE_AGENT_CAPABILITIES, CLAUDE_TOOLS
from podium.providers.loop import DeltaStream
from podium.providers.retry import status_is_retryable
from podium.providers.runtime_common import (
    CLAUDE_CLI,
    CLAUDE_QUIET_ENV,
    LoopThread,
    RuntimeMissing,
    claude_login_missing,
    clip,
    find_cli,
    install_hint,
    session_table,
    time_left,
)
from podium.providers.settings import ProviderSettings
from podium.providers.stream_deltas import anthropic_delta, anthropic_usage
from podium.records import record

if TYPE_CHECKING:
    from podium.providers.runtime_common import SessionTable

CAPABILITIES = CLAUDE_AGENT_CAPABILITIES
START_SECONDS = 60.0
MCP_SEP = "__"


def bundled_cli() -> Path | None:
    """The Claude Code binary the claude-agent-sdk wheel ships, found without importing it."""
    spec = importlib.util.find_spec("claude_agent_sdk")
    if spec is None or not spec.origin:
        return None
    return Path(spec.origin).parent / "_bundled" / "claude"


@record(frozen=True)
class ClaudeAgentConfig:
    cli_path: str
    env: dict[str, str] = field(default_factory=dict, repr=False)  # added to the CLI's
    mcp_servers: Mapping[str, Any] = field(default_factory=dict, repr=False)


def resolve_config(settings: ProviderSettings) -> ClaudeAgentConfig:
    env: dict[str, str] = dict(CLAUDE_QUIET_ENV)
    base_url = settings.base_url or settings.env("ANTHROPIC_BASE_URL")
    key = settings.api_key or settings.env("ANTHROPIC_API_KEY")
    token = settings.auth_token or settings.env("ANTHROPIC_AUTH_TOKEN")
    if base_url:
        env["ANTHROPIC_BASE_URL"] = base_url
    if key:
        env["ANTHROPIC_API_KEY"] = key
    if token:
        env["ANTHROPIC_AUTH_TOKEN"] = token
    if settings.headers:
        env["ANTHROPIC_CUSTOM_HEADERS"] = "\n".join(f"{k}: {v}"
                                                    for k, v in settings.headers.items())
    if settings.timeout:
        env["API_TIMEOUT_MS"] = str(int(settings.timeout * 1000))
    try:
        cli = find_cli(CLAUDE_CLI, settings.environ, bundled_cli())
    except RuntimeMissing as exc:
        raise ProviderError(str(exc)) from None
    login = claude_login_missing(settings.environ, bool(base_url or key or token))
    if login is not None:  # Claude Code would start, then fail at its first call
        raise ProviderError(login)
    return ClaudeAgentConfig(cli, env, settings.mcp_servers)


def tool_selection(names: tuple[str, ...] | None, servers: Mapping[str, Any]
                   ) -> tuple[list[str] | None, list[str] | None]:
    """(Claude Code's built-in `tools`, the MCP servers to pass) for `tools:`; None: the
    defaults (every built-in tool, every declared server)."""
    if names is None:
        return None, None
    builtin: list[str] = []
    chosen: list[str] = []
    for name in names:
        if name in CLAUDE_TOOLS:
            builtin += CLAUDE_TOOLS[name]
            continue
        server, sep, tool = name.partition(MCP_SEP)
        if sep and server in servers and tool == "*":
            chosen.append(server)
            continue
        if sep and server in servers:
            raise ProviderError(f"provider 'claude-agent-sdk' offers an MCP server's tools all "
                                f"together: use '{server}__*', not '{name}'")
        if sep:
            raise ProviderError(f"provider 'claude-agent-sdk' has no tool for '{name}': no MCP "
                                f"server '{server}' is declared")
        builtin.append(name)  # a Claude Code tool named directly (`WebSearch`)
    return list(dict.fromkeys(builtin)), list(dict.fromkeys(chosen))


def mcp_config(servers: Mapping[str, Any], chosen: list[str] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, cfg in servers.items():
        if chosen is not None and name not in chosen:
            continue
        if getattr(cfg, "type", "stdio") == "stdio":
            entry: dict[str, Any] = {"type": "stdio", "command": cfg.command,
                                     "args": list(cfg.args)}
            if cfg.env:
                entry["env"] = {k: os.path.expandvars(v) for k, v in cfg.env.items()}
        else:
            entry = {"type": cfg.type, "url": cfg.url}
            if cfg.headers:
                entry["headers"] = dict(cfg.headers)
        out[name] = entry
    return out


class _Stream:
    """The raw stream events of a turn's top-level model calls: their pieces go out as
    `model_delta` events, and the last call's tokens are kept (the context gauge)."""

    def __init__(self, request: AgentRequest) -> None:
        self.deltas = DeltaStream(request)
        self.tools: dict[int, str] = {}  # content block index -> tool name
        self.used: list[int] = []  # [input, output] tokens of the last call

    def feed(self, msg: Any) -> None:
        if msg.parent_tool_use_id is not None:  # a subagent's call
            return
        anthropic_delta(msg.event, self.tools, self.deltas)
        anthropic_usage(msg.event, self.used)


@record
class _Result:
    text: str
    usage: TokenUsage
    session_id: str | None
    turns: int
    raw: dict[str, Any]


class _Actor:
    """One Claude Code session: a task on the provider's loop owns the SDK client from connect
    to disconnect (its task group must stay in one task) and runs the sends it is given."""

    def __init__(self, session: ClaudeAgentSession, options: Any) -> None:
        self.session = session
        self.options = options
        self.queue: asyncio.Queue[tuple[str, str, asyncio.Future[Any]]] = asyncio.Queue()
        self.ready: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.task = asyncio.get_running_loop().create_task(self.main())

    async def main(self) -> None:
        from claude_agent_sdk import ClaudeSDKClient

        try:
            async with ClaudeSDKClient(self.options) as client:
                self.ready.set_result(None)
                while True:
                    command, message, done = await self.queue.get()
                    if command == "close":
                        done.set_result(None)
                        return
                    try:
                        done.set_result(await self.session.turn(client, message))
                    except BaseException as exc:  # handed to the caller
                        if not done.done():
                            done.set_exception(exc)
                        if isinstance(exc, asyncio.CancelledError):
                            raise
        except BaseException as exc:
            if not self.ready.done():
                self.ready.set_exception(exc if isinstance(exc, Exception)
                                         else RuntimeError(str(exc)))
            while not self.queue.empty():
                _, _, done = self.queue.get_nowait()
                if not done.done():
                    done.set_exception(RuntimeError("the Claude Code session ended"))
            if not isinstance(exc, Exception):
                raise

    async def call(self, command: str, message: str = "") -> Any:
        if self.task.done():
            raise ProviderError("claude-agent-sdk: the Claude Code session has ended")
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        await self.queue.put((command, message, done))
        return await done


class ClaudeAgentSession:
    """One Claude Code session; it keeps its history between sends."""

    def __init__(self, provider: ClaudeAgentProvider, request: AgentRequest, keyed: bool
                 ) -> None:
        self.provider = provider
        self.request = request
        self.keyed = keyed
        self.session_id: str | None = None
        self.deadline = (time.monotonic() + request.timeout) if request.timeout else None
        self.actor: _Actor | None = None
        self.stderr: list[str] = []
        self.closed = False

    # ------------------------------------------------------------------ options

    def options(self, resume: str | None) -> Any:
        from claude_agent_sdk import ClaudeAgentOptions, PermissionResultAllow

        req = self.request
        cfg = self.provider.config

        async def allow(name: str, args: dict[str, Any], ctx: Any) -> Any:
            return PermissionResultAllow()

        def keep_stderr(line: str) -> None:
            self.stderr = [*self.stderr[-40:], line]

        builtin, chosen = tool_selection(_effective_tools(req), cfg.mcp_servers)
        system: dict[str, Any] = {"type": "preset", "preset": "claude_code"}
        if req.system_prompt:
            system["append"] = req.system_prompt
        kwargs: dict[str, Any] = {
            "cli_path": cfg.cli_path, "cwd": req.working_dir or os.getcwd(),
            "env": dict(cfg.env), "can_use_tool": allow, "stderr": keep_stderr,
            "system_prompt": system, "strict_mcp_config": True,
            "mcp_servers": mcp_config(cfg.mcp_servers, chosen),
            "include_partial_messages": True,  # stream events, as model_delta
        }
        if builtin is not None:
            kwargs["tools"] = builtin
        if req.model:
            kwargs["model"] = req.model
        if req.reasoning_effort:
            kwargs["effort"] = req.reasoning_effort
        if req.max_agent_iterations:
            kwargs["max_turns"] = req.max_agent_iterations
        if resume:
            kwargs["resume"] = resume
        kwargs.update(self.provider.skill_options(req))
        return ClaudeAgentOptions(**kwargs)

    async def start(self, resume: str | None) -> None:
        self.actor = _Actor(self, self.options(resume))
        await asyncio.wait_for(asyncio.shield(self.actor.ready), START_SECONDS)

    # ------------------------------------------------------------------ a turn

    async def turn(self, client: Any, message: str) -> _Result:
        from claude_agent_sdk import (
            AssistantMessage,
            ResultMessage,
            StreamEvent,
            SystemMessage,
            TextBlock,
            ToolResultBlock,
            ToolUseBlock,
            UserMessage,
        )

        await client.query(message)
        texts: list[str] = []
        model = None
        started: dict[str, tuple[float, Any]] = {}
        result = None
        stream = _Stream(self.request)
        async for msg in client.receive_response():
            if isinstance(msg, StreamEvent):
                stream.feed(msg)
            elif isinstance(msg, SystemMessage) and msg.subtype == "init":
                self.session_id = msg.data.get("session_id") or self.session_id
            elif isinstance(msg, AssistantMessage) and msg.parent_tool_use_id is None:
                stream.deltas.flush()  # the streamed call is over: its tools run next
                model = msg.model or model
                texts = [b.text for b in msg.content if isinstance(b, TextBlock)] or texts
                for block in msg.content:
                    if isinstance(block, ToolUseBlock):
                        started[block.id] = (time.monotonic(), block)
            elif isinstance(msg, UserMessage) and isinstance(msg.content, list):
                for block in msg.content:
                    if isinstance(block, ToolResultBlock) and block.tool_use_id in started:
                        began, use = started.pop(block.tool_use_id)
                        self._emit_tool(use, block, time.monotonic() - began)
            elif isinstance(msg, ResultMessage):
                result = msg
        stream.deltas.flush()
        return self._outcome(result, model, texts, stream.used)

    def _outcome(self, result: Any, model: str | None, texts: list[str], used: list[int]
                 ) -> _Result:
        """The turn's answer from Claude Code's result message (raises when it failed)."""
        if result is None:
            raise ProviderError("claude-agent-sdk: Claude Code ended the turn without a result")
        self.session_id = result.session_id or self.session_id
        usage = _usage(result, model)
        if result.is_error:
            status = result.api_error_status
            detail = result.result or "; ".join(result.errors or []) or result.subtype
            text = f"claude-agent-sdk: HTTP {status}: {detail}" if status else \
                f"claude-agent-sdk: {detail}"
            raise ProviderError(text, retryable=status_is_retryable(status), status=status,
                                spent=[usage] if usage.input_tokens or usage.output_tokens
                                else None)
        final = result.result if result.result is not None else "".join(texts)
        return _Result(final, usage, self.session_id, result.num_turns,
                       {"session_id": self.session_id, "turns": result.num_turns,
                        "runtime": "claude-agent-sdk",
                        "reported_cost_usd": result.total_cost_usd,
                        "context_tokens": sum(used) if used else None,
                        "stop": getattr(result, "stop_reason", None)})

    def _emit_tool(self, use: Any, result: Any, elapsed: float) -> None:
        emit = self.request.emit
        if emit is None:
            return
        from podium.events.model import ToolCalled

        content = result.content
        if isinstance(content, list):
            content = "\n".join(str(c.get("text", c)) if isinstance(c, dict) else str(c)
                                for c in content)
        name = str(use.name)
        source = "claude-agent-sdk"
        if name.startswith("mcp__"):
            source = "mcp:" + name.split("__")[1]
        emit(ToolCalled(step=self.request.step, iteration=self.request.iteration, tool=name,
                        source=source, arguments=clip(dict(use.input or {})),
                        output=clip(str(content or "")), is_error=bool(result.is_error),
                        elapsed=elapsed))

    # ------------------------------------------------------------------ the Session protocol

    def send(self, message: str) -> Reply:
        left = time_left(self.request.timeout, self.deadline)
        assert self.actor is not None
        try:
            res: _Result = self.provider.loop.run(self._send(message, left))
        except ProviderError:
            raise
        except Exception as exc:
            raise ProviderError(f"claude-agent-sdk: {exc}{self._stderr_tail()}") from None
        if self.keyed and res.session_id:
            self.provider.remember(self, res.session_id)
        u = res.usage
        return Reply(res.text, None, u.input_tokens, u.output_tokens, u.cached_tokens,
                     u.model or self.request.model, res.raw, u.cache_write_tokens)

    async def _send(self, message: str, timeout: float) -> _Result:
        assert self.actor is not None
        try:
            result: _Result = await asyncio.wait_for(self.actor.call("send", message), timeout)
        except TimeoutError:
            raise ProviderError(f"claude-agent-sdk: no answer within {timeout:g}s (the agent's "
                                "timeout)", category="timeout") from None
        return result

    def _stderr_tail(self) -> str:
        lines = [ln.strip() for ln in self.stderr if ln.strip()]
        return (" (Claude Code said: " + " | ".join(lines[-5:])[:800] + ")") if lines else ""

    def shutdown(self) -> None:
        actor = self.actor
        self.actor = None
        if actor is None:
            return

        async def stop() -> None:
            if not actor.task.done():
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(actor.call("close"), 15)
            # the actor now leaves `async with`, which disconnects the CLI: let it finish
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(actor.task), 20)
            if not actor.task.done():
                actor.task.cancel()
                with contextlib.suppress(BaseException):
                    await actor.task

        with contextlib.suppress(Exception):
            self.provider.loop.run(stop(), 30)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if not self.keyed:
            self.provider.discard(self)


def _usage(result: Any, model: str | None) -> TokenUsage:
    u = result.usage or {}
    read = int(u.get("cache_read_input_tokens") or 0)
    write = int(u.get("cache_creation_input_tokens") or 0)
    inp = int(u.get("input_tokens") or 0) + read + write
    if model is None and result.model_usage:
        model = next(iter(result.model_usage))
    return TokenUsage(inp, int(u.get("output_tokens") or 0), read, write, model)


def _effective_tools(request: AgentRequest) -> tuple[str, ...] | None:
    effective = getattr(request, "effective_tools", None)
    if effective is not None:
        return tuple(effective)
    return request.tools


class ClaudeAgentProvider:
    name = "claude-agent-sdk"
    capabilities = CAPABILITIES

    def __init__(self, config: ClaudeAgentConfig, table: SessionTable | None = None,
                 environ: Mapping[str, str] | None = None) -> None:
        self.config = config
        self.table = table if table is not None else session_table(environ or os.environ)
        self.loop = LoopThread("podium-claude-agent")
        self.keyed: dict[str, ClaudeAgentSession] = {}
        self.open: set[ClaudeAgentSession] = set()
        self.wrappers: dict[tuple[str, ...], Path] = {}  # skill folders -> their plugin

    def skill_options(self, request: AgentRequest) -> dict[str, Any]:
        """`skills:` and `plugins:` as Claude Code takes them. Claude Code loads a skill only
        from a plugin, so the skill folders are linked into one plugin made for them
        (`podium-skills`, removed with the provider); each plugin folder is registered as
        it is. Only their skills are enabled (no user or project settings are read), and
        `skills: []` with no plugin enables none. Nothing is set when neither is declared."""
        if request.skill_dirs is None and request.plugin_dirs is None:
            return {}
        plugins = [{"type": "local", "path": p} for p in request.plugin_dirs or ()]
        if request.skill_dirs:
            plugins.insert(0, {"type": "local", "path": str(self._wrapper(request.skill_dirs))})
        return {"plugins": plugins, "skills": "all" if plugins else [],
                "setting_sources": []}

    def _wrapper(self, dirs: tuple[str, ...]) -> Path:
        import json
        import tempfile

        found = self.wrappers.get(dirs)
        if found is not None:
            return found
        root = Path(tempfile.mkdtemp(prefix="podium-skills-"))
        (root / ".claude-plugin").mkdir()
        (root / ".claude-plugin" / "plugin.json").write_text(json.dumps(
            {"name": "podium-skills", "description": "the workflow's skills"}), "utf-8")
        (root / "skills").mkdir()
        for d in dirs:
            name = Path(d).name
            link = root / "skills" / name
            n = 2
            while link.exists() or link.is_symlink():
                link = root / "skills" / f"{name}-{n}"
                n += 1
            link.symlink_to(d, target_is_directory=True)
        self.wrappers[dirs] = root
        return root

    def open_session(self, request: AgentRequest) -> ClaudeAgentSession:
        key = None
        if request.session_key:
            key = self.table.key(request.run_id, self.name, request.session_key,
                                 request.working_dir)
            live = self.keyed.get(key)
            if live is not None and live.actor is not None and not live.actor.task.done():
                live.request = request
                live.deadline = (time.monotonic() + request.timeout) if request.timeout \
                    else None
                live.closed = False
                return live
        session = ClaudeAgentSession(self, request, keyed=key is not None)
        previous = self.table.get(key) if key else None
        try:
            self.loop.run(session.start(previous), START_SECONDS + 5)
        except Exception as exc:
            session.shutdown()
            if previous:
                if request.emit is not None:
                    from podium.events.model import Warning_

                    request.emit(Warning_(step=request.step, message=(
                        f"session_key '{request.session_key}': the Claude Code session "
                        f"{previous} could not be resumed; a fresh session starts")))
                session = ClaudeAgentSession(self, request, keyed=True)
                try:
                    self.loop.run(session.start(None), START_SECONDS + 5)
                except Exception as again:
                    session.shutdown()
                    raise self._start_error(again, session) from None
            else:
                raise self._start_error(exc, session) from None
        if key is not None:
            self.keyed[key] = session
            session.session_id = session.session_id or previous
        else:
            self.open.add(session)
        return session

    def _start_error(self, exc: Exception, session: ClaudeAgentSession) -> ProviderError:
        if isinstance(exc, TimeoutError):
            what = f"did not start within {START_SECONDS:g}s"
        else:
            what = "failed to start: " + " ".join(str(exc).split())[:600]
        return ProviderError(f"provider 'claude-agent-sdk': Claude Code "
                             f"({self.config.cli_path}) {what}{session._stderr_tail()}; "
                             f"{install_hint(CLAUDE_CLI)}")

    def remember(self, session: ClaudeAgentSession, session_id: str) -> None:
        req = session.request
        if req.session_key:
            self.table.put(self.table.key(req.run_id, self.name, req.session_key,
                                          req.working_dir), session_id)

    def discard(self, session: ClaudeAgentSession) -> None:
        self.open.discard(session)
        session.shutdown()

    def close(self) -> None:
        for session in [*self.open, *self.keyed.values()]:
            session.shutdown()
        self.open.clear()
        self.keyed.clear()
        self.loop.close()
        import shutil

        for root in self.wrappers.values():
            shutil.rmtree(root, ignore_errors=True)
        self.wrappers.clear()


def create_claude_agent(settings: ProviderSettings) -> ClaudeAgentProvider:
    return ClaudeAgentProvider(resolve_config(settings), environ=settings.environ)
