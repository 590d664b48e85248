#!/usr/bin/env bash
# Runs every Fuzz* target in the module for the given -fuzztime each: a
# duration (5m) or a count of inputs (20000x, the default).
# Seed corpora live next to the tests, in testdata/fuzz/<FuzzName>/.
# Minimizing is off: several fuzzers call a real Redis, and minimizing new
# inputs would eat the whole short budget.
#
# Each package's test binary is built once, instrumented for fuzzing, and
# runs every target of the package in turn (as `go test -fuzz` would run
# it: in the package's directory, with the go command's fuzz cache), so a
# package of five targets is linked once, not five times.
set -euo pipefail
fuzztime="${1:-20000x}"
cd "$(dirname "$0")/.."

# saturated: targets whose coverage stops growing within 5,000 inputs (a
# small input space: measured with a fresh cache, 5,000 and 20,000 inputs
# reach the same coverage, give or take a few edges), and the Redis-backed
# ones whose inputs cost most (below). A short run (a count of at most
# 20,000, make test's) gives them theirs; a longer one or a duration (make
# fuzz-long) gives every target the same. Take a target off the list when
# it grows.
declare -A saturated=(
  [FuzzTooManyRequestsBody]=5000x
  [FuzzCounterDecision]=5000x
  [FuzzHeaders]=5000x
  [FuzzKeys]=5000x
  [FuzzMiddlewareHeaders]=5000x
  # Redis-backed: every input is one or more round trips to a real
  # redis-server, and the rate falls as the corpus grows. Measured on
  # FuzzControlRecordAgreement from an empty cache (2 cores, load 20-25):
  # the first 10,000 inputs took about 10 s and found about 108 of the 129
  # new-coverage inputs that 20,000 found in 44 s (1,156 inputs/s at
  # first, 141 at the end): the second 10,000 cost three quarters of the
  # time for a sixth of the coverage. Their seed corpora run in every
  # plain go test, and make fuzz-long gives them 2,000,000.
  [FuzzControlRecordAgreement]=10000x
  [FuzzAuthorizerEvent]=10000x
  [FuzzAPIEvent]=10000x
)

# budget prints the -fuzztime of target $1.
budget() {
  local own=${saturated[$1]:-}
  if [[ -n ${own} && ${fuzztime} =~ ^[0-9]+x$ ]] && ((${own%x} < ${fuzztime%x} && ${fuzztime%x} <= 20000)); then
    echo "${own}"
  else
    echo "${fuzztime}"
  fi
}

status=0
work=$(mktemp -d -t slidegate-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT
log=${work}/log
cache=$(go env GOCACHE)/fuzz
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  names=$(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u || true)
  [[ -n ${names} ]] || continue
  bin=${work}/pkg.test
  if ! go test -c -fuzz . -o "$bin" "$pkg" >"$log" 2>&1; then
    echo "fuzz $pkg: build failed"
    cat "$log"
    status=1
    continue
  fi
  for name in ${names}; do
    t=$(budget "$name")
    echo "fuzz $pkg $name for $t"
    if ! (cd "$dir" && "$bin" -test.run '^$' -test.fuzz "^${name}\$" -test.fuzztime "$t" -test.fuzzminimizetime 0 \
      -test.fuzzcachedir "${cache}/${pkg}" -test.paniconexit0 -test.timeout 10m) >"$log" 2>&1; then
      cat "$log"
      status=1
    fi
  done
done
exit $status
