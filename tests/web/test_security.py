"""The console's guard against a real uvicorn on 127.0.0.1: the token for actions, Host and
Origin checks, JSON-only actions, anti-framing headers, no way out of the static folder, the
token file, and remote binding only on request (and then with the token for reads too)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from console_helpers import Serve, free_port, run_podium

from conftest import Live, Store

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
