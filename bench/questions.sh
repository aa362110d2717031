#!/usr/bin/env bash
# Many questions: latency and system1's peak memory against the number of
# questions in one request (1, 10, 100, 1,000), on the fake engine and on
# llama-server serving the tiny model (../shared/models/stories260K.gguf).
#
#   bench/questions.sh [-reps N]
set -euo pipefail
cd "$(dirname "$0")/.."
server=$(scripts/llama-server.sh)
mkdir -p bin
go build -o bin/system1 ./cmd/system1
go build -o bin/questions ./bench/questions
bin/questions -system1 bin/system1 "$@"
echo
port=18592
"$server" -m ../shared/models/stories260K.gguf --host 127.0.0.1 --port $port -c 4096 -np 4 -t "$(nproc)" -a stories260k --no-webui >/dev/null 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait 2>/dev/null' EXIT
for _ in $(seq 300); do curl -fs -o /dev/null "http://127.0.0.1:$port/health" && break; sleep 0.1; done
bin/questions -system1 bin/system1 -llama "http://127.0.0.1:$port" -model stories260k "$@"
