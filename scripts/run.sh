#!/usr/bin/env bash
# The main job: builds system1, starts a local engine when none is
# configured, starts `system1 serve` and shows a first decision. Its usage
# text (scripts/run.sh --help) says what it does and takes.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
	cat <<'USAGE'
usage: scripts/run.sh [--once] [MODEL.gguf]

Builds system1 (bin/system1), starts system1 serve on 127.0.0.1:$SYSTEM1_PORT
(default 3000), shows a first decision and serves until Ctrl-C.

With no MODEL and a configuration that lists nodes ($SYSTEM1_CONFIG, else
~/.config/system1/config.yaml) it serves those engines. Otherwise it starts
llama.cpp's llama-server on 127.0.0.1:$SYSTEM1_ENGINE_PORT (default 8081)
with MODEL, else $SYSTEM1_MODEL, else a small default instruct model
($SYSTEM1_MODEL_URL) it downloads where the machine can reach it; the
first run builds llama-server (9 to 16 minutes on two cores, cached). It then writes a
configuration for that engine, one per port of system1 serve:
~/.cache/system1/run/config-3000.yaml by default ($SYSTEM1_CACHE moves
~/.cache/system1), which the command line takes with --config. Each run
logs to its own files beside it.

It checks what it can before building anything and fails fast, saying what
to do: a port already taken, a file that is not a GGUF model, an engine
that exits while starting (with the end of its log).

flags, anywhere on the line (after --, everything is the model):
  --once      stop everything after the first decision
  -h, --help  print this text

environment: SYSTEM1_PORT, SYSTEM1_ENGINE_PORT, SYSTEM1_MODEL,
SYSTEM1_MODEL_URL, SYSTEM1_CONFIG, SYSTEM1_CACHE, SYSTEM1_LLAMA_SERVER
(a llama-server binary to use instead of building one), and SYSTEM1_KEY
(a key of the configuration's, for the first decision when it turns auth
on; without one, run.sh serves without the first decision, and --once
fails saying so).
USAGE
}

# bad_usage says what is wrong with the command line, and exits 2.
bad_usage() {
	echo "run.sh: $*" >&2
	usage | head -n 1 >&2
	echo "scripts/run.sh --help says more." >&2
	exit 2
}

once=
model=
flags=1
for arg in "$@"; do
	case $flags$arg in
	1--once) once=1 ;;
	1-h | 1--help) usage; exit 0 ;;
	1--) flags= ;;
	1-*) bad_usage "unknown flag $arg" ;;
	*)
		[[ -z $model ]] || bad_usage "one model at a time: $model and $arg"
		model=$arg
		;;
	esac
done
model=${model:-${SYSTEM1_MODEL:-}}
port=${SYSTEM1_PORT:-3000}
engine_port=${SYSTEM1_ENGINE_PORT:-8081}
cache="${SYSTEM1_CACHE:-$HOME/.cache/system1}"
default_url=${SYSTEM1_MODEL_URL:-https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct-GGUF/resolve/main/qwen2.5-0.5b-instruct-q4_k_m.gguf}

say() { echo "run.sh: $*" >&2; }
pids=()
# cleanup stops what run.sh started: asked to stop, then, after 10 s,
# killed, so that an engine stuck in its shutdown cannot hold the exit.
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for _ in $(seq 100); do
		alive=
		for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
		[[ -z $alive ]] && break
		sleep 0.1
	done
	if [[ -n $alive ]]; then
		for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	fi
	wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# taken reports whether something already listens on 127.0.0.1:$1.
taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free_port fails, saying what to do, when port $1 (for $2) is taken,
# before anything starts: a second run.sh must not serve a first
# decision from the first one.
free_port() {
	if taken "$1"; then
		say "port $1 on 127.0.0.1 (for $2) is taken: another scripts/run.sh, system1 serve or engine is listening there."
		say "Stop it, or pick free ports: SYSTEM1_PORT=3001 SYSTEM1_ENGINE_PORT=8082 scripts/run.sh ..."
		exit 1
	fi
}

# wait_ok waits up to $2 seconds for $1 to answer, failing at once when
# the process $3 (whose log is $4) exits first.
wait_ok() {
	for _ in $(seq $(($2 * 10))); do
		if ! kill -0 "$3" 2>/dev/null; then
			status=0
			wait "$3" || status=$?
			say "$5 exited (status $status) before it answered on $1. Its log, $4, ends:"
			tail -n 15 "$4" >&2 || true
			exit 1
		fi
		curl -fs --max-time 2 -o /dev/null "$1" && return 0
		sleep 0.1
	done
	say "no answer from $1 after $2 s; see $4"
	exit 1
}

config=${SYSTEM1_CONFIG:-${XDG_CONFIG_HOME:-$HOME/.config}/system1/config.yaml}
use_config=
if [[ -z $model && -f $config ]] && grep -q '^nodes:' "$config"; then use_config=1; fi
free_port "$port" "system1 serve"
if [[ -z $use_config ]]; then
	free_port "$engine_port" "llama-server"
	if [[ -n $model ]]; then
		[[ -f $model ]] || { say "model $model does not exist"; exit 1; }
		# A GGUF file starts with the bytes "GGUF"; anything else would
		# only make llama-server exit.
		if [[ $(head -c 4 "$model" 2>/dev/null) != GGUF ]]; then
			say "$model is not a GGUF model file (it does not start with \"GGUF\")."
			say "Give a .gguf model, e.g. ../shared/models/stories260K.gguf to try the plumbing, or an instruct model such as Qwen2.5-0.5B-Instruct."
			exit 1
		fi
	fi
