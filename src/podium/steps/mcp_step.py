"""The `mcp` step: call one tool of a declared MCP server with templated arguments, no model.

The server is `workflow.runtime.mcp_servers[<server>]`: a stdio command started for this call
in the workflow's folder (its stderr kept for error messages, never printed), or an http/sse
URL with headers. The official `mcp` SDK is async; `call_tool` runs it on a private event
loop, so the executor stays synchronous. The step's output is the tool's structuredContent,
else its text when that is one JSON object, else `{"text": ...}`; an `output:` schema, when
declared, is checked like a script's.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from contextlib import AsyncExitStack
from dataclasses import field
from pathlib import Path
from typing import IO, Any, TextIO, cast

from podium import jsontext
from podium.errors import LimitExceeded, OutputContractError, StepError, TemplateError
from podium.events.model import McpCalled
from podium.language.diagnostics import did_you_mean
from podium.language.model import McpServerConfig, McpStep
from podium.records import record
from podium.steps.base import StepCall, StepOutcome
from podium.steps.schema import SchemaViolation, check_value
from podium.templating import RenderFailure

DEFAULT_TIMEOUT = 60.0  # seconds for the tool call, when neither the step nor the server says
CONNECT_TIMEOUT = 30.0  # seconds to start the server, connect and list its tools
_STDERR_TAIL = 800

_ONE_EXPRESSION = re.compile(r"^\s*\{\{(?P<expr>.*)\}\}\s*$", re.DOTALL)


# --------------------------------------------------------------------------- arguments


def render_arguments(call: StepCall, value: Any, ctx: dict[str, Any], where: str) -> Any:
    """Render `arguments` recursively: a string that is exactly one `{{ expr }}` becomes the
    expression's value (a number stays a number, a list a list); other strings render as
    text; anything else is kept."""
    if isinstance(value, dict):
        return {k: render_arguments(call, v, ctx, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [render_arguments(call, v, ctx, f"{where}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value
    run, step = call.run, call.step.name
    match = _ONE_EXPRESSION.match(value)
    expr = match.group("expr") if match else None
    if expr is not None and "{{" not in expr and "}}" not in expr and "{%" not in expr:
        try:
            result = run.templates.evaluate(expr.strip(), ctx)
        except RenderFailure as exc:
            raise TemplateError(f"{where}: {exc}", step=step, iteration=call.iteration) \
                from None
        return _plain(result, where, call)
    if "{{" in value or "{%" in value:
        return run.render(value, ctx, step=step, what=where, iteration=call.iteration)
    return value


def _plain(value: Any, where: str, call: StepCall) -> Any:
    """A JSON value (what an MCP tool can receive), or a StepError naming the argument."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        raise StepError(f"{where}: the expression gave a {type(value).__name__}, which is not "
                        "a JSON value", step=call.step.name, iteration=call.iteration) from None


# --------------------------------------------------------------------------- the client


class McpCallError(Exception):
    """The call could not be made or did not finish; `kind` says why."""

    def __init__(self, kind: str, message: str, *, bounded_by_run: bool = False) -> None:
        super().__init__(message)
        self.kind = kind  # start | connect | unknown_tool | protocol | timeout
        self.bounded_by_run = bounded_by_run


@record(frozen=True)
class ToolCall:
    """One tool call on one server."""

    server: str
    config: McpServerConfig
    cwd: Path
    tool: str
    arguments: dict[str, Any]
    timeout: float = DEFAULT_TIMEOUT
    connect_timeout: float = CONNECT_TIMEOUT
    run_remaining: float | None = None  # seconds the run has left, when it has a timeout


@record
class ToolReply:
    is_error: bool
    structured: Any
    text: str
    tools: list[str] = field(default_factory=list)


def call_tool(request: ToolCall) -> ToolReply:
    """Call the tool synchronously (a private event loop; another thread if this one already
    runs a loop). Raises McpCallError."""
    try:
        from mcp import Client  # noqa: F401  (mcp 2: `Client`, streamable_http_client, httpx2)
    except ImportError:
        raise McpCallError("start", "the mcp step needs version 2 of the official MCP SDK "
                           "(pip install 'mcp>=2,<3')") from None
    from podium.blocking import run_to_end

    return run_to_end(_call(request), "podium-mcp")


