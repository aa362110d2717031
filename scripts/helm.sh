#!/usr/bin/env bash
# Builds Helm v4.3.1 (helm.sh/helm/v4/cmd/helm, from the Go module proxy)
# and caches the binary on this machine, for the chart's tests
# (test/helm: helm lint and helm template over deploy/helm/system1).
# Prints the binary's path on stdout; everything else goes to stderr, and
# the build's own output to a log file beside the binary. Only cmd/helm
# is built, with -trimpath and without symbols: about 6 minutes of CPU
# the first time (downloads included; measured on this project's 2
# cores), nothing after.
#
# A lock keeps two runs at once (two worktrees, CI and a developer) from
# building into the same folder: the second waits and then finds the
# binary.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

version=4.3.1
cache="${SYSTEM1_CACHE:-$HOME/.cache/system1}"
dir="$cache/helm-$version"
bin="$dir/helm"

buildlog="$dir/build.log"
build_once "$bin" "$cache/helm-$version.lock" "helm $version" "$buildlog"
log() { echo "helm.sh: $*" >&2; }

mkdir -p "$dir"
log "building helm $version from the Go module proxy (log: $buildlog)"
start=$SECONDS
# go install pkg@version builds outside any module, so this repository's
# go.mod plays no part; GOFLAGS from the caller (-mod=vendor) must not
# either. The version is Helm's own ldflag, so `helm version` says it.
if ! GOFLAGS= GOBIN="$dir/bin" go install -trimpath \
	-ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=v$version" \
	"helm.sh/helm/v4/cmd/helm@v$version" >"$buildlog" 2>&1; then
	log "the build failed; the end of $buildlog:"
	tail -n 30 "$buildlog" >&2
	exit 1
fi
mv "$dir/bin/helm" "$bin.tmp"
rmdir "$dir/bin"
mv "$bin.tmp" "$bin"
log "built $bin in $((SECONDS - start))s"
echo "$bin"
