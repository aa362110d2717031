#!/usr/bin/env bash
# Forwarding overhead: system1 forwarding POST /v1/systemone to an instant
# stand-in System One backend, against the backend called directly, at 16
# connections on loopback; prints both rows and system1's CPU per request.
# Flags go to bench/forward (-c, -duration).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
go build -o bin/system1 ./cmd/system1
go run ./bench/forward -system1 bin/system1 "$@"
