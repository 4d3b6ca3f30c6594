"""A real MCP server process for the agent-tool tests, built with the MCP SDK's FastMCP
(`MCPServer` in mcp 2).

    python mcp_server.py          # stdio
    python mcp_server.py http     # streamable HTTP on 127.0.0.1, port chosen by the OS and
                                  # printed as the first line of stdout

Tools: add(a, b); echo(text); where() (the server's working directory); write_note(name,
text) (writes a file in its working directory); fail() (a tool error).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

app = MCPServer("podium-agent-tools", log_level="WARNING")


@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@app.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@app.tool()
def where() -> str:
    """The server's working directory."""
    return os.getcwd()


@app.tool()
def write_note(name: str, text: str) -> str:
    """Write a note file in the working directory."""
    Path(name).write_text(text, encoding="utf-8")
    return f"wrote {name}"


@app.tool()
def fail() -> str:
    """Always fails."""
    raise ToolError("the note store is down")


def _serve_http() -> None:
    import socket

    import anyio
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    sys.stdout.write(f"{sock.getsockname()[1]}\n")
    sys.stdout.flush()
    config = uvicorn.Config(app.streamable_http_app(), log_level="warning")
    anyio.run(lambda: uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    if sys.argv[1:] == ["http"]:
        _serve_http()
    else:
        app.run("stdio")
