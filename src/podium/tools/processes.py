"""Commands that end with podium: each runs as the leader of its own process group, is fed, read
and bounded by one loop, and is registered with a reaper process that kills every group still
registered when podium exits or is killed (docs/decisions/0011-child-processes.md).

The reaper is a small `python -S -I` process in its own session, started before the first
command. It reads "+PGID" / "-PGID" lines from a pipe whose write end only podium holds (the
end is non-inheritable and commands start with close_fds), so it reads EOF when podium's
process ends in any way, SIGKILL included, and then sends SIGKILL to each group it still
holds. A start is announced before the spawn ("?") and closed with the group's registration
("="): a podium killed between the two leaves its reaper a start under way, and the reaper
then also kills every group led by a process carrying this podium process's mark
(PODIUM_REAPER_MARK, in every command's environment), which the new command has.

A group is killed and unregistered only while its leader is an unreaped zombie or after it was
reaped, never on a guess: the leader's exit is observed without reaping it (a pidfd, or waitid
with WNOWAIT), so the group's id cannot have been reused when podium signals it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import select
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field

from podium.records import record

RUN_ID_VARIABLE = "PODIUM_RUN_ID"  # in every command's environment: the run it belongs to
# in every command's environment too: which podium process started it (its reaper's mark)
MARK_VARIABLE = "PODIUM_REAPER_MARK"
DRAIN_SECONDS = 2.0  # how long pipes may stay open once their group was killed
REAP_SECONDS = 5.0  # how long a killed leader may take to be reaped
_POLL_SECONDS = 0.02  # how often the leader's exit is polled where there is no pidfd
_PIPE_BUF = getattr(select, "PIPE_BUF", 512)  # a write this size never blocks when writable
_READ_SIZE = 65536

# The reaper reads lines: `+PGID` registers a group, `-PGID` unregisters it, `?` says a
# command is being started and `=` that this start ended (its group registered, or it failed).
# At EOF it kills every registered group, and, when a start was still under way (podium was
# killed between the spawn and the registration), every group led by a process that carries
# this podium process's mark (MARK_VARIABLE, its last argument; Linux: read from /proc).
_REAPER_CODE = """\
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
groups, starting, rest = set(), 0, b""
while True:
    chunk = os.read(0, 65536)
    if not chunk:
        break
    *lines, rest = (rest + chunk).split(b"\\n")
    for line in lines:
        kind = line[:1]
        if kind == b"+":
            groups.add(int(line[1:]))
        elif kind == b"-":
            groups.discard(int(line[1:]))
        elif kind == b"?":
            starting += 1
        elif kind == b"=":
            starting -= 1
if starting > 0:
    mark = ("PODIUM_REAPER_MARK=" + sys.argv[-1]).encode()
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        pids = []
    for pid in pids:
        try:
            with open("/proc/%d/environ" % pid, "rb") as f:
                marked = mark in f.read().split(b"\\0")
            if marked and os.getpgid(pid) == pid:
                groups.add(pid)
        except OSError:
            pass
for pgid in groups:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
"""


# what a helper process of podium's own (the reaper, git for registries) keeps of podium's
# environment: nothing that could be a key (its /proc/PID/environ is readable by the user's
# every process, the commands agents run included)
HELPER_VARIABLES = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ")


def helper_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a helper process: HELPER_VARIABLES from podium's, and `extra`."""
    env = {k: os.environ[k] for k in HELPER_VARIABLES if k in os.environ}
    env.update(extra or {})
    return env


