package tracing_test

// The tests' Jaeger: Jaeger's v2 binary (an OpenTelemetry Collector with
// OTLP receivers, an in-memory store and the query API) built by
// scripts/jaeger.sh, started on free loopback ports, and its traces read
// back from its query API. Tests that need it skip with the reason when
// $SYSTEM1_JAEGER is not set, unless SYSTEM1_REQUIRE_JAEGER=1
// (scripts/test.sh sets both), where a missing Jaeger fails.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"system1/internal/testbin"
)

// Jaeger is a running Jaeger.
type Jaeger struct {
	// GRPC is the OTLP/gRPC receiver's URL, HTTP the OTLP/HTTP
	// receiver's base URL (traces go to HTTP+"/v1/traces"), Query the
	// query API's.
	GRPC, HTTP, Query string
	// Log is the file Jaeger writes its log to.
	Log string

	proc    *os.Process
	exited  chan error // its Wait's result
	stopped bool
}

// jaegerConfig is a Jaeger v2 configuration: OTLP in, memory, the query API,
// and no listener beyond those three (no metrics port, no UI sampling
// endpoints), so that parallel runs need no fixed port.
const jaegerConfig = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: %s
    grpc:
      endpoint: %s
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
      http:
        endpoint: %s
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`

// startJaeger runs Jaeger until the test ends, and returns once its query API
// answers and both OTLP receivers take connections.
func startJaeger(t testing.TB) *Jaeger {
	t.Helper()
	bin := testbin.Tool(t, "Jaeger", "SYSTEM1_JAEGER", "scripts/jaeger.sh")
	dir := t.TempDir()
	addr := func() string { return testbin.LoopbackAddr(t) }
	query, queryGRPC, otlpGRPC, otlpHTTP := addr(), addr(), addr(), addr()
	cfg := filepath.Join(dir, "jaeger.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, jaegerConfig, query, queryGRPC, otlpGRPC, otlpHTTP), 0o644); err != nil {
		t.Fatal(err)
	}
	j := &Jaeger{GRPC: "http://" + otlpGRPC, HTTP: "http://" + otlpHTTP, Query: "http://" + query, Log: filepath.Join(dir, "jaeger.log")}
	logf, err := os.Create(j.Log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "--config", cfg)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	j.proc, j.exited = cmd.Process, make(chan error, 1)
	go func() { j.exited <- cmd.Wait() }()
	t.Cleanup(j.Stop)
	deadline := time.Now().Add(60 * time.Second)
	for !j.ready(otlpGRPC, otlpHTTP) {
		select {
		case err := <-j.exited:
			j.stopped = true
			log, _ := os.ReadFile(j.Log)
			t.Fatalf("jaeger exited (%v) before it was ready:\n%s", err, log)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(j.Log)
			t.Fatalf("jaeger was not ready in 60s:\n%s", log)
		}
	}
	return j
}

// ready reports whether the query API answers and the receivers listen.
func (j *Jaeger) ready(receivers ...string) bool {
	resp, err := httpClient.Get(j.Query + "/api/services")
	if err != nil {
		return false
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return false
	}
	for _, a := range receivers {
		c, err := net.DialTimeout("tcp", a, time.Second)
		if err != nil {
			return false
		}
		c.Close()
	}
	return true
}

// Endpoint is what OTEL_EXPORTER_OTLP_ENDPOINT should say for protocol
// (grpc or http/protobuf).
func (j *Jaeger) Endpoint(protocol string) string {
	if protocol == "grpc" {
		return j.GRPC
	}
	return j.HTTP
}

// Stop ends Jaeger; stopping twice is fine.
func (j *Jaeger) Stop() {
	if j.exited == nil || j.stopped {
		return
	}
	j.stopped = true
	_ = j.proc.Kill()
	<-j.exited
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// Trace is a trace as Jaeger's query API returns it (GET
// /api/traces/{id}).
type Trace struct {
	TraceID   string             `json:"traceID"`
	Spans     []Span             `json:"spans"`
	Processes map[string]Process `json:"processes"`
}

// Span is one span of a Trace.
type Span struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags      []Tag  `json:"tags"`
	ProcessID string `json:"processID"`
}

// Tag is a span's attribute: Value is a string, a float64 (numbers) or
// a bool, as JSON decodes them.
type Tag struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

// Process is the service that sent spans.
type Process struct {
	ServiceName string `json:"serviceName"`
	Tags        []Tag  `json:"tags"`
}

// Tag returns the value of the span's attribute key.
func (s Span) Tag(key string) (any, bool) {
	i := slices.IndexFunc(s.Tags, func(t Tag) bool { return t.Key == key })
	if i < 0 {
		return nil, false
	}
	return s.Tags[i].Value, true
}

// Parent is the span id of the span's CHILD_OF reference, "" for a root.
func (s Span) Parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// Named returns the trace's spans named name.
func (tr *Trace) Named(name string) []Span {
	return slices.DeleteFunc(slices.Clone(tr.Spans), func(s Span) bool { return s.OperationName != name })
}

// ErrNotYet is what Get says of a trace Jaeger does not hold yet.
var ErrNotYet = errors.New("the trace is not in jaeger yet")

// Get reads trace id (32 hex digits) from the query API once.
func (j *Jaeger) Get(ctx context.Context, id string) (*Trace, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.Query+"/api/traces/"+id, nil)
	if err != nil {
		return nil, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusNotFound {
		return nil, ErrNotYet
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /api/traces/%s: HTTP %d: %s", id, resp.StatusCode, body)
	}
	var out struct {
		Data []Trace `json:"data"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("GET /api/traces/%s: %w", id, err)
	}
	if len(out.Data) == 0 {
		return nil, ErrNotYet
	}
	return &out.Data[0], nil
}