def _command(request: ToolCall) -> str:
    cfg = request.config
    command = cfg.command or ""
    if os.sep in command:
        path = Path(command) if os.path.isabs(command) else request.cwd / command
        if not path.exists():
            raise McpCallError("start", f"cannot start MCP server '{request.server}': "
                               f"command not found: {path}")
        return str(path)
    search = cfg.env.get("PATH") or os.environ.get("PATH", os.defpath)
    found = shutil.which(command, path=search)
    if found is None:
        raise McpCallError("start", f"cannot start MCP server '{request.server}': command "
                           f"'{command}' not found on PATH")
    return found


async def _transport(request: ToolCall, stack: AsyncExitStack, errlog: TextIO) -> Any:
    cfg = request.config
    if cfg.type == "stdio":
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        params = StdioServerParameters(command=_command(request), args=list(cfg.args),
                                       env=dict(cfg.env) or None, cwd=str(request.cwd))
        return stdio_client(params, errlog=errlog)
    url = cfg.url or ""
    if cfg.type == "sse":
        from mcp.client.sse import sse_client

        return sse_client(url, headers=dict(cfg.headers) or None,
                          timeout=request.connect_timeout)
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    http = await stack.enter_async_context(httpx2.AsyncClient(
        headers=dict(cfg.headers), timeout=httpx2.Timeout(request.connect_timeout, read=300.0)))
    return streamable_http_client(url, http_client=http)


async def _tool_names(client: Any) -> list[str]:
    names: list[str] = []
    cursor: str | None = None
    for _ in range(100):  # a server that pages forever cannot hang the step
        page = await client.list_tools(cursor=cursor)
        names += [t.name for t in page.tools]
        cursor = page.next_cursor
        if cursor is None:
            break
    return names


def _allowed(request: ToolCall, names: list[str]) -> list[str]:
    patterns = request.config.tools or ["*"]
    if "*" in patterns:
        return names
    return [n for n in names if n in patterns]


async def _call(request: ToolCall) -> ToolReply:
    from mcp import Client

    started = time.monotonic()
    phase = "connect"
    limit = request.connect_timeout
    bounded = False
    if request.run_remaining is not None and request.run_remaining < limit:
        limit, bounded = max(request.run_remaining, 0.001), True
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:
        try:
            import anyio

            with anyio.fail_after(limit) as scope:
                async with AsyncExitStack() as stack:
                    transport = await _transport(request, stack, cast(TextIO, errlog))
                    client = await stack.enter_async_context(Client(transport))
                    names = await _tool_names(client)
                    allowed = _allowed(request, names)
                    if request.tool not in allowed:
                        raise McpCallError("unknown_tool", _unknown_tool(request, allowed))
                    phase = "call"
                    limit, bounded = request.timeout, False
                    if request.run_remaining is not None:
                        left = request.run_remaining - (time.monotonic() - started)
                        if left < limit:
                            limit, bounded = max(left, 0.001), True
                    scope.deadline = anyio.current_time() + limit
                    result = await client.call_tool(request.tool, request.arguments)
        except McpCallError:
            raise
        except TimeoutError:
            what = ("calling the tool" if phase == "call"
                    else "starting the server and listing its tools")
            raise McpCallError("timeout", f"MCP server '{request.server}': {what} took longer "
                               f"than {limit:g}s", bounded_by_run=bounded) from None
        except BaseException as exc:
            leaf = _leaf(exc)
            if not isinstance(leaf, Exception) or isinstance(leaf, McpCallError):
                raise leaf from None
            raise _failure(request, phase, leaf, _tail(errlog)) from None
    texts = [str(getattr(b, "text", "")) for b in result.content if hasattr(b, "text")]
    return ToolReply(bool(result.is_error), result.structured_content, "\n".join(texts),
                     names)


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _tail(errlog: IO[str]) -> str:
    try:
        errlog.flush()
        errlog.seek(0)
        text = errlog.read().strip()
    except (OSError, ValueError):
        return ""
    return text[-_STDERR_TAIL:]


def _failure(request: ToolCall, phase: str, exc: Exception, stderr: str) -> McpCallError:
    server = f"MCP server '{request.server}'"
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    detail = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    said = f"; its stderr ends with: {stderr}" if stderr else ""
    if isinstance(exc, OSError) and phase == "connect" and request.config.type == "stdio":
        return McpCallError("start", f"cannot start {server}: {detail}")
    if phase == "connect" and request.config.type == "stdio":
        return McpCallError("connect", f"{server} ended or closed its connection before "
                            f"answering ({detail}){said}")
    if phase == "connect":
        return McpCallError("connect", f"{server} did not answer (could not connect to "
                            f"{request.config.url}: {detail}); check its url and headers")
    return McpCallError("protocol", f"{server} failed during the call of '{request.tool}': "
                        f"{detail}{said}")


