"""Many podium processes on one run store at once: the store stays sound.

The issue's stress test: eight worker processes spend 20 s each looping over a mix of podium
commands on one PODIUM_HOME (run, run --web, runs, show, events, gate list, gate answer,
resume, stop, replay, fork; `resume` and `gate answer` of one parked run started at the same
moment) while `podium serve` serves its console over the same store and this test reads its
JSON API. The console is restarted twice (serve is one of the processes of the mix): with a
console up all the time, its connection hides a process that lost its SQLite locks, because
no other process ever finds itself alone on the store and takes the write-ahead log for
abandoned. `run --web` runs wait a few seconds at their gate, in their own process, before a
worker answers them with `podium gate answer`.

The test fails on any store error on stderr ("disk I/O error", "malformed", "database is
locked", ...), any traceback, any command that hangs past its timeout, any exit code the
README does not allow for what the command was asked (a refusal only with the message that
says why), any console answer other than 200, and, at the end, on a store whose `PRAGMA
integrity_check` is not ok, that lacks a run some `podium run` (or `fork`) announced, that
keeps a run as running when no process runs it any more, or that holds a gate answer podium
accepted but the run never took.

The stress runs on both backends: on PostgreSQL (PODIUM_STORE names a database of the real
server the tests start) for a shorter time, and the end checks what corresponds there to
SQLite's integrity check (tests/store_backends.py PG_SOUNDNESS: every event of a known run,
each run's events numbered 1..n, checkpoints at checkpoint events, no gate of an unknown run,
no lease of a run that no process runs).

The second test is the console-restart case made deterministic: a `run --web` run waits at its
gate while other processes open and close the store alone; the answer must still reach it.

This file is also the worker: `python test_store_concurrency.py worker CONFIG.json` (the
test starts eight of them; each podium command is a real `python -m podium` subprocess).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from helpers_engine import cli_env, podium_argv
from store_backends import Store, pg_query, pg_soundness, soundness

WORKERS = 8
STRESS_SECONDS = 20.0
PG_STRESS_SECONDS = 10.0  # the same mix on PostgreSQL, shorter (a 2-core machine runs both)
COMMAND_TIMEOUT = 60.0  # a podium command still running after this has hung
WEB_END_TIMEOUT = 30.0  # a `run --web` still running this long after its gate was answered
PARKED_SECONDS = 6.0  # how long a worker leaves its `run --web` run waiting at its gate
# The live console is restarted at these fractions of the stress, down for RESTART_DOWN s.
RESTARTS = (0.3, 0.65)
RESTART_DOWN = 2.0
# A worker still running this long after the stress ended has hung (its commands are bounded).
WORKER_GRACE = 2 * COMMAND_TIMEOUT + 30

# Text on any stderr that means the store (or podium) broke under concurrency. "is busy" is how
# podium reports SQLite's "database is locked"; "cannot be used", "is corrupted" and "not a
# SQLite database" are its reports of a store it had to refuse; "sink SQLiteStore failed" says
# a run went on while its events could no longer be stored.
FORBIDDEN = ("disk I/O error", "malformed", "database is locked", "is busy", "truncated",
             "Traceback", "not a SQLite database", "is corrupted", "cannot be used",
             "sink SQLiteStore failed",
             # PostgreSQL's: a statement podium could not make, two writers in a deadlock or
             # a duplicate (two processes numbering one run's events), a run's events lost
             "cannot write to the run store", "cannot read the run store", "deadlock",
             "could not serialize", "duplicate key", "sink PostgresStore failed")

# ------------------------------------------------------------------------------ workflows

QUICK = """
workflow:
  name: stress-quick
  description: An agent (scripted answers), a script, a set step, then success.
  entry_point: ask
  input:
    n: {type: number, default: 0}
agents:
  - name: ask
    type: agent
    model: gpt-4o-mini
    prompt: "Name the number {{ workflow.input.n }}"
    routes: [{to: build}]
  - name: build
    type: script
    command: python
    args: ["-c", "import json, sys; print(json.dumps({'n': int(float(sys.argv[1]))}))",
           "{{ workflow.input.n }}"]
    routes: [{to: tally}]
  - name: tally
    type: set
    value: "{{ build.output.n + 1 }}"
    output_type: integer
    routes: [{to: done}]
  - name: done
    type: terminate
    status: success
    reason: "tallied {{ tally.output }}"
output:
  tally: "{{ tally.output }}"
"""

QUICK_RESPONSES = """
agents:
  ask:
    every:
      text: "a number"
      usage: {input_tokens: 10, output_tokens: 3}
"""

GATE = """
workflow:
  name: stress-gate
  description: A draft (scripted answers), a person approves or rejects, publish.
  entry_point: draft
