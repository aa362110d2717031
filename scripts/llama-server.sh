#!/usr/bin/env bash
# Builds llama.cpp's llama-server from the source that the npm package
# node-llama-cpp@3.21.1 ships, and caches the binary on this machine.
# Prints the binary's path on stdout; progress goes to stderr, and the
# build's own output to a log file in the cache (its end is printed when
# the build fails).
# No registry ships a prebuilt llama-server, so this is the only route
# that works with registries alone (see ../shared/docs/local-engine.md).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

version=3.21.1
commit=80fb11a
cache="${SYSTEM1_CACHE:-$HOME/.cache/system1}"
dir="$cache/llama-server-$commit"
bin="$dir/llama-server"
# The build leaves AMX out (lib.sh's no_amx). A binary cached with other
# flags, or before they were kept, is built again.
cflags=$no_amx
if [[ -x $bin && $(cat "$dir/cflags" 2>/dev/null) != "$cflags" ]]; then
	echo "llama-server.sh: $bin was built with other compiler flags than '$cflags': building it again" >&2
	rm -f "$bin"
fi

# One build at a time per cache: a second llama-server.sh (run.sh and
# test.sh in two terminals) waits for the first and reuses its binary,
# instead of deleting the tree the first one compiles.
# Everything the build prints (npm, git, cmake and the compiler's
# thousands of lines with upstream warnings) goes to this file; a failure
# prints its end.
build_log="$cache/llama-server-$commit.build.log"
build_once "$bin" "$cache/llama-server-$commit.lock" "llama-server $commit" "$build_log"
log() { echo "llama-server.sh: $*" >&2; }
: >"$build_log"

if [[ -z ${SYSTEM1_LLAMA_BUILD:-} ]] && ! command -v cmake >/dev/null; then
	log "installing cmake from Debian's packages (log: $build_log)"
	logged "$build_log" apt_install cmake
fi

work="$cache/build-$commit"
rm -rf "$work"
mkdir -p "$work" "$dir"
echo "$cflags" >"$dir/cflags" # before the binary is in place: a script that finds it finds its flags
cd "$work"
if [[ -n ${SYSTEM1_LLAMA_BUILD:-} ]]; then
	# A stand-in for the fetch and compile below, for the tests of this
	# script's locking and logging: it gets the work folder and the binary
	# to write.
	log "building llama-server with $SYSTEM1_LLAMA_BUILD (log: $build_log)"
	logged "$build_log" "$SYSTEM1_LLAMA_BUILD" "$work" "$bin.tmp"
	mv "$bin.tmp" "$bin"
else
	log "fetching node-llama-cpp@$version (llama.cpp source bundle; log: $build_log)"
	logged "$build_log" npm init -y
	logged "$build_log" npm i -E --omit=optional --ignore-scripts --no-audit --no-fund "node-llama-cpp@$version"
	logged "$build_log" git clone -q node_modules/node-llama-cpp/llama/gitRelease.bundle llama.cpp
	log "building llama-server (9 to 16 minutes on 2 cores; log: $build_log)"
	logged "$build_log" cmake -S llama.cpp -B llama.cpp/build -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
		-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
		-DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DGGML_CCACHE=OFF \
		-DCMAKE_C_FLAGS="$cflags" -DCMAKE_CXX_FLAGS="$cflags"
	logged "$build_log" cmake --build llama.cpp/build --target llama-server -j"$(nproc)"
	cp llama.cpp/build/bin/llama-server "$bin.tmp"
	mv "$bin.tmp" "$bin"
	# Keep the vocab-only GGUFs and gguf-py: the latency benchmark builds a
	# random-weight model around a real tokenizer from them.
	mkdir -p "$dir/vocab"
	cp llama.cpp/models/ggml-vocab-*.gguf "$dir/vocab/" 2>/dev/null || true
	rm -rf "$dir/gguf-py"
	cp -r llama.cpp/gguf-py "$dir/gguf-py"
fi
cd /
rm -rf "$work"
log "built $bin (build log: $build_log)"
echo "$bin"
