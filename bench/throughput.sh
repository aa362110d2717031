#!/usr/bin/env bash
# Row-wise throughput against the engine's own: the same two questions
# over many states, on llama-server serving a random-weight model of
# Qwen2.5-0.5B's shape with 8 slots, six ways side by side in one run
# (bench/throughput/main.go): (a) llama-server driven directly at its
# best, (b) system1 run, (b2) the same with prompts_per_call, (c) POST
# /v1/systemone/batch, (d) one POST /v1/systemone per state, 8 in flight,
# (d2) the same with spread_slots off; then system1's own cost per row
# against the instant fake engine at 10,000 and 100,000 rows.
#
#   bench/throughput.sh [-rows N] [-rounds N] [-fake-rows 10000,100000]
#
# THROUGHPUT_ENGINE=0 skips the llama-server part. SYSTEM1_BIN runs
# another build (an older commit's, to compare).
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${SYSTEM1_CACHE:-$HOME/.cache/system1}"
model="$cache/models/rand-qwen2-0.5b-f16.gguf"
system1=${SYSTEM1_BIN:-bin/system1}
[[ -n ${SYSTEM1_BIN:-} ]] || { mkdir -p bin && go build -o bin/system1 ./cmd/system1; }
args=(-system1 "$system1" "$@")
if [[ ${THROUGHPUT_ENGINE:-1} != 0 ]]; then
	[[ -f $model ]] || { echo "run bench/kquestions.sh once first: it writes $model" >&2; exit 1; }
	server=$(scripts/llama-server.sh)
	port=18595
	work=$(mktemp -d)
	pids=()
	trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
	"$server" -m "$model" --host 127.0.0.1 --port $port -c 16384 -np 8 -t "$(nproc)" -a rand-qwen2 --no-webui --metrics >"$work/llama.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 600); do curl -fs -o /dev/null "http://127.0.0.1:$port/health" && break; sleep 0.1; done
	echo "llama-server: random Qwen2.5-0.5B shape (F16), 8 slots, $(nproc) threads"
	args+=(-llama "http://127.0.0.1:$port" -model rand-qwen2)
fi
go run ./bench/throughput "${args[@]}"
