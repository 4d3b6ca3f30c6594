#!/usr/bin/env bash
# System packages the test suite needs beyond Python: Debian's Chromium for the console's
# browser tests (Playwright drives it; no browser is downloaded), git for the examples,
# PostgreSQL for the PostgreSQL run store's tests (tests/pg_server.py starts a throwaway
# server as an unprivileged user; Debian puts initdb in /usr/lib/postgresql/N/bin), and
# openssl, which makes the self-signed certificate of the HTTPS provider tests.
set -euo pipefail
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v git >/dev/null 2>&1 || need+=(git)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1
then
  need+=(postgresql)
fi
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "podium tests need: ${need[*]} (install them with apt-get as root)" >&2
    exit 1
  fi
fi
