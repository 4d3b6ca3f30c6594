"""`podium validate` read without typer (podium.cli.plain) does what the typer command does.

Each case runs the same arguments twice, as real processes: through the console entry
(`python -m podium`, which takes the plain path) and through the typer app
(podium.cli.process.main, which the plain path skips), and compares the exit code, stdout and
stderr. Forms the plain reader does not know go to typer, which gives its help and errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from helpers_engine import EXAMPLES, cli_env, podium_argv, write
from podium.cli import plain

ARTICLE = EXAMPLES / "dev-review" / "workflow.yaml"
TYPER = ("import sys\n"
         "from podium.cli.entry import skip_pydantic_plugins\n"
         "skip_pydantic_plugins()\n"
         "from podium.cli.process import main\n"
         "main()\n")


def _run(argv: list[str], tmp_path: Path) -> tuple[int, str, str]:
    proc = subprocess.run(argv, cwd=tmp_path, env=cli_env(tmp_path / "home"),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=60, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def _both(tmp_path: Path, *args: str) -> tuple[tuple[int, str, str], tuple[int, str, str]]:
    fast = _run(podium_argv(*args), tmp_path)
    typed = _run([sys.executable, "-c", TYPER, *args], tmp_path)
    return fast, typed


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    bad = write(tmp_path, """
        workflow:
          name: bad
          entry_point: a
        agents:
          - name: a
            type: set
            value: "{{ nope.output }}"
            routes: [{to: $end}]
        """, "bad.yaml")
    warned = write(tmp_path, """
        workflow:
          name: warned
          entry_point: a
        agents:
          - name: a
            type: set
            value: 1
            unknown_key: 2
            routes: [{to: $end}]
        """, "warned.yaml")
    folder = tmp_path / "flows"
    folder.mkdir()
    (folder / "one.yaml").write_text(ARTICLE.read_text(encoding="utf-8"), encoding="utf-8")
    return {"article": str(ARTICLE), "bad": str(bad), "warned": str(warned),
            "folder": str(folder), "missing": str(tmp_path / "missing.yaml"),
            "dash": "-leading.yaml"}


CASES = [
    ["article"],
    ["bad"],
    ["warned"],
    ["--strict", "warned"],
    ["warned", "--strict"],
    ["missing"],
    ["article", "bad", "missing"],
    ["folder"],
    ["--format", "json", "article", "bad"],
    ["--format=json", "warned"],
    ["-f", "json", "missing"],
    ["--format", "yaml", "article"],
    ["--format", "text", "--format", "json", "article"],
    ["--budget", "article"],
    ["--budget", "--strict", "--format", "json", "article"],
    ["--", "article"],
    ["--format", "--strict", "article"],  # click takes what follows as the value
    ["--", "dash", "article"],  # a file whose name starts with a dash
]


@pytest.mark.parametrize("case", CASES, ids=[" ".join(c) for c in CASES])
def test_the_plain_reader_does_what_typer_does(case: list[str], files: dict[str, str],
                                                tmp_path: Path) -> None:
    args = ["validate", *(files.get(a, a) for a in case)]
    assert plain.parse(args) is not None  # the console entry takes the plain path
    fast, typed = _both(tmp_path, *args)
    assert fast == typed
    assert "Traceback" not in fast[2]


@pytest.mark.parametrize("case", [
    ["validate"],
    ["validate", "--help"],
    ["validate", "-h"],
    ["validate", "--nope", "x.yaml"],
    ["validate", "--format"],
    ["validate", "-"],
    ["validate", "--store", "other.db", "x.yaml"],
    ["-q", "validate", "x.yaml"],
])
def test_what_the_plain_reader_does_not_know_goes_to_typer(case: list[str],
                                                          tmp_path: Path) -> None:
    assert plain.parse(case) is None
    code, out, err = _run(podium_argv(*case), tmp_path)
    assert "Traceback" not in err
    if "--help" in case or "-h" in case:
        assert code == 0
        assert out.startswith("Usage: python -m podium validate [OPTIONS]")
    elif case[0] == "validate" and "--store" not in case and "-" not in case:
        assert code == 2  # click's usage error
        assert "Error:" in err


def test_the_plain_reader_knows_every_option_of_the_typer_command() -> None:
    """An option added to `validate` must be added to podium.cli.plain too (or the plain
    reader would send it to typer: correct, and slower)."""
    import typer

    from podium.cli.main import app

    command = typer.main.get_command(app).commands["validate"]  # type: ignore[attr-defined]
    options = {o for p in command.params for o in p.opts if o.startswith("-")}
    assert options - {"--help", "-h"} == set(plain.FLAGS) | set(plain.FORMAT)


def test_a_reader_that_goes_away_ends_quietly(tmp_path: Path) -> None:
    """`podium validate --format json FILE | head -1`: exit 1 and no traceback, as click."""
    argv = [*podium_argv("validate", "--format", "json", str(ARTICLE))]
    shell = subprocess.run(
        ["bash", "-c", " ".join(f"'{a}'" for a in argv) + " | head -c 1 >/dev/null; "
         "echo ${PIPESTATUS[0]}"],
        cwd=tmp_path, env=cli_env(tmp_path / "home"), capture_output=True, text=True,
        timeout=60, check=False)
    assert "Traceback" not in shell.stderr
    assert shell.stdout.strip() in ("0", "1")  # 0 when the pipe took it all before closing


def test_a_validate_that_ends_without_finalization_loses_no_output(tmp_path: Path) -> None:
    """cli/guard.py end_without_finalization: the plain `validate` ends with os._exit after
    its exit handlers and a flush. Output far past a pipe's and stdio's buffers (a warning
    per agent of 400) arrives whole, to a file and through a pipe, summary last, with the
    exit code of the check: 0 for warnings, 2 (INVALID) for an error, in the same run."""
    agents = "\n".join(f"  - {{name: a{i}, prompt: hi, routes: [{{to: "
                       f"{f'a{i + 1}' if i < 399 else '$end'}}}]}}" for i in range(400))
    many = write(tmp_path, f"""
