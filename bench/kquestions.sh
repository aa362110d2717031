#!/usr/bin/env bash
# K questions at the compute floor: latency of K = 1..8 questions over one
# ~400-token state through system1 to llama-server serving a random-weight
# model of Qwen2.5-0.5B's shape, cold (a state the engine has not seen) and
# warm (the same state again), before (a state's questions one after
# another on its slot: spread_slots false) and after (spread over slots,
# the default) side by side, against the floor computed from llama-server's
# own timings (see bench/kquestions/main.go).
#
#   bench/kquestions.sh [-reps N]
#
# Builds llama-server if needed (scripts/llama-server.sh) and writes the
# random model once (about 1 GB, needs Debian's python3-numpy).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
. bench/lib.sh
cache="${SYSTEM1_CACHE:-$HOME/.cache/system1}"
server=$(scripts/llama-server.sh)
tools=$(dirname "$server")
model="$cache/models/rand-qwen2-0.5b-f16.gguf"
if [[ ! -f $model ]]; then
	need_numpy
	mkdir -p "$(dirname "$model")"
	random_qwen2 /usr/bin/python3 ../shared/tools/gen_random_gguf.py "$tools/gguf-py" "$tools/vocab/ggml-vocab-qwen2.gguf" "$model.part" >&2
	mv "$model.part" "$model"
fi
mkdir -p bin
# SYSTEM1_BIN runs another build (an older commit's, to compare).
system1=${SYSTEM1_BIN:-bin/system1}
[[ -n ${SYSTEM1_BIN:-} ]] || go build -o bin/system1 ./cmd/system1
port=18591
work=$(mktemp -d) logs=$work
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
"$server" -m "$model" --host 127.0.0.1 --port $port -c 16384 -np 8 -t "$(nproc)" -a rand-qwen2 --no-webui --metrics >"$work/llama.log" 2>&1 &
pids+=($!)
wait_ok "http://127.0.0.1:$port/health" 60
echo "llama-server: random Qwen2.5-0.5B shape (F16), 8 slots, $(nproc) threads"
start_system1 serial false
serial=$url
start_system1 spread true
spread=$url
echo
go run ./bench/kquestions -url "$spread" -serial-url "$serial" -engine "http://127.0.0.1:$port" -model rand-qwen2 "$@"
