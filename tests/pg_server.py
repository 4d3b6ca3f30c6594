"""A real, throwaway PostgreSQL server for the tests, started on first use and stopped at the end.

PostgreSQL refuses to run as root (CI runs as root), so as root the server's folder belongs to
an unprivileged user (`nobody`, or a `podium-test` system user made when there is none) and
initdb and pg_ctl run as that user through setpriv. The server listens on 127.0.0.1 on a free
port, its socket in its own folder, with fsync off (a test database is thrown away). The
superuser has a password: tests check that no message ever shows it. A server that cannot start
fails the tests that asked for it, with the reason; nothing is skipped.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

SUPERUSER = "podium"


def pg_bin() -> Path:
    """The folder of initdb and pg_ctl: on PATH, else Debian's /usr/lib/postgresql/N/bin."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(os.path.realpath(found)).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                      key=lambda p: int(Path(p).parent.parent.name) if
                      Path(p).parent.parent.name.isdigit() else 0)
    if versions:
        return Path(versions[-1]).parent
    pytest.fail("PostgreSQL is not installed (no initdb on PATH nor in /usr/lib/postgresql): "
                "run scripts/test-deps.sh as root, or apt-get install postgresql")


def _unprivileged() -> tuple[int, int]:
    """The uid and gid the server runs as when the tests run as root."""
    for name in ("nobody", "podium-test"):
        with contextlib.suppress(KeyError):
            entry = pwd.getpwnam(name)
            return entry.pw_uid, entry.pw_gid
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                    "podium-test"], check=True, capture_output=True)
    entry = pwd.getpwnam("podium-test")
    return entry.pw_uid, entry.pw_gid


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PgServer:
    """A running server: URLs for its databases, and fresh databases on demand."""

    folder: Path
    port: int
    password: str
    bindir: Path
    # a test database is thrown away: no fsync (bench/bench_store.py asks for a durable one)
    durable: bool = False
    _as: list[str] = field(default_factory=list)
    _count: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}:{self.password}@127.0.0.1:{self.port}/{database}"

    def create_database(self, prefix: str = "t") -> str:
        """A new empty database; returns its URL."""
        import psycopg

        with self._lock:
            self._count += 1
            name = f"{prefix}_{os.getpid()}_{self._count}"
        with psycopg.connect(self.url(), autocommit=True) as con:
            con.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def _run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self._as, *argv], capture_output=True, text=True,
                              cwd=self.folder, timeout=120, check=False)

    def start(self) -> None:
        data = self.folder / "data"
        pwfile = self.folder / "pw"
        pwfile.write_text(self.password + "\n", encoding="utf-8")
        if os.geteuid() == 0:
            uid, gid = _unprivileged()
            os.chown(self.folder, uid, gid)
            os.chown(pwfile, uid, gid)
            self._as = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups"]
        done = self._run(str(self.bindir / "initdb"), "-D", str(data), "-U", SUPERUSER,
                         f"--pwfile={pwfile}", "--auth-host=scram-sha-256",
                         "--auth-local=trust", "-E", "UTF8", "--no-locale", "--no-sync")
        if done.returncode != 0:
            pytest.fail(f"initdb failed: {(done.stderr or done.stdout).strip()[-2000:]}")
        log = self.folder / "server.log"
        for _attempt in range(5):
            options = (f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.folder} "
                       "-c max_connections=300 -c shared_buffers=32MB")
            if not self.durable:
                options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
            seen = log.stat().st_size if log.exists() else 0
            done = self._run(str(self.bindir / "pg_ctl"), "-D", str(data), "-l", str(log),
                             "-o", options, "-w", "-t", "60", "start")
            if done.returncode == 0:
                return
            tail = log.read_text(errors="replace")[seen:] if log.exists() else ""
            if "already in use" not in tail:
                break
            # the free port was taken between its pick and the bind (other test workers
            # open connections all the time): start again on another one
            self.port = _free_port()
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        pytest.fail(f"PostgreSQL did not start: {done.stderr.strip()} {tail}")

    def stop(self) -> None:
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.folder / "data"), "-m",
                  "immediate", "-w", "stop")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """The session's PostgreSQL server (started the first time a test asks for it)."""
    folder = Path(tempfile.mkdtemp(prefix="podium-pg-"))
    server = PgServer(folder, _free_port(), secrets.token_hex(12), pg_bin())
    try:
        server.start()
        yield server
    finally:
        try:
            server.stop()
        finally:
            shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server: PgServer) -> str:
    """The URL of a fresh, empty database on the session's server."""
    return pg_server.create_database()
