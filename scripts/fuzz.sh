#!/usr/bin/env bash
# Runs every Fuzz* target in the module for the given -fuzztime each: a
# duration (5m) or a count of inputs (20000x, the default).
# Seed corpora live next to the tests, in testdata/fuzz/<FuzzName>/.
# Minimizing is off: several fuzzers call a real Redis, and minimizing new
# inputs would eat the whole short budget.
set -euo pipefail
fuzztime="${1:-20000x}"
cd "$(dirname "$0")/.."
status=0
log=$(mktemp -t slidegate-fuzz.XXXXXX)
trap 'rm -f "$log"' EXIT
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for name in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
    echo "fuzz $pkg $name for $fuzztime"
    if ! go test "$pkg" -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" -fuzzminimizetime 0 >"$log" 2>&1; then
      cat "$log"
      status=1
    fi
  done
done
exit $status
