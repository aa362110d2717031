#!/usr/bin/env bash
# Decision quality of the calibration loop on the simulated model, through
# the real binary: builds system1 and bench/quality into bin/, then, for
# each shared dev set, answers a first part, feeds back its outcomes, lets
# `system1 serve` refit on its own, and measures the later part (accuracy,
# ECE, NLL, Brier, the gate, conformal sets), raw and calibrated.
# docs/quality.md holds a run and how to read it.
#
#   bench/quality.sh                                 # all five sets, bin/system1
#   bench/quality.sh -sets agnews -keep              # one set, keep the logs
#   bench/quality.sh --before REV [flags]            # REV's binary beside this one
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
go build -o bin/system1 ./cmd/system1
go build -o bin/quality ./bench/quality
if [[ "${1:-}" == --before ]]; then
	rev=${2:?--before needs a git revision}
	shift 2
	src=$(mktemp -d)
	trap 'rm -rf "$src"' EXIT
	git archive "$rev" | tar -x -C "$src"
	(cd "$src" && go build -o "$OLDPWD/bin/system1-before" ./cmd/system1)
	bin/quality -system1 "before=bin/system1-before" -system1 "after=bin/system1" "$@"
	exit
fi
exec bin/quality "$@"
