#!/usr/bin/env bash
# A freshly started llama-server's first requests with spread_slots: K
# questions over a new state each time, through one system1, on a new
# llama-server (8 slots, none used yet), printing each request's latency
# and the prompt tokens the engine evaluated (from its /metrics). A slot
# never used since the server started loads nothing from the host prompt
# cache unless system1 primes it first, so there each spread question
# would prefill the state again.
#
#   bench/freshslots.sh [-k K] [-requests N]
#
# SYSTEM1_BIN runs another build (an older commit's, to compare).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
k=8 requests=4
while [[ $# -gt 0 ]]; do
	case $1 in
	-k) k=$2; shift 2 ;;
	-requests) requests=$2; shift 2 ;;
	*) echo "usage: bench/freshslots.sh [-k K] [-requests N]" >&2; exit 2 ;;
	esac
done
cache="${SYSTEM1_CACHE:-$HOME/.cache/system1}"
server=$(scripts/llama-server.sh)
model="$cache/models/rand-qwen2-0.5b-f16.gguf"
[[ -f $model ]] || { echo "run bench/kquestions.sh once first: it writes $model" >&2; exit 1; }
system1=${SYSTEM1_BIN:-bin/system1}
[[ -n ${SYSTEM1_BIN:-} ]] || { mkdir -p bin && go build -o bin/system1 ./cmd/system1; }
port=18593 listen=18594
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
"$server" -m "$model" --host 127.0.0.1 --port $port -c 16384 -np 8 -t "$(nproc)" -a rand-qwen2 --no-webui --metrics >"$work/llama.log" 2>&1 &
pids+=($!)
wait_ok "http://127.0.0.1:$port/health" 60
cat >"$work/system1.yaml" <<YAML
listen: 127.0.0.1:$listen
timeouts: {request: 120s}
decision_log: {off: true}
nodes:
  - {name: llama, url: "http://127.0.0.1:$port", dialect: llamacpp, models: [rand-qwen2], timeout: 120s}
YAML
"$system1" serve --config "$work/system1.yaml" >/dev/null 2>"$work/system1.log" &
pids+=($!)
wait_ok "http://127.0.0.1:$listen/health" 10
tokens() { curl -fs "http://127.0.0.1:$port/metrics" | awk '/^llamacpp:prompt_tokens_total/ {printf "%d", $2}'; }
echo "llama-server just started: random Qwen2.5-0.5B shape (F16), 8 slots; $k questions over a new ~450-token state per request"
for r in $(seq "$requests"); do
	body=$(K=$k R=$r /usr/bin/env python3 -c '
import json, os
k, r = int(os.environ["K"]), os.environ["R"]
state = " ".join([f"Report {r}-{os.getpid()}: the quarterly report shows revenue rising in three regions."] * 30)
qs = {f"q{i}": {"type": "choice", "instructions": f"Which fits item {i} best?",
      "criteria": {"alpha": None, "beta": None, "gamma": None, "delta": None}} for i in range(k)}
print(json.dumps({"model": "rand-qwen2", "state": state, "questions": qs}))')
	before=$(tokens)
	ms=$(curl -fs -o /dev/null -w '%{time_total}' -H 'content-type: application/json' -d "$body" "http://127.0.0.1:$listen/v1/systemone" | awk '{printf "%.0f", $1 * 1000}')
	echo "request $r: $ms ms, $(($(tokens) - before)) prompt tokens evaluated"
done
