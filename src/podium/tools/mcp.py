"""MCP servers declared in `runtime.mcp_servers`, as tools for agents: stdio servers (a child
process) and streamable-HTTP servers, through the official MCP Python SDK.

The SDK is asynchronous and the engine is not, so one run owns one event-loop thread (the
`McpHub`); each server connection lives in its own task on that loop (the SDK's context
managers must be entered and left by the same task) and serves calls from a queue. Servers are
started on first use, one per (server, working directory), and closed when the run ends. The
model sees each tool as `<server>__<tool>`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import re
import tempfile
import threading
from collections.abc import Awaitable, Callable
from dataclasses import field
from pathlib import Path
from typing import Any

from podium.language.model import McpServerConfig
from podium.records import record
from podium.tools.base import ToolError, ToolResult, ToolSpec

CONNECT_TIMEOUT = 30.0
CALL_TIMEOUT = 300.0
SEP = "__"
_BAD = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(server: str, tool: str) -> str:
    """The name the model sees: `<server>__<tool>`, limited to what model APIs accept."""
    return _BAD.sub("_", f"{server}{SEP}{tool}")[:64]


def _timeout(cfg: McpServerConfig, default: float) -> float:
    # Conductor's `timeout` is in milliseconds
    return cfg.timeout / 1000.0 if cfg.timeout else default


def _wanted(cfg: McpServerConfig, name: str) -> bool:
    import fnmatch

    return any(fnmatch.fnmatchcase(name, pattern) for pattern in cfg.tools)


def _result_text(result: Any) -> str:
    parts: list[str] = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource":
            res = block.resource
            parts.append(getattr(res, "text", None) or f"[resource {getattr(res, 'uri', '')}]")
        else:
            parts.append(f"[{kind} content: {getattr(block, 'mime_type', '') or ''}]".strip())
    if not parts and getattr(result, "structured_content", None) is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


@record
class McpTool:
    """One tool of a connected server, as the model sees it."""

    spec: ToolSpec
    server: str
    remote_name: str
    connection: _Connection

    @property
    def source(self) -> str:
        return f"mcp:{self.server}"

    def run(self, arguments: dict[str, Any]) -> ToolResult:
        result = self.connection.call_tool(self.remote_name, arguments)
        return ToolResult(_result_text(result), bool(getattr(result, "is_error", False)))


@record
class _Connection:
    hub: McpHub
    name: str
    cfg: McpServerConfig
    cwd: str | None
    queue: asyncio.Queue[Any] | None = None
    ready: concurrent.futures.Future[list[Any]] = field(
        default_factory=concurrent.futures.Future)
    done: concurrent.futures.Future[None] = field(default_factory=concurrent.futures.Future)
    errlog: Any = None
    tools: list[McpTool] = field(default_factory=list)

    def transport(self) -> tuple[Any, Any]:
        """(the SDK's server argument, an optional httpx client to close)."""
        if self.cfg.type == "stdio":
            from mcp import StdioServerParameters
            from mcp.client.stdio import stdio_client

            assert self.cfg.command
            params = StdioServerParameters(command=self.cfg.command, args=list(self.cfg.args),
                                           env=dict(self.cfg.env) or None, cwd=self.cwd)
            return stdio_client(params, errlog=self.errlog), None
        if self.cfg.type == "http":
            assert self.cfg.url
            if not self.cfg.headers:
                return self.cfg.url, None
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            http = httpx2.AsyncClient(headers=dict(self.cfg.headers),
                                      timeout=httpx2.Timeout(30.0, read=CALL_TIMEOUT))
            return streamable_http_client(self.cfg.url, http_client=http), http
        raise ToolError(f"MCP server '{self.name}': transport '{self.cfg.type}' is not "
                        "supported by podium (use stdio or http)")

    async def serve(self) -> None:
        """Connect, list the tools, then run calls from the queue until told to stop."""
        from mcp import Client

        self.queue = asyncio.Queue()
        http = None
        try:
            target, http = self.transport()
            async with Client(target, read_timeout_seconds=_timeout(self.cfg, CALL_TIMEOUT)) \
                    as client:
                listed = await client.list_tools()
                self.ready.set_result(list(listed.tools))
                while True:
                    job = await self.queue.get()
                    if job is None:
                        break
                    fn, fut = job
                    try:
                        fut.set_result(await fn(client))
                    except Exception as exc:
                        fut.set_exception(exc)
        except BaseException as exc:
            if not self.ready.done():
                self.ready.set_exception(ToolError(self._failure(exc)))
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            while self.queue is not None and not self.queue.empty():
                job = self.queue.get_nowait()
                if job is not None:
                    job[1].set_exception(ToolError(f"MCP server '{self.name}' has stopped"))
            if http is not None:
                await http.aclose()
            self.done.set_result(None)

    def _failure(self, exc: BaseException) -> str:
        leaves: list[BaseException] = [exc]
        while leaves and isinstance(leaves[0], BaseExceptionGroup):
            leaves = list(leaves[0].exceptions) + leaves[1:]
        first = leaves[0] if leaves else exc
        where = self.cfg.url or " ".join([self.cfg.command or "", *self.cfg.args])
        msg = f"MCP server '{self.name}' ({where}) failed: {type(first).__name__}: {first}"
        tail = self._stderr_tail()
        return msg + (f"; its stderr ends with: {tail}" if tail else "")

    def _stderr_tail(self) -> str:
        if self.errlog is None:
            return ""
        try:
            self.errlog.flush()
            text = Path(self.errlog.name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return " ".join(text.strip().splitlines()[-3:])[-500:]

    def submit(self, fn: Callable[[Any], Awaitable[Any]], timeout: float) -> Any:
        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
        assert self.queue is not None
        self.hub.loop.call_soon_threadsafe(self.queue.put_nowait, (fn, fut))
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            raise ToolError(f"MCP server '{self.name}' did not answer within {timeout:g}s") \
                from None

    def call_tool(self, remote: str, arguments: dict[str, Any]) -> Any:
        timeout = _timeout(self.cfg, CALL_TIMEOUT)
        try:
            return self.submit(lambda c: c.call_tool(remote, arguments), timeout + 5)
        except ToolError:
            raise
        except Exception as exc:
            raise ToolError(f"MCP tool {self.name}{SEP}{remote} failed: "
                            f"{type(exc).__name__}: {exc}") from None

    def stop(self) -> None:
        if self.queue is not None and not self.done.done():
            self.hub.loop.call_soon_threadsafe(self.queue.put_nowait, None)


class McpHub:
    """The MCP connections of one run, on one event-loop thread (started on first use)."""

    def __init__(self, servers: dict[str, McpServerConfig]) -> None:
        self.servers = servers
        self._conns: dict[tuple[str, str | None], _Connection] = {}
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._logdir: tempfile.TemporaryDirectory[str] | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=self._loop.run_forever,
                                            name="podium-mcp", daemon=True)
            self._thread.start()
        return self._loop

    def tools(self, server: str, cwd: str | None = None) -> list[McpTool]:
        """The tools of `server` (connecting on first use), after its `tools:` filter."""
        cfg = self.servers.get(server)
        if cfg is None:
            raise ToolError(f"unknown MCP server '{server}' (declared: "
                            f"{', '.join(self.servers) or 'none'})")
        key = (server, cwd if cfg.type == "stdio" else None)
        with self._lock:
            conn = self._conns.get(key)
            if conn is None:
                conn = _Connection(self, server, cfg, key[1])
                if cfg.type == "stdio":
                    if self._logdir is None:
                        self._logdir = tempfile.TemporaryDirectory(prefix="podium-mcp-")
                    conn.errlog = open(  # noqa: SIM115 (closed in close())
                        os.path.join(self._logdir.name, f"{server}-{len(self._conns)}.log"),
                        "w+", encoding="utf-8")
                self._conns[key] = conn
                asyncio.run_coroutine_threadsafe(conn.serve(), self.loop)
        try:
            listed = conn.ready.result(_timeout(cfg, CONNECT_TIMEOUT))
        except concurrent.futures.TimeoutError:
            raise ToolError(f"MCP server '{server}' did not start within "
                            f"{_timeout(cfg, CONNECT_TIMEOUT):g}s") from None
        if not conn.tools:
            conn.tools = [
                McpTool(ToolSpec(tool_name(server, t.name), t.description or "",
                                 dict(t.input_schema or {"type": "object", "properties": {}})),
                        server, t.name, conn)
                for t in listed if _wanted(cfg, t.name)]
        return conn.tools

    def close(self) -> None:
        with self._lock:
            conns = list(self._conns.values())
            self._conns.clear()
        for conn in conns:
            conn.stop()
        for conn in conns:
            with contextlib.suppress(concurrent.futures.TimeoutError):
                conn.done.result(10.0)
            if conn.errlog is not None:
                conn.errlog.close()
        if self._loop is not None:
            loop = self._loop
            loop.call_soon_threadsafe(loop.stop)
            if self._thread is not None:
                self._thread.join(10.0)
            if not loop.is_running():
                loop.close()
            self._loop = None
        if self._logdir is not None:
            self._logdir.cleanup()
            self._logdir = None
