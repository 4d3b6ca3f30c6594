"""A store path that is not a regular file (a device such as /dev/null, a pipe) is refused
with one clear line and exit code 3, before SQLite opens it: nothing is written beside it
(SQLite would put its -journal in /dev)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers_engine import run_cli


def _one_line(text: str) -> str:
    assert "Traceback" not in text
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


@pytest.mark.parametrize("device", ["/dev/null", "/dev/zero", "/dev/full"])
def test_a_device_is_refused_and_nothing_is_written_beside_it(tmp_path: Path,
                                                              device: str) -> None:
    if not os.path.exists(device):
        pytest.skip(f"{device} is not on this system")
    journal = Path(device + "-journal")
    before = journal.exists()
    proc = run_cli(tmp_path / "home", "runs", "--store", device)
    assert proc.returncode == 3, proc.stderr
    line = _one_line(proc.stderr)
    assert line.startswith(f"podium: the run store {device} is not a regular file"), line
    assert not proc.stdout
    if not before:
        assert not journal.exists()


def test_a_pipe_is_refused_without_opening_it(tmp_path: Path) -> None:
    pipe = tmp_path / "store.db"
    os.mkfifo(pipe)
    proc = run_cli(tmp_path / "home", "runs", "--store", pipe, timeout=30)
    assert proc.returncode == 3, proc.stderr
    assert "is not a regular file" in _one_line(proc.stderr)
    assert [p.name for p in tmp_path.iterdir()] == ["store.db"]  # no -journal, no -wal
