# Shared by the set-up scripts, which source it: installing Debian
# packages, building once per cache, and keeping a build's output out
# of the terminal.

# as_root runs a command as root: as it is when this is root, else
# through sudo.
as_root() {
	if [[ $(id -u) -eq 0 ]]; then
		"$@"
	else
		sudo "$@"
	fi
}

# apt_install installs Debian packages (apt-get install's arguments),
# after apt-get update, as root, without questions. (Chained with &&: a
# caller's `if` or logged turns set -e off in here.)
apt_install() {
	as_root apt-get update -q &&
		as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@"
}

# no_amx are the compiler flags that leave AMX out of a -march=native
# build of ggml, llama-server's and Ollama's: on a CPU that has it (a
# Sapphire Rapids Xeon, as this project's machine), llama.cpp's AMX
# kernels segfaulted in ggml_backend_amx_mul_mat as a Q8_0 model loaded,
# and Ollama's cgo build, which never compiles their source, failed to
# link.
no_amx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"

# need_numpy installs Debian's python3-numpy when the system's python3
# cannot import numpy, for the model writers (gen_random_gguf.py, gguf-py).
need_numpy() {
	if ! /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
		echo "${0##*/}: installing Debian's python3-numpy" >&2
		apt_install python3-numpy >&2
	fi
}

# logged runs a command with its output appended to the file $1 instead
# of the terminal: a build's thousands of lines of progress and upstream
# warnings would bury the test suite's own. When the command fails it
# prints the end of that file and where the whole is, and fails.
logged() {
	local log=$1
	shift
	if ! "$@" >>"$log" 2>&1; then
		echo "${0##*/}: this failed: $*" >&2
		echo "${0##*/}: the end of its output ($log has all of it):" >&2
		tail -n "${SYSTEM1_LOG_TAIL:-40}" "$log" >&2
		return 1
	fi
}

# build_once keeps two runs at once (two worktrees, CI and a developer)
# from building into the same folder. When the binary $1 is there it
# prints its path and exits; else it takes the lock file $2, waiting
# while another run holds it, and when that run built the binary prints
# its path and exits. The lock is file descriptor 9 and holds until the
# script exits. $3 says what is built and $4 is the build's log: a
# build takes many minutes, so while it waits it says every
# $SYSTEM1_LOCK_REPORT_EVERY seconds (default 10) how long it has waited
# and the other build's last line in that log, not one line and silence.
build_once() {
	local bin=$1 lock=$2 what=$3 log=${4:-}
	if [[ -x $bin ]]; then
		echo "$bin"
		exit 0
	fi
	mkdir -p "$(dirname "$lock")"
	exec 9>"$lock"
	if ! flock -n 9; then
		echo "${0##*/}: another build of $what is running; waiting for it (lock $lock${log:+, its log $log})" >&2
		local start=$SECONDS every=${SYSTEM1_LOCK_REPORT_EVERY:-10}
		until flock -w "$every" 9; do
			local waited=$((SECONDS - start)) last=
			# The log's last line, printable and short: a compiler's
			# line may be long and hold escapes.
			[[ -z $log || ! -f $log ]] || last=$(tail -n 1 "$log" 2>/dev/null | tr -cd '[:print:]' | cut -c 1-160)
			echo "${0##*/}: still waiting for the other build of $what: $((waited / 60))m$((waited % 60))s so far${log:+; $log ends: ${last:-(nothing yet)}}" >&2
		done
	fi
	if [[ -x $bin ]]; then
		echo "${0##*/}: reusing the binary the other build made" >&2
		echo "$bin"
		exit 0
	fi
}
