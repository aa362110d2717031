package tracesdk

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"

	"system1/internal/config"
)

func TestEnabled(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, c := range []struct {
		name string
		cfg  config.Tracing
		env  map[string]string
		on   bool
		err  string
	}{
		{"nothing", config.Tracing{}, nil, false, ""},
		{"block", config.Tracing{Endpoint: "http://c:4318"}, nil, true, ""},
		{"endpoint variable", config.Tracing{}, map[string]string{EnvEndpoint: "http://c:4318"}, true, ""},
		{"traces endpoint variable", config.Tracing{}, map[string]string{EnvTracesEndpoint: "http://c:4318/v1/traces"}, true, ""},
		{"only a sampler", config.Tracing{Sampler: "always_on"}, map[string]string{EnvSampler: "always_on"}, false, ""},
		{"disabled", config.Tracing{Endpoint: "http://c:4318"}, map[string]string{EnvSDKDisabled: "TRUE"}, false, ""},
		{"exporter none", config.Tracing{}, map[string]string{EnvEndpoint: "http://c:4318", EnvTracesExporter: "none"}, false, ""},
		{"exporter otlp", config.Tracing{}, map[string]string{EnvEndpoint: "http://c:4318", EnvTracesExporter: "otlp"}, true, ""},
		{"exporter zipkin", config.Tracing{}, map[string]string{EnvEndpoint: "http://c:4318", EnvTracesExporter: "zipkin"}, false, `OTEL_TRACES_EXPORTER="zipkin"`},
		// The spec's values are case-insensitive, and the variable is a list.
		{"exporter OTLP", config.Tracing{}, map[string]string{EnvEndpoint: "http://c:4318", EnvTracesExporter: "OTLP"}, true, ""},
		{"exporter NONE", config.Tracing{}, map[string]string{EnvEndpoint: "http://c:4318", EnvTracesExporter: " None "}, false, ""},
		{"exporter list of otlp", config.Tracing{}, map[string]string{EnvEndpoint: "http://c:4318", EnvTracesExporter: "otlp, OTLP"}, true, ""},
		{"exporter list with console", config.Tracing{}, map[string]string{EnvEndpoint: "http://c:4318", EnvTracesExporter: "otlp,console"}, false, `OTEL_TRACES_EXPORTER="otlp,console": console is not`},
		{"exporter none in a list", config.Tracing{}, map[string]string{EnvEndpoint: "http://c:4318", EnvTracesExporter: "otlp,none"}, false, `OTEL_TRACES_EXPORTER="otlp,none": none`},
	} {
		t.Run(c.name, func(t *testing.T) {
			on, err := enabled(c.cfg, env(c.env))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || on != c.on {
				t.Fatalf("on %v err %v, want %v", on, err, c.on)
			}
		})
	}
}

func TestProtocolOf(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, c := range []struct {
		cfg  config.Tracing
		env  map[string]string
		want string
		err  string
	}{
		{config.Tracing{}, nil, "http/protobuf", ""},
		{config.Tracing{}, map[string]string{EnvProtocol: "grpc"}, "grpc", ""},
		{config.Tracing{}, map[string]string{EnvProtocol: "grpc", EnvTracesProtocol: "http/protobuf"}, "http/protobuf", ""},
		{config.Tracing{Protocol: "grpc"}, map[string]string{EnvTracesProtocol: "http/protobuf"}, "grpc", ""},
		{config.Tracing{}, map[string]string{EnvProtocol: "http/json"}, "", `OTEL_EXPORTER_OTLP_PROTOCOL="http/json" is not one of grpc, http/protobuf`},
	} {
		got, err := protocolOf(c.cfg, env(c.env))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v: err %v, want %q", c.env, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%+v %v: %q %v, want %q", c.cfg, c.env, got, err, c.want)
		}
	}
}

func TestServiceName(t *testing.T) {
	env := func(v string) func(string) string { return func(string) string { return v } }
	if got := serviceName(config.Tracing{}, env("")); got != "system1" {
		t.Errorf("default %q", got)
	}
	if got := serviceName(config.Tracing{}, env("from-env")); got != "from-env" {
		t.Errorf("variable %q", got)
	}
	if got := serviceName(config.Tracing{ServiceName: "from-block"}, env("from-env")); got != "from-block" {
		t.Errorf("block %q", got)
	}
}

func TestSamplers(t *testing.T) {
	for _, name := range config.TracingSamplers {
		if sampler(config.Tracing{Sampler: name}, 1) == nil {
			t.Errorf("sampler %s is accepted by the configuration but not built", name)
		}
	}
	r := 0.25
	if s := sampler(config.Tracing{SampleRatio: &r}, r); s == nil || !strings.Contains(s.Description(), "ParentBased") || !strings.Contains(s.Description(), "0.25") {
		t.Errorf("a ratio alone: %v", s)
	}
	if sampler(config.Tracing{}, 1) != nil {
		t.Error("no sampler in the block should leave OTEL_TRACES_SAMPLER to the SDK")
	}
}

func TestHeaders(t *testing.T) {
	cfg := config.Tracing{HeadersEnv: "H"}
	env := func(v string) func(string) string { return func(string) string { return v } }
	h, err := headersOf(cfg, env("api-key=s3cr%3Dt, x-team = ops"))
	if err != nil || h["api-key"] != "s3cr=t" || h["x-team"] != "ops" || len(h) != 2 {
		t.Fatalf("%v %v", h, err)
	}
	if h, err := headersOf(cfg, env("")); h != nil || err != nil {
		t.Fatalf("empty: %v %v", h, err)
	}
	for _, bad := range []string{"SECRET", "=SECRET", "bad key=SECRET", "k=%zzSECRET", "k=SECRET%0Ab"} {
		_, err := headersOf(cfg, env(bad))
		if err == nil || !strings.Contains(err.Error(), "entry 0 of $H") {
			t.Errorf("%q: %v", bad, err)
		}
		if err != nil && strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%q: the error repeats the variable's text", bad)
		}
	}
}

