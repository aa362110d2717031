#!/usr/bin/env bash
# Builds system1 as a statically linked binary (no cgo, no dynamic loader,
# no shared libraries), as the container image runs it.
#
#   scripts/build-static.sh OUT
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/build-static.sh OUT}
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out" ./cmd/system1
