#!/usr/bin/env bash
# The Valkey half of `make test`: every Redis-facing test (each Test and Fuzz
# function that starts a server through internal/testkit/redistest, as listed
# by scripts/redisfacing) run again with REDIS_SERVER=valkey-server.
#
# VALKEY chooses what happens when valkey-server is missing and cannot be
# installed here (scripts/ensure-valkey.sh tries as root with apt-get):
#   auto      (default) say plainly that the Valkey half was not run; exit 0
#   required  say so and fail (CI: .ci/run sets it)
#   skip      do not run the Valkey half at all, and say so
# A failing test fails the script whatever VALKEY is.
#
# VALKEY_SCOPE chooses which of those tests run again:
#   library   (default) those of pkg/ and internal/testkit/: every script,
#             on a single node and a cluster, which is all a server of
#             another make can answer differently
#   all       every Redis-facing test, the functions, the command and the
#             end-to-end ones too (the same Go over the same scripts: about
#             twice the time for no script not already run)
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
VALKEY=${VALKEY:-auto}

case ${VALKEY} in
auto | required) ;;
skip)
	echo "Valkey half NOT run: VALKEY=skip" >&2
	exit 0
	;;
*)
	echo "test-valkey: VALKEY=${VALKEY}: want auto, required or skip" >&2
	exit 2
	;;
esac

status=0
./scripts/ensure-valkey.sh || status=$?
if [[ ${status} -eq 3 ]]; then
	# ensure-valkey.sh has said why, on a line starting "Valkey half NOT run:".
	if [[ ${VALKEY} == required ]]; then
		echo "test-valkey: VALKEY=required, so a missing Valkey fails the run" >&2
		exit 1
	fi
	exit 0
elif [[ ${status} -ne 0 ]]; then
	exit "${status}"
fi

export REDIS_SERVER=${VALKEY_SERVER:-valkey-server}
export REDIS_CLI=${VALKEY_CLI:-valkey-cli}

selection=$(${GO} run ./scripts/redisfacing)
run=$(head -n 1 <<<"${selection}")
mapfile -t packages < <(tail -n +2 <<<"${selection}")
case ${VALKEY_SCOPE:-library} in
library)
	mapfile -t packages < <(printf '%s\n' "${packages[@]}" | grep -E '^\./(pkg|internal/testkit)/')
	;;
all) ;;
*)
	echo "test-valkey: VALKEY_SCOPE=${VALKEY_SCOPE}: want library or all" >&2
	exit 2
	;;
esac

echo "== Valkey half (VALKEY_SCOPE=${VALKEY_SCOPE:-library}): Redis-facing tests in ${#packages[@]} packages (${packages[*]}) on $("${REDIS_SERVER}" --version)"
# -parallel 4: as in make test, the tests marked t.Parallel wait (for a
# cluster to form, or for a control to propagate) side by side.
exec ${GO} test -count=1 -timeout 15m -parallel 4 -run "${run}" "${packages[@]}"
