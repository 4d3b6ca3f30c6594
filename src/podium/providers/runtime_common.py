"""What the agent-runtime providers (copilot, claude-agent-sdk) share, with no SDK imported:
their capabilities and tool-name maps (which `validate` reads), where their CLIs are found, the
environment that keeps them quiet, the event loop their async SDKs run on, and the table that
lets `session_key` continue a runtime session across a resumed run.

A runtime is a CLI process (GitHub Copilot CLI, Claude Code) driven by its vendor's Python SDK.
It runs its own tool loop with its own tools; podium chooses which tools it may offer
(`tools:`), where it works (`working_dir`), the model, the effort and the endpoint.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import sys
import threading
import time
from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from podium.records import record

if TYPE_CHECKING:
    import asyncio

T = TypeVar("T")

# An agent on a runtime without a timeout of its own gets this much (Conductor's Copilot
# default for max_session_seconds).
DEFAULT_SESSION_SECONDS = 1800.0


def time_left(timeout: float | None, deadline: float | None) -> float:
    """The seconds an agent's next turn may take: until its deadline (its timeout counted
    from its start), or the whole timeout (else DEFAULT_SESSION_SECONDS) when it has none.
    ProviderError (a timeout) when nothing is left."""
    from podium.providers.base import ProviderError  # the runtimes' own modules have it

    left = (timeout or DEFAULT_SESSION_SECONDS) if deadline is None else \
        deadline - time.monotonic()
    if left <= 0:
        raise ProviderError(f"the agent ran out of time ({timeout:g}s)", category="timeout")
    return left


# --------------------------------------------------------------------------- finding the CLIs


@record(frozen=True)
class RuntimeCli:
    provider: str
    label: str  # what a person calls it
    npm: str  # the npm package
    binary: str  # the command it installs
    override: str  # the variable naming the executable explicitly

    def platform_binary(self, node_modules: Path) -> Path:
        """The native binary inside the per-platform npm package (no node needed)."""
        system = {"darwin": "darwin", "win32": "win32"}.get(sys.platform, "linux")
        machine = platform.machine().lower()
        arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64"}.get(machine, machine)
        exe = ".exe" if system == "win32" else ""
        if self.provider == "copilot":
            return node_modules / "@github" / f"copilot-{system}-{arch}" / f"copilot{exe}"
        return node_modules / "@anthropic-ai" / f"claude-code-{system}-{arch}" / f"claude{exe}"


COPILOT_CLI = RuntimeCli("copilot", "the GitHub Copilot CLI", "@github/copilot", "copilot",
                         "PODIUM_COPILOT_CLI")
CLAUDE_CLI = RuntimeCli("claude-agent-sdk", "the Claude Code CLI", "@anthropic-ai/claude-code",
                        "claude", "PODIUM_CLAUDE_CLI")


def repo_runtimes_bin() -> Path:
    """<repo>/runtimes/node_modules/.bin for a podium run from its source tree."""
    return Path(__file__).resolve().parents[3] / "runtimes" / "node_modules" / ".bin"


def runtimes_bin(environ: Mapping[str, str]) -> Path:
    return Path(environ.get("PODIUM_RUNTIMES_DIR") or repo_runtimes_bin())


class RuntimeMissing(Exception):
    """The runtime's CLI is not installed (or not where it was said to be)."""


def install_hint(cli: RuntimeCli) -> str:
    return (f"provider '{cli.provider}' needs {cli.label} (npm {cli.npm}): run `make install-runtimes` "
            f"(or `npm ci --prefix runtimes`) in podium's repository, or set {cli.override} "
            f"to its executable")


def find_cli(cli: RuntimeCli, environ: Mapping[str, str], bundled: Path | None = None) -> str:
    """The runtime's executable: ${override} when set (it must exist), then the pinned copy in
    PODIUM_RUNTIMES_DIR (default <repo>/runtimes/node_modules/.bin; its native binary first),
    then the copy the Python SDK bundles (`bundled`), then PATH. Raises RuntimeMissing."""
    explicit = environ.get(cli.override)
    if explicit:
        path = Path(explicit).expanduser()
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
        raise RuntimeMissing(f"{install_hint(cli)} ({cli.override}={explicit} is not an "
                             "executable file)")
    bin_dir = runtimes_bin(environ)
    for candidate in (cli.platform_binary(bin_dir.parent), bin_dir / cli.binary):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    if bundled is not None and bundled.is_file() and os.access(bundled, os.X_OK):
        return str(bundled)
    found = shutil.which(cli.binary, path=environ.get("PATH"))
    if found:
        return found
    raise RuntimeMissing(f"{install_hint(cli)} (looked in {bin_dir} and on PATH)")


# --------------------------------------------------------------------------- quiet runtimes

# No update checks, telemetry, error reports or other traffic besides the model endpoint.
COPILOT_QUIET_ENV: dict[str, str] = {
    "COPILOT_AUTO_UPDATE": "false",
}
COPILOT_OFFLINE_ENV: dict[str, str] = {
    # BYOK: no GitHub, no telemetry, no GitHub MCP server; only the configured endpoint
    "COPILOT_OFFLINE": "true",
}
CLAUDE_QUIET_ENV: dict[str, str] = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_COST_WARNINGS": "1",
    "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
    # podium's retry policy retries (with events, on the run's clock), not the CLI
    "CLAUDE_CODE_MAX_RETRIES": "0",
}


