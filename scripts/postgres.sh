#!/usr/bin/env bash
# A throwaway PostgreSQL server for the decision log's tests.
#
#   scripts/postgres.sh start DIR   # prints a connection URL on stdout
#   scripts/postgres.sh stop DIR
#
# start installs PostgreSQL from Debian's packages when no server is
# found (apt-get update first, through sudo unless this is root),
# initialises a cluster in DIR/data, and starts it listening only on a
# Unix socket in DIR (no TCP port, so it cannot clash with anything),
# with trust auth for the local user "postgres". PostgreSQL refuses to
# run as root, so as root the cluster is owned and run by the `postgres`
# system user the package creates.
# stop shuts it down and removes DIR. Progress goes to stderr.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

say() { printf 'postgres.sh: %s\n' "$*" >&2; }

bindir() {
	local d
	if command -v pg_config >/dev/null && d=$(pg_config --bindir 2>/dev/null) && [[ -x $d/initdb ]]; then
		echo "$d"; return 0
	fi
	for d in /usr/lib/postgresql/*/bin; do
		if [[ -x $d/initdb && -x $d/pg_ctl ]]; then echo "$d"; fi
	done | sort -V | tail -n 1 | grep . && return 0
	return 1
}

install() {
	local log=${TMPDIR:-/tmp}/system1-postgresql-install.log
	say "no PostgreSQL server here: installing Debian's postgresql package (log: $log)"
	: >"$log"
	logged "$log" apt_install --no-install-recommends postgresql
}

# as runs a command as the cluster's owner.
as() {
	if [[ $(id -u) == 0 ]]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

start() {
	local dir=$1 bin
	bin=$(bindir) || { install; bin=$(bindir); } || { say "no initdb after installing"; exit 1; }
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	if [[ $(id -u) == 0 ]]; then
		id postgres >/dev/null 2>&1 || { say "no postgres user: is the postgresql package installed?"; exit 1; }
		chown postgres: "$dir"
		chmod 700 "$dir"
		# The path to DIR must be traversable by postgres.
		local p=$dir
		while [[ $p != / ]]; do p=$(dirname "$p"); chmod o+x "$p" 2>/dev/null || true; done
	fi
	say "initdb in $dir/data ($bin)"
	as "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 ||
		{ cat "$dir/initdb.log" >&2; exit 1; }
	# fsync stays on: the tests check what a crash leaves, not the server.
	as "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
		-o "-c listen_addresses='' -k $dir -c max_connections=50" start >&2 ||
		{ cat "$dir/server.log" >&2; exit 1; }
	echo "postgres://postgres@/postgres?host=$dir&sslmode=disable"
}

stop() {
	local dir=$1 bin
	[[ -d $dir/data ]] || return 0
	bin=$(bindir)
	as "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >&2 || true
	rm -rf "$dir"
}

case "${1:-}" in
start) start "${2:?usage: postgres.sh start DIR}" ;;
stop) stop "${2:?usage: postgres.sh stop DIR}" ;;
*) echo "usage: scripts/postgres.sh start|stop DIR" >&2; exit 2 ;;
esac
