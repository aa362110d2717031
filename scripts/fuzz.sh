#!/usr/bin/env bash
# Runs every fuzz target in the module for the given time each (default
# 10s): go test -fuzz takes one target at a time.
set -euo pipefail
cd "$(dirname "$0")/.."
time=${1:-10s}
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
		echo "fuzz $pkg $target ($time)"
		go test -run '^$' -fuzz "^${target}\$" -fuzztime "$time" "$pkg" | tail -1
	done
done
