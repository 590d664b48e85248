#!/usr/bin/env bash
# The cfn-lint half of `make test`: AWS's CloudFormation linter on every SAM
# template at the root (template*.yaml), or on the templates given as
# arguments. Any error or warning fails it. A rule that is wrong for a
# template is ignored by its id in that template's Metadata (cfn-lint's
# `ignore_checks`), with a comment saying why; never here.
#
# Each template is linted twice:
#   1. as written, through the SAM transform (cfn-lint runs aws-sam-translator);
#   2. its SAM translation (scripts/sam-translate.py, cfn-lint's own) as plain
#      CloudFormation, because cfn-lint turns rule W3037 (IAM actions that do
#      not exist) off for any template with the SAM transform
#      (aws/serverless-application-model#3633: SAM's policy templates name
#      such actions; ours use none).
# Findings are printed as cfn-lint's parseable lines, FILE:LINE:COL:...:RULE:
# message; a finding of pass 2 names the translation, TEMPLATE.sam.json,
# whose path is printed.
#
# CFN_LINT chooses what happens when cfn-lint is missing (it is a Python
# tool: pip install cfn-lint; it brings aws-sam-translator):
#   auto      (default) say plainly that cfn-lint was not run; exit 0
#   required  say so and fail (CI: .ci/run sets it)
#   skip      do not run cfn-lint at all, and say so
# A finding fails the script whatever CFN_LINT is.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

CFN_LINT=${CFN_LINT:-auto}

not_run() {
	echo "cfn-lint NOT run: $*" >&2
	if [[ ${CFN_LINT} == required ]]; then
		echo "test-cfn-lint: CFN_LINT=required, so a missing cfn-lint fails the run" >&2
		exit 1
	fi
	exit 0
}

case ${CFN_LINT} in
auto | required) ;;
skip)
	echo "cfn-lint NOT run: CFN_LINT=skip" >&2
	exit 0
	;;
*)
	echo "test-cfn-lint: CFN_LINT=${CFN_LINT}: want auto, required or skip" >&2
	exit 2
	;;
esac

if ! version=$(cfn-lint --version 2>/dev/null); then
	not_run "cfn-lint is not on PATH (pip install cfn-lint)"
fi

# cfn_lint_python prints the interpreter that runs cfn-lint (the one whose
# site-packages hold cfnlint and samtranslator): the #! line of the cfn-lint
# script, found through pyenv's shim when it is one.
cfn_lint_python() {
	local script line
	script=$(command -v cfn-lint)
	if [[ ${script} == */shims/* ]] && command -v pyenv >/dev/null 2>&1; then
		script=$(pyenv which cfn-lint)
	fi
	script=$(readlink -f "${script}")
	IFS= read -r line <"${script}" || true
	line=${line#\#!}
	case ${line} in
	*/env\ *) echo "${line#*/env }" ;;
	*python*) echo "${line}" ;;
	*) echo python3 ;;
	esac
}

templates=("$@")
if [[ ${#templates[@]} -eq 0 ]]; then
	shopt -s nullglob
	templates=("${root}"/template*.yaml)
	shopt -u nullglob
fi
if [[ ${#templates[@]} -eq 0 ]]; then
	echo "test-cfn-lint: no template*.yaml in ${root}" >&2
	exit 1
fi

python=$(cfn_lint_python)

# --non-zero-exit-code warning: errors and warnings fail; informational
# findings are printed but do not.
lint=(cfn-lint --format parseable --non-zero-exit-code warning --)

# One translation process for every template (it is also the check that
# ${python} runs cfn-lint), and one cfn-lint run for both passes: their
# start-up (Python importing cfnlint and samtranslator) is most of their
# time.
status=0
translations=$(mktemp -d)
trstatus=0
# ${python} may be "python3 -E" and the like: word splitting is wanted.
# shellcheck disable=SC2086
${python} "${root}/scripts/sam-translate.py" "${translations}" "${templates[@]}" >"${translations}/list" || trstatus=$?
if [[ ${trstatus} -eq 3 ]]; then
	rm -rf "${translations}"
	not_run "found ${version} but not the Python that runs it (${python} cannot import cfnlint and samtranslator)"
elif [[ ${trstatus} -ne 0 ]]; then
	status=1
fi
mapfile -t translated <"${translations}/list"

echo "== ${version} on ${templates[*]##*/} (SAM transform, then the SAM translation for IAM actions)"
"${lint[@]}" "${templates[@]}" "${translated[@]}" || status=1

if [[ ${status} -ne 0 ]]; then
	# The translations stay for the findings that point into them.
	echo "test-cfn-lint: cfn-lint found errors or warnings (SAM translations kept in ${translations})" >&2
	exit 1
fi
rm -rf "${translations}"