workflow: {{name: many, entry_point: a0, runtime: {{provider: copilot}}}}
agents:
{agents}
""", "many.yaml")
    broken = write(tmp_path, "workflow: {name: b, entry_point: nowhere}\nagents: []\n",
                   "broken.yaml")
    code, out, err = _run(podium_argv("validate", str(many)), tmp_path)
    assert code == 0, err
    lines = out.splitlines()
    assert sum("warning:" in line for line in lines) >= 400
    assert lines[-1] == "many.yaml: valid: 400 warnings"  # shown relative to the cwd
    assert len(out) > 100_000
    typed = _run([sys.executable, "-c", TYPER, "validate", str(many)], tmp_path)
    assert (code, out) == typed[:2]  # as the typer command, which ends as Python does
    into = tmp_path / "out.txt"
    shell = subprocess.run(
        ["bash", "-c", " ".join(f"'{a}'" for a in podium_argv("validate", str(many),
                                                            str(broken)))
         + f" > '{into}'; echo $?"],
        cwd=tmp_path, env=cli_env(tmp_path / "home"), capture_output=True, text=True,
        timeout=60, check=False)
    assert shell.stdout.strip() == "2"
    assert into.read_text() == _run([sys.executable, "-c", TYPER, "validate", str(many),
                                     str(broken)], tmp_path)[1]


KEEP_LAST = """
import json, weakref
from podium.cli import guard
class Result:  # what a check leaves: a large object graph, here one object
    pass
first, second = Result(), Result()
gone = weakref.ref(first)
guard.keep_until_exit(first)  # a process that ends as Python does: nothing kept
kept_outside = len(guard._kept)
guard.end_without_finalization()
guard.keep_until_exit(first)
guard.keep_until_exit(second)
del first
print(json.dumps({"outside": kept_outside, "kept": len(guard._kept),
                  "second": guard._kept[0] is second, "first_freed": gone() is None}))
"""


def test_a_process_that_skips_finalization_keeps_only_its_last_checks_result() -> None:
    """cli/guard.py keep_until_exit (decision 0044): the plain `validate` ends without
    finalization and keeps its last file's result to spare freeing it; an earlier file's
    is freed as the next is kept (a folder of large files holds one at a time), and a
    process that ends as Python does keeps nothing."""
    import json

    proc = subprocess.run([sys.executable, "-c", KEEP_LAST], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=60, check=True)
    assert json.loads(proc.stdout) == {"outside": 0, "kept": 1, "second": True,
                                       "first_freed": True}
