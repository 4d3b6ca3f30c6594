#!/usr/bin/env bash
# Installs podium and its development tools into .venv from the lock file (uv.lock).
# Needs only python3 (>= 3.11) and network access to PyPI; installs uv itself if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v uv >/dev/null 2>&1; then
  python3 -m pip install --quiet --disable-pip-version-check uv
fi
UV="$(command -v uv || echo "python3 -m uv")"
$UV sync --frozen --compile-bytecode --quiet --extra runtimes
# podium itself is installed editable (src/): compile its bytecode as an install would. A process
# that finds none compiles every module it imports (~25 ms of each cold command), and this
# machine may set PYTHONDONTWRITEBYTECODE, so nothing would ever write it.
"${UV_PROJECT_ENVIRONMENT:-.venv}/bin/python" -m compileall -q src

# The agent runtimes (provider: copilot, provider: claude-agent-sdk): the CLIs pinned in
# runtimes/package-lock.json, from the npm registry (each ships its native binary in a
# per-platform package; nothing else is downloaded). podium finds them in
# runtimes/node_modules/.bin (or $PODIUM_RUNTIMES_DIR). Reinstalled only when the lock changed.
if command -v npm >/dev/null 2>&1; then
  stamp=runtimes/node_modules/.podium-lock
  if ! cmp -s runtimes/package-lock.json "$stamp" 2>/dev/null; then
    npm ci --prefix runtimes --no-audit --no-fund --loglevel=error >/dev/null
    cp runtimes/package-lock.json "$stamp"
  fi
else
  echo "bootstrap: npm not found, so the agent runtimes (provider: copilot," \
       "claude-agent-sdk) are not installed; install Node.js with npm and run it again" >&2
fi
