#!/usr/bin/env bash
# Measures the latency system1 adds to one engine call: builds system1
# and bench/overhead, then sends a one-question POST /v1/systemone to
# system1 in front of a fast fake engine and the same engine call straight
# to the engine, each at a fixed rate over the same period, and prints
# p50, p90, p99 and requests per second of both and their difference.
# The issue's target: under 0.3 ms added at p50 and 1 ms at p99.
#
#   bench/overhead.sh                       # 200 req/s each for 10 s
#   bench/overhead.sh -rate 500 -duration 30s -dialect ollama
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/out
mkdir -p "$out"
go build -o "$out/system1" ./cmd/system1
go build -o "$out/overhead" ./bench/overhead
exec "$out/overhead" -system1 "$out/system1" "$@"
