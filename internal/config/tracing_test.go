package config

import (
	"os"
	"strings"
	"testing"
)

// The block as docs/tracing.md documents it parses and passes Check.
func TestTracingParses(t *testing.T) {
	b, err := os.ReadFile("../../docs/tracing.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```yaml\n")
	example, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/tracing.md has no yaml block")
	}
	c, err := Parse([]byte(example))
	if err != nil {
		t.Fatal(err)
	}
	if errs := c.Check(); len(errs) > 0 {
		t.Fatal(errs)
	}
	tr := c.Tracing
	if tr.Endpoint != "http://collector:4318" || tr.Protocol != "http/protobuf" || tr.Sampler != "parentbased_traceidratio" ||
		tr.Ratio() != 0.1 || tr.ServiceName != "system1" || tr.IncludeState || tr.HeadersEnv != "OTLP_HEADERS" {
		t.Fatalf("parsed %+v", tr)
	}
	if _, err := Parse([]byte("tracing: {endpoit: http://x:4318}")); err == nil || !strings.Contains(err.Error(), "tracing.endpoit") {
		t.Fatalf("an unknown key under tracing: %v", err)
	}
	if (Tracing{}).Ratio() != 1 {
		t.Fatal("the default ratio is not 1")
	}
	for _, name := range append(TracingSamplers, TracingProtocols...) {
		if !strings.Contains(example, name) {
			t.Errorf("docs/tracing.md's block does not list %s", name)
		}
	}
}

func TestTracingCheck(t *testing.T) {
	ratio := func(r float64) *float64 { return &r }
	for _, tc := range []struct {
		name string
		in   Tracing
		want string // "" for no error
	}{
		{"empty is off", Tracing{}, ""},
		{"grpc", Tracing{Endpoint: "https://collector:4317", Protocol: "grpc"}, ""},
		{"ratio alone", Tracing{SampleRatio: ratio(0)}, ""},
		{"ftp", Tracing{Endpoint: "ftp://collector:4317"}, "tracing.endpoint: the scheme"},
		{"bare host", Tracing{Endpoint: "collector:4317"}, "tracing.endpoint"},
		{"no host", Tracing{Endpoint: "http://"}, "tracing.endpoint: names no host"},
		{"credentials", Tracing{Endpoint: "http://u:secret@collector:4318"}, "tracing.endpoint: holds credentials"},
		{"query", Tracing{Endpoint: "http://collector:4318/?key=secret"}, "tracing.endpoint: a collector's URL has no query"},
		{"http/json", Tracing{Protocol: "http/json"}, `tracing.protocol: "http/json" is not one of grpc, http/protobuf`},
		{"jaeger_remote", Tracing{Sampler: "jaeger_remote"}, `tracing.sampler: "jaeger_remote" is not one of`},
		{"ratio over 1", Tracing{SampleRatio: ratio(1.5)}, "tracing.sample_ratio: 1.5 is not in [0,1]"},
		{"ratio without a ratio sampler", Tracing{Sampler: "always_on", SampleRatio: ratio(0.5)}, "sampler always_on takes no ratio"},
		{"long name", Tracing{ServiceName: strings.Repeat("s", 256)}, "tracing.service_name: 256 bytes"},
		{"control", Tracing{ServiceName: "a\nb"}, "tracing.service_name: holds a control"},
		{"blank", Tracing{ServiceName: "  "}, "tracing.service_name: is blank"},
		{"headers_env", Tracing{HeadersEnv: "OTLP HEADERS"}, "tracing.headers_env"},
		{"headers_env digit", Tracing{HeadersEnv: "1X"}, "tracing.headers_env"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := (&Config{Tracing: tc.in}).Check()
			if tc.want == "" {
				if len(errs) > 0 {
					t.Fatal(errs)
				}
				return
			}
			if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want) {
				t.Fatalf("got %v, want one error with %q", errs, tc.want)
			}
			if strings.Contains(errs[0].Error(), "secret") {
				t.Fatalf("the error repeats the URL's secret: %v", errs[0])
			}
		})
	}
}
