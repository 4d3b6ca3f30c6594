"""Who advances a run, and whether that process is still alive: the one rule for liveness.

A process that advances a run (run, resume, a gate answer that resumes, fork) holds a lease on
it in the store: its pid, the kernel's start time of that pid (psutil), its host, and a
heartbeat it renews every HEARTBEAT seconds from a thread of its own. The owner is dead when
its pid is gone, when the pid now belongs to another process (another start time), or when
its heartbeat is older than STALE (a hung or frozen process, or an owner on another host that
cannot be asked). A run whose status says `running` but whose owner is dead was interrupted.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Protocol

from podium.app.family import root_of
from podium.records import record
from podium.store.base import GateRecord, Lease, Leases, Owner, RunRecord, RunStore

HEARTBEAT = 5.0  # seconds between an owner's heartbeats
STALE = 30.0  # a heartbeat older than this means the owner is gone


def this_host() -> str:
    return os.uname().nodename  # gethostname(), without importing socket


def process_start(pid: int) -> float | None:
    """The kernel's start time of `pid` (with the pid, a process identity), or None when no
    such process exists."""
    if _PROC:
        return _linux_start(pid)
    import psutil

    try:
        return float(psutil.Process(pid).create_time())
    except (psutil.Error, OSError, ValueError):
        return None


_PROC = sys.platform.startswith("linux") and os.path.isdir("/proc/self")


def _linux_start(pid: int) -> float | None:
    """psutil's create_time() on Linux, computed as psutil does it (the start in clock ticks
    since boot from /proc/PID/stat, plus /proc/stat's btime) without importing psutil: every
    run takes a lease at its start, and psutil's import was most of what that cost."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        ticks = float(data[data.rfind(b")") + 2:].split()[19])
        with open("/proc/stat", "rb") as f:
            boot = next(float(line.split()[1]) for line in f if line.startswith(b"btime"))
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return ticks / os.sysconf("SC_CLK_TCK") + boot


def this_process(command: str) -> Owner:
    pid = os.getpid()
    start = process_start(pid)
    return Owner(pid, start if start is not None else time.time(), this_host(), command)


def owner_state(lease: Lease, now: float | None = None) -> str:
    """`alive`; `gone` (its pid is gone, or now another process's); `hung` (alive but its
    heartbeat is stale); `silent` (on another host, heartbeat stale)."""
    now = time.time() if now is None else now
    stale = now - lease.heartbeat_at > STALE
    owner = lease.owner
    if owner.host != this_host():  # another machine: its heartbeat is all there is to go by
        return "silent" if stale else "alive"
    start = process_start(owner.pid)
    if start is None or abs(start - owner.pid_start) >= 0.01:
        return "gone"
    return "hung" if stale else "alive"


def owner_alive(lease: Lease, now: float | None = None) -> bool:
    """Is the lease's owner still the live process that took it, and renewing it?"""
    return owner_state(lease, now) == "alive"


def ancestors() -> set[int]:
    """This process and its parents, up to init: a stop must never signal one of them."""
    import psutil

    out: set[int] = set()
    with contextlib.suppress(psutil.Error):
        proc: psutil.Process | None = psutil.Process()
        while proc is not None and proc.pid > 1:
            out.add(proc.pid)
            proc = proc.parent()
    return out


@record(frozen=True)
class Liveness:
    """What a run is doing now, as people read it."""

    status: str  # the stored status, or `interrupted` for a running run whose owner is dead
    lease: Lease | None
    live: bool  # a live process advances it

    @property
    def interrupted(self) -> bool:
        return self.status == "interrupted"


class RunReads(Protocol):
    """What liveness reads: a RunStore, or the console's read-only catalog (store/catalog.py)."""

    def get_run(self, run_id: str) -> RunRecord: ...

    def lease(self, run_id: str) -> Lease | None: ...


def runs_on_temporal(run: RunRecord) -> bool:
    """Does a Temporal workflow advance this (top-level) run? Its row records the executor."""
    return (run.options or {}).get("executor") == "temporal"


def liveness(store: RunReads, run: RunRecord) -> Liveness:
    """The run as it is: a `running` run without a live owner is `interrupted` (resumable).
    A sub-workflow run lives and dies with its top-level run. Every surface (CLI, console,
    fleet TUI, MCP) reads a run's status through this."""
    root = root_of(store, run)
    lease = store.lease(root.id)
    if runs_on_temporal(root):
        # no local owner: its Temporal workflow advances it (its workers hold no lease)
        return Liveness(run.status, lease, root.status in ("running", "waiting"))
    live = lease is not None and owner_alive(lease)
    status = run.status
    if status == "running" and not live:
        status = "interrupted"
    return Liveness(status, lease, live)


HELD = ("running", "interrupted", "waiting")  # the statuses an open gate reads as `waiting`


def held(lv: Liveness, gates: Sequence[GateRecord]) -> Liveness:
    """The run as people read it, given the open gates of its family (app/family.py): a run
    held by an open gate is `waiting` for a person, whether it parked (stored `waiting`), a
    live process asks at a console gate (stored `running`), or the process that asked died
    (answering resumes it). The one rule `runs`, `show`, the console, the fleet TUI and the
    MCP server read."""
    if gates and lv.status in HELD and lv.status != "waiting":
        return replace(lv, status="waiting")
    return lv


def seen(store: RunStore, run: RunRecord) -> Liveness:
    """liveness, held by the open gates of the run's family."""
    from podium.app.family import open_gates

    return held(liveness(store, run), open_gates(store, run.id))


def resume_hint(run_id: str) -> str:
    return f"podium resume {run_id}"


class Ownership:
    """A lease held for the life of a `with` block, its heartbeat renewed by a thread."""

    def __init__(self, store: Leases, run_id: str, command: str) -> None:
        self.store = store
        self.run_id = run_id
        self.owner = this_process(command)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def acquire(self) -> Ownership:
        """Take the lease (RunOwned when a live process holds it), then keep it alive."""
        self.store.acquire_lease(self.run_id, self.owner, owner_alive)
        return self.keep()

    def keep(self) -> Ownership:
        """Keep a lease this process holds alive (one written with its run, for instance)."""
        self._thread = threading.Thread(target=self._beat, name=f"podium-lease-{self.run_id}",
                                        daemon=True)
        self._thread.start()
        return self

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT):
            try:
                if not self.store.heartbeat(self.run_id, self.owner):
                    sys.stderr.write(f"podium: run {self.run_id}: another process took over "
                                     "its lease\n")
                    return
            except Exception as exc:  # the run's own writes report a broken store
                sys.stderr.write(f"podium: run {self.run_id}: cannot renew its lease: {exc}\n")
                return

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=HEARTBEAT + 1)
        with contextlib.suppress(Exception):  # a broken store: the lease dies with us
            self.store.release_lease(self.run_id, self.owner)


@contextlib.contextmanager
def owning(store: Leases, run_id: str, command: str) -> Iterator[Ownership]:
    """Hold the run's lease (RunOwned when a live process holds it) while the block runs."""
    ownership = Ownership(store, run_id, command).acquire()
    try:
        yield ownership
    finally:
        ownership.release()


@contextlib.contextmanager
def kept(ownership: Ownership) -> Iterator[Ownership]:
    """Keep the lease `ownership` was given with its run alive while the block runs."""
    ownership.keep()
    try:
        yield ownership
    finally:
        ownership.release()