class _Reaper:
    """podium's end of the reaper: registers and unregisters process groups, and starts the
    reaper process on the first group (again if it was killed). Best effort: when the reaper
    cannot start, commands still run, without the guard."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._groups: set[int] = set()
        self._starting = 0  # starts under way: spawned, or about to be, and not registered
        self._mark = ""  # this process's mark (MARK_VARIABLE), made on first use
        self._inherited: list[subprocess.Popen[bytes]] = []
        self._hooked = False

    def mark(self) -> str:
        """This process's mark, set in the environment of every command it starts."""
        with self._lock:
            return self._mark_unlocked()

    def _mark_unlocked(self) -> str:
        if not self._mark:
            self._mark = f"{os.getpid()}-{os.urandom(6).hex()}"
        return self._mark

    def starting(self) -> None:
        """A command is about to start: the reaper runs, and knows until `started` to kill
        the groups led by this process's marked commands should podium die before it could
        register the new group. (A podium killed in the moment between a spawn and its
        registration once left the command running.)"""
        with self._lock:
            proc = self._proc
            if proc is None or proc.poll() is not None:
                self._start()
            self._starting += 1
            self._send(b"?\n")

    def started(self, pgid: int | None) -> None:
        """The start ended: its group `pgid` is registered (None: the start failed)."""
        with self._lock:
            self._starting -= 1
            if pgid is not None:
                self._groups.add(pgid)
            self._send(b"=\n" if pgid is None else b"+%d\n=\n" % pgid)

    def discard(self, pgid: int) -> None:
        with self._lock:
            if pgid in self._groups:
                self._groups.discard(pgid)
                self._send(b"-%d\n" % pgid)

    def pid(self) -> int | None:
        """The reaper process's id, None before the first command."""
        with self._lock:
            return self._proc.pid if self._proc is not None else None

    def _send(self, line: bytes) -> None:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            self._start()
            return
        assert proc.stdin is not None
        try:
            os.write(proc.stdin.fileno(), line)
        except OSError:  # the reaper was killed: start another, which learns every group
            self._start()

    def _start(self) -> None:
        self._stop(wait=1.0)
        if not self._hooked:
            self._hooked = True
            atexit.register(self.close)
            os.register_at_fork(after_in_child=self._forget)
        try:
            proc = subprocess.Popen(
                [sys.executable, "-S", "-I", "-c", _REAPER_CODE, "podium-reaper",
                 self._mark_unlocked()],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                cwd="/", close_fds=True, start_new_session=True, env=helper_environment())
        except OSError:
            return
        self._proc = proc
        assert proc.stdin is not None
        with contextlib.suppress(OSError):
            os.write(proc.stdin.fileno(),
                     b"".join(b"+%d\n" % g for g in self._groups) + b"?\n" * self._starting)

    def _stop(self, wait: float) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        assert proc.stdin is not None
        with contextlib.suppress(OSError):
            proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(wait)

    def close(self) -> None:
        """podium is exiting: the reaper kills the groups still registered, and exits."""
        with self._lock:
            self._stop(wait=1.0)

    def _forget(self) -> None:
        # In a forked child: the parent's reaper is not ours to feed, close or wait for.
        self._lock = threading.Lock()
        if self._proc is not None:
            self._inherited.append(self._proc)
            self._proc = None
        self._groups.clear()
        self._starting = 0
        self._mark = ""  # a mark of its own: the parent's reaper must not take its commands


_reaper = _Reaper()


def reaper_pid() -> int | None:
    """The id of this process's reaper, None until the first command started."""
    return _reaper.pid()


@record(frozen=True)
class Command:
    """A command to run as the leader of its own process group."""

    argv: Sequence[str]
    env: Mapping[str, str]
    cwd: str | None = None
    stdin: bytes | None = None  # piped, then closed; None: /dev/null
    run_id: str | None = None  # set as PODIUM_RUN_ID, the marker of a run's processes
    output_cap: int = 10 * 1024 * 1024  # bytes kept per stream; the rest is read and dropped
    # True: stdout passing output_cap ends the command at once (its group is killed), as a
    # script step fails then; False: the rest of stdout is read and dropped
    stop_past_stdout_cap: bool = False
    term_grace: float = 0.0  # at a timeout or an interrupt: SIGTERM, this long, then SIGKILL
    # True: done once the leader exited AND stdout and stderr closed (what a shell's `$(...)`
    # waits for); False: done once the leader exited. Either way the rest of the group is
    # then killed.
    wait_for_output: bool = True