func TestSetup(t *testing.T) {
	for _, k := range []string{EnvEndpoint, EnvTracesEndpoint, EnvSDKDisabled, EnvTracesExporter, EnvProtocol, EnvTracesProtocol} {
		t.Setenv(k, "")
	}
	ctx := context.Background()
	tr, err := Setup(ctx, Options{})
	if err != nil || tr.Enabled() {
		t.Fatalf("no endpoint: %v %v", tr.Enabled(), err)
	}
	for _, p := range config.TracingProtocols {
		tr, err := Setup(ctx, Options{Config: config.Tracing{Endpoint: "http://127.0.0.1:1", Protocol: p}, Version: "v0"})
		if err != nil || !tr.Enabled() {
			t.Fatalf("%s: %v", p, err)
		}
		sctx, cancel := context.WithTimeout(ctx, 0)
		_ = tr.Shutdown(sctx) // nothing listens there: only that it returns
		cancel()
	}
	t.Setenv(EnvEndpoint, "http://127.0.0.1:1")
	if tr, err := Setup(ctx, Options{}); err != nil || !tr.Enabled() {
		t.Fatalf("the variable: %v", err)
	}
	if _, err := Setup(ctx, Options{Config: config.Tracing{Protocol: "thrift"}}); err == nil || !strings.Contains(err.Error(), "tracing.protocol") {
		t.Fatalf("a bad block: %v", err)
	}
}

// A headers_env naming a variable that is unset or empty still starts
// tracing (docs/tracing.md does not make it required), but says so,
// naming the variable: the collector would refuse every batch unseen.
func TestHeadersEnvUnsetWarns(t *testing.T) {
	for _, k := range []string{EnvEndpoint, EnvTracesEndpoint, EnvSDKDisabled, EnvTracesExporter, EnvProtocol, EnvTracesProtocol} {
		t.Setenv(k, "")
	}
	for _, v := range []string{"unset", "", "k=v"} {
		t.Run(v, func(t *testing.T) {
			t.Setenv("S1_TEST_OTLP_HEADERS", v)
			if v == "unset" {
				os.Unsetenv("S1_TEST_OTLP_HEADERS")
			}
			var buf bytes.Buffer
			tr, err := Setup(context.Background(), Options{Config: config.Tracing{Endpoint: "http://127.0.0.1:1", HeadersEnv: "S1_TEST_OTLP_HEADERS"},
				Log: slog.New(slog.NewTextHandler(&buf, nil))})
			if err != nil || !tr.Enabled() {
				t.Fatalf("%v", err)
			}
			sctx, cancel := context.WithTimeout(context.Background(), 0)
			defer cancel()
			_ = tr.Shutdown(sctx)
			warned := strings.Contains(buf.String(), "level=WARN") && strings.Contains(buf.String(), "S1_TEST_OTLP_HEADERS")
			if warned != (v != "k=v") {
				t.Fatalf("warned %v, log %q", warned, buf.String())
			}
		})
	}
}

func TestTracesURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://c:4318":       "http://c:4318/v1/traces",
		"http://c:4318/":      "http://c:4318/v1/traces",
		"https://c/otlp":      "https://c/otlp/v1/traces",
		"https://c/otlp/":     "https://c/otlp/v1/traces",
		"http://[::1]:4318/x": "http://[::1]:4318/x/v1/traces",
	} {
		if got, err := tracesURL(in); err != nil || got != want {
			t.Errorf("%s: %q %v, want %q", in, got, err, want)
		}
	}
}

// A block that names a ratio sampler and no sample_ratio takes the ratio
// from OTEL_TRACES_SAMPLER_ARG, as a variable fills what the block leaves
// empty (docs/tracing.md); a ratio in the block wins over it, and one the
// variable gives that is not a ratio stops the start, naming it.
func TestSamplerArgFillsTheBlock(t *testing.T) {
	for _, k := range []string{EnvTracesExporter, EnvSDKDisabled} {
		t.Setenv(k, "")
	}
	ctx := context.Background()
	one := 1.0
	for _, c := range []struct {
		sampler string
		ratio   *float64
		arg     string
		records bool
		err     string
	}{
		{"traceidratio", nil, "0", false, ""},
		{"parentbased_traceidratio", nil, "0", false, ""},
		{"parentbased_traceidratio", nil, "", true, ""},
		{"parentbased_traceidratio", &one, "0", true, ""},
		{"always_on", nil, "0", true, ""},
		{"traceidratio", nil, "lots", false, "OTEL_TRACES_SAMPLER_ARG"},
		{"traceidratio", nil, "1.5", false, "OTEL_TRACES_SAMPLER_ARG"},
	} {
		t.Setenv(EnvSamplerArg, c.arg)
		tr, err := Setup(ctx, Options{Config: config.Tracing{Endpoint: "http://127.0.0.1:1", Sampler: c.sampler, SampleRatio: c.ratio}})
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s, %s=%q: err %v, want one naming %s", c.sampler, EnvSamplerArg, c.arg, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		_, span := tr.StartCall(ctx, "x")
		if span.IsRecording() != c.records {
			t.Errorf("%s, ratio %v, %s=%q: recording %v, want %v", c.sampler, c.ratio, EnvSamplerArg, c.arg, span.IsRecording(), c.records)
		}
		span.End()
		sctx, cancel := context.WithTimeout(ctx, 0)
		_ = tr.Shutdown(sctx)
		cancel()
	}
}
