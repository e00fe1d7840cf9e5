#!/usr/bin/env bash
# Checks that the project's entry points agree: the README names exactly the two commands
# (scripts/demo.sh and scripts/test.sh), both exist, and .ci/run is `bash scripts/test.sh`.
# test.sh runs it first, so CI fails if one of them drifts.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
for cmd in scripts/demo.sh scripts/test.sh; do
  [ -f "$cmd" ] || { echo "check_entry_points: $cmd is missing" >&2; fail=1; }
  grep -qx "$cmd" README.md || { echo "check_entry_points: README.md does not give \`$cmd\` on a line of its own" >&2; fail=1; }
done
ci=$(grep -vE '^\s*(#|$|set |cd )' .ci/run)
if [ "$ci" != "bash scripts/test.sh" ]; then
  echo "check_entry_points: .ci/run must run \`bash scripts/test.sh\`, it runs: $ci" >&2
  fail=1
fi
exit $fail
