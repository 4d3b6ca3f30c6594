"""The console's guard: the token, Host and Origin checks, JSON-only actions, safe headers.

- Every request: the Host header must name a loopback address or the bound host, with the
  bound port (DNS rebinding); an Origin header, when present, must be that same origin
  (cross-site requests). Anything else is 403.
- Every API request, reads and streams included, needs `Authorization: Bearer TOKEN`
  (compared in constant time), on loopback too: other users and programs of the machine read
  nothing without it. Only the page's shell and static files (no data in them) and, on
  loopback, `/api/info` (which console this is: version, pid, PODIUM_HOME; nothing about
  runs; `podium doctor` asks it) answer without it. The token travels in that header only:
  the page reads its event streams with fetch (not EventSource), so it never goes into a URL
  (logs, history, Referer), and no cookie carries it (cookies ignore ports: every other local
  server on 127.0.0.1 would receive it, and SameSite treats localhost:3000 as the same site).
- Actions (POST) take a JSON body (`Content-Type: application/json`, else 415), so no form
  post or image tag from another site can act.
- A body over MAX_BODY is refused (413, connection closed) from its Content-Length, before
  any of it is read; a body without one (chunked) is read only up to the limit (api._body).
- Every response carries a strict Content-Security-Policy (scripts only from this origin, no
  inline script), X-Frame-Options DENY, frame-ancestors 'none', nosniff and no-referrer.

The token lives in $PODIUM_HOME/console.token (mode 0600) and survives restarts, so a page
left open keeps working when the console comes back. The page gets it from the URL fragment
(`#token=...`, never sent to the server, never written into the served HTML).
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
import stat
from dataclasses import field
from pathlib import Path
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from podium.records import record

TOKEN_FILE = "console.token"

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; "
       "frame-ancestors 'none'")

SECURITY_HEADERS: list[tuple[bytes, bytes]] = [
    (b"content-security-policy", CSP.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"permissions-policy", b"camera=(), microphone=(), geolocation=()"),
]

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")

MAX_BODY = 1_000_000  # bytes: the largest request body the console reads

# Reads that need no token: the page's shell and its static files (no data in them), and on
# loopback /api/info (which console this is, nothing about runs). Anything else needs it.
OPEN_PAGES = frozenset({"/", "/favicon.ico"})
OPEN_PREFIXES = ("/static/", "/runs/", "/evals/")
OPEN_ON_LOOPBACK = frozenset({"/api/info"})


def is_loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


# ----------------------------------------------------------------------------- the token


def load_or_create_token(home: Path) -> tuple[str, Path]:
    """The console token from $PODIUM_HOME/console.token, created (mode 0600) when missing or
    unusable (wrong owner, readable by others, malformed)."""
    path = home / TOKEN_FILE
    home.mkdir(parents=True, exist_ok=True)
    try:
        st = path.lstat()
        if (stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid()
                and not st.st_mode & (stat.S_IRWXG | stat.S_IRWXO)):
            token = path.read_text(encoding="ascii").strip()
            if 32 <= len(token) <= 128 and token.replace("-", "").replace("_", "").isalnum():
                return token, path
    except (OSError, UnicodeDecodeError):
        pass
    token = secrets.token_urlsafe(32)
    tmp = path.with_name(f".{TOKEN_FILE}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, (token + "\n").encode("ascii"))
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return token, path


def token_matches(expected: str, header: str | None) -> bool:
    if not header:
        return False
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer":
        return False
    try:
        return hmac.compare_digest(given.strip().encode("ascii"), expected.encode("ascii"))
    except UnicodeEncodeError:
        return False


# ----------------------------------------------------------------------------- the guard


@record
class GuardConfig:
    token: str
    bind_host: str
    port: int
    remote: bool = False  # listening beyond loopback: /api/info needs the token too
    extra_hosts: tuple[str, ...] = field(default_factory=tuple)

    def host_allowed(self, host_header: str) -> bool:
        host, port = _split_host(host_header)
        if host is None or port != self.port:
            return False
        if is_loopback(host):
            return True
        if host.lower() in (h.lower() for h in (self.bind_host, *self.extra_hosts)):
            return True
        # Bound to every interface: any name reaches us, but then every request needs the
        # token, so a rebinding page learns nothing.
        return self.remote and is_wildcard(self.bind_host)

    def origin_allowed(self, origin: str, host_header: str) -> bool:
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return False
        return parts.netloc.lower() == host_header.lower() and self.host_allowed(parts.netloc)


def _split_host(value: str) -> tuple[str | None, int | None]:
    value = value.strip()
    if not value:
        return None, None
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None, None
        host, rest = value[1:end], value[end + 1:]
        port_text = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port_text = value.rpartition(":") if ":" in value else (value, "", "")
    if not port_text:
        return host, 80
    if not port_text.isdigit():
        return None, None
    return host, int(port_text)


class Guard:
    """Pure ASGI middleware: Host/Origin checks, the token, JSON-only actions, headers."""

    def __init__(self, app: ASGIApp, config: GuardConfig) -> None:
        self.app = app
        self.config = config

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refusal = self._refusal(scope, headers)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                raw = [(k, v) for k, v in message.get("headers", [])
                       if k.lower() not in {h for h, _ in SECURITY_HEADERS}]
                message["headers"] = raw + SECURITY_HEADERS
            await send(message)

        if refusal is not None:
            await refusal(scope, receive, send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)

    def _refusal(self, scope: Scope, headers: Headers) -> Response | None:
        """The response refusing this request, or None. Nothing here reads the body: a
        refusal of a request that has one closes the connection instead of draining it."""
        cfg = self.config
        declared = headers.get("content-length", "").strip()
        if declared and not declared.isdigit():
            return _error(400, "malformed Content-Length", close=True)
        close = bool(declared and int(declared)) or "transfer-encoding" in headers
        host = headers.get("host", "")
        if not cfg.host_allowed(host):
            return _error(403, "forbidden host: the console answers only to its own address",
                          close=close)
        origin = headers.get("origin")
        if origin is not None and not cfg.origin_allowed(origin, host):
            return _error(403, "forbidden origin: cross-site requests are refused", close=close)
        if declared and int(declared) > MAX_BODY:
            return _error(413, f"the request body is too large (at most {MAX_BODY} bytes)",
                          close=True)
        method = scope["method"]
        path: str = scope["path"]
        acting = method not in ("GET", "HEAD")
        needs_token = acting or not _open_without_token(path, cfg.remote)
        if needs_token and not token_matches(cfg.token, headers.get("authorization")):
            return _error(401, "this needs the console token (Authorization: Bearer ...); it "
                               "is printed by podium serve and kept in "
                               "$PODIUM_HOME/console.token", close=close,
                          extra={"www-authenticate": "Bearer"})
        if acting:
            ctype = headers.get("content-type", "").split(";", 1)[0].strip().lower()
            if ctype != "application/json":
                return _error(415, "actions take a JSON body (Content-Type: application/json)",
                              close=close)
        return None


def _open_without_token(path: str, remote: bool) -> bool:
    if path in OPEN_PAGES or path.startswith(OPEN_PREFIXES):
        return True
    return not remote and path in OPEN_ON_LOOPBACK


def _error(status: int, message: str, *, close: bool = False,
           extra: dict[str, str] | None = None) -> Response:
    headers = {"cache-control": "no-store", **(extra or {})}
    if close:  # the body was not read: end the connection rather than drain it
        headers["connection"] = "close"
    return JSONResponse({"error": message}, status_code=status, headers=headers)
