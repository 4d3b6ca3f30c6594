"""Every command on a PostgreSQL run store, through the real CLI in subprocesses: `--store URL`
as a root option or after the command name, or PODIUM_STORE; run, runs, show, events, gate
list and answer (which resumes the parked run), resume, replay, fork, stop, doctor, fleet
list and prune; several
processes running runs at once against one database; the errors a user meets (no server, no
psycopg) as one line without the URL's password."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers_engine import EXAMPLES, cli_env, podium_argv, wait_until, write
from pg_server import PgServer
from test_durable_cli import GATE_WF, PARALLEL_WF, SLOW_PY, SLOW_WF

TIMEOUT = 90.0


class Pg:
    """A PODIUM_HOME whose runs go to one PostgreSQL database; the CLI as methods."""

    def __init__(self, root: Path, url: str, password: str) -> None:
        self.root = root
        self.home = root / "home"
        self.url = url
        self.password = password

    def __call__(self, *args: str | Path, env: dict[str, str] | None = None
                 ) -> subprocess.CompletedProcess[str]:
        """`podium ARGS` with PODIUM_STORE set (unless `env` says otherwise)."""
        proc = subprocess.run(podium_argv(*args), cwd=self.root, env=self.env(env),
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              encoding="utf-8", errors="replace", timeout=TIMEOUT, check=False)
        assert self.password not in proc.stdout + proc.stderr
        return proc

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return cli_env(self.home, {"PODIUM_STORE": self.url, **(extra or {})})

    def start(self, *args: str | Path) -> subprocess.Popen[str]:
        return subprocess.Popen(podium_argv(*args), cwd=self.root, env=self.env(),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def runs(self) -> list[dict[str, Any]]:
        proc = self("runs", "--format", "json")
        assert proc.returncode == 0, proc.stderr
        rows: list[dict[str, Any]] = json.loads(proc.stdout)
        return rows

    def events(self, run_id: str) -> list[dict[str, Any]]:
        proc = self("events", run_id)
        assert proc.returncode == 0, proc.stderr
        return [json.loads(line) for line in proc.stdout.splitlines()]


@pytest.fixture
def pg(tmp_path: Path, pg_url: str, pg_server: PgServer) -> Pg:
    return Pg(tmp_path, pg_url, pg_server.password)


def _json(proc: subprocess.CompletedProcess[str]) -> Any:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _consecutive(events: list[dict[str, Any]]) -> None:
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))


def _dev_review(pg: Pg) -> list[str]:
    """The dev-review example's arguments, offline (its scripted answers), in a fresh repo."""
    repo = pg.root / "repo"
    shutil.copytree(EXAMPLES / "dev-review" / "sample-repo", repo)
    for git in (["init", "-q"], ["add", "-A"],
                ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "s"]):
        subprocess.run(["git", "-C", str(repo), *git], check=True)
    return [str(EXAMPLES / "dev-review" / "workflow.yaml"), "-i",
            f"ticket={EXAMPLES}/dev-review/tickets/add-slugify.md", "-i", f"repo_dir={repo}",
            "--responses", str(EXAMPLES / "dev-review" / "responses" / "happy.yaml")]


def test_run_show_replay_and_fork_an_example_on_postgres(pg: Pg) -> None:
    args = _dev_review(pg)
    ran = _json(pg("run", *args, "--json", "--store", pg.url, env={"PODIUM_STORE": ""}))
    assert ran["status"] == "success"
    run_id = ran["run_id"]
    assert not (pg.home / "podium.db").exists()  # nothing went to SQLite
    (row,) = pg.runs()
    assert (row["id"], row["status"], row["workflow"]) == (run_id, "success", "dev-review")
    shown = _json(pg("show", run_id[:8], "--format", "json"))
    assert shown["run"]["id"] == run_id
    _consecutive(pg.events(run_id))
    assert pg("replay", run_id).returncode == 0
    forked = _json(pg("fork", run_id, "--from", "reviewer", "--json"))
    assert forked["status"] == "success"
    assert {r["id"] for r in pg.runs()} == {run_id, forked["run_id"]}
    # the run's own JSONL log is kept in PODIUM_HOME, as with SQLite
    assert (pg.home / "runs" / run_id / "events.jsonl").is_file()


def test_store_as_a_root_option_in_both_spellings(pg: Pg) -> None:
    wf = write(pg.root, "workflow: {name: tiny, entry_point: a}\n"
                        "agents:\n  - {name: a, type: set, value: 1}\n")
    no_env = {"PODIUM_STORE": ""}
    assert pg("--store", pg.url, "run", wf, "--json", env=no_env).returncode == 0
    assert pg(f"--store={pg.url}", "run", wf, env=no_env).returncode == 0
    listed = pg("--store", pg.url, "runs", "--format", "json", env=no_env)
    assert len(_json(listed)) == 2
    assert len(_json(pg("runs", f"--store={pg.url}", "--format", "json", env=no_env))) == 2
    assert not (pg.home / "podium.db").exists()
    assert json.loads(pg("runs", "--format", "json", env=no_env).stdout) == []  # SQLite
    fleet = _json(pg("fleet", "list", "--format", "json"))
    assert len(fleet["runs"]) == 2
    pruned = pg("fleet", "prune", "--older-than", "0h", "--yes")
    assert pruned.returncode == 0, pruned.stderr
    assert pg.runs() == []
    assert "--store URL" in pg("--help").stdout


