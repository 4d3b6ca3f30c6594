#!/usr/bin/env bash
# System packages the test suite needs beyond Python: Debian's Chromium for the console's
# browser tests (Playwright drives it; no browser is downloaded), and git for the examples.
set -euo pipefail
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v git >/dev/null 2>&1 || need+=(git)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "podium tests need: ${need[*]} (install them with apt-get as root)" >&2
    exit 1
  fi
fi
