"""`podium diff` ignores timing: keys named elapsed, duration, started_at, finished_at or ts at
any depth of an output (and of a script's JSON stdout); free text is compared as it is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from podium.app.replay import TIMING_KEYS, without_timing

FLOW = """
workflow:
  name: timed
  entry_point: measure
  input:
    label: {type: string, default: "same"}
agents:
  - name: measure
    type: script
    command: python
    args:
      - "-c"
      - |
        import json, sys, time
        t = time.perf_counter()
        time.sleep(0.01 + (time.time_ns() % 7) / 1000)
        took = time.perf_counter() - t
        print(json.dumps({"result": sys.argv[1], "elapsed": took,
                          "steps": [{"name": "a", "duration": took, "ts": time.time()}]}))
      - "{{ workflow.input.label }}"
    routes: [{to: done}]
  - name: done
    type: terminate
    status: success
    reason: measured
    output_template:
      result: "{{ measure.output.result }}"
      elapsed: "{{ measure.output.elapsed }}"
"""


def _podium(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PODIUM_HOME=str(home))
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return subprocess.run([sys.executable, "-m", "podium", *args], env=env, text=True,
                          capture_output=True, timeout=120, check=False,
                          stdin=subprocess.DEVNULL)


def _run(home: Path, flow: Path, *extra: str) -> str:
    proc = _podium(home, "run", str(flow), "--json", *extra)
    assert proc.returncode == 0, proc.stderr
    return str(json.loads(proc.stdout)["run_id"])


def test_the_rule() -> None:
    assert {"elapsed", "duration", "started_at", "finished_at", "ts"} == TIMING_KEYS
    value = {"ok": 1, "elapsed": 0.3, "items": [{"ts": 5, "name": "a", "sub": {"duration": 2}}],
             "elapsed_ms": 7, "log": "3 passed in 0.08s"}
    assert without_timing(value) == {"ok": 1, "items": [{"name": "a", "sub": {}}],
                                     "elapsed_ms": 7, "log": "3 passed in 0.08s"}
    out = {"stdout": '{"r": 1, "elapsed": 0.2}\n', "stderr": "took 0.2s", "r": 1,
           "elapsed": 0.2}
    assert without_timing(out) == {"stdout": {"json": {"r": 1}}, "stderr": "took 0.2s", "r": 1}
    assert without_timing({"stdout": "ran in 0.2s"}) == {"stdout": "ran in 0.2s"}
    assert without_timing({"stdout": "{not json"}) == {"stdout": "{not json"}


def test_two_runs_that_differ_only_in_timing_are_the_same(tmp_path: Path) -> None:
    flow = tmp_path / "timed.yaml"
    flow.write_text(FLOW, encoding="utf-8")
    home = tmp_path / "home"
    a, b = _run(home, flow), _run(home, flow)
    data = json.loads(_podium(home, "diff", a, b, "--format", "json").stdout)
    assert data["same"] is True, data
    assert data["first_difference"] is None
    assert data["outputs"] == []
    assert data["timing_ignored"]["steps"] == [1]  # the elapsed values did differ
    assert data["timing_ignored"]["final"] is True
    text = _podium(home, "diff", a, b)
    assert text.returncode == 0, text.stdout + text.stderr
    assert "same path, same outputs, same final output" in text.stdout
    assert "timing fields ignored (duration, elapsed, finished_at, started_at, ts): they " \
           "differ at step 1, the final output" in text.stdout

    # A real difference next to the timing still shows.
    c = _run(home, flow, "--input", "label=other")
    diff = _podium(home, "diff", a, c)
    assert diff.returncode == 1
    assert "first difference at step 1" in diff.stdout
    assert "output of measure (execution 1) differs:" in diff.stdout
