"""A real MCP server for tests, built with the official SDK (FastMCP, `MCPServer` in mcp 2).

    python mcp_tools_server.py                      # stdio (what an `mcp` step starts)
    python mcp_tools_server.py --http PORT [--token T]   # streamable HTTP on 127.0.0.1:PORT
    python mcp_tools_server.py --sse PORT [--token T]    # the older SSE transport
    python mcp_tools_server.py --crash              # dies at start with a message on stderr

Tools: lookup_ticket (structured data), add, fail (a tool error), echo, two unstructured ones
(ticket_json: a JSON object as text; note: plain text), kinds (the JSON type of each value it
receives) and nap (sleeps, for timeouts). With --token, every HTTP
request must carry `Authorization: Bearer T` (to prove that configured headers are sent).
Each call of `add` appends a line to $MCP_CALLS_FILE when it is set (a side-effect counter).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

try:  # mcp 2 renamed FastMCP to MCPServer
    from mcp.server.mcpserver import MCPServer as FastMCP
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP  # type: ignore[no-redef]
    from mcp.server.fastmcp.exceptions import ToolError  # type: ignore[no-redef]

app = FastMCP("podium-test-tools", log_level="WARNING")

TICKETS: dict[str, dict[str, Any]] = {
    "T-1": {"id": "T-1", "title": "Add slugify", "priority": 2, "labels": ["text", "small"]},
    "T-2": {"id": "T-2", "title": "Big refactor", "priority": 1, "labels": ["core"]},
}


@app.tool()
def lookup_ticket(id: str) -> dict[str, Any]:
    """Return a ticket as structured data."""
    ticket = TICKETS.get(id)
    if ticket is None:
        raise ToolError(f"no ticket {id}")
    return ticket


@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    calls = os.environ.get("MCP_CALLS_FILE")
    if calls:
        with open(calls, "a", encoding="utf-8") as fh:
            fh.write(f"add {a} {b}\n")
    return a + b


@app.tool()
def fail() -> str:
    """Always fails."""
    raise ToolError("the ticket system is down")


@app.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@app.tool(structured_output=False)
def ticket_json(id: str) -> str:
    """A ticket as JSON text (no structured content)."""
    return json.dumps(TICKETS.get(id, {"id": id, "missing": True}))


@app.tool(structured_output=False)
def note(text: str) -> str:
    """Plain text (no structured content)."""
    return f"noted: {text}"


@app.tool()
def kinds(payload: dict[str, Any]) -> dict[str, Any]:
    """The JSON type of each value of `payload` (to see what the caller really sent)."""
    names = {bool: "boolean", int: "number", float: "number", str: "string", list: "array",
             dict: "object", type(None): "null"}
    return {k: names.get(type(v), type(v).__name__) for k, v in payload.items()}


@app.tool()
async def nap(seconds: float) -> str:
    """Sleep, then answer."""
    import anyio

    await anyio.sleep(seconds)
    return "rested"


def _serve_http(port: int, token: str | None, sse: bool) -> None:
    import uvicorn

    inner = app.sse_app() if sse else app.streamable_http_app()

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and token is not None:
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization") != f"Bearer {token}".encode():
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain")]})
                await send({"type": "http.response.body", "body": b"missing token"})
                return
        await inner(scope, receive, send)

    uvicorn.run(guarded, host="127.0.0.1", port=port, log_level="warning", lifespan="on")


def main(argv: list[str]) -> None:
    if "--crash" in argv:
        sys.stderr.write("mcp_tools_server: cannot open the ticket database\n")
        raise SystemExit(3)
    for flag in ("--http", "--sse"):
        if flag in argv:
            port = int(argv[argv.index(flag) + 1])
            token = argv[argv.index("--token") + 1] if "--token" in argv else None
            _serve_http(port, token, sse=flag == "--sse")
            return
    app.run("stdio")


if __name__ == "__main__":
    main(sys.argv[1:])
