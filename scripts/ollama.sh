#!/usr/bin/env bash
# Builds Ollama v0.17.4 from the Go module proxy and caches the binary on
# this machine. Prints the binary's path on stdout; progress goes to
# stderr, and the build's own output to a log file in the cache (its end
# is printed when the build fails). Ollama's module ships llama.cpp's
# sources without the headers under its vendor/ folder, so they come
# from the llama.cpp source bundle in the npm package node-llama-cpp@3.21.1
# (see ../shared/docs/local-engine.md, "Alternative B"). Without -O3
# -march=native the engine is about 35 times slower. AMX is left out
# (lib.sh's no_amx).
#
# A lock keeps two runs at once (two worktrees, CI and a developer) from
# building into the same folder: the second waits and then finds the
# binary.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

version=0.17.4
npm_version=3.21.1
cache="${SYSTEM1_CACHE:-$HOME/.cache/system1}"
dir="$cache/ollama-$version"
bin="$dir/ollama"

# Everything the build prints goes to this file; a failure prints its end.
build_log="$cache/ollama-$version.build.log"
build_once "$bin" "$cache/ollama-$version.lock" "ollama $version" "$build_log"
log() { echo "ollama.sh: $*" >&2; }

work="$cache/build-ollama-$version"
: >"$build_log"
rm -rf "$work"
mkdir -p "$work" "$dir"
cd "$work"
log "fetching node-llama-cpp@$npm_version (for llama.cpp's vendor/ headers; log: $build_log)"
logged "$build_log" npm init -y
logged "$build_log" npm i -E --omit=optional --ignore-scripts --no-audit --no-fund "node-llama-cpp@$npm_version"
logged "$build_log" git clone -q node_modules/node-llama-cpp/llama/gitRelease.bundle llama.cpp
log "building ollama $version (about 6 minutes on 2 cores; log: $build_log)"
flags="-O3 -march=native $no_amx"
CGO_CPPFLAGS="-I$work/llama.cpp/vendor" CGO_CFLAGS="$flags" CGO_CXXFLAGS="$flags" \
	GOBIN="$work/bin" logged "$build_log" go install "github.com/ollama/ollama@v$version"
cp "$work/bin/ollama" "$bin.tmp"
mv "$bin.tmp" "$bin"
cd /
rm -rf "$work"
log "built $bin (build log: $build_log)"
echo "$bin"
