#!/usr/bin/env bash
# Banking77 through the whole path: 77-option choices from
# ../shared/data/banking77-train-sample.jsonl benched through system1's
# POST /v1/systemone over llama-server with the shared tiny model. The
# tiny model is not instruction-tuned, so accuracy is near chance; this
# shows that 77 options are served (no 422), every probability from the
# engine, and what it costs. The tiny model's 512-token vocabulary spells
# 77 options in about 2,800 tokens, past its trained context of 2,048, so
# the script lifts the model's context to 4,096 a slot (--override-kv). Writes docs/bench/tiny-banking77.md.
#
#   bench/banking77.sh [--limit N]     # default 100 cases
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
limit=100
if [[ ${1:-} == --limit ]]; then limit=$2; fi
out=bench/out/banking77
mkdir -p "$out" docs/bench
go build -o "$out/system1" ./cmd/system1
server=${SYSTEM1_LLAMA_SERVER:-$(scripts/llama-server.sh)}
port=$(free_port)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null' EXIT
"$server" -m ../shared/models/stories260K.gguf --host 127.0.0.1 --port "$port" -c 16384 -np 4 -t 2 \
	-a stories260k --no-webui --override-kv llama.context_length=int:4096 >"$out/llama-server.log" 2>&1 &
pids+=($!)
wait_ok "http://127.0.0.1:$port/health" 30
cat >"$out/config.yaml" <<YAML
listen: 127.0.0.1:0
nodes:
  - {name: tiny, url: "http://127.0.0.1:$port", dialect: llamacpp, models: [stories260k]}
YAML
"$out/system1" serve --config "$out/config.yaml" 2>"$out/system1.log" &
pids+=($!)
url=$(served_url "$out/system1.log")
{
	echo "# Banking77 (77 options) through system1 over llama-server, stories260K"
	echo
	echo "\`bench/banking77.sh --limit $limit\`, $(date -u +%Y-%m-%d)."
	echo
	"$out/system1" bench --endpoint "$url" --model stories260k --concurrency 2 --timeout 120s --limit "$limit" \
		--out "$out/report.json" ../shared/data/banking77-train-sample.jsonl
} | tee docs/bench/tiny-banking77.md
