"""A run killed inside a parallel or for-each group resumes without running, or recording,
again the members that had finished: each member's events are in the store once. Real
processes (`podium run`, SIGKILL, `podium resume`) on each backend: a real SQLite store, and a
database on the real PostgreSQL server the tests start (the `store` fixture)."""

from __future__ import annotations

import json
import signal
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from helpers_engine import cli_env, podium_argv, wait_until, write
from store_backends import Store

TIMEOUT = 60.0

# Agent members answered by the scripted provider; the slow one (`b`, or item 2) waits 60 s on
# its first attempt (then podium is killed) and answers at once on its second (the test
# rewrites the responses file in between). A member that ran again would record its prompt
# and its model exchange again.
PARALLEL = """
workflow:
  name: fan
  entry_point: fan
  runtime: {provider: copilot, default_model: gpt-5-mini}
agents:
  - {name: a, prompt: "a?", output: {done: {type: string}}}
  - {name: b, prompt: "b?", output: {done: {type: string}}}
  - {name: c, prompt: "c?", output: {done: {type: string}}}
  - {name: done, type: terminate, status: success, reason: all}
parallel:
  - {name: fan, agents: [a, b, c], routes: [{to: done}]}
"""

FOR_EACH = """
workflow:
  name: items
  entry_point: each
  runtime: {provider: copilot, default_model: gpt-5-mini}
  input: {items: {type: array}}
agents:
  - {name: done, type: terminate, status: success, reason: all}
for_each:
  - name: each
    type: for_each
    source: workflow.input.items
    as: item
    max_concurrent: 4
    agent: {name: work, prompt: "{{ item }}?", output: {done: {type: string}}}
    routes: [{to: done}]
"""


def _responses(path: Path, case: str, slow_delay: float) -> Path:
    def answer(name: str, delay: float = 0.0) -> list[dict[str, Any]]:
        return [{"output": {"done": name}, "delay": delay}]

    if case == "parallel":
        agents = {"a": answer("a"), "b": answer("b", slow_delay), "c": answer("c")}
    else:
        agents = {"work": [answer("i0")[0], answer("i1")[0], answer("i2", slow_delay)[0],
                           answer("i3")[0]]}
    path.write_text(json.dumps({"agents": agents}), encoding="utf-8")
    return path


def _cli(root: Path, *args: str | Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(podium_argv(*args), cwd=root, env=cli_env(root / "home", env),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=TIMEOUT, check=False)


def _events(root: Path, run_id: str, env: dict[str, str]) -> list[dict[str, Any]]:
    proc = _cli(root, "events", run_id, env=env)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def _kill_once_started(root: Path, wf: Path, finished: list[str], *extra: str,
                       env: dict[str, str]) -> str:
    """Run `wf`, SIGKILL podium once every member of `finished` is committed; the run id."""
    proc = subprocess.Popen(podium_argv("run", wf, *extra), cwd=root,
                            env=cli_env(root / "home", env), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def committed() -> bool:
            rows = json.loads(_cli(root, "runs", "--format", "json", env=env).stdout or "[]")
            if not rows:
                return False
            done = {e["step"] for e in _events(root, rows[0]["id"], env)
                    if e["type"] == "step_finished" and e.get("group")}
            return done >= set(finished)

        assert wait_until(committed, TIMEOUT)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    rows = json.loads(_cli(root, "runs", "--format", "json", env=env).stdout)
    assert rows[0]["status"] == "interrupted"
    return str(rows[0]["id"])


def _member_events(events: list[dict[str, Any]]) -> Counter[tuple[str, str]]:
    return Counter((e["type"], str(e["step"])) for e in events if "step" in e
                   and e["type"] != "checkpoint")


@pytest.mark.parametrize("case", ["parallel", "for_each"])
def test_members_that_finished_before_a_kill_are_not_run_or_recorded_again(
        tmp_path: Path, case: str, store: Store) -> None:
    env = store.env
    responses = tmp_path / "responses.json"
    if case == "parallel":
        wf = write(tmp_path, PARALLEL)
        slow, fast, extra = "b", ["a", "c"], ()
        labels = {"a": "a", "b": "b", "c": "c"}
    else:
        wf = write(tmp_path, FOR_EACH)
        slow, fast = "i2", ["i0", "i1", "i3"]
        extra = ("-i", 'items=["i0", "i1", "i2", "i3"]')
        labels = {f"i{n}": f"work[{n}]" for n in range(4)}
    _responses(responses, case, 60.0)
    run_id = _kill_once_started(tmp_path, wf, [labels[f] for f in fast], "--responses",
                                responses, *extra, env=env)
    _responses(responses, case, 0.0)  # the slow member answers at once from now on
    resumed = _cli(tmp_path, "resume", run_id, "--json", env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["status"] == "success"
    events = _events(tmp_path, run_id, env)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    counts = _member_events(events)
    for member in fast:  # recorded once, not again by the resume
        for kind in ("step_started", "step_finished"):
            assert counts[(kind, labels[member])] == 1, (kind, member, counts)
    if case == "parallel":  # each member's prompt and model call: once
        for member in fast:
            assert counts[("prompt_rendered", member)] == 1, counts
            assert counts[("model_exchange", member)] == 1, counts
    else:  # items share their step's name: four calls, and the killed item's prompt again
        assert (counts[("prompt_rendered", "work")], counts[("model_exchange", "work")]) == \
            (5, 4), counts
    assert counts[("step_started", labels[slow])] == 2  # killed, then run again
    assert counts[("step_finished", labels[slow])] == 1
    group = next(e for e in reversed(events) if e["type"] == "step_finished"
                 and not e.get("group") and e["step_type"] == case)
    outputs = group["output"]["outputs"]
    got = list(outputs.values()) if isinstance(outputs, dict) else outputs
    assert sorted(o["done"] for o in got) == sorted([*fast, slow])
    shown = json.loads(_cli(tmp_path, "show", run_id, "--format", "json", env=env).stdout)
    assert [s["step"] for s in shown["steps"]] == [(case == "parallel" and "fan") or "each",
                                                   "done"]
