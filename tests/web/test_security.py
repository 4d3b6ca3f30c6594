"""The console's guard against a real uvicorn on 127.0.0.1: the token for every API read and
action (on loopback too; only the page, its files and /api/info answer without it), Host and
Origin checks, JSON-only actions, bodies over the limit refused before they are read,
anti-framing headers, no way out of the static folder, the token file, and remote binding
only on request (and then with the token for /api/info too)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
import time
from pathlib import Path
from typing import Any

import pytest
from console_helpers import Serve, free_port, run_podium

from conftest import Live, Store
from podium.web.security import MAX_BODY

HEADERS = {
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
}


@pytest.mark.parametrize("path", ["/", "/runs/abc", "/static/app.js", "/api/runs",
                                  "/api/nowhere", "/static/nope.js"])
def test_every_response_carries_the_safety_headers(console: Live, path: str) -> None:
    reply = console.client().get(path)
    for name, value in HEADERS.items():
        assert reply.headers.get(name) == value, (path, name, reply.headers)
    csp = reply.headers["content-security-policy"]
    assert "script-src 'self'" in csp
    assert "frame-ancestors 'none'" in csp
    assert "unsafe-inline" not in csp
    assert "default-src 'none'" in csp


def test_refused_requests_carry_the_headers_too(console: Live) -> None:
    reply = console.client().get("/", headers={"Host": "evil.example:80"})
    assert reply.status == 403
    assert reply.headers["x-frame-options"] == "DENY"


def test_the_page_holds_no_token_and_no_inline_script(console: Live) -> None:
    body = console.client().get("/").body.decode()
    assert console.token not in body
    assert "<script>" not in body
    assert "onload=" not in body
    assert "onclick=" not in body
    assert '<script type="module" src="/static/app.js"></script>' in body


@pytest.mark.parametrize("path", [
    "/static/../app.py", "/static/..%2fapp.py", "/static/%2e%2e/%2e%2e/server.py",
    "/static/app.css/../../api.py", "/static//etc/passwd", "/static/%2fetc%2fpasswd",
    "/static/__init__.py", "/static/..", "/static/.%2e/security.py", "/static/index.html%00",
    "/static/APP.JS", "/api/../static/../app.py",
])
def test_static_files_cannot_reach_outside_their_list(console: Live, path: str) -> None:
    reply = console.client().get(path)
    assert reply.status == 404, (path, reply.status)
    assert b"import" not in reply.body
    assert b"root:" not in reply.body


def test_static_files_are_served_with_their_types(console: Live) -> None:
    c = console.client()
    js = c.get("/static/app.js")
    assert js.status == 200
    assert js.headers["content-type"].startswith("text/javascript")
    again = c.get("/static/app.js", headers={"If-None-Match": js.headers["etag"]})
    assert again.status == 304
    assert c.get("/static/app.css").headers["content-type"].startswith("text/css")


def test_actions_need_the_token(console: Live, store: Store) -> None:
    path = f"/api/runs/{store.success}/stop"
    anonymous = console.client(token=False)
    assert anonymous.post(path, {}).status == 401
    wrong = anonymous.post(path, {}, headers={"Authorization": "Bearer " + "x" * 43})
    assert wrong.status == 401
    basic = anonymous.post(path, {}, headers={"Authorization": f"Basic {console.token}"})
    assert basic.status == 401
    in_query = anonymous.post(f"{path}?token={console.token}", {})
    assert in_query.status == 401
    odd = anonymous.post(path, {}, headers={"Authorization": "Bearer \u00e9\u00e9"})
    assert odd.status in (400, 401)
    # With the token the request reaches the action (a finished run cannot be stopped).
    assert console.client().post(path, {}).status == 409


READS = ["/api/runs", "/api/runs?status=waiting&limit=5", "/api/stream", "/api/runs/{run}",
         "/api/runs/{run}/events?after=0", "/api/runs/{run}/graph", "/api/runs/{run}/stream",
         "/api/runs/{run}/live"]


@pytest.mark.parametrize("path", READS)
def test_every_api_read_needs_the_token_on_loopback_too(console: Live, store: Store,
                                                        path: str) -> None:
    p = path.format(run=store.parked)
    anonymous = console.client(token=False)
    refused = anonymous.get(p)
    assert refused.status == 401, p
    assert refused.headers["www-authenticate"] == "Bearer"
    assert refused.headers["cache-control"] == "no-store"
    assert store.parked.encode() not in refused.body
    assert b"release" not in refused.body
    for header in ({"Authorization": "Bearer " + "x" * 43},
                   {"Authorization": f"Basic {console.token}"},
                   {"Authorization": console.token},
                   {"Cookie": f"token={console.token}; podium_token={console.token}"}):
        assert anonymous.get(p, headers=header).status == 401, (p, header)
    sep = "&" if "?" in p else "?"
    assert anonymous.get(f"{p}{sep}token={console.token}").status == 401  # never in a URL
    if "stream" in p:
        with console.sse(p) as sse:  # the token in its header, as the page sends it
            assert sse.res is not None
            assert sse.res.status == 200
            assert sse.next()[0] in ("runs", "ev")
    else:
        assert console.client().get(p).status == 200


def test_unknown_api_paths_need_the_token_before_they_are_looked_up(console: Live) -> None:
    assert console.client(token=False).get("/api/nowhere").status == 401
    assert console.client(token=False).get("//api/runs").status == 401
    assert console.client().get("/api/nowhere").status == 404


@pytest.mark.parametrize("path", ["/", "/runs/abc", "/static/app.js", "/static/net.js",
                                  "/favicon.ico"])
def test_the_page_and_its_files_need_no_token_and_hold_no_data(console: Live, store: Store,
                                                               path: str) -> None:
    reply = console.client(token=False).get(path)
    assert reply.status == 200, path
    assert store.parked.encode() not in reply.body
    assert store.success.encode() not in reply.body
    assert console.token.encode() not in reply.body


def test_info_answers_without_the_token_on_loopback_and_says_nothing_about_runs(
        console: Live, store: Store) -> None:
    """`podium doctor` asks /api/info which console holds the port and which home it serves."""
    reply = console.client(token=False).get("/api/info")
    assert reply.status == 200
    data = reply.json()
    assert set(data) == {"podium", "pid", "home", "remote", "started_at", "now"}
    assert data["home"] == str(store.home)
    assert store.parked not in reply.body.decode()
    assert store.success not in reply.body.decode()


# ----------------------------------------------------------------------------- bodies


def _raw(port: int, head: str, body: bytes = b"", timeout: float = 3.0) -> tuple[bytes, float]:
    """Send a request's head (and `body`) on a raw socket, then read until the server closes
    the connection: (everything it sent, seconds until its first byte). `timeout` bounds
    every wait: a server that waited for the rest of the body would never answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        started = time.monotonic()
        sock.sendall(head.encode("ascii") + body)
        first = sock.recv(65536)
        took = time.monotonic() - started
        data = first
        while chunk := sock.recv(65536):  # b"": the server closed the connection
            data += chunk
    return data, took


