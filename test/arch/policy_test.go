package arch_test

// policy is the layering of system1 as an allow-list, in the manner of Go's
// own go/build/deps_test.go: every package of the module is listed, with
// the module's packages and the third-party modules it may import. The
// standard library is allowed by rule, less what a row forbids (io for the
// pure packages, net/http for the contract and the answer path) and the
// testing packages, which only test support may import. A package missing
// from the list fails, and so does a row that names no package. It is a
// statement of policy: a new edge is a change to this list, made on
// purpose and reviewed, never a side effect. docs/architecture.md's table
// is written from it (TestArchitectureTableIsThePolicy).
//
// Paths are the module's without "system1/"; a path ending in /... covers
// every package below it.
var policy = []rule{
	{
		pkgs: []string{"internal/decision", "internal/jsonx"},
		not:  noIO,
		why:  "the domain: requests, distributions, answers, steps, limits; JSON read strictly. Pure: no I/O, no globals; unit- and fuzz-tested",
	},
	{
		pkgs: []string{"internal/calibration"},
		may:  []string{"internal/decision", "internal/jsonx"},
		not:  noIO,
		why:  "what a request reads of calibration: the fits file's bytes (parsed and encoded, never read or written here), its lookup, the calibrators and prediction sets it applies. Pure",
	},
	{
		pkgs: []string{"internal/calibration/fitting"},
		may:  []string{"internal/calibration", "internal/decision", "gonum.org/v1/gonum"},
		not:  noIO,
		why:  "the fitting lab: measures, fitters, selection by cross-validation, gates (their binomial bounds from gonum's incomplete beta), running statistics, drift and shadow comparison; writes fits, never read by a request. Pure",
	},
	{
		pkgs: []string{"internal/fingerprint"},
		may:  []string{"internal/decision"},
		not:  noIO,
		why:  "what identifies a served model's build: an identity's fields, the canary's questions and readings, the rule that says a build changed. Pure",
	},
	{
		pkgs: []string{"internal/redact", "internal/retryafter", "internal/atomicfile"},
		why:  "small helpers with one job each: addresses out of text, a server's Retry-After read, a file replaced whole",
	},
	{
		pkgs: []string{"internal/pause"},
		may:  []string{"internal/atomicfile"},
		why:  "the pause switch's state file",
	},
	{
		pkgs: []string{"internal/config"},
		may:  []string{"internal/decision", "internal/pause", "go.yaml.in/yaml/v3"},
		why:  "the configuration file, read strictly (every field known), normalized and checked",
	},
	{
		pkgs: []string{"internal/httpcall"},
		may:  []string{"internal/retryafter", "internal/tracing"},
		why:  "the one outgoing HTTP helper: bearer key, the caller's trace (W3C traceparent), bounded reply, status, Retry-After, key redaction",
	},
	{
		pkgs: []string{"internal/metrics"},
		may:  []string{"github.com/prometheus/client_golang"},
		why:  "the Prometheus metrics, told what the fleet and the faces do",
	},
	{
		pkgs: []string{"internal/engine"},
		may:  []string{"internal/decision", "internal/fingerprint", "internal/jsonx"},
		why:  "what every engine dialect shares: prompts, labels, readings, rounds and orders, the gate each call holds, the kinds of failure",
	},
	{
		pkgs: []string{"internal/engine/openai"},
		may:  []string{"internal/engine", "internal/fingerprint", "internal/httpcall", "github.com/segmentio/encoding"},
		why:  "the OpenAI-compatible dialect (vLLM and others), whose reply decoding the other dialects reuse (segmentio's decoder, held to encoding/json's reading by a fuzz test)",
	},
	{
		pkgs: []string{"internal/engine/llamacpp", "internal/engine/ollama"},
		may:  []string{"internal/engine", "internal/engine/openai", "internal/fingerprint"},
		why:  "one package per engine API; only the fleet builds them",
	},
	{
		pkgs: []string{"internal/systemone", "internal/decisionsapi"},
		may:  []string{"internal/decision", "internal/fingerprint", "internal/httpcall", "internal/jsonx"},
		why:  "one external wire each, System One and OpenAI's Decisions: every name of the wire lives here, translated to and from the domain, with the client and the official clients' checks",
	},
	{
		pkgs: []string{"internal/cases"},
		may:  []string{"internal/config", "internal/decision", "internal/jsonx", "internal/systemone"},
		why:  "case files (a System One request and the expected answers per line) for the bench and calibration",
	},
	{
		pkgs: []string{"internal/fleet"},
		may: []string{"internal/config", "internal/decision", "internal/engine", "internal/engine/llamacpp", "internal/engine/ollama",
			"internal/engine/openai", "internal/atomicfile", "internal/decisionsapi", "internal/fingerprint", "internal/redact", "internal/systemone", "internal/tracing", "github.com/hashicorp/golang-lru/v2"},
		why: "the only package that talks to engines and upstreams: a node has one Backend (an engine dialect, a System One upstream or a Decisions endpoint), so every node fails over, cools and honours Retry-After by one rule; debias and prior read there; each engine attempt a span; the fingerprints of the builds the nodes serve",
	},
	{
		pkgs: []string{"internal/decisionlog"},
		may:  []string{"internal/calibration", "internal/config", "internal/decision"},
		why:  "the decision log: records written off the request path, outcomes, windows; opens its database by driver name, which main links",
	},
	{
		pkgs: []string{"internal/answer"},
		may: []string{"internal/calibration", "internal/decision", "internal/decisionlog", "internal/engine", "internal/fleet",
			"internal/redact", "internal/tracing", "github.com/hashicorp/golang-lru/v2"},
		not: []string{"net/http"},
		why: "the one answer path every face calls: decide, check, calibrate, name the steps, record; the decision cache of exact repeats; the class of a failure and its Retry-After; redaction for remote callers; each question a span",
	},
	{
		pkgs: []string{"internal/outcomes"},
		may:  []string{"internal/answer", "internal/atomicfile", "internal/calibration", "internal/calibration/fitting", "internal/decision", "internal/decisionlog", "internal/jsonx", "internal/tracing"},
		why:  "the learning loop over the decision log: feedback, calibration, drift and shadow reports, refits, the fits file; a replay asks logged questions of a candidate through the answer path",
	},
	{
		pkgs: []string{"internal/gateway"},
		may: []string{"internal/answer", "internal/calibration", "internal/config", "internal/decision", "internal/decisionlog",
			"internal/fleet", "internal/jsonx", "internal/outcomes", "internal/pause", "github.com/google/jsonschema-go"},
		not: []string{"net/http"},
		why: "the decide contract and the chain as a policy over the answer path: abstention, grading, pause, health and capabilities of the chain, the published schemas; no engine, no wire, no HTTP",
	},
	{
		pkgs: []string{"internal/web"},
		may:  []string{"internal/calibration", "internal/decision", "internal/decisionsapi", "internal/fleet", "internal/gateway", "internal/outcomes", "internal/systemone", "github.com/google/jsonschema-go"},
		why:  "the page at /, /docs and /openapi.json: embedded assets that call the API like any client; the OpenAPI document takes its limits from the domain, the prediction sets' coverages and the Decisions wire's",
	},
	{
		pkgs: []string{"internal/httpapi"},
		may: []string{"internal/answer", "internal/decision", "internal/decisionlog", "internal/decisionsapi", "internal/fleet", "internal/gateway",
			"internal/httpcall", "internal/metrics", "internal/outcomes", "internal/redact", "internal/systemone", "internal/tracing", "internal/web", "golang.org/x/time"},
		why: "the HTTP face: auth, rate limits, body limits, one log line a request; parses, calls the core and writes in each wire's shapes (System One, OpenAI's Decisions); bodies read as httpcall reads replies; no engine",
	},
	{
		pkgs: []string{"internal/mcpserver"},
		may:  []string{"internal/gateway", "internal/jsonx", "internal/outcomes", "internal/tracing", "github.com/google/jsonschema-go", "github.com/modelcontextprotocol/go-sdk"},
		why:  "the MCP face over stdio: its own wording (tool names, /system1:toggle) and tool-only schema changes",
	},
	{
		pkgs: []string{"internal/bench"},
		may: []string{"internal/answer", "internal/calibration", "internal/calibration/fitting", "internal/cases", "internal/decision",
			"internal/systemone", "golang.org/x/image"},
		why: "the bench: cases asked of an endpoint or the configuration's answer path, reports, reliability diagrams",
	},
	{
		pkgs: []string{"internal/jobs"},
		may: []string{"internal/calibration", "internal/calibration/fitting", "internal/cases", "internal/decision", "internal/httpcall", "internal/jsonx",
			"internal/systemone", "golang.org/x/term"},
		why: "the job runner of system1 run: rows streamed through a decider (the local answer path or a remote system1), written in input order, resumed exactly",
	},
	{
		pkgs: []string{"internal/tracing"},
		may:  append([]string{"internal/decision"}, otelAPI...),
		why:  "OpenTelemetry traces over the API alone: the spans and attribute names the faces and the fleet use, in one place; the program hands it the SDK's provider",
	},
	{
		pkgs: []string{"cmd/system1"},
		may: []string{"internal/answer", "internal/atomicfile", "internal/bench", "internal/calibration", "internal/cases", "internal/config",
			"internal/decision", "internal/decisionlog", "internal/fleet", "internal/gateway", "internal/httpapi", "internal/jobs",
			"internal/mcpserver", "internal/metrics", "internal/outcomes", "internal/pause", "internal/systemone", "internal/tracing",
			"cmd/system1/tracesdk", "github.com/jackc/pgx/v5/stdlib", "modernc.org/sqlite"},
		why: "wiring: reads the configuration, builds one router (fleet.FromConfig), the answer path and the gateway over it, serves; the only package that links the database drivers",
	},
	{
		pkgs: []string{"cmd/system1/tracesdk"},
		may:  []string{"internal/config", "internal/tracing", "go.opentelemetry.io/otel"},
		why:  "the program's pick of OpenTelemetry's SDK and OTLP exporters (HTTP, gRPC), set up from the tracing block or the standard variables; only the program imports it",
	},
	{
		pkgs: []string{"internal/gateway/schemagen"},
		may:  []string{"internal/gateway"},
		why:  "go generate's writer of schema/request.json and response.json, the decide contract's JSON Schemas",
	},
	{
		pkgs: []string{"internal/web/openapigen"},
		may:  []string{"internal/web"},
		why:  "go generate's writer of schema/openapi.json",
	},
	{
		pkgs: []string{"internal/fakeengine", "internal/testbin"},
		may:  []string{"internal/decision", "internal/decisionsapi", "internal/systemone"},
		test: true,
		why:  "test support: fake engines, System One and Decisions endpoints of every dialect, the system1 binary built once per suite",
	},
	{
		pkgs: []string{"internal/testengine"},
		may:  []string{"internal/testbin", "github.com/jackc/pgx/v5/stdlib"},
		test: true,
		why:  "test support: a real llama-server, Ollama and a PostgreSQL schema per test, where the machine has them",
	},
	{
		pkgs: []string{"internal/simmodel"},
		may:  []string{"internal/calibration", "internal/calibration/fitting", "internal/cases", "internal/decision", "internal/engine", "internal/fakeengine"},
		test: true,
		why:  "test support: a simulated model trained on case files, served by the fake engine",
	},
	{
		pkgs: []string{"internal/procstat"},
		test: true,
		why:  "benchmark support: a process's CPU time and memory and the machine's load, read from /proc",
	},
	{
		pkgs: []string{"bench/forward", "bench/kquestions", "bench/load", "bench/overhead", "bench/questions", "bench/throughput"},
		may:  []string{"internal/fakeengine", "internal/procstat", "internal/testbin"},
		test: true,
		why:  "benchmark programs, which build the real binary and drive it against fakes",
	},
	{
		pkgs: []string{"bench/quality"},
		may: []string{"internal/calibration", "internal/calibration/fitting", "internal/cases", "internal/decision", "internal/decisionlog",
			"internal/fakeengine", "internal/outcomes", "internal/procstat", "internal/simmodel", "internal/systemone", "internal/testbin", "modernc.org/sqlite"},
		test: true,
		why:  "the decision-quality benchmark: the simulated model through the real binary, outcomes fed back, the refit measured on held-out answers (read back from the stopped server's SQLite decision log)",
	},
	{
		pkgs: []string{"test/..."},
		test: true,
		why:  "the suites that drive the faces as their users do; only their tests import, and tests may import what they need",
	},
}

// noIO is the standard library the pure packages may not import: files,
// the network, processes, databases and loggers.
var noIO = []string{"os", "os/exec", "io/fs", "path/filepath", "net", "net/http", "database/sql", "log", "log/slog", "syscall"}

// testOnly are the standard library's packages for tests, which only
// test support may import.
var testOnly = []string{"testing", "net/http/httptest"}

// otelAPI are OpenTelemetry's API packages, which a library that traces
// may import; the SDK and the exporters are the program's (programOnly).
var otelAPI = []string{"go.opentelemetry.io/otel/attribute", "go.opentelemetry.io/otel/codes", "go.opentelemetry.io/otel/propagation",
	"go.opentelemetry.io/otel/semconv", "go.opentelemetry.io/otel/trace"}

// programOnly are what only the program (cmd/...) and tests may depend
// on, directly or not: the database drivers, OpenTelemetry's SDK and
// exporters and the gRPC they bring, so that the fleet, the answer path,
// the wires and the faces build without them.
var programOnly = []string{"modernc.org/sqlite", "github.com/jackc/pgx/v5/stdlib",
	"go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters", "google.golang.org/grpc"}
