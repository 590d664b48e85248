#!/usr/bin/env bash
# Says whether moto_server, the AWS API emulator that the tests of the AWS
# calls start on free loopback ports (internal/testkit/mototest), is here.
# It starts nothing and installs nothing: moto is a Python tool
# (pip install 'moto[server]').
#
# Exits 0 and prints moto's version when moto_server runs; exits 3 and prints
# a line starting "moto NOT run:" when it does not, so that the caller can go
# on and say so (the tests that need it skip, unless MOTO=required).
set -euo pipefail

not_run=3

if ! command -v moto_server >/dev/null 2>&1; then
	echo "moto NOT run: moto_server is not on PATH, so the tests of the AWS calls skip (pip install 'moto[server]')" >&2
	exit "${not_run}"
fi
# moto_server has no --version; `moto_server --help` proves that it starts
# (a pyenv shim without the package behind it fails here).
if ! moto_server --help >/dev/null 2>&1; then
	echo "moto NOT run: moto_server is on PATH but does not start ($(command -v moto_server)), so the tests of the AWS calls skip" >&2
	exit "${not_run}"
fi
echo "moto_server: $(command -v moto_server)"