TAIL_BYTES = 1024  # the end of a stream kept beside its first `cap` bytes


@record
class Captured:
    """What a command wrote to one stream: its first `cap` bytes, how many were dropped, and
    (once some were) the last TAIL_BYTES it wrote."""

    cap: int
    data: bytearray = field(default_factory=bytearray)
    dropped: int = 0
    tail: bytes = b""

    def add(self, chunk: bytes) -> None:
        room = max(self.cap - len(self.data), 0)
        self.data += chunk[:room]
        if len(chunk) > room:
            self.dropped += len(chunk) - room
            self.tail = (self.tail + chunk[room:])[-TAIL_BYTES:]

    @property
    def truncated(self) -> bool:
        return self.dropped > 0

    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


@record(frozen=True)
class Finished:
    returncode: int  # the leader's exit status; -N when signal N ended it
    timed_out: bool
    stdout: Captured
    stderr: Captured


def start(command: Command) -> Running:
    """Start `command` in a new session (its own process group) and register the group with
    the reaper. Raises OSError when it cannot start."""
    env = dict(command.env)
    if command.run_id is not None:
        env[RUN_ID_VARIABLE] = command.run_id
    env[MARK_VARIABLE] = _reaper.mark()
    _reaper.starting()
    try:
        proc = subprocess.Popen(list(command.argv), cwd=command.cwd, env=env,
                                stdin=subprocess.DEVNULL if command.stdin is None
                                else subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                close_fds=True, start_new_session=True)
    except BaseException:
        _reaper.started(None)
        raise
    _reaper.started(proc.pid)
    try:
        return Running(proc, command)
    except BaseException:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        _reaper.discard(proc.pid)
        raise


