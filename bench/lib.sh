# Shared by the benchmark scripts, which source it from the repository
# root: the random model of Qwen2.5-0.5B's shape, system1 started in
# front of an engine, and waiting for either to answer.

# random_qwen2 writes a random-weight model of Qwen2.5-0.5B's shape (F16,
# about 1 GB) to $5 with the Python $1, the generator $2
# (../shared/tools/gen_random_gguf.py), llama.cpp's gguf-py $3 and its
# Qwen2 vocabulary $4.
random_qwen2() {
	"$1" "$2" "$3" --vocab "$4" --out "$5" --arch qwen2 --layers 24 --embd 896 --ff 4864 --heads 14 --kv 2
}

# free_port prints a loopback port that was free a moment ago.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# wait_ok waits up to $2 seconds for the URL $1 to answer; it says so and
# fails when it does not.
wait_ok() {
	for _ in $(seq $(($2 * 10))); do
		curl -fs -o /dev/null "$1" && return 0
		sleep 0.1
	done
	echo "${0##*/}: no answer from $1 after $2 s" >&2
	return 1
}

# start_system1 starts $system1 serve over the llama-server on
# 127.0.0.1:$port serving rand-qwen2, with spread_slots $2: its
# configuration goes in $work/$1.yaml, its log in $logs/system1-$1.log,
# its pid on pids and its URL (it listens on a free port) in $url.
start_system1() {
	cat >"$work/$1.yaml" <<-YAML
		listen: 127.0.0.1:0
		timeouts: {request: 120s}
		nodes:
		  - {name: llama, url: "http://127.0.0.1:$port", dialect: llamacpp, models: [rand-qwen2], timeout: 120s, spread_slots: $2}
	YAML
	"$system1" serve --config "$work/$1.yaml" >/dev/null 2>"$logs/system1-$1.log" &
	pids+=($!)
	url=$(served_url "$logs/system1-$1.log")
}

# served_url prints the URL that system1 serve logs to the file $1 once it
# listens, waiting up to 10 s for it; it says so and fails when none
# came.
served_url() {
	local url
	for _ in $(seq 100); do
		url=$(grep -o 'url=http://[^ ]*' "$1" | head -1 | cut -d= -f2) && [[ -n $url ]] && {
			echo "$url"
			return 0
		}
		sleep 0.1
	done
	echo "${0##*/}: system1 logged no URL in $1 after 10 s" >&2
	return 1
}
