#!/usr/bin/env bash
# Makes sure valkey-server and valkey-cli are installed, for the Valkey half of
# `make test` (internal/testkit/redistest starts its own servers on free ports;
# this script starts nothing, and leaves any redis-server on the machine alone).
#
# Exits 0 and prints the server's version when Valkey is there: already, or
# after installing Debian's valkey-server as root on a system with apt-get (on
# bookworm from bookworm-backports, whose source this script adds). A valkey it
# installs is for its binaries only: the package's service, which would listen
# on 6379 at every boot, is stopped and disabled.
#
# Exits 3 and prints a line starting "Valkey half NOT run:" when Valkey is
# missing and cannot be installed here, so that the caller can skip the Valkey
# half and say so; any other non-zero exit is a failure.
set -euo pipefail

not_run=3
# root is where the system's files are: "" (the real system), or a scratch
# tree for tests/ensure_valkey_test.go, which also puts stub apt-get,
# apt-cache and systemctl first on PATH.
root=${ENSURE_VALKEY_ROOT:-}

have_valkey() {
	command -v valkey-server >/dev/null 2>&1 && command -v valkey-cli >/dev/null 2>&1
}

skip() {
	echo "Valkey half NOT run: $*" >&2
	exit "${not_run}"
}

if have_valkey; then
	valkey-server --version
	exit 0
fi

if [[ ${EUID} -ne 0 ]]; then
	skip "valkey-server or valkey-cli is not on PATH and installing needs root (Debian: apt-get install -t bookworm-backports valkey-server; macOS: brew install valkey)"
fi
if ! command -v apt-get >/dev/null 2>&1; then
	skip "valkey-server or valkey-cli is not on PATH and this system has no apt-get to install it with"
fi

codename=""
if [[ -r ${root}/etc/os-release ]]; then
	# shellcheck disable=SC1091
	codename=$(. "${root}/etc/os-release" && echo "${ID:-}:${VERSION_CODENAME:-}")
fi

export DEBIAN_FRONTEND=noninteractive
# As in ensure-redis.sh: exit code 101 from policy-rc.d tells invoke-rc.d not
# to start services, so the package's own valkey (configured for 6379, where
# this machine may already run a redis-server) stays stopped. Remove our copy
# only; never touch one that was already there.
policy=${root}/usr/sbin/policy-rc.d
if [[ ! -e ${policy} ]]; then
	printf '#!/bin/sh\nexit 101\n' >"${policy}"
	chmod +x "${policy}"
	trap 'rm -f "${policy}"' EXIT
fi

# valkey-cli comes with valkey-server (it depends on valkey-tools). Installing
# without recommends keeps out valkey-redis-compat, whose redis-server and
# redis-cli links would take the place of the real Redis the other half tests.
install_args=(-y --no-install-recommends)
case ${codename} in
debian:bookworm)
	# Valkey reached Debian after bookworm; its backports carry 8.0.
	backports=${root}/etc/apt/sources.list.d/bookworm-backports.list
	# A commented-out line ("# deb ... bookworm-backports main") is no
	# source; deb822 files name it in "Suites:".
	if ! grep -rqsE '^[^#]*bookworm-backports' "${root}/etc/apt/sources.list" "${root}/etc/apt/sources.list.d/"; then
		echo "ensure-valkey: adding ${backports}" >&2
		echo 'deb http://deb.debian.org/debian bookworm-backports main' >"${backports}"
	fi
	install_args+=(-t bookworm-backports)
	;;
esac

echo "ensure-valkey: installing valkey-server with apt-get" >&2
if ! apt-get update; then
	skip "apt-get update failed"
fi
if ! apt-cache show valkey-server >/dev/null 2>&1; then
	skip "no valkey-server package in this system's apt sources (${codename:-unknown system})"
fi
if ! apt-get install "${install_args[@]}" valkey-server; then
	skip "apt-get install valkey-server failed"
fi
# The package enables its service, which listens on 6379, where this machine
# may run the redis-server it tests too: policy-rc.d kept it from starting
# now, but at the next boot it would start, and take 6379 from that redis or
# fail over and over. This script installed it for its binaries only, so its
# service is stopped (a policy-rc.d already there may have let it start) and
# disabled, on systemd and on sysv-rc alike.
if command -v systemctl >/dev/null 2>&1; then
	systemctl disable valkey-server.service >/dev/null 2>&1 || true
	systemctl stop valkey-server.service >/dev/null 2>&1 || true
fi
if command -v update-rc.d >/dev/null 2>&1 && [[ -e ${root}/etc/init.d/valkey-server ]]; then
	service valkey-server stop >/dev/null 2>&1 || true
	update-rc.d valkey-server disable >/dev/null 2>&1 || true
fi
echo "ensure-valkey: installed valkey-server for its binaries; its service (port 6379) is stopped and disabled" >&2
if ! have_valkey; then
	echo "ensure-valkey: apt-get finished but valkey-server or valkey-cli is still missing" >&2
	exit 1
fi
valkey-server --version
