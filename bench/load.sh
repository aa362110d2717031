#!/usr/bin/env bash
# Load test on loopback: 10,000 mixed requests at 500 per second through
# system1's /v1/systemone to a fake engine answering in 100 ms; prints
# errors, latency and system1's goroutines and RSS before, during and after.
# Flags go to bench/load (-n, -rate, -engine-latency, -limit).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
go build -o bin/system1 ./cmd/system1
go run ./bench/load -system1 bin/system1 "$@"