def _head(console: Live, path: str, extra: str, token: bool = True) -> str:
    auth = f"Authorization: Bearer {console.token}\r\n" if token else ""
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{console.port}\r\n{auth}"
            f"Content-Type: application/json\r\n{extra}\r\n")


@pytest.mark.parametrize("token", [True, False])
def test_a_body_over_the_limit_is_refused_from_its_content_length_at_once(
        console: Live, store: Store, token: bool) -> None:
    """Headers claiming 300 MB, then nothing: the 413 comes at once (the server does not wait
    for the body) and the connection is closed (it will not read the body either)."""
    head = _head(console, f"/api/runs/{store.parked}/stop", "Content-Length: 300000000\r\n",
                 token)
    reply, took = _raw(console.port, head)
    assert reply.startswith(b"HTTP/1.1 413 "), reply[:200]
    assert b"\r\nconnection: close\r\n" in reply.lower()
    assert b"too large" in reply
    assert took < 3.0  # the socket timeout: in practice milliseconds
    assert store.parked.encode() not in reply


def test_a_chunked_body_is_read_only_up_to_the_limit(console: Live, store: Store) -> None:
    """No Content-Length: the console reads the chunks until they pass the limit, answers 413
    and closes the connection (the body's end is never sent). The last byte sent is the one
    past the limit, so the console has read all of it when it closes (no reset)."""
    head = _head(console, f"/api/runs/{store.parked}/stop", "Transfer-Encoding: chunked\r\n")
    sizes = [65536] * (MAX_BODY // 65536) + [MAX_BODY % 65536 + 1]  # MAX_BODY + 1 in all
    chunks = b"\r\n".join(f"{n:x}\r\n".encode() + b"x" * n for n in sizes)
    reply, _ = _raw(console.port, head, chunks)
    assert reply.startswith(b"HTTP/1.1 413 "), reply[:200]
    assert b"\r\nconnection: close\r\n" in reply.lower()


def _asgi(app: Any, headers: dict[str, str], chunks: int) -> tuple[list[dict[str, Any]], int]:
    """One POST through an ASGI app whose body is `chunks` pieces of 64 KiB (endless when
    -1): (the messages it sent, how many times it asked for the body)."""
    reads = 0
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal reads
        reads += 1
        more = chunks < 0 or reads < chunks
        return {"type": "http.request", "body": b"x" * 65536, "more_body": more}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": "/api/runs/abc/stop",
             "raw_path": b"/api/runs/abc/stop", "query_string": b"", "root_path": "",
             "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8765),
             "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]}
    asyncio.run(app(scope, receive, send))
    return sent, reads


def _status_and_headers(sent: list[dict[str, Any]]) -> tuple[int, dict[bytes, bytes]]:
    start = next(m for m in sent if m["type"] == "http.response.start")
    return start["status"], dict(start["headers"])


def test_the_guard_answers_413_without_reading_a_byte(console: Live) -> None:
    from podium.web.security import Guard, GuardConfig

    reached: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["path"])

    guard = Guard(app, GuardConfig(console.token, "127.0.0.1", 8765))
    sent, reads = _asgi(guard, {"Host": "127.0.0.1:8765", "Content-Type": "application/json",
                                "Authorization": f"Bearer {console.token}",
                                "Content-Length": "300000000"}, chunks=-1)
    assert reads == 0
    assert reached == []
    status, headers = _status_and_headers(sent)
    assert status == 413
    assert headers[b"connection"] == b"close"


