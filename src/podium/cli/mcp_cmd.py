"""`podium mcp serve FOLDER`: the folder's workflows as MCP tools (podium/mcp/server.py)."""

from __future__ import annotations

import ipaddress
import sys
from pathlib import Path

from podium import exitcodes


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve_command(folder: Path, http: bool, host: str, port: int, allow_remote: bool) -> int:
    if not folder.is_dir():
        sys.stderr.write(f"podium: {folder} is not a folder of workflows\n")
        return exitcodes.FILE_ERROR
    if http and not _loopback(host) and not allow_remote:
        sys.stderr.write(f"podium: --host {host} is not a loopback address: anyone who reaches "
                         "it could run these workflows; pass --allow-remote to serve it anyway\n")
        return exitcodes.INVALID
    if not 0 <= port <= 65535:
        sys.stderr.write(f"podium: --port {port}: give 0 to 65535\n")
        return exitcodes.INVALID
    from podium.mcp.server import serve

    def ready(url: str) -> None:
        sys.stderr.write(f"podium mcp: listening on {url}\n")
        sys.stderr.flush()

    try:
        serve(folder, http=http, host=host, port=port, ready=ready)
    except OSError as exc:
        sys.stderr.write(f"podium: cannot serve on {host}:{port}: {exc}\n")
        return exitcodes.FILE_ERROR
    except KeyboardInterrupt:
        pass
    return exitcodes.OK
