#!/usr/bin/env bash
# Installs headless Chromium from Debian's packages for the browser tests
# (internal/web), once: a no-op when it is already there. Prints the
# browser's path.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

find_chromium() {
	for p in "${SYSTEM1_CHROMIUM:-}" /usr/lib/chromium/chromium; do
		if [[ -n $p && -x $p ]]; then echo "$p"; return 0; fi
	done
	command -v chromium || command -v chromium-browser || return 1
}

if p=$(find_chromium); then
	echo "$p"
	exit 0
fi
if ! command -v apt-get >/dev/null; then
	echo "chromium.sh: no Chromium and no apt-get to install it; set SYSTEM1_CHROMIUM to a Chromium binary" >&2
	exit 1
fi
log=${TMPDIR:-/tmp}/system1-chromium-install.log
echo "chromium.sh: installing chromium from Debian's packages (log: $log)" >&2
: >"$log"
logged "$log" apt_install chromium
find_chromium
