"""`podium doctor` through the real CLI, each test with its own PODIUM_HOME in tmp_path and its
own console port: all well on a fresh home, a damaged store named in one line and left alone
(exit 3), a run whose owner was SIGKILLed, a process a run left behind, a port held by another
program (exit 1)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers_engine import cli_env, podium_argv, wait_until, write

TIMEOUT = 60.0

TINY_WF = """
workflow: {name: tiny, entry_point: a}
agents:
  - {name: a, type: set, value: 1}
"""

# The script kills the podium process that runs it: the run stays `running`, its lease names
# a process that is gone.
KILLER_WF = """
workflow: {name: killer, entry_point: k}
agents:
  - name: k
    type: script
    command: python
    args: ["-c", "import os, signal; os.kill(os.getppid(), signal.SIGKILL)"]
"""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Home:
    """A PODIUM_HOME, a console port nobody uses, and the CLI."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"
        self.store = self.home / "podium.db"
        self.port = _free_port()

    def __call__(self, *args: str | Path, env: dict[str, str] | None = None,
                 ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(podium_argv(*args), cwd=self.root, env=cli_env(self.home, env),
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              encoding="utf-8", errors="replace", timeout=TIMEOUT, check=False)

    def doctor(self, *args: str, port: int | None = None, env: dict[str, str] | None = None,
               ) -> subprocess.CompletedProcess[str]:
        proc = self("doctor", "--port", str(port or self.port), *args, env=env)
        assert "Traceback" not in proc.stderr, proc.stderr
        return proc

    def run(self, text: str, name: str = "wf.yaml") -> subprocess.CompletedProcess[str]:
        return self("run", write(self.root, text, name), "-q")

    def interrupted_run(self) -> str:
        """A run whose owning `podium run` was SIGKILLed in its first step: its id."""
        killed = self.run(KILLER_WF, "killer.yaml")
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        proc = self("runs", "--format", "json")
        assert proc.returncode == 0, proc.stderr
        (row,) = [r for r in json.loads(proc.stdout) if r["workflow"] == "killer"]
        assert row["status"] == "interrupted"
        run_id: str = row["id"]
        return run_id


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return Home(tmp_path)


def _lines(proc: subprocess.CompletedProcess[str], text: str) -> list[str]:
    return [line for line in proc.stdout.splitlines() if text in line]


def _fix_after(proc: subprocess.CompletedProcess[str], text: str) -> str:
    """The fix printed under the (only) finding that contains `text`."""
    lines = proc.stdout.splitlines()
    (at,) = [i for i, line in enumerate(lines) if text in line]
    fix = lines[at + 1].strip()
    assert fix.startswith("fix: "), proc.stdout
    return fix[len("fix: "):]


def _json(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


def test_a_fresh_home_is_all_well_and_keys_are_never_printed(home: Home) -> None:
    secret = "sk-test-do-not-print-0123456789"
    env = {"OPENAI_API_KEY": secret}
    fresh = home.doctor(env=env)
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr
    assert fresh.stdout.rstrip().endswith("all well")
    assert _lines(fresh, "no run store yet")
    assert not home.home.exists()  # doctor creates nothing
    assert _lines(fresh, "openai: OPENAI_API_KEY is set")
    assert _lines(fresh, "claude: none of ANTHROPIC_API_KEY")  # information, not a problem
    assert _lines(fresh, f"port {home.port} on 127.0.0.1 is free")
    assert "PROBLEM" not in fresh.stdout

    assert home.run(TINY_WF).returncode == 0
    used = home.doctor("--format", "json", env=env)
    assert used.returncode == 0, used.stdout
    data = _json(used)
    assert data["exit_code"] == 0
    assert [f for f in data["findings"] if f["severity"] == "problem"] == []
    store = [f["message"] for f in data["findings"] if f["area"] == "store"]
    assert any(str(home.store) in m and "integrity check passed" in m for m in store)
    for proc in (fresh, used):
        assert secret not in proc.stdout + proc.stderr


def test_a_damaged_store_is_named_in_one_line_and_left_untouched(home: Home) -> None:
    assert home.run(TINY_WF).returncode == 0
    assert home.run(TINY_WF).returncode == 0
    data = home.store.read_bytes()
    home.store.write_bytes(data[:4096 + 8] + b"\xa5" * 4088 + data[8192:])  # a garbage page
    before = hashlib.sha256(home.store.read_bytes()).hexdigest()

    proc = home.doctor()
    assert proc.returncode == 3, proc.stdout + proc.stderr
    (line,) = _lines(proc, str(home.store))
    assert line.startswith("PROBLEM")
    assert "corrupted" in line
    assert "left it untouched" in line
    assert "move podium.db aside" in _fix_after(proc, str(home.store))
    assert proc.stdout.rstrip().endswith("(exit 3)")
    assert _json(home.doctor("--format", "json"))["exit_code"] == 3

    assert hashlib.sha256(home.store.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in home.home.glob("podium.db*")) == ["podium.db"]


def test_a_run_whose_owner_was_killed_is_reported_with_the_resume_command(home: Home) -> None:
    run_id = home.interrupted_run()
    proc = home.doctor()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (line,) = _lines(proc, f"run {run_id} (killer)")
    assert line.startswith("PROBLEM")
    assert "was interrupted" in line
    assert "is gone" in line
    assert _fix_after(proc, f"run {run_id} (killer)") == f"podium resume {run_id}"


def test_a_running_run_without_a_lease_is_reported(home: Home) -> None:
    run_id = home.interrupted_run()
    con = sqlite3.connect(home.store)
    try:
        con.execute("DELETE FROM leases")
        con.commit()
    finally:
        con.close()
    proc = home.doctor()
    assert proc.returncode == 1, proc.stdout
    (line,) = _lines(proc, f"run {run_id} (killer)")
    assert "no process holds its lease" in line
    assert _fix_after(proc, f"run {run_id} (killer)") == f"podium resume {run_id}"


# A script that says it started, then waits (bounded) until podium is told to stop.
SLOW_WF = """
workflow: {name: slow, entry_point: wait}
agents:
  - name: wait
    type: script
    command: python
    args: ["-c", "import pathlib, sys, time; pathlib.Path(sys.argv[1]).touch(); time.sleep(60)",
           "{{ workflow.dir }}/started"]
"""


def test_a_live_run_and_its_processes_are_all_well(home: Home) -> None:
    wf = write(home.root, SLOW_WF, "slow.yaml")
    live = subprocess.Popen(podium_argv("run", wf, "-q"), cwd=home.root, env=cli_env(home.home),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        assert wait_until((home.root / "started").exists, timeout=TIMEOUT)
        proc = home.doctor()
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert _lines(proc, "1 run in progress, each advanced by a live process")
        assert _lines(proc, "no process left behind by a run")
    finally:
        live.terminate()
        live.wait(timeout=TIMEOUT)


def test_a_process_left_behind_by_a_run_is_named_with_its_fix(home: Home) -> None:
    run_id = home.interrupted_run()
    base = {k: v for k, v in os.environ.items() if k != "PODIUM_RUN_ID"}
    orphan = subprocess.Popen(["sleep", "300"], env={**base, "PODIUM_RUN_ID": run_id})
    stranger = subprocess.Popen(["sleep", "301"],  # a run of another store: not ours to judge
                                env={**base, "PODIUM_RUN_ID": "run-of-another-home"})
    try:
        proc = home.doctor()
        assert proc.returncode == 1, proc.stdout + proc.stderr
        (line,) = _lines(proc, f"pid {orphan.pid} `sleep 300`")
        assert line.startswith("PROBLEM")
        assert f"run {run_id} (interrupted)" in line
        assert _fix_after(proc, f"pid {orphan.pid}") == f"kill {orphan.pid}"
        assert str(stranger.pid) not in proc.stdout
    finally:
        for child in (orphan, stranger):
            child.kill()
            child.wait(timeout=TIMEOUT)
    after = home.doctor()
    assert _lines(after, "no process left behind by a run"), after.stdout


def test_a_console_port_held_by_another_program_is_reported_with_the_fix(home: Home) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        proc = home.doctor(port=port)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    text = f"port {port} on 127.0.0.1 is held by another program"
    (line,) = _lines(proc, text)
    assert line.startswith("PROBLEM")
    if sys.platform == "linux":  # psutil names the holder only where it may read sockets
        assert f"pid {os.getpid()}" in line  # this test process holds it
    assert "podium serve --port 0" in _fix_after(proc, text)
