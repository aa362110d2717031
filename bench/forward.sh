#!/usr/bin/env bash
# Forwarding overhead: system1 forwarding POST /v1/systemone to an instant
# stand-in System One backend, against the backend called directly, at 16
# connections on loopback; prints both rows and system1's CPU per request.
# Flags go to bench/forward (-c, -duration, -rounds, -decision-log on|off|both,
# -profile DIR, and more -system1 NAME=PATH[,ENV=VALUE] to compare binaries
# side by side); see docs/bench.md.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
go build -o bin/system1 ./cmd/system1
go run ./bench/forward -system1 bin/system1 "$@"
