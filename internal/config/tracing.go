package config

import (
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"unicode"
)

// Tracing configures OpenTelemetry tracing (see docs/tracing.md). It is
// off unless Endpoint is set here or the standard variables name one
// (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); a
// setting given here wins over its variable, and a variable fills what
// is left empty here, as the OpenTelemetry SDK's own options do.
//
//	tracing:
//	  endpoint: http://collector:4318    # the collector's base URL
//	  protocol: http/protobuf            # or grpc
//	  sampler: parentbased_traceidratio  # as OTEL_TRACES_SAMPLER
//	  sample_ratio: 0.1                  # as OTEL_TRACES_SAMPLER_ARG
//	  service_name: system1
//	  include_state: false
//	  headers_env: OTLP_HEADERS          # a variable holding k=v,k2=v2
type Tracing struct {
	// Endpoint is the collector's base URL, as OTEL_EXPORTER_OTLP_ENDPOINT
	// reads: http/protobuf sends to its path + /v1/traces, gRPC to its
	// host and port; http:// is plain text, https:// TLS.
	Endpoint string `yaml:"endpoint"`
	// Protocol is grpc or http/protobuf (TracingProtocols); empty reads
	// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, then OTEL_EXPORTER_OTLP_PROTOCOL,
	// then http/protobuf, the specification's default.
	Protocol string `yaml:"protocol"`
	// Sampler is one of TracingSamplers, named as OTEL_TRACES_SAMPLER
	// names them; empty reads that variable, then parentbased_always_on.
	Sampler string `yaml:"sampler"`
	// SampleRatio is the share of traces a traceidratio sampler keeps, in
	// [0,1] (default 1); given without a sampler it means
	// parentbased_traceidratio.
	SampleRatio *float64 `yaml:"sample_ratio"`
	// ServiceName is the service.name traces are filed under; empty reads
	// OTEL_SERVICE_NAME, then "system1".
	ServiceName string `yaml:"service_name"`
	// IncludeState puts each request's state on its span (input.value).
	// Off by default: states are the callers' data, and spans travel to a
	// collector that may keep them longer and show them more widely than
	// the decision log.
	IncludeState bool `yaml:"include_state"`
	// HeadersEnv names a variable holding headers for the collector, as
	// OTEL_EXPORTER_OTLP_HEADERS writes them (key=value,key2=value2), so
	// that a collector's key stays out of the file.
	HeadersEnv string `yaml:"headers_env"`
}

// TracingProtocols are the OTLP protocols tracing can export over.
var TracingProtocols = []string{"grpc", "http/protobuf"}

// TracingSamplers are the samplers tracing.sampler may name: those
// OTEL_TRACES_SAMPLER defines that need no other component.
var TracingSamplers = []string{
	"always_on", "always_off", "traceidratio",
	"parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio",
}

// TakesRatio reports whether sampler reads a sample ratio.
func TakesRatio(sampler string) bool { return strings.HasSuffix(sampler, "traceidratio") }

// maxServiceName bounds service_name: collectors index it, and a name
// longer than this is a mistake.
const maxServiceName = 255

// Check lists what is wrong with the section alone, as Config.Check does.
func (t Tracing) Check() []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if t.Endpoint != "" {
		// The URL is not quoted back whole: it may carry a key in its
		// query.
		u, err := url.Parse(t.Endpoint)
		switch {
		case err != nil:
			bad("tracing.endpoint: does not parse as a URL, such as http://collector:4318")
		case u.Scheme != "http" && u.Scheme != "https":
			bad("tracing.endpoint: the scheme must be http:// (plain text) or https:// (TLS), such as http://collector:4318")
		case u.Host == "":
			bad("tracing.endpoint: names no host, such as http://collector:4318")
		case u.User != nil:
			bad("tracing.endpoint: holds credentials; give them as headers through headers_env instead")
		case u.Fragment != "" || u.RawQuery != "":
			bad("tracing.endpoint: a collector's URL has no query or fragment")
		}
	}
	if t.Protocol != "" && !slices.Contains(TracingProtocols, t.Protocol) {
		bad("tracing.protocol: %q is not one of %s", t.Protocol, strings.Join(TracingProtocols, ", "))
	}
	if t.Sampler != "" && !slices.Contains(TracingSamplers, t.Sampler) {
		bad("tracing.sampler: %q is not one of %s", t.Sampler, strings.Join(TracingSamplers, ", "))
	}
	if r := t.SampleRatio; r != nil {
		if !(*r >= 0 && *r <= 1) { // NaN too
			bad("tracing.sample_ratio: %v is not in [0,1]", *r)
		}
		if t.Sampler != "" && !TakesRatio(t.Sampler) {
			bad("tracing.sample_ratio: sampler %s takes no ratio (traceidratio and parentbased_traceidratio do)", t.Sampler)
		}
	}
	switch {
	case len(t.ServiceName) > maxServiceName:
		bad("tracing.service_name: %d bytes, over %d", len(t.ServiceName), maxServiceName)
	case strings.ContainsFunc(t.ServiceName, unicode.IsControl):
		bad("tracing.service_name: holds a control character")
	case t.ServiceName != "" && strings.TrimSpace(t.ServiceName) == "":
		bad("tracing.service_name: is blank")
	}
	if t.HeadersEnv != "" && !envName(t.HeadersEnv) {
		bad("tracing.headers_env: %q is not a variable's name (letters, digits and _, not starting with a digit)", t.HeadersEnv)
	}
	return errs
}

// Ratio is the sample ratio in force: SampleRatio, else 1.
func (t Tracing) Ratio() float64 {
	if t.SampleRatio == nil || math.IsNaN(*t.SampleRatio) {
		return 1
	}
	return *t.SampleRatio
}

// envName reports whether s is a portable environment variable's name.
func envName(s string) bool {
	for i, r := range s {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return s != ""
}