class Running:
    """A started command: its leader, its group, its pipes and what they delivered."""

    def __init__(self, proc: subprocess.Popen[bytes], command: Command) -> None:
        self.proc = proc
        self.command = command
        self.pgid = proc.pid  # registered with the reaper by start()
        self.exited = False
        self.reaped = False
        self.pidfd = _pidfd(proc.pid)
        self.watching = self.pidfd is not None  # the selector wakes up when the leader exits
        assert proc.stdout is not None
        assert proc.stderr is not None
        self.stdout = Captured(command.output_cap)
        self.stderr = Captured(command.output_cap)
        self.outputs = {proc.stdout.fileno(): self.stdout, proc.stderr.fileno(): self.stderr}
        self.selector = selectors.DefaultSelector()
        for fd in self.outputs:
            self.selector.register(fd, selectors.EVENT_READ)
        if self.pidfd is not None:
            self.selector.register(self.pidfd, selectors.EVENT_READ)
        self.pending = memoryview(command.stdin or b"")
        self.stdin_fd: int | None = None
        if proc.stdin is not None:
            if self.pending:
                self.stdin_fd = proc.stdin.fileno()
                self.selector.register(self.stdin_fd, selectors.EVENT_WRITE)
            else:
                self._close_stdin()

    def finish(self, timeout: float | None, *,
               slow: tuple[float, Callable[[], None]] | None = None) -> Finished:
        """Feed, read and wait until the command is done or `timeout` seconds passed, then
        kill what is left of its group. `slow` is (seconds, fn): fn() is called once, on this
        thread, if the command is still running after that long (an error it raises ends the
        command as an interrupt does). Whatever happens (an interrupt too), the group is
        killed, its leader reaped and the pipes closed when this returns."""
        try:
            now = time.monotonic()
            deadline = None if timeout is None else now + timeout
            timed_out = self._communicate(
                deadline, None if slow is None else (now + slow[0], slow[1]))
            self._end(self.command.term_grace if timed_out else 0.0)
            self._drain(DRAIN_SECONDS)
        except BaseException:
            self._end(self.command.term_grace)
            raise
        finally:
            self._close()
        code = self.proc.returncode
        return Finished(-signal.SIGKILL if code is None else code, timed_out,
                        self.stdout, self.stderr)

    # ------------------------------------------------------------------ the loop

    def _communicate(self, deadline: float | None,
                     slow: tuple[float, Callable[[], None]] | None) -> bool:
        """Run the loop until the command is done; True when the deadline came first.
        `slow` is (when, fn): fn() runs once `when` (monotonic) passed, if it is not done."""
        while True:
            if self._leader_exited() and (not self.command.wait_for_output
                                          or not self.outputs):
                return False
            if self.command.stop_past_stdout_cap and self.stdout.truncated:
                return False
            if slow is not None and (deadline is None or slow[0] < deadline):
                if not self._select(slow[0]):  # still running when `when` came
                    slow[1]()
                    slow = None
                continue
            if not self._select(deadline):
                return True

    def _drain(self, seconds: float) -> None:
        """Read what the killed group left in its pipes, for at most `seconds` (a process
        that left the group may hold them open)."""
        end = time.monotonic() + seconds
        while self.outputs and self._select(end):
            pass

    def _select(self, end: float | None) -> bool:
        """Handle one batch of events, waiting until `end` at most; False once `end` passed."""
        wait = None
        if end is not None:
            wait = end - time.monotonic()
            if wait <= 0:
                return False
        if not self.watching and not self.exited:
            wait = _POLL_SECONDS if wait is None else min(wait, _POLL_SECONDS)
        for key, _ in self.selector.select(wait):
            fd = key.fd
            if fd == self.pidfd:
                self.selector.unregister(fd)  # stays readable; _leader_exited() takes over
                self.watching = False
            elif fd == self.stdin_fd:
                self._feed()
            else:
                data = os.read(fd, _READ_SIZE)
                if data:
                    self.outputs[fd].add(data)
                else:
                    self.selector.unregister(fd)
                    del self.outputs[fd]
        return True

    def _feed(self) -> None:
        assert self.stdin_fd is not None
        try:
            written = os.write(self.stdin_fd, self.pending[:_PIPE_BUF])
        except OSError:  # the command closed its stdin: the rest is not wanted
            written = len(self.pending)
        self.pending = self.pending[written:]
        if not self.pending:
            self._close_stdin()

    def _close_stdin(self) -> None:
        if self.stdin_fd is not None:
            self.selector.unregister(self.stdin_fd)
            self.stdin_fd = None
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()

    # ------------------------------------------------------------------ the group

    def _leader_exited(self) -> bool:
        """Whether the leader exited, without reaping it: while it is a zombie its pid, and so
        the group's id, cannot be reused."""
        if not self.exited:
            try:
                info = os.waitid(os.P_PID, self.pgid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:  # already reaped
                info = None
                self.exited = True
            else:
                self.exited = info is not None
        return self.exited

    def _wait_exit(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not self._leader_exited():
            left = end - time.monotonic()
            if left <= 0:
                return
            if self.pidfd is not None:
                select.select([self.pidfd], [], [], left)
            else:
                time.sleep(min(left, _POLL_SECONDS))

    def _kill(self, sig: int) -> None:
        if not self.reaped:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pgid, sig)

    def _end(self, grace: float) -> None:
        """Kill the whole group (SIGTERM first and up to `grace` seconds for the leader),
        reap the leader, and unregister the group."""
        if self.reaped:
            return
        if grace > 0 and not self._leader_exited():
            self._kill(signal.SIGTERM)
            self._wait_exit(grace)
        self._kill(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(REAP_SECONDS)
        if self.proc.returncode is not None:
            self.reaped = True
            _reaper.discard(self.pgid)

    def _close(self) -> None:
        self._close_stdin()
        self.selector.close()
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


def _pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when `pid` exits (Linux 5.3+), else None."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        fd: int = opener(pid)
    except OSError:
        return None
    return fd