agents:
  - name: draft
    type: agent
    model: gpt-4o-mini
    prompt: "Write the release notes"
    routes: [{to: approval}]
  - name: approval
    type: human_gate
    prompt: "Publish {{ draft.output.result }}?"
    options:
      - {label: Approve, value: approved, route: publish}
      - {label: Reject, value: rejected, route: rejected}
  - name: publish
    type: set
    value: "published"
    routes: [{to: released}]
  - name: released
    type: terminate
    status: success
    reason: "released"
  - name: rejected
    type: terminate
    status: failed
    reason: "rejected by a person"
"""

GATE_RESPONSES = """
agents:
  draft:
    every:
      text: "the notes"
      usage: {input_tokens: 20, output_tokens: 5}
"""

LONG = """
workflow:
  name: stress-long
  description: A script step that takes a few seconds, to be stopped and resumed.
  entry_point: prepare
agents:
  - name: prepare
    type: set
    value: "ready"
    routes: [{to: hold}]
  - name: hold
    type: script
    command: python
    args: ["-c", "import json, time; time.sleep(2.5); print(json.dumps({'held': True}))"]
    routes: [{to: finish}]
  - name: finish
    type: set
    value: "finished"
    routes: [{to: done}]
  - name: done
    type: terminate
    status: success
    reason: "held, then finished"
"""

FLOWS = {"quick.yaml": QUICK, "quick.responses.yaml": QUICK_RESPONSES, "gate.yaml": GATE,
         "gate.responses.yaml": GATE_RESPONSES, "long.yaml": LONG}
WORKFLOW_OF = {"stress-quick": "quick", "stress-gate": "gate", "stress-long": "long"}

# ------------------------------------------------------------------------------ what is allowed

# Exit codes each command may end with, from the README's table, for what this test asks of
# it. A key is (command, workflow) for the commands that start a run, else the command.
ALLOWED: dict[tuple[str, str], frozenset[int]] = {
    ("run", "quick"): frozenset({0}),           # ends at its success terminate
    ("run", "gate"): frozenset({5}),            # stdin is no terminal: parks at its gate
    ("run", "long"): frozenset({0, 130}),       # 130: a `podium stop` ended it (resumable)
    ("run --web", "gate"): frozenset({0, 1}),   # its gate is answered with `podium gate answer`
    #                                             (1: another worker answered it "rejected")
    ("run --web", "quick"): frozenset({0}),     # ends on its own
    ("fork", "quick"): frozenset({0}),          # forked from a script or set step: no model
    ("replay", ""): frozenset({0}),             # of a finished quick run: identical trajectory
    ("runs", ""): frozenset({0}),
    ("show", ""): frozenset({0}),
    ("events", ""): frozenset({0}),
    ("gate list", ""): frozenset({0}),
    ("stop", ""): frozenset({0}),               # stopped, or "is not running" any more
    # 0/1: answered and resumed to the success/failed terminate (or left to the run's own
    # process); 2 and 3: refused, with one of the messages below.
    ("gate answer", ""): frozenset({0, 1, 2, 3}),
    # 0/1 resumed to its end; 5 parked again at its gate; 130 a `podium stop` ended it; 2
    # refused (still running in another process, or already finished).
    ("resume", ""): frozenset({0, 1, 2, 5, 130}),
}

# A refusal is allowed only with the message that says why: (command, exit code) -> pattern.
REFUSALS: dict[tuple[str, int], re.Pattern[str]] = {
    ("resume", 2): re.compile(r"run \w+ is still running|run \w+ already finished"),
    ("gate answer", 2): re.compile(r"has no gate waiting for an answer|was already answered|"
                                   r"run \w+ is still running|run \w+ already finished"),
    ("gate answer", 3): re.compile(r"gate \d+ is not open \(already answered\?\)"),
}

# Every kind of command the stress must have run at least once (the openings guarantee it).
KINDS = {"run", "run --web", "runs", "show", "events", "gate list", "gate answer", "resume",
         "stop", "replay", "fork", "http"}

# The statuses a run of these workflows can end in once no process runs it.
FINAL_STATUSES = {"success", "failed", "waiting", "interrupted"}

RUN_STARTED = re.compile(r"^podium: run ([0-9a-f]+) (?:started|resumed)", re.MULTILINE)
CONSOLE_URL = re.compile(r"podium console: http://127\.0\.0\.1:(\d+)/runs/([0-9a-f]+)"
                         r"#token=(\S+)")


def problems_of(entry: dict[str, Any]) -> list[str]:
    """What is wrong with one recorded command (an empty list when nothing is)."""
    kind, rc, stderr = entry["kind"], entry["rc"], entry.get("stderr", "")
    out = []
    if entry.get("timed_out"):
        out.append(f"hung: still running after {entry.get('timeout')} s")
    out += [f"stderr has {word!r}" for word in FORBIDDEN if word in stderr]
    if entry.get("problem"):
        out.append(entry["problem"])
    if kind == "http":
        if rc != 200:
            out.append(f"HTTP {rc}")
        return out
    if rc is None:
        return out
    allowed = ALLOWED.get((kind, entry.get("flow", "")), frozenset())
    if rc not in allowed:
        out.append(f"exit code {rc} (allowed: {sorted(allowed)})")
    elif (kind, rc) in REFUSALS and not REFUSALS[kind, rc].search(stderr):
        out.append(f"exit code {rc} without a known refusal message")
    if kind in ("run", "run --web", "fork") and not entry.get("run_id"):
        out.append("no run id on stderr")
    return out


def describe(entry: dict[str, Any], problems: list[str]) -> str:
    tail = "\n".join(entry.get("stderr", "").splitlines()[-12:])
    return (f"worker {entry['w']} at {entry['t']:.1f}s: {' '.join(entry['argv'])} -> "
            f"{entry['rc']}: {'; '.join(problems)}\n" + textwrap.indent(tail, "    | "))


# ------------------------------------------------------------------------------ the worker


class Command:
    """A podium subprocess whose stdout and stderr are read as they come (by two threads), so
    a worker can wait for a line (a run id, a console URL) without losing any output."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self._out: list[str] = []
        self._err: list[str] = []
        self._changed = threading.Condition()
        self._readers = [threading.Thread(target=self._read, args=(stream, sink), daemon=True)
                         for stream, sink in ((proc.stdout, self._out), (proc.stderr, self._err))]
        for reader in self._readers:
            reader.start()

    def _read(self, stream: Any, sink: list[str]) -> None:
        for line in stream:
            with self._changed:
                sink.append(line)
                self._changed.notify_all()
        stream.close()
        with self._changed:
            self._changed.notify_all()

    def stdout(self) -> str:
        with self._changed:
            return "".join(self._out)

    def stderr(self) -> str:
        with self._changed:
            return "".join(self._err)

    def wait_for(self, pattern: re.Pattern[str], timeout: float) -> re.Match[str] | None:
        """The first match of `pattern` on stderr, once it is there (None if stderr ends, or
        `timeout` passes, without it)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                found = pattern.search("".join(self._err))
                left = deadline - time.monotonic()
                if found or left <= 0 or not self._readers[1].is_alive():
                    return found
                self._changed.wait(min(left, 1.0))

    def wait(self, timeout: float) -> bool:
        """Whether the process ended (and its output was read) within `timeout` seconds."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        for reader in self._readers:
            reader.join(timeout)
        return True


