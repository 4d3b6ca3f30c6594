"""Input files (--input-file) and responses files (--responses) are read under the same bounds
as a workflow file: a file over 5 MiB, or one whose aliases repeat more than 20 MiB of text
(one 1 MB string aliased 30 times), is one located line and exit code 2, never a
MemoryError or a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers_engine import run_cli, write

FLOW = """
workflow:
  name: t
  entry_point: a
  input:
    text: {type: string, required: false}
agents:
  - {name: a, prompt: "{{ workflow.input.text }}"}
"""


def _bomb(key: str) -> str:
    aliases = ", ".join(["*big"] * 30)
    return f'big: &big "{"x" * 1_000_000}"\n{key}: [{aliases}]\n'


def _big(key: str) -> str:
    return f"{key}: |\n" + ("  " + "y" * 98 + "\n") * 60_000  # 6 MB


CASES = {
    "input-bomb": ("--input-file", _bomb("text"), "alias bomb"),
    "input-large": ("--input-file", _big("text"), "too large"),
    "responses-bomb": ("--responses", _bomb("agents"), "alias bomb"),
    "responses-large": ("--responses", _big("agents"), "too large"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_file_is_one_located_line(tmp_path: Path, case: str) -> None:
    flag, text, words = CASES[case]
    flow = write(tmp_path, FLOW, "flow.yaml")
    data = write(tmp_path, text, "data.yaml")
    proc = run_cli(tmp_path / "home", "run", flow, flag, data, "--no-record")
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out
    assert "MemoryError" not in out
    assert proc.returncode == 2, out[-2000:]
    (line,) = [ln for ln in out.splitlines() if words in ln]
    assert line.startswith(f"podium run: {data}:"), line
    assert len(line) < 300, line
