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


@pytest.fixture(scope="session")
def podium_cli() -> Callable[..., subprocess.CompletedProcess[str]]:
    """The real CLI as a function: `podium_cli("validate", path, cwd=..., env=...)`."""
    return run_podium


from pg_server import pg_server, pg_url  # noqa: E402,F401  (a real PostgreSQL, on first use)
from store_backends import store  # noqa: E402,F401  (either run store backend, for CLI tests)
