#!/usr/bin/env bash
# The main job: builds system1, starts a local engine when none is
# configured, starts `system1 serve` and shows a first decision.
#
#   scripts/run.sh [--once] [MODEL.gguf]
#
# With a configuration that lists nodes ($SYSTEM1_CONFIG, or
# ~/.config/system1/config.yaml), it serves that. Otherwise it builds
# llama.cpp's llama-server (cached; about 10 minutes the first time) and
# serves the GGUF given as argument or in $SYSTEM1_MODEL, else a small
# default instruct model it downloads where the machine can reach it.
# --once stops everything after the first decision.
set -euo pipefail
cd "$(dirname "$0")/.."

once=
if [[ ${1:-} == --once ]]; then once=1; shift; fi
model=${1:-${SYSTEM1_MODEL:-}}
port=${SYSTEM1_PORT:-3000}
engine_port=${SYSTEM1_ENGINE_PORT:-8081}
cache="${SYSTEM1_CACHE:-$HOME/.cache/system1}"
default_url=https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct-GGUF/resolve/main/qwen2.5-0.5b-instruct-q4_k_m.gguf

say() { echo "run.sh: $*" >&2; }
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
trap 'exit 130' INT TERM

wait_ok() { # url seconds
	for _ in $(seq $(($2 * 10))); do
		curl -fs -o /dev/null "$1" && return 0
		sleep 0.1
	done
	say "no answer from $1 after $2 s"; return 1
}

say "building system1"
mkdir -p bin
go build -o bin/system1 ./cmd/system1

config=${SYSTEM1_CONFIG:-${XDG_CONFIG_HOME:-$HOME/.config}/system1/config.yaml}
if [[ -z $model && -f $config ]] && grep -q '^nodes:' "$config"; then
	say "serving the engines configured in $config"
else
	if [[ -z $model ]]; then
		model="$cache/models/$(basename "$default_url")"
		if [[ ! -f $model ]]; then
			say "no model given: fetching the default $(basename "$default_url")"
			mkdir -p "$(dirname "$model")"
			if ! curl -fL --connect-timeout 10 --max-time 900 -o "$model.part" "$default_url"; then
				rm -f "$model.part"
				cat >&2 <<MSG
run.sh: this machine cannot download the default model ($default_url).
Point system1 at a GGUF file instead, one of:
  scripts/run.sh /path/to/model.gguf
  SYSTEM1_MODEL=/path/to/model.gguf scripts/run.sh
Any instruct model works (Qwen2.5-0.5B-Instruct, SmolLM2, Llama 3.2 1B...);
to try the plumbing only, the project's tiny test model is ../shared/models/stories260K.gguf.
Or write $config listing nodes you already run (Ollama, vLLM, llama-server).
MSG
				exit 1
			fi
			mv "$model.part" "$model"
		fi
	fi
	[[ -f $model ]] || { say "model $model does not exist"; exit 1; }
	server=$(scripts/llama-server.sh)
	alias=$(basename "$model" .gguf | tr 'A-Z' 'a-z')
	say "starting llama-server with $model as $alias on 127.0.0.1:$engine_port"
	"$server" -m "$model" --host 127.0.0.1 --port "$engine_port" -c 8192 -np 4 -t "$(nproc)" \
		-a "$alias" --no-webui >"$cache/llama-server.log" 2>&1 &
	pids+=($!)
	wait_ok "http://127.0.0.1:$engine_port/health" 120
	config="$cache/run/config.yaml"
	mkdir -p "$(dirname "$config")"
	cat >"$config" <<YAML
# Written by scripts/run.sh.
listen: 127.0.0.1:$port
aliases:
  jev-latest: $alias
nodes:
  - name: local
    url: http://127.0.0.1:$engine_port
    dialect: llamacpp
    models: [$alias]
gateway:
  threshold: 0.6
providers:
  - name: local
    kind: engine
    model: $alias
YAML
fi

say "starting system1 serve --config $config"
bin/system1 serve --config "$config" --listen "127.0.0.1:$port" &
pids+=($!)
wait_ok "http://127.0.0.1:$port/health" 30

say "a first decision: POST /v1/systemone"
curl -fsS "http://127.0.0.1:$port/v1/systemone" -H 'Content-Type: application/json' -d '{
  "model": "jev-latest",
  "state": {"ticket": "I was charged twice for my subscription this month and want my money back."},
  "questions": {
    "department": {"type": "choice", "instructions": "Which team should handle this ticket?",
                   "criteria": {"billing": "payments, refunds, invoices", "technical": "bugs and outages", "sales": "new plans"}},
    "urgent": {"type": "noul", "instructions": "Does this need action today?"},
    "frustration": {"type": "score", "criteria": ["calm", "annoyed", "angry"]}
  }
}'
echo
if [[ -n $once ]]; then exit 0; fi
say "serving on http://127.0.0.1:$port (POST /v1/systemone, POST /v1/decide, GET /v1/models); Ctrl-C stops"
wait
