#!/usr/bin/env bash
# Builds Jaeger v1.76.0 (github.com/jaegertracing/jaeger/cmd/jaeger, from
# the Go module proxy) and caches the binary on this machine, for the
# tracing tests (test/tracing): it is Jaeger's v2
# binary, an OpenTelemetry Collector with OTLP receivers (gRPC and
# HTTP), an in-memory store and the query API. Prints the binary's path
# on stdout; everything else goes to stderr, and the build's own output
# to a log file beside the binary (its end is printed when the build
# fails).
#
# Jaeger's go.mod has a replace directive, which `go install pkg@version`
# refuses, so the build runs in a throwaway module that requires Jaeger
# and repeats that replace. The first build costs about 8 minutes of CPU
# (400 s user, 81 s system, downloads included; 12 minutes on the clock on
# this project's 2 shared cores) and 2.2 GB of memory at its peak; the
# binary is 85 MB. Nothing after.
#
# A lock keeps two runs at once (two worktrees, CI and a developer) from
# building into the same folder: the second waits and then finds the
# binary.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

version=1.76.0
cache="${SYSTEM1_CACHE:-$HOME/.cache/system1}"
dir="$cache/jaeger-$version"
bin="$dir/jaeger"

buildlog="$dir/build.log"
build_once "$bin" "$cache/jaeger-$version.lock" "jaeger $version" "$buildlog"
log() { echo "jaeger.sh: $*" >&2; }

mkdir -p "$dir"
: >"$buildlog"
work="$cache/build-jaeger-$version"
rm -rf "$work"
mkdir -p "$work"
cd "$work"
log "building jaeger $version from the Go module proxy (log: $buildlog)"
start=$SECONDS
# This repository's go.mod and the caller's GOFLAGS (-mod=vendor) play no
# part; the throwaway module is the build's only main module.
export GOFLAGS= GOWORK=off
logged "$buildlog" go mod init system1.invalid/jaeger-build
logged "$buildlog" go mod edit -replace github.com/Shopify/sarama=github.com/Shopify/sarama@v1.33.0
logged "$buildlog" go get "github.com/jaegertracing/jaeger/cmd/jaeger@v$version"
logged "$buildlog" go build -trimpath -ldflags "-s -w" -o "$bin.tmp" github.com/jaegertracing/jaeger/cmd/jaeger
mv "$bin.tmp" "$bin"
cd /
rm -rf "$work"
log "built $bin in $((SECONDS - start))s"
echo "$bin"