@dataclass
class Known:
    """What a worker last saw in the store: runs by id (status, workflow) and open gates."""

    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    gated: list[str] = field(default_factory=list)

    def pick(self, rng: random.Random, *, flow: str | None = None,
             statuses: tuple[str, ...] = ()) -> str | None:
        ids = sorted(rid for rid, r in self.runs.items()
                     if (flow is None or WORKFLOW_OF.get(r["workflow"]) == flow)
                     and (not statuses or r["status"] in statuses))
        return rng.choice(ids) if ids else None


class Worker:
    """One of the eight: podium commands, one after the other, each recorded as a JSON line."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.index: int = cfg["index"]
        self.home = Path(cfg["home"])
        self.flows = Path(cfg["flows"])
        self.store_env: dict[str, str] = cfg.get("store_env") or {}
        self.until: float = cfg["until"]
        self.t0: float = cfg["t0"]
        self.rng = random.Random(cfg["seed"])
        self.log = Path(cfg["log"]).open("a", encoding="utf-8")  # noqa: SIM115
        self.known = Known()
        self.background: list[tuple[Command, dict[str, Any]]] = []
        # `run --web` runs parked at their console gate: (command, entry, run id, since)
        self.parked: list[tuple[Command, dict[str, Any], str, float]] = []

    # -------------------------------------------------------------- recording

    def record(self, entry: dict[str, Any]) -> dict[str, Any]:
        entry.setdefault("w", self.index)
        self.log.write(json.dumps(entry) + "\n")
        self.log.flush()
        return entry

    def start(self, *args: str | Path) -> Command:
        return Command(subprocess.Popen(
            podium_argv(*args), env=cli_env(self.home, self.store_env), cwd=self.flows,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            encoding="utf-8", errors="replace"))

    def finish(self, cmd: Command, entry: dict[str, Any],
               timeout: float = COMMAND_TIMEOUT) -> dict[str, Any]:
        """Wait for a started command, then record its exit code and output."""
        if not cmd.wait(timeout):
            cmd.proc.kill()  # by its pid: this worker started it
            cmd.wait(30)
            entry.update(timed_out=True, timeout=timeout)
        out, err = cmd.stdout(), cmd.stderr()
        entry.update(rc=cmd.proc.returncode, stderr=err[-6000:],
                     dt=round(time.time() - entry["start"], 2))
        found = RUN_STARTED.search(err)
        if entry["kind"] in ("run", "run --web", "fork") and found:
            entry["run_id"] = found.group(1)
        entry["stdout"] = out[-2000:] if entry["kind"] != "runs" else ""
        self.check_stdout(entry, out)
        return self.record(entry)

    def podium(self, kind: str, *args: str | Path, flow: str = "",
               timeout: float = COMMAND_TIMEOUT) -> dict[str, Any]:
        entry = self.entry(kind, args, flow)
        return self.finish(self.start(*args), entry, timeout)

    def entry(self, kind: str, args: tuple[str | Path, ...], flow: str = "") -> dict[str, Any]:
        now = time.time()
        return {"kind": kind, "flow": flow, "argv": [str(a) for a in args], "start": now,
                "t": round(now - self.t0, 2), "rc": None}

    def check_stdout(self, entry: dict[str, Any], out: str) -> None:
        """The JSON a command printed must parse (a torn read would not); it feeds `known`."""
        kind, rc = entry["kind"], entry["rc"]
        if rc != 0 or entry.get("timed_out"):
            return
        try:
            if kind == "runs":
                rows = json.loads(out)
                self.known.runs = {r["id"]: {"status": r["status"], "workflow": r["workflow"]}
                                   for r in rows}
                entry["count"] = len(rows)
            elif kind == "gate list":
                self.known.gated = sorted({g["run_id"] for g in json.loads(out)})
            elif kind == "show":
                json.loads(out)["run"]["id"]
            elif kind == "events":
                for line in out.splitlines():
                    json.loads(line)["seq"]
            elif kind == "run" and "--json" in entry["argv"]:
                got = json.loads(out)["run_id"]
                found = RUN_STARTED.search(entry["stderr"])
                if found is None or found.group(1) != got:
                    entry["problem"] = f"--json names run {got}, stderr another"
        except (ValueError, KeyError, TypeError) as exc:
            entry["problem"] = f"unreadable stdout ({exc!r}): {out[:300]!r}"

    # -------------------------------------------------------------- the commands

    def run_quick(self) -> str | None:
        args: list[str] = ["run", "quick.yaml", "--responses", "quick.responses.yaml",
                           "-i", f"n={self.rng.randint(0, 99)}"]
        if self.rng.random() < 0.5:
            args.append("--json")
        return self.podium("run", *args, flow="quick").get("run_id")

    def run_gate(self) -> str | None:
        return self.podium("run", "run", "gate.yaml", "--responses", "gate.responses.yaml",
                           flow="gate").get("run_id")

    def run_long(self) -> tuple[Command, dict[str, Any], str | None]:
        """Start a long run in the background: (command, its entry, its run id)."""
        args = ("run", "long.yaml")
        entry = self.entry("run", args, "long")
        cmd = self.start(*args)
        found = cmd.wait_for(RUN_STARTED, COMMAND_TIMEOUT)
        return cmd, entry, found.group(1) if found else None

    def long_stop_resume(self) -> None:
        cmd, entry, rid = self.run_long()
        if rid is not None:
            self.wait_running(rid)
            self.podium("stop", "stop", rid, "--wait", "20")
        self.finish(cmd, entry)
        if rid is not None:
            self.podium("resume", "resume", rid)

    def long_in_background(self) -> None:
        cmd, entry, _rid = self.run_long()
        self.background.append((cmd, entry))

    def wait_running(self, rid: str) -> None:
        """Until the run is at its script step (its `show` says so), briefly."""
        deadline = time.time() + 10
        while time.time() < deadline:
            shown = self.podium("show", "show", rid, "--format", "json")
            if shown["rc"] != 0 or '"current_step": "hold"' in shown["stdout"]:
                return

    def run_web(self, flow: str) -> None:
        args = ("run", "--web", f"{flow}.yaml", "--responses", f"{flow}.responses.yaml")
        entry = self.entry("run --web", args, flow)
        cmd = self.start(*args)
        url = cmd.wait_for(CONSOLE_URL, COMMAND_TIMEOUT)
        if url is not None:
            port, rid, token = int(url.group(1)), url.group(2), url.group(3)
            if self.watch_web(cmd, port, rid, token, gate=(flow == "gate")):
                # it waits at its gate, in its own process, while this worker goes on; it is
                # answered a few commands later (or by another worker first)
                self.parked.append((cmd, entry, rid, time.time()))
                return
        self.finish(cmd, entry)

    def watch_web(self, cmd: Command, port: int, rid: str, token: str, *, gate: bool) -> bool:
        """Read the run's own console until the run ends, or (`gate`) until its gate is open;
        whether it is waiting at its gate."""
        deadline = time.time() + 30
        pause = threading.Event()
        seen = False
        while time.time() < deadline and cmd.proc.poll() is None:
            entry = self.entry("http", ("GET", f"run --web console /api/runs/{rid}"))
            status, body = http_get(port, token, f"/api/runs/{rid}")
            if status < 0 and cmd.wait(10):
                return False  # the run ended (someone else answered its gate), its console too
            if status == 404 and not seen:  # the console comes up before the run is stored
                pause.wait(0.1)
                continue
            seen = True
            entry.update(rc=status, stderr="" if status == 200 else body[:500])
            self.record(entry)
            if status != 200:
                return False
            if gate and json.loads(body).get("gates"):
                return True
            pause.wait(0.1)
        return False

    def answer_parked(self, older_than: float) -> None:
        """Answer (from the command line) the gates of this worker's parked `run --web` runs
        that have waited `older_than` seconds, and see each run end in its own process."""
        now = time.time()
        for item in [p for p in self.parked if now - p[3] >= older_than]:
            self.parked.remove(item)
            cmd, entry, rid, _since = item
            self.podium("gate answer", "gate", "answer", rid, "approved")
            self.finish(cmd, entry, WEB_END_TIMEOUT)

    def race(self, rid: str | None = None) -> None:
        """`resume` and `gate answer` of one parked run, started at the same moment: one of
        them runs it, the other refuses (or finds nothing left to do)."""
        rid = rid or self.run_gate()
        if not rid:
            return
        first, second = ("resume", rid), ("gate", "answer", rid, "approved")
        entries = [self.entry("resume", first), self.entry("gate answer", second)]
        commands = [self.start(*first), self.start(*second)]
        for cmd, entry in zip(commands, entries, strict=True):
            self.finish(cmd, entry)

    def show(self, rid: str | None = None) -> None:
        rid = rid or self.known.pick(self.rng)
        if rid:
            self.podium("show", "show", rid, "--format", "json")

    def events(self, rid: str | None = None) -> None:
        rid = rid or self.known.pick(self.rng)
        if rid:
            self.podium("events", "events", rid)

    def runs(self) -> None:
        self.podium("runs", "runs", "--format", "json", "--limit", "100000")

    def gate_list(self) -> None:
        self.podium("gate list", "gate", "list", "--format", "json")

    def gate_answer(self, rid: str | None = None) -> None:
        rid = rid or (self.rng.choice(self.known.gated) if self.known.gated
                      else self.known.pick(self.rng, flow="gate", statuses=("waiting",)))
        if rid:
            value = "rejected" if self.rng.random() < 0.2 else "approved"
            self.podium("gate answer", "gate", "answer", rid, value)

    def resume(self, rid: str | None = None) -> None:
        rid = rid or self.known.pick(self.rng, statuses=("waiting", "interrupted")) \
            or self.known.pick(self.rng)
        if rid:
            self.podium("resume", "resume", rid)

    def stop(self, rid: str | None = None) -> None:
        rid = rid or self.known.pick(self.rng, flow="long", statuses=("running",))
        if rid:
            self.podium("stop", "stop", rid, "--wait", "20")

    def replay(self, rid: str | None = None) -> None:
        rid = rid or self.known.pick(self.rng, flow="quick", statuses=("success",))
        if rid:
            self.podium("replay", "replay", rid)

    def fork(self, rid: str | None = None) -> None:
        rid = rid or self.known.pick(self.rng, flow="quick", statuses=("success",))
        if rid:
            step = self.rng.choice(["build", "tally"])
            self.podium("fork", "fork", rid, "--from", step, flow="quick")

    # -------------------------------------------------------------- the loop

    def opening(self) -> None:
        """A fixed first sequence per worker, so that across the eight every command runs at
        least once however slow the machine is."""
        match self.index % WORKERS:
            case 0:
                rid = self.run_quick()
                self.replay(rid)
                self.fork(rid)
            case 1:
                rid = self.run_gate()
                self.gate_list()
                self.gate_answer(rid)
            case 2:
                self.long_stop_resume()
            case 3:
                self.run_web("gate")
            case 4:
                self.run_web("quick")
                self.runs()
            case 5:
                rid = self.run_gate()
                self.race(rid)
                self.events(rid)
            case 6:
                self.long_in_background()
                self.runs()
                self.stop()
            case _:
                rid = self.run_quick()
                self.show(rid)
                self.events(rid)

    def main(self) -> None:
        actions = [
            (self.run_quick, 12), (self.run_gate, 10), (lambda: self.run_web("gate"), 5),
            (lambda: self.run_web("quick"), 2), (self.long_stop_resume, 2),
            (self.long_in_background, 3), (self.runs, 10), (self.show, 8), (self.events, 6),
            (self.gate_list, 6), (self.gate_answer, 10), (self.resume, 8), (self.race, 4),
            (self.stop, 5), (self.replay, 6), (self.fork, 5),
        ]
        funcs, weights = zip(*actions, strict=True)
        try:
            self.opening()
            while time.time() < self.until:
                self.answer_parked(PARKED_SECONDS)
                self.rng.choices(funcs, weights)[0]()
        finally:
            self.answer_parked(0)
            for cmd, entry in self.background:
                self.finish(cmd, entry)
            self.log.close()


def http_get(port: int, token: str, path: str) -> tuple[int, str]:
    """(status, body) of a GET on a console; status -1 when it could not be reached."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        conn.request("GET", path, headers={"Host": f"127.0.0.1:{port}",
                                           "Authorization": f"Bearer {token}"})
        res = conn.getresponse()
        return res.status, res.read().decode("utf-8", "replace")
    except OSError as exc:
        return -1, f"{type(exc).__name__}: {exc}"
    finally:
        conn.close()


