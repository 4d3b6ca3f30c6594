#!/usr/bin/env bash
# Installs podium and its development tools into .venv from the lock file (uv.lock).
# Needs only python3 (>= 3.11) and network access to PyPI; installs uv itself if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v uv >/dev/null 2>&1; then
  python3 -m pip install --quiet --disable-pip-version-check uv
fi
UV="$(command -v uv || echo "python3 -m uv")"
$UV sync --frozen --compile-bytecode --quiet
