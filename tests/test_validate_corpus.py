"""The invalid-workflow corpus: `podium validate` prints exactly the expected diagnostics.

Each tests/corpus/invalid/NN-name.yaml has a sibling NN-name.expected holding the diagnostic
lines podium prints for it (without the summary line) when run from the repository root as
`podium validate tests/corpus/invalid/NN-name.yaml`. A first line `# args: --strict` adds
command-line flags (warning-only cases need --strict to fail). Every case must exit with 2.

After a deliberate change of a message, regenerate and then *review* the expectations with
`python tests/test_validate_corpus.py` (run from the repository root).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpus" / "invalid"
CASES = sorted(CORPUS.glob("[0-9][0-9]-*.yaml"))
_ARGS_RE = re.compile(r"^#\s*args:\s*(.*)$")
WORKERS = min(8, 2 * (os.cpu_count() or 2))  # each run is a short-lived process

Runner = Callable[..., subprocess.CompletedProcess[str]]


def case_args(case: Path) -> list[str]:
    """Extra CLI flags from the case's first-line `# args: ...` comment."""
    first = case.read_text(encoding="utf-8").split("\n", 1)[0]
    m = _ARGS_RE.match(first)
    return m.group(1).split() if m else []


def relative(case: Path) -> str:
    return case.relative_to(ROOT).as_posix()


def diagnostic_lines(case: Path, stdout: str) -> list[str]:
    """The printed lines minus the closing summary (`FILE: valid|invalid...`)."""
    lines = stdout.splitlines()
    if lines and lines[-1].startswith(f"{relative(case)}: "):
        assert re.match(rf"{re.escape(relative(case))}: invalid\b", lines[-1]), lines[-1]
        lines.pop()
    return lines


@pytest.fixture(scope="module")
def results(podium_cli: Runner) -> dict[Path, subprocess.CompletedProcess[str]]:
    """Every corpus case validated once, a few at a time (each run is a fresh process)."""

    def run(case: Path) -> subprocess.CompletedProcess[str]:
        return podium_cli("validate", *case_args(case), relative(case), cwd=ROOT)

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        return dict(zip(CASES, pool.map(run, CASES), strict=True))


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= 45
    names = [c.name[:2] for c in CASES]
    assert len(names) == len(set(names)), "two corpus cases share a number"
    for case in CASES:
        assert re.fullmatch(r"\d\d-[a-z0-9-]+\.yaml", case.name), case.name
        assert case.with_suffix(".expected").is_file(), f"{case.name} has no .expected file"


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_invalid_workflow_diagnostics(
        case: Path, results: dict[Path, subprocess.CompletedProcess[str]]) -> None:
    proc = results[case]
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.stderr == ""
    expected = case.with_suffix(".expected").read_text(encoding="utf-8").splitlines()
    assert diagnostic_lines(case, proc.stdout) == expected
    assert proc.returncode == 2


def _regenerate() -> None:  # pragma: no cover - a maintainer's tool
    from conftest import run_podium

    for case in CASES:
        proc = run_podium("validate", *case_args(case), relative(case), cwd=ROOT)
        lines = diagnostic_lines(case, proc.stdout)
        case.with_suffix(".expected").write_text("".join(f"{x}\n" for x in lines),
                                                 encoding="utf-8")
        print(f"{case.name}: exit {proc.returncode}, {len(lines)} line(s)")


if __name__ == "__main__":
    _regenerate()
