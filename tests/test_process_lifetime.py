"""Processes that podium starts end with their step, their timeout and podium itself (real
processes, no mocks; docs/decisions/0011-child-processes.md):

- SIGKILL of `podium run` leaves no process of its script alive (the reaper kills the group),
  grandchildren orphaned inside the group included;
- a script's timeout fails the step at the timeout even when a background child holds stdout,
  and ends that child;
- a script that finishes leaves no background process behind;
- the agent tool run_command ends what its command started in the background;
- scripts and commands carry PODIUM_RUN_ID, the marker of their run;
- a podium killed between spawning a script and registering its group still ends it.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from helpers_engine import cli_env, podium_argv, process_gone, run_yaml, wait_until, write
from podium.errors import LimitExceeded, StepError
from podium.events.model import ScriptOutput
from podium.tools.processes import RUN_ID_VARIABLE
from podium.tools.workspace import Workspace

pytestmark = pytest.mark.skipif(not hasattr(os, "killpg"), reason="process groups are POSIX")


def marked(run_id: str) -> list[psutil.Process]:
    """The live (not zombie) processes whose environment says they belong to `run_id`."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get(RUN_ID_VARIABLE) == run_id:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


class Leftovers:
    """What a test started indirectly (pids, and run ids as markers): whatever of it still
    runs when the test ends is killed, so a failing test leaves no process behind."""

    def __init__(self) -> None:
        self.pids: list[int] = []
        self.run_ids: list[str] = []

    def gone(self) -> bool:
        return all(process_gone(pid) for pid in self.pids) and \
            not any(marked(run_id) for run_id in self.run_ids)

    def kill(self) -> None:
        for run_id in self.run_ids:
            for proc in marked(run_id):
                with contextlib.suppress(psutil.NoSuchProcess):
                    proc.kill()
        for pid in self.pids:
            if not process_gone(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


@pytest.fixture
def leftovers() -> Iterator[Leftovers]:
    left = Leftovers()
    yield left
    left.kill()


def script_yaml(shell: str, extra: str = "", limits: str = "") -> str:
    """One script step running `sh -c SHELL`; `extra` goes into the step, `limits` into the
    workflow."""
    limits = f", {limits}" if limits else ""
    return f"""
        workflow: {{name: lifetime, entry_point: s{limits}}}
        agents:
          - name: s
            type: script
            command: sh
            args: ["-c", {json.dumps(shell)}]
            {extra}
    """


# A background child, then a grandchild orphaned inside the group (its parent exits at once:
# only a group kill reaches it, a parent-death signal on the script would not).
KILLED_SCRIPTS = {
    "background": "sleep 300 & echo $! >> {pids}; {ready}; sleep 300",
    "orphaned-grandchild": "sh -c 'sleep 300 & echo $! >> {pids}'; {ready}; sleep 300",
}


@pytest.mark.parametrize("shape", sorted(KILLED_SCRIPTS))
def test_sigkill_of_podium_ends_the_scripts_processes(tmp_path: Path, shape: str,
                                                      leftovers: Leftovers) -> None:
    pids, ready = tmp_path / "pids", tmp_path / "ready"
    announce = f'echo $$ $PODIUM_RUN_ID > {ready}.tmp && mv {ready}.tmp {ready}'
    shell = KILLED_SCRIPTS[shape].format(pids=pids, ready=announce)
    path = write(tmp_path, script_yaml(shell))
    podium = subprocess.Popen(podium_argv("run", path), cwd=tmp_path,
                              env=cli_env(tmp_path / "home"), stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        if not wait_until(lambda: ready.exists() or podium.poll() is not None, timeout=60) \
                or not ready.exists():
            podium.kill()
            pytest.fail(f"the script did not start: {podium.communicate()[1]!r}")
        leader, run_id = ready.read_text().split()
        started = [int(leader), *map(int, pids.read_text().split())]
        leftovers.pids.extend(started)
        leftovers.run_ids.append(run_id)
        # and the foreground sleep, which the shell starts just after it announced itself
        assert wait_until(lambda: {p.pid for p in marked(run_id)} > set(started), timeout=10)
        (reaper,) = [p for p in psutil.Process(podium.pid).children()
                     if "podium-reaper" in p.cmdline()]
        leftovers.pids.append(reaper.pid)
        podium.send_signal(signal.SIGKILL)
    finally:
        podium.kill()
        podium.wait()
        assert podium.stderr is not None
        podium.stderr.close()
    assert wait_until(leftovers.gone, timeout=3), \
        f"still alive after podium was killed: {[p.pid for p in marked(run_id)]}"


# `python -m podium ARGS`, killed with SIGKILL right after it spawned its first command and
# before it registered the command's group with the reaper: the narrowest window there is
KILLED_AT_REGISTRATION = """\
import os, runpy, signal
import podium.tools.processes as processes
def started(pgid):
    os.kill(os.getpid(), signal.SIGKILL)
processes._reaper.started = started
runpy.run_module("podium", run_name="__main__", alter_sys=True)
"""


def test_a_podium_killed_before_it_registered_a_group_still_ends_it(
        tmp_path: Path, leftovers: Leftovers) -> None:
    """podium dies between spawning a script and registering its group: the reaper knew a
    start was under way, and kills the groups led by the commands carrying this podium
    process's mark (PODIUM_REAPER_MARK), the new script's included."""
    ready = tmp_path / "ready"
    path = write(tmp_path, script_yaml(f"sleep 300 & touch {ready}; sleep 301"))
    argv = podium_argv("run", str(path))
    proc = subprocess.run([argv[0], "-c", KILLED_AT_REGISTRATION, *argv[3:]], cwd=tmp_path,
                          env=cli_env(tmp_path / "home"), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    db = sqlite3.connect(tmp_path / "home" / "podium.db")
    try:
        (run_id,), = db.execute("SELECT id FROM runs").fetchall()
    finally:
        db.close()
    leftovers.run_ids.append(run_id)  # whatever the reaper misses is killed after the test
    # the script ran, or was killed before it could: either way nothing of it is left
    assert wait_until(lambda: not marked(run_id), timeout=10), \
        f"still alive after podium was killed: {[p.cmdline() for p in marked(run_id)]}"


@pytest.mark.parametrize(("limits", "error", "message"), [
    ("", StepError, "script timed out after 1s (the whole process group was killed)"),
    ("limits: {timeout_seconds: 1}", LimitExceeded,
     "the run's timeout expired while script 's' ran"),
])
def test_timeout_holds_while_a_background_child_keeps_stdout_open(
        tmp_path: Path, leftovers: Leftovers, limits: str, error: type[Exception],
        message: str) -> None:
    child = tmp_path / "child.pid"
    text = script_yaml(f"sleep 30 > /dev/stdout & echo $! > {child}; echo started",
                       "" if limits else "timeout: 1", limits)
    began = time.monotonic()
    run = run_yaml(tmp_path, text)
    elapsed = time.monotonic() - began
    leftovers.pids.append(int(child.read_text()))
    assert run.exit_code == (3 if error is StepError else 4)
    assert isinstance(run.result.error, error)
    assert message in run.error_text()
    assert 0.9 < elapsed < 10
    assert run.of(ScriptOutput) == []
    assert wait_until(leftovers.gone, timeout=3)


def test_a_finished_script_leaves_no_background_process(tmp_path: Path,
                                                       leftovers: Leftovers) -> None:
    child = tmp_path / "child.pid"
    run = run_yaml(tmp_path, script_yaml(
        f"sleep 100 > /dev/null 2>&1 & echo $! > {child}; "
        'echo "{\\"run\\": \\"$PODIUM_RUN_ID\\"}"'))
    leftovers.pids.append(int(child.read_text()))
    leftovers.run_ids.append(run.result.run_id)
    assert run.exit_code == 0, run.error_text()
    assert run.outputs["s"]["run"] == run.result.run_id
    assert wait_until(leftovers.gone, timeout=3)


def test_output_written_by_a_background_child_is_kept(tmp_path: Path) -> None:
    # the script is done when its output closes, as `$(...)` in a shell: nothing is cut off
    run = run_yaml(tmp_path, script_yaml("(sleep 0.3; echo late) & echo early", "timeout: 20"))
    assert run.exit_code == 0, run.error_text()
    assert run.outputs["s"]["stdout"] == "early\nlate\n"


def test_run_command_ends_its_background_processes(tmp_path: Path,
                                                   leftovers: Leftovers) -> None:
    run_id = f"run-command-{secrets.token_hex(4)}"
    ws = Workspace(tmp_path, run_id=run_id)
    began = time.monotonic()
    out = ws.run_command({"command": "sleep 100 & echo $! > child.pid; echo $PODIUM_RUN_ID"})
    assert time.monotonic() - began < 10
    leftovers.pids.append(int((tmp_path / "child.pid").read_text()))
    leftovers.run_ids.append(run_id)
    assert out == f"exit code: 0\nstdout:\n{run_id}\n\nstderr:\n"
    assert wait_until(leftovers.gone, timeout=3)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_a_script_inherits_no_descriptor_of_podium(tmp_path: Path) -> None:
    # only stdin, stdout and stderr: not the reaper's pipe (which would keep it from seeing
    # podium's end), nor another script's pipes
    run = run_yaml(tmp_path, f"""
        workflow: {{name: fds, entry_point: s}}
        agents:
          - name: s
            type: script
            command: {json.dumps(sys.executable)}
            args: ["-c", "import os, json; print(json.dumps({{'fds': sorted(os.listdir('/proc/self/fd'))}}))"]
    """)
    assert run.exit_code == 0, run.error_text()
    assert len(run.outputs["s"]["fds"]) == 4  # 0, 1, 2 and the listing's own descriptor
