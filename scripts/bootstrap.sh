#!/usr/bin/env bash
# Installs podium into .venv from the lock file (uv.lock). Needs only python3 (>= 3.11) and
# access to PyPI. Without uv it fetches uv's wheel from PyPI into .cache/uv (scripts/get_uv.py,
# the standard library only): a distribution's Python (PEP 668) is never pip-installed into.
#
#   scripts/bootstrap.sh             podium alone: what `make demo` needs (offline, scripted)
#   scripts/bootstrap.sh --uv        only find (or fetch) uv, and print how to call it
#   scripts/bootstrap.sh --runtimes  + the provider SDKs and the agent runtimes' CLIs (npm)
#   scripts/bootstrap.sh --dev       + the test tools, every SDK and runtime (what `make test`
#                                      needs)
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-}"
cache="${PODIUM_BOOTSTRAP_CACHE:-.cache}"
if command -v uv >/dev/null 2>&1; then
  UV="$(command -v uv)"
elif python3 -m uv --version >/dev/null 2>&1; then
  UV="python3 -m uv"
else
  UV="$(python3 scripts/get_uv.py "$cache/uv")"
fi
case "$mode" in
  --uv) echo "$UV"; exit 0 ;;
  "") $UV sync --frozen --no-dev --inexact --quiet ;;  # keeps what --dev installed
  --runtimes) $UV sync --frozen --no-dev --all-extras --inexact --quiet ;;
  --dev) $UV sync --frozen --all-extras --quiet ;;
  *) echo "bootstrap: unknown option $mode (use --runtimes or --dev)" >&2; exit 2 ;;
esac
# podium itself is installed editable (src/): compile its bytecode as an install would. A process
# that finds none compiles every module it imports (~25 ms of each cold command), and this
# machine may set PYTHONDONTWRITEBYTECODE, so nothing would ever write it.
"${UV_PROJECT_ENVIRONMENT:-.venv}/bin/python" -m compileall -q src
[ -z "$mode" ] && exit 0

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