# --------------------------------------------------------------------------- the event loop


class LoopThread:
    """An asyncio event loop in a daemon thread: the async SDKs live on it, and podium's
    synchronous engine (which may call from several threads at once) submits work to it."""

    def __init__(self, name: str) -> None:
        import asyncio  # only runs that use a runtime pay for importing asyncio

        self.loop: asyncio.AbstractEventLoop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        import asyncio

        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run `coro` on the loop and wait for its result (TimeoutError after `timeout`; the
        coroutine is cancelled then)."""
        import asyncio

        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except BaseException:
            future.cancel()
            raise

    def close(self) -> None:
        import asyncio

        if self.loop.is_closed():
            return

        async def drain() -> None:
            tasks = [t for t in asyncio.all_tasks(self.loop) if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(drain(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self.loop.close()


# --------------------------------------------------------------------------- logins

# PODIUM_RUNTIME_LOGIN_CHECK=0: trust the runtime to find a login podium cannot see (a
# keychain entry, say) instead of stopping before the run
LOGIN_CHECK = "PODIUM_RUNTIME_LOGIN_CHECK"
COPILOT_TOKENS = ("COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN")


def _home(environ: Mapping[str, str]) -> Path:
    return Path(environ.get("HOME") or Path.home())


def _mentions(path: Path, *keys: str) -> bool:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")[:1 << 20]
    except OSError:
        return False
    return any(f'"{k}"' in text for k in keys)


def copilot_login_missing(environ: Mapping[str, str]) -> str | None:
    """Why the Copilot CLI cannot reach GitHub's service (no token variable, no stored login),
    or None. A custom endpoint (base_url) or a runtime_url needs neither: not asked then."""
    if environ.get(LOGIN_CHECK) == "0" or any(environ.get(k) for k in COPILOT_TOKENS):
        return None
    folders = [_home(environ) / ".copilot"]
    if environ.get("XDG_CONFIG_HOME"):
        folders.insert(0, Path(environ["XDG_CONFIG_HOME"]) / ".copilot")
    for folder in folders:
        if _mentions(folder / "config.json", "logged_in_users", "last_logged_in_user"):
            return None
    return (f"provider 'copilot' has no GitHub login: set {', '.join(COPILOT_TOKENS[:-1])} or "
            f"{COPILOT_TOKENS[-1]} to a token with Copilot access, or run `copilot login` "
            f"(runtimes/node_modules/.bin/copilot in podium's checkout); {LOGIN_CHECK}=0 "
            "skips this check")


def claude_login_missing(environ: Mapping[str, str], configured: bool) -> str | None:
    """Why Claude Code has no credentials (no key or token, no `claude login`), or None.
    `configured`: the workflow gives a key, token or endpoint of its own."""
    keys = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN",
            "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX")
    if configured or environ.get(LOGIN_CHECK) == "0" or any(environ.get(k) for k in keys):
        return None
    config = Path(environ.get("CLAUDE_CONFIG_DIR") or _home(environ) / ".claude")
    if (config / ".credentials.json").is_file() or _mentions(
            _home(environ) / ".claude.json", "oauthAccount") or _mentions(
            config / ".claude.json", "oauthAccount"):
        return None
    return ("provider 'claude-agent-sdk' has no credentials: set ANTHROPIC_API_KEY (or "
            "ANTHROPIC_AUTH_TOKEN, CLAUDE_CODE_OAUTH_TOKEN), or run `claude login`; "
            f"{LOGIN_CHECK}=0 skips this check")


# --------------------------------------------------------------------------- session_key table


def podium_home(environ: Mapping[str, str]) -> Path:
    return Path(environ.get("PODIUM_HOME") or Path.home() / ".podium")


class SessionTable:
    """Runtime session ids by (run, provider, session_key, working dir), kept in a small JSON
    file under PODIUM_HOME so that `podium resume` continues the same runtime session."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    @staticmethod
    def key(run_id: str, provider: str, session_key: str, working_dir: str | None) -> str:
        return json.dumps([run_id, provider, session_key, working_dir or ""])

    def _read(self) -> dict[str, str]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}

    def get(self, key: str) -> str | None:
        with self._lock:
            return self._read().get(key)

    def put(self, key: str, session_id: str) -> None:
        with self._lock:
            data = self._read()
            if data.get(key) == session_id:
                return
            data[key] = session_id
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
            os.replace(tmp, self.path)


def session_table(environ: Mapping[str, str]) -> SessionTable:
    return SessionTable(podium_home(environ) / "runtime-sessions.json")


def clip(value: Any, limit: int = 2000) -> Any:
    """Long strings in an event are cut (the model saw them whole)."""
    if isinstance(value, str) and len(value) > limit:
        return value[:limit] + f"… [{len(value) - limit} more characters]"
    if isinstance(value, dict):
        return {str(k): clip(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [clip(v, limit) for v in value]
    return value