def _unknown_tool(request: ToolCall, names: list[str]) -> str:
    hint = did_you_mean(request.tool, names)
    has = ", ".join(sorted(names)) or "no tools"
    return (f"MCP server '{request.server}' has no tool '{request.tool}'"
            + (f" ({hint})" if hint else "") + f"; it has: {has}")


# --------------------------------------------------------------------------- the executor


def _output(reply: ToolReply) -> dict[str, Any]:
    """The step's output from the tool's result; JsonLimitError for JSON past podium's
    bounds (podium/jsontext.py)."""
    if reply.structured is not None:
        jsontext.check_depth(reply.structured)
        if isinstance(reply.structured, dict):
            return reply.structured
        return {"result": reply.structured}
    stripped = reply.text.strip()
    if stripped.startswith("{"):
        try:
            value = jsontext.loads(stripped)
        except jsontext.JsonLimitError:
            raise
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
    return {"text": reply.text}


def _server(call: StepCall, step: McpStep) -> McpServerConfig:
    servers = call.run.workflow.workflow.runtime.mcp_servers
    cfg = servers.get(step.server)
    if cfg is not None:
        return cfg
    if not servers:
        raise StepError(f"unknown MCP server '{step.server}': the workflow declares none "
                        "(add it under workflow.runtime.mcp_servers)", step=step.name,
                        iteration=call.iteration)
    hint = did_you_mean(step.server, servers)
    raise StepError(f"unknown MCP server '{step.server}'" + (f" ({hint})" if hint else "")
                    + f"; workflow.runtime.mcp_servers declares: {', '.join(servers)}",
                    step=step.name, iteration=call.iteration)


def execute_mcp(call: StepCall) -> StepOutcome:
    step = call.step
    assert isinstance(step, McpStep)
    run, name, it = call.run, step.name, call.iteration
    cfg = _server(call, step)
    ctx = run.step_context(step)
    arguments = render_arguments(call, dict(step.arguments), ctx, "arguments")
    timeout = step.timeout or (cfg.timeout / 1000.0 if cfg.timeout else DEFAULT_TIMEOUT)
    request = ToolCall(step.server, cfg, run.path.parent, step.tool, arguments,
                       timeout=timeout, run_remaining=run.remaining())
    started = run.clock.monotonic()
    try:
        reply = call_tool(request)
    except McpCallError as exc:
        if exc.kind == "timeout" and exc.bounded_by_run:
            raise LimitExceeded(f"the run's timeout expired during MCP tool '{step.tool}': "
                                f"{exc}", limit="timeout", step=name, iteration=it) from None
        raise StepError(str(exc), step=name, iteration=it,
                        details={"server": step.server, "tool": step.tool,
                                 "reason": exc.kind}) from None
    elapsed = run.clock.monotonic() - started
    if reply.is_error:
        text = reply.text.strip() or "(no message)"
        line = " ".join(text.split())  # one line for the message; the event keeps it whole
        line = line if len(line) <= 1000 else line[:999] + "…"
        run.bus.emit(McpCalled(step=name, iteration=it, server=step.server, tool=step.tool,
                               arguments=arguments, result=text, is_error=True,
                               elapsed=elapsed))
        raise StepError(f"MCP tool '{step.tool}' of server '{step.server}' returned an error: "
                        f"{line}", step=name, iteration=it,
                        details={"server": step.server, "tool": step.tool, "error": text})
    try:
        output = _output(reply)
    except jsontext.JsonLimitError as exc:
        raise StepError(f"MCP tool '{step.tool}' of server '{step.server}' returned JSON that "
                        f"{exc}", step=name, iteration=it,
                        details={"server": step.server, "tool": step.tool,
                                 "result_excerpt": reply.text[:2000]}) from None
    run.bus.emit(McpCalled(step=name, iteration=it, server=step.server, tool=step.tool,
                           arguments=arguments, result=output, elapsed=elapsed))
    if step.output is not None:
        try:
            check_value(step.output, output)
        except SchemaViolation as exc:
            raise OutputContractError(f"the result of MCP tool '{step.tool}' breaks the output "
                                      f"schema: {exc}", step=name, iteration=it,
                                      details={"field": exc.field, "result": output}) from None
    return StepOutcome(output, details={"server": step.server, "tool": step.tool})