# ------------------------------------------------------------------------------ the test


class LiveConsole:
    """`podium serve` over the store, its JSON API read in a thread of this test; restarted
    (stopped, then started again on a new port) when asked: serve is one of the processes of
    the mix too."""

    def __init__(self, home: Path, folder: Path, env: dict[str, str]) -> None:
        self.home, self.folder, self.env = home, folder, env
        self.lock = threading.Lock()  # held by each round of reads, and by a restart
        self.stopped = threading.Event()
        self.failures: list[str] = []
        self.requests = 0
        self.exits: list[tuple[int, int | None]] = []  # (start number, exit code)
        self.starts = 0
        self.proc, self.port, self.token = self._start()

    def _start(self) -> tuple[subprocess.Popen[str], int, str]:
        self.starts += 1
        err_path = self.folder / f"serve{self.starts}.stderr"
        with err_path.open("wb") as err:
            proc = subprocess.Popen(podium_argv("serve", "--port", "0", "--no-open"),
                                    env=cli_env(self.home, self.env), stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=err, text=True,
                                    encoding="utf-8", errors="replace", start_new_session=True)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        found = re.search(r"podium console: http://127\.0\.0\.1:(\d+)/#token=(\S+)", line)
        if found is None:
            _end(proc)
            raise AssertionError(f"podium serve did not start: {line!r} {_text(err_path)}")
        return proc, int(found.group(1)), found.group(2)

    def _stop(self) -> None:
        self.exits.append((self.starts, _end(self.proc)))

    def restart(self, down: float) -> None:
        with self.lock:
            self._stop()
            self.stopped.wait(down)
            self.proc, self.port, self.token = self._start()

    def close(self) -> None:
        self.stopped.set()
        with self.lock:
            self._stop()

    def stderr(self) -> str:
        return "".join(_text(self.folder / f"serve{n}.stderr") for n in range(1, self.starts + 1))

    def get(self, path: str) -> Any:
        status, body = http_get(self.port, self.token, path)
        self.requests += 1
        if status != 200:
            self.failures.append(f"GET {path} -> {status}: {body[:300]}")
            return None
        try:
            return json.loads(body)
        except ValueError as exc:
            self.failures.append(f"GET {path} -> unreadable JSON ({exc}): {body[:300]}")
            return None

    def poll(self) -> None:
        """Read the API until closed: the runs page, and one run's page, events and graph."""
        turn = 0
        while not self.stopped.is_set():
            with self.lock:
                if self.stopped.is_set():
                    return
                self.get("/api/info")
                listing = self.get("/api/runs?limit=100&children=1")
                rows = listing.get("runs", []) if isinstance(listing, dict) else []
                if rows:
                    rid = rows[turn % len(rows)]["id"]
                    self.get(f"/api/runs/{rid}")
                    self.get(f"/api/runs/{rid}/events?after=0")
                    self.get(f"/api/runs/{rid}/graph")
            turn += 1
            self.stopped.wait(0.1)


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""


