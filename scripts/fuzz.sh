#!/usr/bin/env bash
# Runs every fuzz target in the module for the given time each (default
# 100000x executions; a duration such as 30s works too, but a short one
# can end a clean run with "context deadline exceeded"): go test -fuzz
# takes one target at a time. Every func Fuzz... in a package's test files
# is a target, several to a file included. --list prints the targets and
# runs nothing. A failure prints go test's whole output (the failing input
# is then in the package's testdata/fuzz/<Target>/) and stops.
#
# New inputs are not minimised (-fuzzminimizetime 0): minimising one can
# outlast -fuzztime, and go test then fails the run with "context deadline
# exceeded" although nothing crashed. A crasher is kept as found.
set -euo pipefail
cd "$(dirname "$0")/.."
time=${1:-100000x}
n=0
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
		n=$((n + 1))
		if [ "$time" = --list ]; then
			echo "$pkg $target"
			continue
		fi
		echo "fuzz $pkg $target ($time)"
		if ! out=$(go test -run '^$' -fuzz "^${target}\$" -fuzztime "$time" -fuzzminimizetime 0 "$pkg" 2>&1); then
			echo "$out"
			exit 1
		fi
		echo "$out" | tail -1
	done
done
if [ "$n" -eq 0 ]; then
	echo "no fuzz targets found" >&2
	exit 1
fi
