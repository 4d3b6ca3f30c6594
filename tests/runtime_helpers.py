"""Shared pieces of the agent-runtime tests (copilot, claude-agent-sdk): whether a runtime is
installed (the tests that start one are skipped, with the reason, only when it is not: `make
install` installs both), and the environment a `podium` subprocess gets so that the runtime
talks only to the local protocol servers and keeps its state in the test's folder."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from helpers_engine import cli_env, podium_argv
from podium.providers.runtime_common import CLAUDE_CLI, COPILOT_CLI, RuntimeMissing, find_cli

INSTALL = "install it with `make install` (or `npm ci --prefix runtimes` and `uv sync`)"


def _missing(sdk: str, package: str, cli: Any, bundled: Path | None = None) -> str | None:
    if importlib.util.find_spec(sdk) is None:
        return f"the Python SDK {package} is not installed: {INSTALL}"
    try:
        find_cli(cli, os.environ, bundled)
    except RuntimeMissing as exc:
        return f"{exc}"
    return None


def copilot_missing() -> str | None:
    return _missing("copilot", "github-copilot-sdk", COPILOT_CLI)


def claude_missing() -> str | None:
    if importlib.util.find_spec("claude_agent_sdk") is None:
        return f"the Python SDK claude-agent-sdk is not installed: {INSTALL}"
    from podium.providers.claude_agent import bundled_cli

    return _missing("claude_agent_sdk", "claude-agent-sdk", CLAUDE_CLI, bundled_cli())


needs_copilot = pytest.mark.skipif(copilot_missing() is not None,
                                   reason=f"the Copilot runtime is not installed: "
                                   f"{copilot_missing()}")
needs_claude = pytest.mark.skipif(claude_missing() is not None,
                                  reason=f"the Claude Code runtime is not installed: "
                                  f"{claude_missing()}")
needs_copilot_sdk = pytest.mark.skipif(importlib.util.find_spec("copilot") is None,
                                       reason=f"github-copilot-sdk is not installed: {INSTALL}")


def runtime_env(tmp_path: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """cli_env plus Claude Code's state in tmp (Copilot's goes to PODIUM_HOME/copilot); the
    runtimes directory is passed on when the test run has one set."""
    env = cli_env(tmp_path / "home", {"CLAUDE_CONFIG_DIR": str(tmp_path / "claude-config")})
    if os.environ.get("PODIUM_RUNTIMES_DIR"):
        env["PODIUM_RUNTIMES_DIR"] = os.environ["PODIUM_RUNTIMES_DIR"]
    env.update(extra or {})
    return env


def podium(tmp_path: Path, *args: str | Path, env: dict[str, str],
           timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(podium_argv(*args), env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout, check=False,
                          cwd=tmp_path)


def events_of(path: Path, kind: str) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event["type"] == kind:
            out.append(event)
    return out


def git_repo(path: Path, files: dict[str, str]) -> Path:
    path.mkdir(parents=True)
    for name, text in files.items():
        (path / name).write_text(text, encoding="utf-8")
    for argv in (["git", "init", "-q"], ["git", "add", "-A"],
                 ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit",
                  "-q", "-m", "start"]):
        subprocess.run(argv, cwd=path, check=True, capture_output=True)
    return path


def text_of(messages: Iterable[Any]) -> str:
    """Every string inside a request's messages, joined (to look for earlier exchanges)."""
    return json.dumps(list(messages), ensure_ascii=False)