def _end(proc: subprocess.Popen[Any], sig: int = signal.SIGTERM) -> int | None:
    """End a process this test started (by its pid) and wait for it."""
    if proc.poll() is None:
        os.kill(proc.pid, sig)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(15)
    if proc.stdout is not None:
        proc.stdout.close()
    return proc.returncode


def _kill_group(proc: subprocess.Popen[Any]) -> None:
    """Kill a worker and every podium command it started (its own process group)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(15)


def _store_rows(db_path: Path) -> tuple[list[tuple[str]], dict[str, str]]:
    """SQLite's integrity check of the store, and the status of every run in it."""
    db = sqlite3.connect(str(db_path), timeout=30)
    try:
        integrity = db.execute("PRAGMA integrity_check").fetchall()
        statuses = dict(db.execute("SELECT id, status FROM runs").fetchall())
    except sqlite3.Error as exc:
        return [(f"{type(exc).__name__}: {exc}",)], {}
    finally:
        db.close()
    return integrity, statuses


def _sqlite_query(db_path: Path) -> Any:
    """A function that runs one query on the SQLite store at `db_path`: its rows."""
    def query(sql: str) -> list[tuple[Any, ...]]:
        db = sqlite3.connect(str(db_path), timeout=30)
        try:
            return db.execute(sql).fetchall()
        finally:
            db.close()
    return query