def test_an_endless_chunked_body_is_read_only_up_to_the_limit(console: Live) -> None:
    from podium.web.app import create_app
    from podium.web.security import GuardConfig

    assert console.server.console is not None
    app = create_app(console.server.console, GuardConfig(console.token, "127.0.0.1", 8765))
    sent, reads = _asgi(app, {"Host": "127.0.0.1:8765", "Content-Type": "application/json",
                              "Authorization": f"Bearer {console.token}",
                              "Transfer-Encoding": "chunked"}, chunks=-1)
    status, headers = _status_and_headers(sent)
    assert status == 413
    assert headers[b"connection"] == b"close"
    assert reads == MAX_BODY // 65536 + 1  # the first piece past the limit, and no more
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    assert "too large" in json.loads(body)["error"]


def test_a_body_within_the_limit_still_reaches_the_action(console: Live) -> None:
    from podium.web.app import create_app
    from podium.web.security import GuardConfig

    assert console.server.console is not None
    app = create_app(console.server.console, GuardConfig(console.token, "127.0.0.1", 8765))
    size = str(MAX_BODY // 65536 * 65536)
    sent, reads = _asgi(app, {"Host": "127.0.0.1:8765", "Content-Type": "application/json",
                              "Authorization": f"Bearer {console.token}",
                              "Content-Length": size}, chunks=MAX_BODY // 65536)
    status, _ = _status_and_headers(sent)
    assert status == 400  # read whole, then refused as not JSON: not as too large
    assert reads == MAX_BODY // 65536


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.1:1",
                                  "localhost.evil.example:{port}", "", "127.0.0.2.nip.io:{port}"])
def test_a_foreign_host_is_refused(console: Live, host: str) -> None:
    reply = console.client().get("/api/runs", headers={"Host": host.format(port=console.port)})
    assert reply.status == 403, host


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "[::1]:{port}"])
def test_loopback_names_are_accepted(console: Live, host: str) -> None:
    reply = console.client().get("/api/info", headers={"Host": host.format(port=console.port)})
    assert reply.status == 200, host


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "http://127.0.0.1:1",
                                    "http://localhost:{port}.evil.example", "file://"])
def test_a_foreign_origin_is_refused_for_reads_and_actions(console: Live, store: Store,
                                                           origin: str) -> None:
    o = origin.format(port=console.port)
    c = console.client()
    assert c.get("/api/runs", headers={"Origin": o}).status == 403
    assert c.post(f"/api/runs/{store.success}/stop", {}, headers={"Origin": o}).status == 403


