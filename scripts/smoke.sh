#!/usr/bin/env bash
# The test suite's smoke run of the main job: scripts/run.sh --once with
# the project's tiny model (or the GGUF given), on two free ports and in a
# throwaway cache. So it never meets a run.sh the user has serving, on
# the default ports or any, nor rewrites that run's configuration. The
# engine is $SYSTEM1_LLAMA_SERVER, else the one scripts/llama-server.sh
# builds once for this machine. When the run fails, its logs are kept and
# their folder is named.
set -euo pipefail
cd "$(dirname "$0")/.."

model=${1:-../shared/models/stories260K.gguf}
if [[ ! -f $model ]]; then
	echo "smoke.sh: skipped: $model is not here"
	exit 0
fi
export SYSTEM1_LLAMA_SERVER="${SYSTEM1_LLAMA_SERVER:-$(scripts/llama-server.sh)}"

taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free_port prints a port nothing listens on, other than $1, from below
# the kernel's range for outgoing connections (32768 and up).
free_port() {
	local p
	for _ in $(seq 100); do
		p=$((10000 + RANDOM % 22000))
		if [[ $p != "${1:-}" ]] && ! taken "$p"; then
			echo "$p"
			return 0
		fi
	done
	echo "smoke.sh: found no free port" >&2
	return 1
}

port=$(free_port)
engine_port=$(free_port "$port")
cache=$(mktemp -d "${TMPDIR:-/tmp}/system1-smoke.XXXXXX")
trap 'status=$?; if [[ $status == 0 ]]; then rm -rf "$cache"; else echo "smoke.sh: the run failed; its logs are in $cache/run" >&2; fi' EXIT
SYSTEM1_CACHE=$cache SYSTEM1_PORT=$port SYSTEM1_ENGINE_PORT=$engine_port \
	scripts/run.sh --once "$model"
