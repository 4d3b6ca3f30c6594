"""Shared pytest fixtures: the real `podium` CLI as a subprocess, in a predictable environment."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]

# The environment a CLI subprocess sees: enough to run Python, nothing that makes output
# depend on the machine (did-you-mean hints for env vars, locale-dependent encodings).
_KEPT_ENV = ("PATH", "HOME", "SYSTEMROOT", "TMPDIR", "TEMP", "TMP")


def cli_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A small, predictable environment for running podium as a subprocess."""
    env = {k: os.environ[k] for k in _KEPT_ENV if k in os.environ}
    env.update({"PYTHONIOENCODING": "utf-8", "PYTHONUTF8": "1", "LC_ALL": "C.UTF-8",
                "NO_COLOR": "1", "COLUMNS": "200"})
    env.update(extra or {})
    return env


def run_podium(*args: str | Path, cwd: Path = REPO_ROOT, env: Mapping[str, str] | None = None,
               timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run `python -m podium ARGS...` and capture its output as text."""
    return subprocess.run(
        [sys.executable, "-m", "podium", *(str(a) for a in args)],
        cwd=cwd, env=cli_env(env), capture_output=True, text=True, encoding="utf-8",
        errors="replace", timeout=timeout, check=False,
    )


# Under `make test` (pytest-xdist, `--dist loadfile --no-loadscope-reorder`) each file runs whole
# on one worker and a free worker takes the next file in collection order. These files took the
# longest in a serial run (20 s to 2 min each, docs/performance.md "The test suite"): they go
# first, so the end of the run is short files on every worker rather than one long file on one.
# A file missing from the list only runs in its usual place; a plain `pytest` keeps pytest's order.
LONGEST_FILES_FIRST = (
    "test_temporal.py", "test_kill_resume.py", "test_store_concurrency.py",
    "test_validate_corpus.py", "test_durable_cli.py", "web/test_store_views.py", "test_eval.py",
    "test_skill_discovery.py", "test_fleet.py", "test_run_ownership.py",
    "test_template_limits.py", "test_store_postgres_cli.py", "web/test_browser.py",
    "test_runtime_hermes.py", "web/test_browser_screens.py", "test_first_day.py",
    "test_maintenance.py", "test_secrets_leak.py", "test_runtime_copilot.py",
    "test_store_postgres.py", "test_hostile_data.py", "web/test_api.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("numprocesses", None) and "PYTEST_XDIST_WORKER" not in os.environ:
        return
    tests = Path(__file__).parent
    rank = {name: i for i, name in enumerate(LONGEST_FILES_FIRST)}

    def place(item: pytest.Item) -> int:
        try:
            return rank.get(item.path.relative_to(tests).as_posix(), len(rank))
        except ValueError:
            return len(rank)

    items.sort(key=place)  # stable: the tests of a file keep their order


@pytest.fixture(scope="session")
def podium_cli() -> Callable[..., subprocess.CompletedProcess[str]]:
    """The real CLI as a function: `podium_cli("validate", path, cwd=..., env=...)`."""
    return run_podium


from pg_server import pg_server, pg_url  # noqa: E402,F401  (a real PostgreSQL, on first use)
from store_backends import store  # noqa: E402,F401  (either run store backend, for CLI tests)