def test_the_console_own_origin_is_accepted(console: Live, store: Store) -> None:
    o = f"http://127.0.0.1:{console.port}"
    c = console.client()
    assert c.get("/api/runs", headers={"Origin": o}).status == 200
    assert c.post(f"/api/runs/{store.success}/stop", {}, headers={"Origin": o}).status == 409


@pytest.mark.parametrize("ctype", ["text/plain", "application/x-www-form-urlencoded",
                                   "multipart/form-data; boundary=x", None])
def test_actions_take_only_json(console: Live, store: Store, ctype: str | None) -> None:
    headers = {"Content-Type": ctype} if ctype else {}
    reply = console.client().post(f"/api/runs/{store.success}/stop", raw=b"{}", headers=headers)
    assert reply.status == 415


def test_bad_json_and_wrong_methods(console: Live, store: Store) -> None:
    c = console.client()
    assert c.post(f"/api/runs/{store.success}/stop", raw=b"{nope",
                  headers={"Content-Type": "application/json"}).status == 400
    assert c.post(f"/api/runs/{store.success}/stop", [1, 2]).status == 400
    assert c.request("DELETE", "/api/runs").status in (401, 415, 405)
    assert c.request("PUT", f"/api/runs/{store.success}/stop", {}).status == 405


def test_the_token_file_is_private_and_kept(tmp_path: Path) -> None:
    from podium.web.security import load_or_create_token

    token, path = load_or_create_token(tmp_path)
    mode = stat.S_IMODE(path.stat().st_mode)
    assert mode == 0o600
    assert len(token) >= 40
    assert load_or_create_token(tmp_path)[0] == token  # survives a restart
    os.chmod(path, 0o644)  # readable by others: not trusted, replaced
    fresh, _ = load_or_create_token(tmp_path)
    assert fresh != token
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_serve_prints_the_url_with_the_token_and_keeps_it_in_a_private_file(
        tmp_path: Path) -> None:
    serve = Serve(tmp_path / "home").start()
    try:
        assert serve.url.startswith(f"http://127.0.0.1:{serve.port}/#token=")
        token_file = tmp_path / "home" / "console.token"
        assert token_file.read_text().strip() == serve.token
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert serve.client().get("/api/info").status == 200
    finally:
        assert serve.stop() == 0


def test_a_non_loopback_host_needs_allow_remote(tmp_path: Path) -> None:
    res = run_podium(tmp_path / "home", "serve", "--host", "0.0.0.0", "--port", "0",
                     "--no-open", timeout=30)
    assert res.returncode == 2
    assert "--allow-remote" in res.stderr
    assert not (tmp_path / "home" / "console.token").exists()


def test_remote_mode_needs_the_token_for_reads_too(tmp_path: Path) -> None:
    serve = Serve(tmp_path / "home", args=("--host", "0.0.0.0", "--allow-remote")).start()
    try:
        anonymous = serve.client()
        anonymous.token = ""
        assert anonymous.get("/api/runs").status == 401
        assert anonymous.get("/api/stream").status == 401
        assert anonymous.get("/").status == 200  # the page itself holds nothing
        assert serve.client().get("/api/runs").status == 200
        # Any name reaches it now, with the right port, but only with the token.
        named = serve.client().get("/api/runs", headers={"Host": f"console.lan:{serve.port}"})
        assert named.status == 200
        assert anonymous.get("/api/runs", headers={"Host": f"console.lan:{serve.port}"}
                             ).status == 401
    finally:
        serve.stop()


def test_a_busy_port_is_reported(tmp_path: Path) -> None:
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        port = held.getsockname()[1]
        res = run_podium(tmp_path / "home", "serve", "--port", str(port), "--no-open",
                         timeout=30)
    assert res.returncode == 3
    assert "cannot listen" in res.stderr
    assert "--port 0" in res.stderr
    assert free_port() > 0


def test_serve_stopped_right_after_printing_its_url_exits_0(tmp_path: Path) -> None:
    """SIGTERM as soon as the URL is printed (the console still starting) is a normal stop,
    as later: exit 0, not a death by the signal (the store stress test's console restarts
    met it on a loaded machine)."""
    for _ in range(3):
        serve = Serve(tmp_path / "home").start()
        assert serve.stop() == 0
