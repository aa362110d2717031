#!/usr/bin/env bash
# Runs go test in the current folder with the arguments given (default
# ./...) through gotestsum, the module's tool (go.mod), for a log that
# shows what matters: a line per package, every failed test's output in
# full at the end (passing tests' output is left out), and last the plain
# count line
#
#   go test: N passed, N failed, N skipped
#
# (a package that failed to build counts as failed). When
# $SYSTEM1_TEST_COUNTS names a file, the line goes there instead:
# scripts/test.sh ends its whole run with it, whichever step stops it.
# Exits with go test's status.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
gotestsum=$(cd "$root" && go tool -n gotestsum)
counts=$(mktemp "${TMPDIR:-/tmp}/system1-gotest.XXXXXX")
trap 'rm -f "$counts"' EXIT

status=0
"$gotestsum" --format pkgname --format-hide-empty-pkg \
	--post-run-command "sh -c 'echo \$TESTS_TOTAL \$TESTS_FAILED \$TESTS_SKIPPED \$TESTS_ERRORS >$counts'" \
	-- "${@:-./...}" || status=$?

if read -r total failed skipped errors <"$counts"; then
	failed=$((failed + errors))
	passed=$((total - failed - skipped))
	((passed >= 0)) || passed=0
	line="go test: $passed passed, $failed failed, $skipped skipped"
else
	line="go test: no counts (gotestsum did not finish)"
	((status != 0)) || status=1
fi
if [[ -n ${SYSTEM1_TEST_COUNTS:-} ]]; then
	echo "$line" >"$SYSTEM1_TEST_COUNTS"
else
	printf '\n%s\n' "$line"
fi
exit "$status"
