"""The console cannot be taken down by idle or half-sent connections, on a real `podium serve`.

- more half-sent requests than the process has file descriptors: the console holds at most
  its connection cap (below the descriptor limit), answers the others `503` with a line saying
  why, and answers again by itself once the clients have gone (no socket left in CLOSE-WAIT);
  with a lowered descriptor limit (256, 300 clients) and with the usual 1,024 (1,100 clients);
- a client that never ends its headers (slowloris) is answered `408` and closed within the
  request timeout (lowered for the test through PODIUM_CONSOLE_REQUEST_TIMEOUT);
- a deeply nested or malformed JSON body is a 400, never a 500.
"""

from __future__ import annotations

import contextlib
import os
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from console_helpers import Client, Reply

from conftest import Live
from helpers_engine import cli_env, wait_until

TIMEOUT = 60.0


# `python -m podium ARGS` with at most COUNT open file descriptors (the same process: exec)
_LIMITED = ("import os, resource, sys; resource.setrlimit(resource.RLIMIT_NOFILE, "
            "(int(sys.argv[1]), resource.getrlimit(resource.RLIMIT_NOFILE)[1])); "
            "os.execv(sys.executable, [sys.executable, '-m', 'podium', *sys.argv[2:]])")


class Served:
    """`podium serve` in a subprocess with its own descriptor limit and environment."""

    def __init__(self, home: Path, descriptors: int, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _LIMITED, str(descriptors), "serve", "--port", "0",
             "--no-open"], env=cli_env(home, env), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line.startswith("podium console: "), line
        url = line.split(": ", 1)[1].strip()
        self.port = int(url.split(":")[2].split("/")[0])
        self.client = Client(self.port, url.split("#token=", 1)[1])

    def info(self) -> Reply | None:
        """GET /api/info, or None when the console does not answer at all."""
        try:
            return self.client.get("/api/info")
        except OSError:
            return None

    def close_waiting(self) -> int:
        """The console's sockets in CLOSE-WAIT (the client closed, the console did not)."""
        count = 0
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            with contextlib.suppress(OSError):
                for line in Path(table).read_text().splitlines()[1:]:
                    local, state = line.split()[1], line.split()[3]
                    if state == "08" and int(local.rsplit(":", 1)[1], 16) == self.port:
                        count += 1
        return count

    def descriptors(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def stop(self) -> str:
        self.proc.terminate()
        try:
            _, err = self.proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return err


@contextlib.contextmanager
def served(home: Path, descriptors: int, env: dict[str, str] | None = None) -> Iterator[Served]:
    server = Served(home, descriptors, env or {})
    try:
        yield server
    finally:
        server.stop()


def _half_sent(port: int, count: int) -> list[socket.socket]:
    """`count` connections that each sent the first line of a request, and nothing more."""
    socks: list[socket.socket] = []
    for _ in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.settimeout(10)
        try:
            sock.connect(("127.0.0.1", port))
            sock.sendall(b"GET /api/info HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        except OSError:
            sock.close()
            continue
        socks.append(sock)
    return socks


def _own_descriptors(wanted: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        if hard != resource.RLIM_INFINITY and hard < wanted:
            pytest.skip(f"this test needs {wanted} descriptors (the hard limit is {hard})")
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


@pytest.mark.parametrize(("descriptors", "clients"), [(256, 300), (1024, 1100)],
                         ids=["lowered-limit", "usual-limit"])
def test_half_sent_requests_are_shed_and_the_console_recovers(
        tmp_path: Path, descriptors: int, clients: int) -> None:
    _own_descriptors(clients + 200)
    # the held connections stay held for the whole test (the request timeout is its own test)
    with served(tmp_path / "home", descriptors,
                {"PODIUM_CONSOLE_REQUEST_TIMEOUT": "600"}) as server:
        first = server.info()
        assert first is not None
        assert first.status == 200
        socks = _half_sent(server.port, clients)
        try:
            assert len(socks) == clients
            busy = server.info()
            assert busy is not None, "the console stopped answering"
            assert busy.status == 503
            assert b"busy" in busy.body
            assert server.descriptors() < descriptors
        finally:
            for sock in socks:
                sock.close()
        assert wait_until(lambda: (r := server.info()) is not None and r.status == 200,
                          TIMEOUT), "the console did not recover once the clients had gone"
        assert wait_until(lambda: server.close_waiting() == 0, TIMEOUT)
        err = server.stop()
    assert "Too many open files" not in err
    assert "Traceback" not in err


def _timed_out_then_serving(got: bytes, server: Served) -> None:
    """The client read the 408 in full, and the console still answers others."""
    assert got.startswith(b"HTTP/1.1 408 "), got[:200]
    assert b"did not arrive in full" in got
    answered = server.info()
    assert answered is not None
    assert answered.status == 200


def test_a_client_that_never_ends_its_headers_is_closed(tmp_path: Path) -> None:
    with served(tmp_path / "home", 1024, {"PODIUM_CONSOLE_REQUEST_TIMEOUT": "1"}) as server, \
            socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(b"GET /api/info HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        got = b""
        sock.settimeout(0.2)
        for i in range(300):  # a header line now and then, as slowloris sends them
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                sock.sendall(f"X-Slow-{i}: still coming\r\n".encode())
                continue
            if not chunk:
                break  # the console closed the connection
            got += chunk
        _timed_out_then_serving(got, server)


def test_a_timed_out_client_that_goes_on_sending_still_reads_its_408(tmp_path: Path) -> None:
    """The client goes on sending header lines after the console answered 408: the console
    reads them until the client closes (a lingering close), so no reset reaches the client
    ahead of the answer it has not read yet, and it reads the 408 and then the end."""
    with served(tmp_path / "home", 1024, {"PODIUM_CONSOLE_REQUEST_TIMEOUT": "0.5"}) as server, \
            socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(b"GET /api/info HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        time.sleep(1.0)  # past the timeout: the answer waits unread in this socket
        for i in range(50):
            sock.sendall(f"X-Late-{i}: {'x' * 1000}\r\n".encode())
            time.sleep(0.005)
        time.sleep(0.2)
        got = b""
        while chunk := sock.recv(65536):
            got += chunk
        _timed_out_then_serving(got, server)


@pytest.mark.parametrize("body", [b"[" * 100_000, b"{\"a\":" * 50_000, b"{\"value\": ",
                                  b"\xff\xfe not text"],
                         ids=["nested-arrays", "nested-objects", "cut-off", "not-utf8"])
def test_a_deeply_nested_or_malformed_body_is_a_400(console: Live, body: bytes) -> None:
    reply = console.client().post("/api/runs/nosuchrun/stop", raw=body,
                                  headers={"Content-Type": "application/json"})
    assert reply.status == 400, reply.body[:300]
    assert "error" in reply.json()