def _lost_answers(query: Any) -> dict[str, list[tuple[str, str]]]:
    """Answers podium accepted (a gate row holds one) that their run never took: by run, the
    (step, answer) pairs left over once each gate_answered event has claimed its own. These
    workflows script no gate, so every gate_answered event comes from such an answer.
    `query`: a function running one SQL text on the store (either backend)."""
    given = query("SELECT run_id, step, answer FROM gates WHERE answer IS NOT NULL")
    taken = [(rid, json.loads(body)) for rid, body in query(
        "SELECT run_id, body FROM events WHERE type = 'gate_answered'")]
    left = Counter((rid, step, answer) for rid, step, answer in given)
    left.subtract(Counter((rid, e["step"], e["selected"]) for rid, e in taken))
    lost: dict[str, list[tuple[str, str]]] = {}
    for (rid, step, answer), n in sorted(left.items()):
        lost.setdefault(rid, []).extend([(step, answer)] * max(0, n))
    return {rid: pairs for rid, pairs in lost.items() if pairs}


def _sound_store(store: Store, home: Path) -> tuple[list[str], dict[str, str], Any]:
    """What is wrong with the store once every process has left it (SQLite: its integrity
    check, then PG_SOUNDNESS; PostgreSQL: PG_SOUNDNESS, and any lease left, since no process
    runs a run now),
    the status of every run in it, and a function that queries it."""
    if store.url is None:
        integrity, statuses = _store_rows(home / "podium.db")
        if integrity != [("ok",)]:
            return [f"PRAGMA integrity_check: {integrity[:20]}"], statuses, None
        query = _sqlite_query(home / "podium.db")
        return [f"SQLite store: {w}" for w in soundness(query)], statuses, query
    url = store.url

    def query(sql: str) -> list[tuple[Any, ...]]:
        return pg_query(url, sql)

    wrong = [f"PostgreSQL store: {w}" for w in pg_soundness(url)]
    if leases := query("SELECT run_id, pid, command FROM leases"):
        wrong.append(f"leases left when no process runs a run: {leases[:10]}")
    return wrong, {str(rid): str(s) for rid, s in query("SELECT id, status FROM runs")}, query


