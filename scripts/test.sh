#!/usr/bin/env bash
# Runs the whole test suite, installing what it needs first: the real
# engines (llama-server and Ollama, each built once per machine and
# cached), Helm and Jaeger (each built once per machine), the JS clients'
# packages, then vet, gofmt, the race-enabled Go tests, the Helm chart's
# tests, short fuzz runs, and a smoke run of the main job. With
# SYSTEM1_QUICK=1 it skips the engine, Helm and Jaeger builds and the
# fuzzing, and those tests skip with their reason.
#
# The builds' own output goes to log files in the cache (the end is
# printed when one fails). The Go tests print a line per package, every
# failed test's output in full, and the run ends with the counts of the
# tests passed, failed and skipped, whichever step stopped it.
set -euo pipefail
cd "$(dirname "$0")/.."

current=
step() {
	current=$*
	printf '\n== %s\n' "$*"
}

# On the way out: stop what the suite started, say which step failed,
# and end with the Go tests' counts (scripts/gotest.sh writes them).
cleanups=()
counts=$(mktemp "${TMPDIR:-/tmp}/system1-test-counts.XXXXXX")
finish() {
	local status=$?
	for c in "${cleanups[@]}"; do eval "$c" || true; done
	if [[ $status != 0 ]]; then
		printf '\n== failed: %s (exit status %s)\n' "$current" "$status"
	fi
	if [[ -s $counts ]]; then
		printf '\n'
		cat "$counts"
		[[ -s $counts.helm ]] && sed 's/^go test:/go test (test\/helm):/' "$counts.helm"
	fi
	rm -f "$counts" "$counts.helm"
}
trap finish EXIT

if [[ -z "${SYSTEM1_QUICK:-}" ]]; then
	step "real engine (llama-server, built once per machine)"
	SYSTEM1_LLAMA_SERVER="$(scripts/llama-server.sh)"
	echo "$SYSTEM1_LLAMA_SERVER"
	export SYSTEM1_LLAMA_SERVER SYSTEM1_REQUIRE_ENGINE=1
	step "live Ollama (built from the Go module proxy once per machine)"
	SYSTEM1_OLLAMA="$(scripts/ollama.sh)"
	echo "$SYSTEM1_OLLAMA"
	export SYSTEM1_OLLAMA SYSTEM1_REQUIRE_OLLAMA=1
	step "Helm (built from the Go module proxy once per machine)"
	SYSTEM1_HELM="$(scripts/helm.sh)"
	echo "$SYSTEM1_HELM"
	export SYSTEM1_HELM SYSTEM1_REQUIRE_HELM=1
	step "Jaeger, the tracing tests' collector (built from the Go module proxy once per machine)"
	SYSTEM1_JAEGER="$(scripts/jaeger.sh)"
	echo "$SYSTEM1_JAEGER"
	export SYSTEM1_JAEGER SYSTEM1_REQUIRE_JAEGER=1
fi

# --- PostgreSQL for the decision log's tests (scripts/postgres.sh) ---
if [[ -z "${SYSTEM1_QUICK:-}" ]]; then
	step "PostgreSQL (Debian's packages, a throwaway cluster on a socket)"
	pgdir=$(mktemp -d /tmp/system1-pg.XXXXXX)
	cleanups+=('scripts/postgres.sh stop "$pgdir"')
	SYSTEM1_POSTGRES_URL="$(scripts/postgres.sh start "$pgdir")"
	export SYSTEM1_POSTGRES_URL SYSTEM1_REQUIRE_POSTGRES=1
fi
# --- end PostgreSQL ---

if command -v npm >/dev/null; then
	for d in test/js test/js-mcp test/js-decisions test/claude test/openapi; do
		if [[ -f $d/package-lock.json ]]; then
			step "npm ci in $d"
			(cd "$d" && npm ci --no-audit --no-fund --loglevel=error)
		fi
	done
	export SYSTEM1_REQUIRE_JS=1
fi

step "headless Chromium for the browser tests (Debian's package, installed once)"
SYSTEM1_CHROMIUM="$(scripts/chromium.sh)"
echo "$SYSTEM1_CHROMIUM"
export SYSTEM1_CHROMIUM SYSTEM1_REQUIRE_BROWSER=1

step "go vet"
go vet ./...
(cd test/helm && go vet ./...)

step "go mod tidy -diff (both modules)"
go mod tidy -diff
(cd test/helm && go mod tidy -diff)

step "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [[ -n $unformatted ]]; then
	echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

step "go test -race (scripts/gotest.sh: a line per package, failures in full at the end)"
# A package's binary may run 25 minutes: the real-engine measurements of
# internal/fingerprint read the twelve-question canary on every build.
SYSTEM1_TEST_COUNTS=$counts scripts/gotest.sh -race -count=1 -timeout 25m ./...

# test/helm is a module of its own: only it compiles the Kubernetes API's
# types. Without -race, so that vet's build of them serves the tests too
# (its goroutines only wait on processes).
step "the Helm chart's tests (test/helm)"
(cd test/helm && SYSTEM1_TEST_COUNTS=$counts.helm ../../scripts/gotest.sh -count=1 ./...)

if [[ -z "${SYSTEM1_QUICK:-}" ]]; then
	step "fuzz targets, briefly"
	# A count, not a duration: a short -fuzztime can fail a clean run with
	# "context deadline exceeded" when a worker is mid-input at the end.
	scripts/fuzz.sh "${SYSTEM1_FUZZTIME:-100000x}"

	step "main job smoke run (scripts/smoke.sh: run.sh --once with the tiny model, on free ports)"
	scripts/smoke.sh
fi
step "all tests passed"
