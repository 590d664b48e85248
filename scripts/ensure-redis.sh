#!/usr/bin/env bash
# Makes sure redis-server and redis-cli are installed, for the integration
# tests (internal/testkit/redistest starts its own servers on free ports; this
# script starts nothing).
#
# Exits 0 when both are present (printing their versions), installs Debian's
# redis-server package when run as root on a system with apt-get, and exits 1
# with instructions otherwise.
set -euo pipefail

have_redis() {
	command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1
}

if have_redis; then
	redis-server --version
	exit 0
fi

if [[ ${EUID} -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
	echo "ensure-redis: installing redis-server with apt-get" >&2
	export DEBIAN_FRONTEND=noninteractive
	# policy-rc.d exit code 101 tells invoke-rc.d not to start services, so
	# the package's own redis (which would listen on 6379) stays stopped on
	# systems where its postinst would otherwise start it. Remove our copy
	# only; never touch one that was already there.
	policy=/usr/sbin/policy-rc.d
	if [[ ! -e ${policy} ]]; then
		printf '#!/bin/sh\nexit 101\n' >"${policy}"
		chmod +x "${policy}"
		trap 'rm -f "${policy}"' EXIT
	fi
	apt-get update
	apt-get install -y --no-install-recommends redis-server
	if have_redis; then
		redis-server --version
		exit 0
	fi
	echo "ensure-redis: apt-get finished but redis-server or redis-cli is still missing" >&2
	exit 1
fi

cat >&2 <<'MSG'
ensure-redis: redis-server and redis-cli are required but not installed.
Install them with one of:
  sudo apt-get install redis-server   (Debian, Ubuntu)
  brew install redis                  (macOS)
or rerun this script as root on a system with apt-get.
MSG
exit 1