@pytest.mark.timeout(240)
def test_eight_processes_for_twenty_seconds_leave_a_sound_store(tmp_path: Path,
                                                                store: Store) -> None:
    """The stress on either backend (on PostgreSQL for PG_STRESS_SECONDS)."""
    seconds = PG_STRESS_SECONDS if store.is_pg else STRESS_SECONDS
    home, flows, logs = tmp_path / "home", tmp_path / "flows", tmp_path / "logs"
    flows.mkdir()
    logs.mkdir()
    for name, text in FLOWS.items():
        (flows / name).write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")

    console = LiveConsole(home, tmp_path, store.env)
    polling = threading.Thread(target=console.poll, name="console-poller", daemon=True)
    workers: list[subprocess.Popen[bytes]] = []
    t0 = time.time()
    until = t0 + seconds
    try:
        polling.start()
        for i in range(WORKERS):
            cfg = {"index": i, "home": str(home), "flows": str(flows), "until": until,
                   "t0": t0, "seed": 1000 + i, "log": str(logs / f"worker{i}.jsonl"),
                   "store_env": store.env}
            (logs / f"worker{i}.json").write_text(json.dumps(cfg), encoding="utf-8")
            with (logs / f"worker{i}.err").open("wb") as err:
                workers.append(subprocess.Popen(
                    [sys.executable, __file__, "worker", str(logs / f"worker{i}.json")],
                    env=cli_env(home, store.env), cwd=flows, stdin=subprocess.DEVNULL,
                    stdout=err, stderr=err, start_new_session=True))
        for at in RESTARTS:
            console.stopped.wait(max(0.0, t0 + at * seconds - time.time()))
            console.restart(RESTART_DOWN)
        hung_workers = []
        for i, w in enumerate(workers):
            try:
                w.wait(timeout=max(1.0, until + WORKER_GRACE - time.time()))
            except subprocess.TimeoutExpired:
                hung_workers.append(i)
                _kill_group(w)
    finally:
        console.close()
        polling.join(30)
        for w in workers:
            _kill_group(w)
    elapsed = time.time() - t0

    # ---- every command, as the workers recorded it
    entries = [json.loads(line) for i in range(WORKERS)
               for line in _text(logs / f"worker{i}.jsonl").splitlines() if line.strip()]
    failures = [describe(e, p) for e in entries if (p := problems_of(e))]
    for i, w in enumerate(workers):
        err = _text(logs / f"worker{i}.err")
        if i in hung_workers:
            failures.append(f"worker {i} still running {WORKER_GRACE} s after the stress ended")
        elif w.returncode != 0 or err.strip():
            failures.append(f"worker {i} exited {w.returncode}:\n{err[-3000:]}")
    serve_err = console.stderr()
    failures += [f"podium serve's stderr has {word!r}:\n{serve_err[-3000:]}"
                 for word in FORBIDDEN if word in serve_err]
    failures += [f"podium serve #{n} exited {code} on SIGTERM:\n{serve_err[-3000:]}"
                 for n, code in console.exits if code != 0]
    failures += [f"console: {f}" for f in console.failures[:20]]

    # ---- the store: sound, and holding every run a command announced
    wrong, statuses, query = _sound_store(store, home)
    failures += wrong
    listed = subprocess.run(podium_argv("runs", "--format", "json", "--limit", "100000"),
                            env=cli_env(home, store.env), stdin=subprocess.DEVNULL, capture_output=True,
                            text=True, encoding="utf-8", errors="replace", timeout=60,
                            check=False)
    in_listing: set[str] = set()
    if listed.returncode == 0:
        in_listing = {r["id"] for r in json.loads(listed.stdout)}
    else:
        failures.append(f"podium runs exited {listed.returncode}: {listed.stderr[-2000:]}")
    announced = {e["run_id"] for e in entries if e.get("run_id")}
    if announced - in_listing:
        failures.append(f"runs missing from `podium runs`: {sorted(announced - in_listing)}")
    if announced - set(statuses):
        failures.append(f"runs missing from the store: {sorted(announced - set(statuses))}")
    left = {rid: s for rid, s in statuses.items() if s not in FINAL_STATUSES}
    if left:
        failures.append(f"runs that no process runs any more, left as: {left}")
    if not wrong and (lost := _lost_answers(query)):
        failures.append(f"gate answers podium accepted that their run never took: {lost}")
    # The stress did what it says: every kind of command ran, on a live console.
    kinds = {e["kind"] for e in entries}
    if not kinds >= KINDS or console.requests < 10:
        failures.append(f"the stress did not run: no {sorted(KINDS - kinds)}, "
                        f"{console.requests} console requests")
    summary = (f"{store.backend}: {len(entries)} commands in {elapsed:.0f} s, {len(announced)} runs, "
               f"{console.requests} console requests ({console.starts} consoles); kinds: "
               + ", ".join(f"{k} {sum(e['kind'] == k for e in entries)}"
                           for k in sorted(KINDS)))
    assert not failures, f"{summary}\n\n" + "\n\n".join(failures)


