"""The questions step: defaults under --skip-gates, a clear error with nobody to answer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

WF = """
workflow:
  name: q
  entry_point: ask
  input: {topic: {type: string, default: release}}
agents:
  - name: ask
    type: questions
    questions:
      - id: version
        text: "Which version of {{ workflow.input.topic }}?"
        choices: ["1.0", "2.0"]
        default: "2.0"
      - id: notes
        text: Anything else?
    routes:
      - to: $end
output:
  version: "{{ ask.output.answers.version }}"
  outcome: "{{ ask.output.outcome }}"
  skipped: "{{ ask.output.skipped_count }}"
"""


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    wf = tmp_path / "q.yaml"
    wf.write_text(WF, encoding="utf-8")
    env = dict(os.environ, PODIUM_HOME=str(tmp_path / "home"))
    return subprocess.run([sys.executable, "-m", "podium", "run", str(wf), *args], env=env,
                          text=True, capture_output=True, timeout=60, check=False,
                          stdin=subprocess.DEVNULL)


def test_skip_gates_takes_defaults_and_skips_the_rest(tmp_path: Path) -> None:
    proc = _run(tmp_path, "--skip-gates")
    assert proc.returncode == 0, proc.stderr
    # "2.0" comes back as 2.0: the final output's JSON coercion (spec 4.4)
    assert json.loads(proc.stdout) == {"version": 2.0, "outcome": "skipped_remaining",
                                       "skipped": 1}


def test_nobody_to_answer_is_a_clear_error(tmp_path: Path) -> None:
    proc = _run(tmp_path)
    assert proc.returncode == 3
    assert "needs a person at a terminal" in proc.stderr
    assert "Traceback" not in proc.stderr
