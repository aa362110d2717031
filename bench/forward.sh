#!/usr/bin/env bash
# Forwarding overhead: system1 forwarding POST /v1/systemone to an instant
# stand-in System One backend, against the backend called directly and
# through a bare Go reverse proxy, at 16 connections on loopback; prints
# every row, each process's CPU per request, and each system1's figures as
# ratios to the first binary's and the proxy's of the same round.
# Flags go to bench/forward (-c, -duration, -rounds, -decision-log on|off|both,
# -profile DIR, and more -system1 NAME=PATH[,ENV=VALUE] to compare binaries
# side by side); see docs/bench.md.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
go build -o bin/system1 ./cmd/system1
go run ./bench/forward -system1 bin/system1 "$@"
