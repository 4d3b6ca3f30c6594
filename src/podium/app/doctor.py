"""`podium doctor`'s checks: the run store (its file, SQLite's integrity check, write-ahead log,
runs nothing advances, here or on Temporal, processes left behind), keys, runtimes, console port.

Each check returns Findings and changes nothing. The store file is checked before SQLite opens
it, then read through a read-only connection (a query-only one when the file has no -wal or
-shm beside it, so that none is left behind); a damaged store is named, never written. The
runs and leases are read through the store only once SQLite's check passed.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import sqlite3
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from podium.app.doctor_temporal import check_temporal_runs
from podium.app.owners import liveness, owner_alive, owner_state, resume_hint
from podium.records import record

if TYPE_CHECKING:
    from podium.store.base import Lease, RunRecord, RunStore

Severity = Literal["ok", "info", "problem"]

# areas
STORE = "store"  # the store file itself: a problem here means it is damaged or unreadable
RUNS = "runs"
PROCESSES = "processes"
PROVIDERS = "providers"
RUNTIMES = "runtimes"
CONSOLE = "console"

CONSOLE_HOST = "127.0.0.1"
CONSOLE_PORT = 8765  # `podium serve`'s default --port
WAL_LARGE = 256 * 2**20  # a write-ahead log this big is worth a word
_EVERY = 1_000_000  # "all the runs" for list_runs


@record(frozen=True)
class Finding:
    """One thing doctor found: all right (ok), worth knowing (info), or wrong (problem), with
    how to fix it."""

    severity: Severity
    area: str
    message: str
    fix: str | None = None

    def to_json(self) -> dict[str, str | None]:
        return {"severity": self.severity, "area": self.area, "message": self.message,
                "fix": self.fix}


def _ok(area: str, message: str) -> Finding:
    return Finding("ok", area, message)


def _info(area: str, message: str, fix: str | None = None) -> Finding:
    return Finding("info", area, message, fix)


def _problem(area: str, message: str, fix: str) -> Finding:
    return Finding("problem", area, message, fix)


@record(frozen=True)
class DoctorRequest:
    """What to examine: the store file (default: PODIUM_STORE, else podium.db in the home),
    the home (default: PODIUM_HOME), the console port, the environment (default: os.environ)."""

    store: Path | None = None
    home: Path | None = None
    port: int = CONSOLE_PORT
    environ: Mapping[str, str] | None = None


def diagnose(req: DoctorRequest) -> list[Finding]:
    """Every check, in order: store, runs, processes, providers, runtimes, console."""
    from podium.app.home import podium_home, store_path, store_url
    from podium.errors import PodiumError

    env = os.environ if req.environ is None else req.environ
    home = req.home or podium_home()
    findings: list[Finding] = []
    url = None if req.store else store_url()
    try:
        path = req.store or (None if url else store_path(home if req.home else None))
    except PodiumError as exc:  # PODIUM_STORE names a store podium cannot use
        findings.append(_problem(STORE, str(exc), "unset PODIUM_STORE, or set it to the path "
                                 "of a SQLite file or to a postgresql:// URL"))
    else:
        findings += check_store(path) if path is not None else check_server(url or "", home)
    findings += check_providers(env)
    findings += check_runtimes(env)
    findings += check_console(home, req.port)
    return findings


# --------------------------------------------------------------------------- the store


def _move_aside(path: Path) -> str:
    return (f"move {path.name} aside (with its -wal and -shm files, if any) to start a new "
            "store, or set PODIUM_HOME to another folder; sqlite3's `.recover` command can "
            "copy what is still readable into a new file")


def check_store(path: Path) -> list[Finding]:
    """The store file, then (when it is whole and of this podium's schema) its runs, leases
    and the processes its runs left behind."""
    from podium.store.base import StoreError
    from podium.store.sqlite import SQLiteStore

    findings, usable = check_store_file(path)
    if not usable:
        return findings
    try:
        store = SQLiteStore(path, verify=False)  # checked above; whole and current
    except StoreError as exc:
        return [*findings, _problem(STORE, str(exc), _move_aside(path))]
    try:
        findings += check_runs(store) + check_temporal_runs(store)
        findings += check_orphans(store)
    except StoreError as exc:  # SQLite is fine, a row is not
        findings.append(_problem(STORE, str(exc), _move_aside(path)))
    finally:
        store.close()
    return findings


def check_server(url: str, home: Path) -> list[Finding]:
    """A PostgreSQL store: can podium connect, is its schema this podium's (opening it
    migrates an older one), then its runs, leases and orphans as for a file."""
    from podium.errors import PodiumError
    from podium.store.postgres import PostgresStore

    fix = ("check the server is up and the URL's host, port, user, password and database "
           "(PODIUM_STORE or --store)")
    try:
        store = PostgresStore(url, folder=home)
    except PodiumError as exc:
        return [_problem(STORE, str(exc), fix)]
    try:
        findings = [_ok(STORE, f"the run store {store.where} answers, at schema version "
                               f"{store.schema_version()}")]
        findings += check_runs(store) + check_temporal_runs(store)
        findings += check_orphans(store)
    except PodiumError as exc:
        findings = [_problem(STORE, str(exc), fix)]
    finally:
        store.close()
    return findings


def check_store_file(path: Path) -> tuple[list[Finding], bool]:
    """The file's header and size, its write-ahead log and SQLite's integrity check. Returns
    the findings and whether the runs can be read through the store."""
    from podium.store import files
    from podium.store.schema import SCHEMA_VERSION

    with files.opening():  # no connection of this process to the file while it is read
        try:
            files.check_file(path)
        except files.FileProblem as exc:
            return [_problem(STORE, f"the run store {path} {exc}; doctor left it untouched",
                             _move_aside(path))], False
        exists = path.exists()
        unclean = exists and files.closed_uncleanly(path)
    if not exists:
        return [_ok(STORE, f"no run store yet at {path}: the first `podium run` creates it")
                ], False
    size = path.stat().st_size
    if size == 0:
        return [_ok(STORE, f"the run store {path} is empty: the first `podium run` sets it "
                           "up")], False
    wrong, version, runs = _integrity(path)
    if wrong is not None:
        what, fix = wrong
        return [_problem(STORE, f"the run store {path} {what}; doctor left it untouched",
                         fix)], False
    findings = [_ok(STORE, f"the run store {path} is whole: SQLite's integrity check passed "
                           f"({runs} run{'s' * (runs != 1)}, {_size(size)})")]
    findings += _wal(path, unclean)
    if version < SCHEMA_VERSION:
        findings.append(_info(STORE, f"the run store {path} was written by an older podium "
                                     f"(schema {version}, this podium writes "
                                     f"{SCHEMA_VERSION}); its runs were not checked",
                              "the next podium command that opens it (podium runs) "
                              "upgrades it"))
        return findings, False
    return findings, True


def _integrity(path: Path) -> tuple[tuple[str, str] | None, int, int]:
    """((what is wrong, the fix) or None, the schema version, the number of runs), from
    SQLite's full integrity check through a connection that does not write to the file."""
    from podium.store import files
    from podium.store.schema import SCHEMA_VERSION

    # With a -wal or -shm beside it, a read-only connection creates nothing; without them,
    # it would create both and leave them behind, so a query-only connection is used, which
    # removes them again on close (an empty log: nothing is written to the file).
    sidecars = any(path.with_name(path.name + s).exists() for s in ("-wal", "-shm", "-journal"))
    with files.opening():
        try:
            con = files.connect(path, read_only=sidecars, query_only=not sidecars)
        except sqlite3.Error as exc:
            return (f"cannot be opened: {exc}", _move_aside(path)), 0, 0
    try:
        version = int(con.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            return ((f"was written by a newer podium (schema {version}, this podium knows "
                     f"{SCHEMA_VERSION})", "upgrade podium, or set PODIUM_HOME to another "
                     "folder"), version, 0)
        rows = [str(r[0]) for r in con.execute("PRAGMA integrity_check(5)").fetchall()]
        if rows != ["ok"]:
            text = " ".join(" ".join(rows).split())
            return (f"is corrupted (SQLite's integrity check: {text[:200]})",
                    _move_aside(path)), version, 0
        tables = {str(r[0]) for r in con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()}
        if version == 0 and tables:
            return (("is a SQLite database of another program (it has tables but no podium "
                     "schema version)", "set PODIUM_HOME (or PODIUM_STORE) to podium's own "
                     "folder; that file belongs to another program"), version, 0)
        runs = int(con.execute("SELECT count(*) FROM runs").fetchone()[0]) \
            if "runs" in tables else 0
        return None, version, runs
    except sqlite3.Error as exc:
        if "locked" in str(exc):
            return ("is busy: another process held it for more than 10 s",
                    "run podium doctor again"), 0, 0
        return (f"cannot be read: {exc}", _move_aside(path)), 0, 0
    finally:
        con.close()


def _wal(path: Path, unclean: bool) -> list[Finding]:
    try:
        size = path.with_name(path.name + "-wal").stat().st_size
    except OSError:
        return []
    if unclean:
        return [_info(STORE, f"its write-ahead log ({_size(size)}) was left by a podium "
                             "process that did not close the store (killed or crashed); "
                             "SQLite replays it: nothing committed is lost")]
    if size >= WAL_LARGE:
        return [_info(STORE, f"its write-ahead log has grown to {_size(size)}",
                      "it is folded into the store and deleted when the last podium process "
                      "using the store ends: stop long-lived ones (podium serve) for a moment")]
    return []


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    size = n / 1024
    for unit in ("KiB", "MiB"):
        if size < 1024:
            return f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


# --------------------------------------------------------------------------- runs and leases


def check_runs(store: RunStore, now: float | None = None) -> list[Finding]:
    """Runs marked `running` that no live process advances (their owner died, or they have
    no lease at all), and leases whose owner is gone."""
    from podium.store.base import RunNotFound

    now = time.time() if now is None else now
    findings: list[Finding] = []
    running: set[str] = set()
    live = 0
    for run in store.list_runs(status="running", limit=_EVERY):
        if run.parent_run_id:  # a sub-workflow lives and dies with its top-level run
            continue
        running.add(run.id)
        lv = liveness(store, run)
        if lv.live:
            live += 1
        else:
            findings.append(_interrupted(run, lv.lease, now))
    for lease in store.leases():
        if lease.run_id in running or owner_alive(lease, now):
            continue
        try:
            status = store.get_run(lease.run_id).status
        except RunNotFound:
            status = "not in the store"
        findings.append(_info(RUNS, f"run {lease.run_id} ({status}) still names pid "
                                    f"{lease.owner.pid} (`podium {lease.owner.command}`), "
                                    "which is gone, as its owner; harmless",
                              "nothing to do: the next command that advances the run takes "
                              "the lease over"))
    if not findings:
        findings.append(_ok(RUNS, f"{live} run{'s' * (live != 1)} in progress, each advanced "
                                  "by a live process" if live else "no run in progress"))
    return findings


def _interrupted(run: RunRecord, lease: Lease | None, now: float) -> Finding:
    what = f"run {run.id} ({run.workflow_name})"
    fix = resume_hint(run.id)
    if lease is None:
        return _problem(RUNS, f"{what} is marked running, but no process holds its lease: "
                              "nothing advances it", fix)
    owner = lease.owner
    who = f"pid {owner.pid}, `podium {owner.command}`"
    silent = int(now - lease.heartbeat_at)
    state = owner_state(lease, now)
    if state == "silent":
        return _problem(RUNS, f"{what} was interrupted: its owner on {owner.host} ({who}) has "
                              f"not renewed its lease for {silent} s", fix)
    if state == "hung":
        return _problem(RUNS, f"{what} is stuck: its owner ({who}) is alive but has not "
                              f"renewed its lease for {silent} s",
                        f"if it hangs, end it (kill {owner.pid}), then {fix}")
    return _problem(RUNS, f"{what} was interrupted: its owner ({who}) is gone (killed or "
                          "crashed)", fix)


# --------------------------------------------------------------------------- orphans


def check_orphans(store: RunStore) -> list[Finding]:
    """Live processes marked with a run of this store (PODIUM_RUN_ID) that no live podium
    process advances: left behind by a killed podium, or escaped from their step's group.
    Processes podium may not inspect (other users') and runs of other stores are skipped."""
    from podium.app.owners import ancestors
    from podium.store.base import RunNotFound

    findings: list[Finding] = []
    for run_id, procs in sorted(_marked_processes(ancestors()).items()):
        try:
            run = store.get_run(run_id)
        except RunNotFound:  # a run of another store (another PODIUM_HOME)
            continue
        lv = liveness(store, run)
        if lv.live:
            continue
        listed = ", ".join(f"pid {pid} `{cmd}`" for pid, cmd in procs)
        n = len(procs)
        findings.append(_problem(
            PROCESSES, f"run {run_id} ({lv.status}) left {n} process{'es' * (n != 1)} "
                       f"running that no podium process watches: {listed}",
            f"kill {' '.join(str(pid) for pid, _ in procs)}"))
    if not findings:
        findings.append(_ok(PROCESSES, "no process left behind by a run"))
    return findings


def _marked_processes(skip: set[int]) -> dict[str, list[tuple[int, str]]]:
    """Live processes by the run id in their environment (PODIUM_RUN_ID)."""
    import psutil

    from podium.tools.processes import RUN_ID_VARIABLE

    found: dict[str, list[tuple[int, str]]] = {}
    for proc in psutil.process_iter():
        if proc.pid in skip:
            continue
        try:
            run_id = proc.environ().get(RUN_ID_VARIABLE)
            if not run_id:
                continue
            cmd = " ".join(proc.cmdline()) or proc.name()
        except (psutil.Error, OSError):  # gone, a zombie, or another user's
            continue
        found.setdefault(run_id, []).append((proc.pid, _printable(cmd)))
    return found


def _printable(text: str, limit: int = 80) -> str:
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text if len(text) <= limit else text[:limit - 1] + "…"


# --------------------------------------------------------------------------- providers


@record(frozen=True)
class KeyVariables:
    """The variables that give a provider its credentials (any one is enough), the others it
    needs beside them, and how to set them."""

    keys: tuple[str, ...]
    also: tuple[str, ...]
    how: str
    without: str  # what happens when none is set


PROVIDER_KEYS: dict[str, KeyVariables] = {
    "openai": KeyVariables(
        ("OPENAI_API_KEY",), (),
        "export OPENAI_API_KEY=..., or name another variable in the workflow's "
        "runtime.provider.api_key_env", "an OpenAI-compatible endpoint (base_url or "
        "OPENAI_BASE_URL) needs none"),
    "azure": KeyVariables(
        ("AZURE_OPENAI_API_KEY",), ("AZURE_OPENAI_ENDPOINT", "OPENAI_API_VERSION"),
        "export AZURE_OPENAI_API_KEY, AZURE_OPENAI_ENDPOINT and OPENAI_API_VERSION (or set "
        "runtime.provider api_key_env, base_url and api_version in the workflow)", ""),
    "claude": KeyVariables(
        ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"), (),
        "export ANTHROPIC_API_KEY=... (or ANTHROPIC_AUTH_TOKEN), or name another variable in "
        "runtime.provider.api_key_env", ""),
    "copilot": KeyVariables(
        ("COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN", "COPILOT_PROVIDER_API_KEY"), (),
        "sign in once with the Copilot CLI (`copilot`, then /login), or export "
        "COPILOT_GITHUB_TOKEN (or GH_TOKEN, GITHUB_TOKEN); for your own endpoint export "
        "COPILOT_PROVIDER_BASE_URL and COPILOT_PROVIDER_API_KEY",
        "the Copilot CLI uses its own GitHub sign-in, if it has one"),
    "claude-agent-sdk": KeyVariables(
        ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"), (),
        "export ANTHROPIC_API_KEY=... (or ANTHROPIC_AUTH_TOKEN), or sign in once with "
        "Claude Code (`claude`, then /login)", "Claude Code uses its own sign-in, if it has "
        "one"),
}


def check_providers(environ: Mapping[str, str]) -> list[Finding]:
    """Whether each provider's key variable is set (never its value). A missing key is
    information: offline runs (--responses) and replays need none."""
    from podium.providers import catalog

    findings: list[Finding] = []
    for name in sorted(catalog.PROVIDERS):
        known = PROVIDER_KEYS.get(name)
        if known is None:
            findings.append(_info(PROVIDERS, f"{name}: doctor does not know its key variables"))
            continue
        found = [v for v in known.keys if environ.get(v, "").strip()]
        blank = [v for v in known.keys if v in environ and not environ[v].strip()]
        missing = [v for v in known.also if not environ.get(v, "").strip()]
        if found and not missing:
            findings.append(_ok(PROVIDERS, f"{name}: {found[0]} is set"))
            continue
        if found:
            findings.append(_info(PROVIDERS, f"{name}: {found[0]} is set, "
                                             f"{' and '.join(missing)} not", known.how))
            continue
        said = (f"{known.keys[0]} is not set" if len(known.keys) == 1
                else f"none of {', '.join(known.keys)} is set")
        empty = f" ({', '.join(blank)} set but empty)" if blank else ""
        without = known.without or "live runs need one"
        findings.append(_info(PROVIDERS, f"{name}: {said}{empty}; {without}; offline runs "
                                         "(--responses) need none", known.how))
    return findings


# --------------------------------------------------------------------------- runtimes

_SDKS = {"copilot": "github-copilot-sdk", "claude-agent-sdk": "claude-agent-sdk"}


def check_runtimes(environ: Mapping[str, str]) -> list[Finding]:
    """For each agent runtime, whether its CLI and its Python SDK are installed. A runtime
    that is not installed is information (it is optional); a CLI variable that names no
    executable is a problem."""
    from podium.providers.runtime_common import (
        CLAUDE_CLI,
        COPILOT_CLI,
        RuntimeMissing,
        find_cli,
        install_hint,
    )

    findings: list[Finding] = []
    for cli in (COPILOT_CLI, CLAUDE_CLI):
        name = cli.provider
        sdk = _version(_SDKS[name])
        try:
            exe: str | None = find_cli(cli, environ, _bundled(name))
        except RuntimeMissing:
            exe = None
        explicit = environ.get(cli.override)
        if explicit and exe is None:
            findings.append(_problem(RUNTIMES, f"{name}: {cli.override}={explicit} is not an "
                                               "executable file", install_hint(cli)))
            continue
        external = environ.get("COPILOT_PROVIDER_RUNTIME_URL") if name == "copilot" else None
        where = f"{cli.label} at {exe}" if exe else f"the runtime at {external}"
        if (exe or external) and sdk:
            findings.append(_ok(RUNTIMES, f"{name}: {where}, SDK {_SDKS[name]} {sdk}"))
            continue
        lacking, fixes = [], []
        if not (exe or external):
            lacking.append(f"{cli.label} ({cli.npm})")
            fixes.append(install_hint(cli))
        if not sdk:
            lacking.append(f"the SDK {_SDKS[name]}")
            fixes.append("`make install-runtimes` (or `uv sync --inexact --no-dev --extra "
                         "runtimes`) in podium's checkout installs the SDK and keeps what is "
                         "installed; elsewhere `uv pip install 'podium[runtimes]'`")
        findings.append(_info(RUNTIMES, f"{name}: not installed ({' and '.join(lacking)} "
                                         "missing); workflows with other providers are not "
                                         "affected", "; ".join(fixes)))
    return findings


def _version(distribution: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _bundled(provider: str) -> Path | None:
    if provider != "claude-agent-sdk":
        return None
    from podium.providers.claude_agent import bundled_cli

    return bundled_cli()


# --------------------------------------------------------------------------- the console


def check_console(home: Path, port: int = CONSOLE_PORT, host: str = CONSOLE_HOST,
                  timeout: float = 1.0) -> list[Finding]:
    """Can `podium serve` listen on host:port? Free, a podium console already there (this
    home's, or another's), or another program holding it."""
    fix = "`podium serve --port 0` picks a free port (the URL it prints names it)"
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as podium serve does
        sock.bind((host, port))
        return [_ok(CONSOLE, f"port {port} on {host} is free for `podium serve`")]
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            return [_problem(CONSOLE, f"`podium serve` cannot listen on {host}:{port}: "
                                      f"{exc.strerror or exc}", fix)]
    finally:
        sock.close()
    console = _console_at(host, port, timeout)
    if console is not None:
        pid = f" (pid {console['pid']})" if "pid" in console else ""
        there = str(console.get("home", ""))
        if not there or _same(Path(there), home):
            return [_ok(CONSOLE, f"a podium console already serves http://{host}:{port}/"
                                 f"{pid}")]
        return [_info(CONSOLE, f"port {port} on {host} is held by the podium console of "
                               f"another home, {there}{pid}", fix + " for this home")]
    holder = _holder(port)
    return [_problem(CONSOLE, f"port {port} on {host} is held by another program"
                              f"{f' ({holder})' if holder else ''}: `podium serve` cannot "
                              "listen there", f"{fix}, or end the program that holds it")]


def _console_at(host: str, port: int, timeout: float) -> dict[str, object] | None:
    """What the podium console on host:port says about itself (/api/info answers without the
    token on loopback), or None when what answers there is no podium console."""
    import http.client

    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", "/api/info", headers={"Accept": "application/json"})
        resp = conn.getresponse()
        data = json.loads(resp.read(65536).decode("utf-8"))
    except (OSError, http.client.HTTPException, ValueError):
        return None
    finally:
        conn.close()
    if not isinstance(data, dict):
        return None
    if resp.status == 200 and "podium" in data and "home" in data:
        return data
    if resp.status == 401 and "console token" in str(data.get("error", "")):
        return {}  # a console that needs its token even to read (--allow-remote)
    return None


def _holder(port: int) -> str | None:
    """The process listening on the port, when this user may know it."""
    import psutil

    try:
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and \
                    conn.laddr.port == port and conn.pid:
                try:
                    return f"pid {conn.pid}, {psutil.Process(conn.pid).name()}"
                except psutil.Error:
                    return f"pid {conn.pid}"
    except (psutil.Error, OSError):
        return None
    return None


def _same(a: Path, b: Path) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)
