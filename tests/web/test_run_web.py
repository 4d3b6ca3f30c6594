"""`podium run --web`: the console runs in the run's process, on a free loopback port, until
the run ends; the run's gates are answered there and the run goes on in the same process."""

from __future__ import annotations

import json
import re
import socket
import subprocess
from pathlib import Path

from console_helpers import (
    LOOP_FLOW,
    Client,
    gate_flow,
    start_podium,
    stop_process,
    store_row,
    write_flow,
)

from helpers_engine import run_cli, wait_until

URL = re.compile(r"podium console: http://127\.0\.0\.1:(\d+)/runs/([0-9a-f]+)#token=(\S+)")


def _console_url(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    assert proc.stderr is not None
    seen = []
    for _ in range(200):
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line)
        m = URL.search(line)
        if m:
            return int(m.group(1)), m.group(2), m.group(3)
    raise AssertionError("no console URL on stderr:\n" + "".join(seen))


def _closed(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def test_run_web_serves_the_run_and_stops_with_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    flow = write_flow(tmp_path, "loop.yaml", LOOP_FLOW.replace("max_iterations: 3",
                                                              "max_iterations: 30"))
    proc = start_podium(home, "run", "--web", flow)
    try:
        port, rid, token = _console_url(proc)
        _out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert store_row(home, rid)["status"] == "success"
        assert (home / "console.token").read_text().strip() == token
        assert _closed(port)
    finally:
        stop_process(proc)


def _at_its_gate(home: Path, tmp_path: Path) -> tuple[subprocess.Popen[str], str, Client]:
    """A `podium run --web` of the gate flow, once its gate is open: (process, run id, a
    console client)."""
    flow, responses = gate_flow(tmp_path / "flows")
    proc = start_podium(home, "run", "--web", flow, "--responses", responses)
    try:
        port, rid, token = _console_url(proc)
        c = Client(port, token)
        assert wait_until(lambda: bool(c.get(f"/api/runs/{rid}").json()["gates"]), 30)
    except BaseException:
        stop_process(proc)
        raise
    return proc, rid, c


def test_a_gate_of_a_live_run_is_answered_in_its_console(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proc, rid, c = _at_its_gate(home, tmp_path)
    try:
        detail = c.get(f"/api/runs/{rid}").json()
        assert detail["run"]["state"] == "waiting"
        assert detail["run"]["live"] is True
        gate = detail["gates"][0]
        reply = c.post(f"/api/runs/{rid}/gates/{gate['id']}/answer", {"value": "approved"})
        assert reply.status == 200
        assert reply.json()["resumed"] == "live"
        _out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        row = store_row(home, rid)
        assert row["status"] == "success"
        assert row["terminal"] == "released"
        assert "waiting for a person to answer gate 'approval' in the console" in err
    finally:
        stop_process(proc)


def test_a_gate_of_a_live_run_answered_from_the_command_line(tmp_path: Path) -> None:
    """`podium gate answer` records the answer; the live run's own process takes it and goes
    on (no second process resumes the run)."""
    home = tmp_path / "home"
    proc, rid, _console = _at_its_gate(home, tmp_path)
    try:
        answered = run_cli(home, "gate", "answer", rid, "approved")
        assert answered.returncode == 0, answered.stderr
        assert f"run {rid} is running" in answered.stderr
        assert "goes on with the answer itself" in answered.stderr
        _out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        row = store_row(home, rid)
        assert row["status"] == "success"
        assert row["terminal"] == "released"
        assert len(_run_ids(home)) == 1
    finally:
        stop_process(proc)


def _run_ids(home: Path) -> list[str]:
    listed = run_cli(home, "runs", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    return [r["id"] for r in json.loads(listed.stdout)]


def test_a_live_run_is_stopped_from_its_console(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proc, rid, c = _at_its_gate(home, tmp_path)
    try:
        reply = c.post(f"/api/runs/{rid}/stop", {})
        assert reply.status == 202
        assert reply.json()["signalled"] == proc.pid
        proc.communicate(timeout=60)
        assert proc.returncode == 130
        assert store_row(home, rid)["status"] == "interrupted"
    finally:
        stop_process(proc)


STAYS = re.compile(r"podium: run finished; the console stays at http://127\.0\.0\.1:(\d+)/runs/"
                   r"([0-9a-f]+)#token=\S+ until Ctrl\+C")


def _kept(proc: subprocess.Popen[str]) -> str:
    """The stderr of a `run --web` up to its "the console stays" line (fails without it)."""
    assert proc.stderr is not None
    seen = []
    for _ in range(400):
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line)
        if STAYS.search(line):
            return "".join(seen)
    raise AssertionError("the console did not say it stays:\n" + "".join(seen))


def _failing_loop(tmp_path: Path) -> Path:
    text = LOOP_FLOW.replace("max_iterations: 3", "max_iterations: 30")
    return write_flow(tmp_path, "loop.yaml", text.replace("status: success", "status: failed"))


def test_run_web_at_a_terminal_keeps_its_console_until_ctrl_c(tmp_path: Path) -> None:
    """With a person at the terminal (stdin is a pseudo-terminal), the console outlives the
    run: its link still works, Ctrl+C ends it, and the exit code is still the run's (1)."""
    import os
    import pty
    import signal

    from helpers_engine import cli_env, podium_argv

    home = tmp_path / "home"
    leader, follower = pty.openpty()
    proc = subprocess.Popen(podium_argv("run", "--web", _failing_loop(tmp_path)),
                            env=cli_env(home), stdin=follower, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, encoding="utf-8",
                            errors="replace", start_new_session=True)
    os.close(follower)
    try:
        err = _kept(proc)
        port, rid, token = _console_url_in(err)
        assert store_row(home, rid)["status"] == "failed"
        assert proc.poll() is None  # the run ended, its console did not
        assert Client(port, token).get(f"/api/runs/{rid}").status == 200
        os.kill(proc.pid, signal.SIGINT)
        proc.communicate(timeout=30)
        assert proc.returncode == 1
        assert _closed(port)
    finally:
        stop_process(proc)
        os.close(leader)


def test_run_web_without_a_terminal_stays_only_when_asked(tmp_path: Path) -> None:
    """No terminal (CI, a pipe): PODIUM_WEB_KEEP=1 keeps the console; SIGTERM ends it with the
    run's exit code. (Without it, the run's console ends with the run: the test above.)"""
    import os
    import signal

    from helpers_engine import cli_env, podium_argv

    home = tmp_path / "home"
    proc = subprocess.Popen(podium_argv("run", "--web", _failing_loop(tmp_path)),
                            env=cli_env(home, {"PODIUM_WEB_KEEP": "1"}),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, encoding="utf-8",
                            errors="replace", start_new_session=True)
    try:
        port, rid, token = _console_url_in(_kept(proc))
        assert Client(port, token).get(f"/api/runs/{rid}").status == 200
        os.kill(proc.pid, signal.SIGTERM)
        proc.communicate(timeout=30)
        assert proc.returncode == 1
    finally:
        stop_process(proc)


def _console_url_in(err: str) -> tuple[int, str, str]:
    m = URL.search(err)
    assert m, err
    return int(m.group(1)), m.group(2), m.group(3)


def test_the_web_bg_child_ends_with_its_run_even_when_asked_to_keep(tmp_path: Path) -> None:
    """`--web-bg`'s console lives as long as its run (its page says so when it stops):
    PODIUM_WEB_KEEP, meant for a foreground `run --web`, does not keep a detached child."""
    from helpers_engine import cli_env, podium_argv

    home = tmp_path / "home"
    flow = write_flow(tmp_path, "loop.yaml", LOOP_FLOW.replace("max_iterations: 3",
                                                              "max_iterations: 30"))
    started = subprocess.run(podium_argv("run", flow, "--web-bg"),
                             env=cli_env(home, {"PODIUM_WEB_KEEP": "1"}),
                             stdin=subprocess.DEVNULL, capture_output=True, text=True,
                             timeout=60, check=False)
    assert started.returncode == 0, started.stderr
    m = re.match(r"http://127\.0\.0\.1:(\d+)/runs/([0-9a-f]+)#token=", started.stdout)
    assert m, started.stdout
    port, rid = int(m.group(1)), m.group(2)
    assert wait_until(lambda: store_row(home, rid).get("status") == "success", 30)
    assert wait_until(lambda: _closed(port), 30), "the --web-bg console outlived its run"
