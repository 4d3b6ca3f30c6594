"""bench/compare.py, the regression guard, works end to end: it exports a revision's src/,
times a path of it and of the tree in turn, and prints both medians and their ratio. One
round of the cheapest path: the figures themselves mean nothing here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COMPARE = REPO / "bench" / "compare.py"


def _compare(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PODIUM_BENCH_NO_WAIT": "1"}
    return subprocess.run([sys.executable, str(COMPARE), *args], cwd=REPO, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=300, check=False)


def test_compare_times_the_tree_against_a_revision(tmp_path: Path) -> None:
    out = tmp_path / "compare.json"
    proc = _compare(tmp_path, "--against", "HEAD", "--rounds", "1", "--warmups", "0",
                    "--path", "help", "--json", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "## The tree against HEAD" in proc.stdout
    row = next(line for line in proc.stdout.splitlines() if line.startswith("| help |"))
    rev_ms, tree_ms, ratio, rev_cpu, tree_cpu, _ = (
        cell.strip() for cell in row.strip("|").split("|")[1:])
    assert float(rev_ms) > 0
    assert float(tree_ms) > 0
    assert abs(float(ratio) - float(tree_ms) / float(rev_ms)) < 0.02
    assert float(rev_cpu) > 0
    assert float(tree_cpu) > 0
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["against"] == "HEAD"
    assert len(data["samples_ms"]["rev"]["help"]) == 1
    assert len(data["samples_ms"]["tree"]["help"]) == 1


def test_compare_refuses_an_unknown_revision_in_one_line(tmp_path: Path) -> None:
    proc = _compare(tmp_path, "--against", "no-such-rev-33", "--rounds", "1", "--path", "help",
                    "--json", str(tmp_path / "c.json"))
    assert proc.returncode != 0
    assert "unknown revision 'no-such-rev-33'" in proc.stderr
    assert "Traceback" not in proc.stderr


AB = REPO / "bench" / "ab_foreach.py"


def test_the_fan_out_ab_times_a_revision_against_the_tree() -> None:
    # a revision as a variant is archived and compiled into a temporary folder, its runs
    # interleaved with the tree's; the tree's line gives its ratio to the revision's
    proc = subprocess.run([sys.executable, str(AB), "scripted", "40", "10", "0.01", "1",
                           "HEAD", "tree"], cwd=REPO, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rev_line, tree_line = proc.stdout.strip().splitlines()[-2:]
    assert rev_line.startswith("HEAD: wall median ")
    assert "against" not in rev_line
    rev_wall = float(rev_line.split("wall median ")[1].split(" s")[0])
    tree_wall = float(tree_line.split("wall median ")[1].split(" s")[0])
    ratio = float(tree_line.split("against HEAD: wall ")[1].split(",")[0])
    assert tree_line.startswith("tree: ")
    assert abs(ratio - tree_wall / rev_wall) < 0.03  # the medians are printed rounded
    unknown = subprocess.run([sys.executable, str(AB), "scripted", "40", "10", "0.01", "1",
                              "no-such-rev-33", "tree"], cwd=REPO, stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=60, check=False)
    assert unknown.returncode != 0
    assert "no-such-rev-33: neither a folder, `tree` nor a git revision" in unknown.stderr