def test_a_parked_gate_is_listed_answered_and_resumed(pg: Pg) -> None:
    wf = write(pg.root, GATE_WF)
    parked = pg("run", wf)
    assert parked.returncode == 5, parked.stderr
    (row,) = pg.runs()
    run_id = row["id"]
    assert row["status"] == "waiting"
    listed = pg("gate", "list", "--store", pg.url)
    assert run_id in listed.stdout
    assert "review" in listed.stdout
    done = pg("gate", "answer", run_id, "revise", "--text", "shorter", "--store", pg.url)
    assert _json(done) == {"selected": "revise", "feedback": "shorter"}
    assert pg.runs()[0]["status"] == "success"
    assert "no gates are waiting" in pg("gate", "list").stdout
    events = pg.events(run_id)
    _consecutive(events)
    assert [e["type"] for e in events].count("run_started") == 2


def test_a_parallel_group_parks_and_resumes_to_the_same_output(pg: Pg) -> None:
    """A group's members run in threads of one process and commit through one handle."""
    wf = write(pg.root, PARALLEL_WF)
    straight = _json(pg("run", wf, "--skip-gates"))
    assert pg("run", wf).returncode == 5
    (parked,) = [r["id"] for r in pg.runs() if r["status"] == "waiting"]
    assert _json(pg("gate", "answer", parked, "yes")) == straight
    _consecutive(pg.events(parked))


def test_stop_interrupts_a_run_on_postgres_and_it_resumes(pg: Pg) -> None:
    write(pg.root, SLOW_PY, "slow.py")
    wf = write(pg.root, SLOW_WF)
    proc = pg.start("run", wf)
    try:
        def at_slow() -> bool:
            rows = pg.runs()
            return bool(rows) and (rows[0]["status"], rows[0]["current_step"]) == \
                ("running", "slow")

        assert wait_until(at_slow, TIMEOUT)
        assert wait_until((pg.root / "slow-started").exists, TIMEOUT)
        run_id = pg.runs()[0]["id"]
        assert pg("resume", run_id).returncode == 2  # its owner is alive
        stop = pg("stop", run_id)
        assert stop.returncode == 0, stop.stderr
        _, err = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert pg.runs()[0]["status"] == "interrupted"
    assert _json(pg("resume", run_id)) == {"last": 2, "slept": False}
    _consecutive(pg.events(run_id))


LOOP = """
workflow: {name: many, entry_point: count, limits: {max_iterations: 100}}
agents:
  - name: count
    type: set
    value: "{{ (count.output if count is defined else 0) + 1 }}"
    output_type: integer
    routes:
      - {to: count, when: "{{ count.output < 25 }}"}
      - {to: done}
  - name: done
    type: terminate
    status: success
    reason: counted
    output_template: {n: "{{ count.output }}"}
"""


def test_processes_run_at_once_against_one_database(pg: Pg) -> None:
    wf = write(pg.root, LOOP)
    procs = [pg.start("run", wf, "--json") for _ in range(4)]
    outs = [p.communicate(timeout=TIMEOUT) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        assert json.loads(out)["output"] == {"n": 25}
    rows = pg.runs()
    assert len(rows) == 4
    assert {r["status"] for r in rows} == {"success"}
    for r in rows:
        events = pg.events(r["id"])
        _consecutive(events)
        assert sum(e["type"] == "checkpoint" for e in events) == 26


def test_doctor_checks_the_server(pg: Pg) -> None:
    proc = pg("doctor", "--format", "json")
    store = [f for f in json.loads(proc.stdout)["findings"] if f["area"] == "store"]
    assert store[0]["severity"] == "ok", store
    assert "schema version" in store[0]["message"]
    assert pg.password not in proc.stdout


def test_an_unreachable_server_is_one_line_and_exit_3(pg: Pg, pg_server: PgServer) -> None:
    down = pg.url.replace(f":{pg_server.port}/", ":1/")
    for command in (["runs"], ["run", write(pg.root, GATE_WF)], ["gate", "list"],
                    ["show", "abc"]):
        proc = pg(*command, "--store", down)
        assert proc.returncode == 3, (command, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, proc.stderr
        assert "cannot connect to the run store postgresql://podium@127.0.0.1:1/" in lines[0]


def test_without_psycopg_the_extra_is_named(pg: Pg) -> None:
    code = ("import sys; sys.modules['psycopg'] = None; sys.argv = ['podium', 'runs']; "
            "from podium.cli.process import main; main()")
    proc = subprocess.run([sys.executable, "-c", code], env=pg.env(), capture_output=True,
                          text=True, timeout=TIMEOUT, check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "podium: a PostgreSQL run store needs psycopg 3 and its pool, which are not "
        "installed: pip install 'podium[postgres]'"]
