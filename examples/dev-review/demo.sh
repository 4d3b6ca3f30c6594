#!/usr/bin/env bash
# Runs the article's dev-review workflow offline: a copy of the sample repository, the
# scripted provider (no API key, no network) and scripted answers for the human gates.
# Usage: examples/dev-review/demo.sh [SCENARIO]   (happy, tests-fail-once,
#        changes-then-approve, three-reviews-stop, malformed-then-corrected; default
#        changes-then-approve: the reviewer asks for changes once, then approves)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
scenario="${1:-changes-then-approve}"
work="$(mktemp -d "${TMPDIR:-/tmp}/podium-demo.XXXXXX")"
cp -r "$here/sample-repo/." "$work/"
git -C "$work" init --quiet
git -C "$work" add -A
git -C "$work" -c user.name=podium -c user.email=demo@podium.invalid commit --quiet -m "sample repository"
echo "podium demo: scenario '$scenario' in a fresh copy of the sample repository: $work" >&2
log="$work.events.jsonl"
code=0
podium run "$here/workflow.yaml" \
  --input ticket="$here/tickets/add-slugify.md" \
  --input repo_dir="$work" \
  --responses "$here/responses/$scenario.yaml" \
  --events "$log" || code=$?
python3 "$here/recap.py" "$log" "$scenario" || true
exit "$code"
