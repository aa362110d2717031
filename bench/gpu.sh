#!/usr/bin/env bash
# Rows, K questions and a 1,000-question request on a GPU: llama-server
# built with CUDA serving a random-weight model of Qwen2.5-0.5B's shape
# with every layer offloaded, system1 in front of it. The device machine
# reaches nothing outside itself, so this runs in two steps:
#
#   bench/gpu.sh prepare   here: writes .device-bench/ (llama.cpp's source
#                          at the bundled commit, the Qwen2 vocabulary,
#                          the weight generator and static x86-64 builds
#                          of system1, of system1 at d2e3073 and of the
#                          three benchmarks), ~34 MB
#   bench/gpu.sh run       there, from the repository root with
#                          .device-bench carried: builds llama-server for
#                          the GPU it finds (sm_90 on an H100 or H200),
#                          writes the model, runs bench/throughput (rows
#                          at the engine's own speed: direct, system1
#                          run, the same with prompts_per_call, the batch
#                          route, one request a state with and without
#                          spread_slots; then the same through system1
#                          at d2e3073), bench/kquestions
#                          (cold and warm K = 1..8, one slot against
#                          spread over slots) and bench/questions (1 to
#                          1,000 questions), and leaves the tables and
#                          logs in $OUT (or bench/out)
#
# The run step needs nvcc, cmake, ninja and python3 with numpy, which the
# device image has. GPU_BENCH_SERVER (a llama-server binary) skips the
# build, and GPU_BENCH_GPU_LAYERS (default 99) sets -ngl: with a CPU build
# and 0 layers the run step can be tried out here. The build leaves flash
# attention's kernels out (GPU_BENCH_FA=ON puts them in): they are much of
# its compile time, a lease has 15 minutes, and on prompts of a hundred
# tokens attention is a small part of a call.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
dir=.device-bench
commit=80fb11a
version=3.21.1
# The commit issue 34's figures are ratios against.
base=d2e3073

prepare() {
	rm -rf "$dir"
	mkdir -p "$dir"
	work=$(mktemp -d)
	trap 'rm -rf "$work"' RETURN
	(
		cd "$work"
		npm init -y >/dev/null
		npm i -E --omit=optional --ignore-scripts --no-audit --no-fund "node-llama-cpp@$version" >&2
		git -c advice.detachedHead=false clone -q node_modules/node-llama-cpp/llama/gitRelease.bundle llama.cpp
	)
	got=$(git -C "$work/llama.cpp" rev-parse --short=7 HEAD)
	[[ $got == "$commit" ]] || { echo "node-llama-cpp@$version ships llama.cpp $got, not $commit" >&2; return 1; }
	# What a server build needs: no docs, model files, tests or web UI.
	git -C "$work/llama.cpp" archive --format=tar HEAD -- . ':!docs' ':!models' ':!tests' ':!benches' \
		':!tools/server/webui' ':!examples' ':!media' ':!.github' | xz -T0 -6 >"$dir/llama-src.tar.xz"
	cp "$work/llama.cpp/models/ggml-vocab-qwen2.gguf" "$dir/"
	cp ../shared/tools/gen_random_gguf.py "$dir/"
	# Compressed: the tree that travels to the device machine holds 64 MiB,
	# and the four binaries alone are 50 MB.
	for cmd in cmd/system1 bench/kquestions bench/questions bench/throughput; do
		CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags "-s -w" -o "$work/bin/$(basename "$cmd")" "./$cmd"
	done
	mkdir "$work/base"
	git archive "$base" | tar -x -C "$work/base"
	(cd "$work/base" && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags "-s -w" -o "$work/bin/system1-base" ./cmd/system1)
	tar -C "$work/bin" -cf - . | xz -T0 -6 >"$dir/bin.tar.xz"
	du -sh "$dir"
}

run() {
	out=${OUT:-bench/out/gpu}
	mkdir -p "$out"
	exec > >(tee "$out/gpu.txt") 2>&1
	src=/tmp/llama.cpp
	rm -rf "$src" && mkdir -p "$src"
	tar -xJf "$dir/llama-src.tar.xz" -C "$src"
	bin=/tmp/system1-bench
	rm -rf "$bin" && mkdir -p "$bin"
	tar -xJf "$dir/bin.tar.xz" -C "$bin"
	server=${GPU_BENCH_SERVER:-}
	if [[ -z $server ]]; then
		nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
		cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
		start=$(date +%s)
		cmake -S "$src" -B "$src/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
			-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$cap" \
			-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_UI=OFF \
			-DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DGGML_CCACHE=OFF -DGGML_CUDA_NCCL=OFF \
			-DGGML_CUDA_FA="${GPU_BENCH_FA:-OFF}" >"$out/cmake.log"
		cmake --build "$src/build" --target llama-server -j"$(nproc)" >>"$out/cmake.log"
		echo "llama-server built for sm_$cap in $(($(date +%s) - start)) s"
		server=$src/build/bin/llama-server
	fi
	layers=${GPU_BENCH_GPU_LAYERS:-99}

	model=/tmp/rand-qwen2-0.5b-f16.gguf
	random_qwen2 "${PYTHON:-python3}" "$dir/gen_random_gguf.py" "$src/gguf-py" "$dir/ggml-vocab-qwen2.gguf" "$model" >/dev/null

	port=18591
	work=$(mktemp -d)
	pids=()
	trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null' EXIT
	"$server" -m "$model" --host 127.0.0.1 --port $port -c 32768 -np 8 -ngl "$layers" -a rand-qwen2 \
		--no-webui --metrics >"$out/llama.log" 2>&1 &
	pids+=($!)
	wait_ok "http://127.0.0.1:$port/health" 120
	echo "llama-server: random Qwen2.5-0.5B shape (F16), 8 slots, $layers layers on the GPU"

	system1=$bin/system1 logs=$out
	start_system1 serial false
	serial=$url
	start_system1 spread true
	# Throughput first: a lease that runs out keeps what came before.
	echo
	"$bin/throughput" -system1 "$bin/system1" -llama "http://127.0.0.1:$port" -model rand-qwen2 -rows 128 -rounds 3
	echo
	echo "The same rows through $base's system1 (it has no prompts_per_call), for the ratios against it:"
	"$bin/throughput" -system1 "$bin/system1-base" -llama "http://127.0.0.1:$port" -model rand-qwen2 -rows 128 -rounds 3 \
		-ways engine,run,batch,single,serial
	echo
	"$bin/kquestions" -url "$url" -serial-url "$serial" -engine "http://127.0.0.1:$port" -model rand-qwen2 -reps 3
	echo
	"$bin/questions" -system1 "$bin/system1" -llama "http://127.0.0.1:$port" -model rand-qwen2 -reps 3
}

case ${1:-} in
prepare) prepare ;;
run) run ;;
*)
	echo "usage: bench/gpu.sh prepare|run" >&2
	exit 2
	;;
esac