fi

say "building system1"
mkdir -p bin
go build -o bin/system1 ./cmd/system1
logs="$cache/run"
mkdir -p "$logs"

if [[ -n $use_config ]]; then
	say "serving the engines configured in $config"
else
	if [[ -z $model ]]; then
		model="$cache/models/$(basename "$default_url")"
		if [[ ! -f $model ]]; then
			# Ask first, quietly, so that a machine that cannot download
			# gets the explanation alone, with no progress meter before it.
			if ! curl -fsSL -r 0-0 -o /dev/null --connect-timeout 10 --max-time 60 "$default_url" 2>/dev/null; then
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
			say "no model given: fetching the default $(basename "$default_url")"
			mkdir -p "$(dirname "$model")"
			if ! curl -fL --progress-bar --connect-timeout 10 --max-time 900 -o "$model.part" "$default_url"; then
				rm -f "$model.part"
				rmdir "$(dirname "$model")" 2>/dev/null || true
				say "downloading $default_url failed; give a GGUF file instead: scripts/run.sh /path/to/model.gguf"
				exit 1
			fi
			mv "$model.part" "$model"
		fi
	fi
	server=${SYSTEM1_LLAMA_SERVER:-$(scripts/llama-server.sh)}
	# The model's name, as the configuration's YAML takes it unquoted.
	alias=$(basename "$model" .gguf | tr 'A-Z' 'a-z' | tr -c 'a-z0-9._\n-' '-')
	# A log per run: a second run.sh never truncates the first one's.
	engine_log="$logs/llama-server-$$.log"
	say "starting llama-server with $model as $alias on 127.0.0.1:$engine_port (log: $engine_log)"
	"$server" -m "$model" --host 127.0.0.1 --port "$engine_port" -c 8192 -np 4 -t "$(nproc)" \
		-a "$alias" --no-webui >"$engine_log" 2>&1 &
	pids+=($!)
	wait_ok "http://127.0.0.1:$engine_port/health" 120 "$!" "$engine_log" llama-server
	# One file per port of system1 serve: a second run.sh, on other ports,
	# never rewrites the configuration the first one's user passes to the
	# command line.
	config="$logs/config-$port.yaml"
	cat >"$config" <<YAML
# Written by scripts/run.sh for the llama-server it started.
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
  chain:
    - {name: local, model: $alias}
YAML
	say "wrote $config (use it with: bin/system1 decide --config $config ...)"
fi

serve_log="$logs/serve-$$.log"
say "starting system1 serve --config $config (log: $serve_log)"
bin/system1 serve --config "$config" --listen "127.0.0.1:$port" 2>"$serve_log" &
pids+=($!)
wait_ok "http://127.0.0.1:$port/health" 30 "$!" "$serve_log" "system1 serve"

# The model of the first decision: jev-latest, the alias run.sh writes.
# A configuration of the user's need not name it (only configured aliases
# are): then the first model serve lists (none listed: jev-latest still,
# and serve's answer says why); none when it turns auth on and no key is
# given.
first_model=jev-latest
key=()
if [[ -n ${SYSTEM1_KEY:-} ]]; then key=(-H "Authorization: Bearer $SYSTEM1_KEY"); fi
if [[ -n $use_config ]]; then
	# A configuration that turns auth on answers 401 without a key: run.sh
	# holds none unless SYSTEM1_KEY gives one, and serves without asking.
	if [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "${key[@]}" "http://127.0.0.1:$port/v1/models" || true) == 401 ]]; then
		say "$config turns auth on: set SYSTEM1_KEY to one of its keys for the first decision, or ask with one: curl -H \"Authorization: Bearer KEY\" http://127.0.0.1:$port/v1/models"
		if [[ -n $once ]]; then exit 1; fi
		first_model=
	else
		ids=
		for _ in $(seq 100); do
			ids=$(curl -fs --max-time 2 "${key[@]}" "http://127.0.0.1:$port/v1/models" | grep -o '"id":"[^"]*"' | sed 's/^"id":"//; s/"$//' || true)
			[[ -n $ids ]] && break
			sleep 0.1
		done
		if [[ -n $ids ]] && ! grep -qxF jev-latest <<<"$ids"; then first_model=$(head -n 1 <<<"$ids"); fi
	fi
fi

if [[ -n $first_model ]]; then
	say "a first decision: POST /v1/systemone"
	if ! curl -fsS --max-time 180 "${key[@]}" "http://127.0.0.1:$port/v1/systemone" -H 'Content-Type: application/json' -d '{
	  "model": "'"$first_model"'",
	  "state": {"ticket": "I was charged twice for my subscription this month and want my money back."},
	  "questions": {
	    "department": {"type": "choice", "instructions": "Which team should handle this ticket?",
	                   "criteria": {"billing": "payments, refunds, invoices", "technical": "bugs and outages", "sales": "new plans"}},
	    "urgent": {"type": "noul", "instructions": "Does this need action today?"},
	    "frustration": {"type": "score", "criteria": ["calm", "annoyed", "angry"]}
	  }
	}'; then
		say "the first decision failed or took over 180 s. system1 serve's log, $serve_log, ends:"
		tail -n 15 "$serve_log" >&2 || true
		exit 1
	fi
	echo
fi
if [[ -n $once ]]; then exit 0; fi
say "serving on http://127.0.0.1:$port (POST /v1/systemone, POST /v1/decide, GET /v1/models); Ctrl-C stops"
wait