def _podium(home: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(podium_argv(*args), env=cli_env(home), cwd=cwd,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          encoding="utf-8", errors="replace", timeout=COMMAND_TIMEOUT,
                          check=False)


@pytest.mark.timeout(180)
def test_a_run_web_at_its_gate_takes_an_answer_after_other_processes_left_the_store(
        tmp_path: Path) -> None:
    """The stress test's console restarts, made deterministic: while a `run --web` run waits at
    its gate, other podium processes open the store and close it with nobody else on it (no
    `podium serve`); the answer given with `podium gate answer` must still reach the run."""
    home, flows = tmp_path / "home", tmp_path / "flows"
    flows.mkdir()
    for name, text in FLOWS.items():
        (flows / name).write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    first = _podium(home, flows, "run", "quick.yaml", "--responses", "quick.responses.yaml")
    assert first.returncode == 0, first.stderr
    web = Command(subprocess.Popen(
        podium_argv("run", "--web", "gate.yaml", "--responses", "gate.responses.yaml"),
        env=cli_env(home), cwd=flows, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, encoding="utf-8", errors="replace"))
    try:
        url = web.wait_for(CONSOLE_URL, COMMAND_TIMEOUT)
        assert url is not None, web.stderr()
        port, rid, token = int(url.group(1)), url.group(2), url.group(3)
        deadline = time.time() + 30
        while time.time() < deadline:  # until its gate is open, as its console shows it
            status, body = http_get(port, token, f"/api/runs/{rid}")
            assert status in (200, 404), body  # 404: the run is not stored yet
            if status == 200 and json.loads(body).get("gates"):
                break
            threading.Event().wait(0.1)
        else:
            raise AssertionError(f"the gate of run {rid} never opened:\n{web.stderr()}")
        for args in (("runs",), ("run", "quick.yaml", "--responses", "quick.responses.yaml"),
                     ("show", rid), ("gate", "list")):
            done = _podium(home, flows, *args)
            assert done.returncode == 0, done.stderr
        answered = _podium(home, flows, "gate", "answer", rid, "approved")
        assert answered.returncode == 0, answered.stderr
        ended = web.wait(WEB_END_TIMEOUT)
    finally:
        if web.proc.poll() is None:
            web.proc.kill()  # by its pid: this test started it
            web.wait(30)
    assert ended, (f"`podium run --web` never took the answer recorded for run {rid} "
                   f"(still waiting {WEB_END_TIMEOUT:.0f} s later):\n{web.stderr()[-2000:]}")
    assert web.proc.returncode == 0, web.stderr()
    integrity, statuses = _store_rows(home / "podium.db")
    assert integrity == [("ok",)]
    assert statuses[rid] == "success"


if __name__ == "__main__" and sys.argv[1:2] == ["worker"]:
    Worker(json.loads(Path(sys.argv[2]).read_text(encoding="utf-8"))).main()
