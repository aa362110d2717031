// Package tracesdk is the program's side of tracing: it picks
// OpenTelemetry's SDK and its OTLP exporters (HTTP and gRPC) and builds a
// tracing.Tracer from the configuration's tracing block and the standard
// OTEL_* variables. Only the program imports it, so that the libraries
// that trace take the API alone and build without the SDK or gRPC
// (test/arch holds them to it).
package tracesdk

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdkresource "go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"

	"system1/internal/config"
	"system1/internal/tracing"
)

// The standard variables Setup reads itself, to decide whether tracing
// is on and how; the exporters and the SDK read the rest of theirs
// (OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _CERTIFICATE, OTEL_BSP_*,
// OTEL_RESOURCE_ATTRIBUTES and EnvSampler).
const (
	EnvSDKDisabled    = "OTEL_SDK_DISABLED"
	EnvTracesExporter = "OTEL_TRACES_EXPORTER"
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvServiceName    = "OTEL_SERVICE_NAME"
)

// EnvSampler is the sampler's variable, which Setup leaves to the SDK:
// it applies where the block names no sampler.
const EnvSampler = "OTEL_TRACES_SAMPLER"

// EnvSamplerArg is the sampler's ratio, for a *traceidratio sampler.
const EnvSamplerArg = "OTEL_TRACES_SAMPLER_ARG"

// DefaultServiceName is service.name when neither the block nor
// OTEL_SERVICE_NAME names one.
const DefaultServiceName = "system1"

// DefaultProtocol is the OTLP protocol when none is named: the
// specification's default.
const DefaultProtocol = "http/protobuf"

// tracesPath is where OTLP over HTTP takes traces, below the base URL.
const tracesPath = "/v1/traces"

// Options are what Setup needs.
type Options struct {
	// Config is the configuration's tracing block.
	Config config.Tracing
	// Version is the binary's version, reported as service.version.
	Version string
	// Log takes the exporter's errors (a collector down, a batch
	// dropped); nil is slog.Default().
	Log *slog.Logger
}

// Setup builds the Tracer that the block and the process's environment
// ask for: off (a nil Tracer, and no error) unless the block or
// OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
// names an endpoint, or when OTEL_SDK_DISABLED is true or
// OTEL_TRACES_EXPORTER is none. A setting in the block wins over its
// variable. The exporter connects lazily: a collector that is down
// costs dropped spans and a logged error, never a failed start.
func Setup(ctx context.Context, o Options) (*tracing.Tracer, error) {
	cfg := o.Config
	if errs := cfg.Check(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if on, err := enabled(cfg, os.Getenv); err != nil || !on {
		return nil, err
	}
	protocol, err := protocolOf(cfg, os.Getenv)
	if err != nil {
		return nil, err
	}
	headers, err := headersOf(cfg, os.Getenv)
	if err != nil {
		return nil, err
	}
	log := cmp.Or(o.Log, slog.Default())
	if cfg.HeadersEnv != "" && headers == nil {
		// Not refused (the block does not make it required), but the
		// collector may refuse every batch without the headers.
		log.Warn("tracing: headers_env names a variable that is unset or empty; spans go without its headers",
			"request_id", "-", "variable", cfg.HeadersEnv)
	}
	ratio, err := ratioOf(cfg, os.Getenv)
	if err != nil {
		return nil, err
	}
	exp, err := newExporter(ctx, protocol, cfg.Endpoint, headers)
	if err != nil {
		return nil, fmt.Errorf("tracing: the %s exporter: %w", protocol, err)
	}
	res, err := newResource(ctx, serviceName(cfg, os.Getenv), o.Version)
	if err != nil {
		return nil, err
	}
	// The SDK reports what it cannot send through OpenTelemetry's one
	// error handler; without this it would print through the log package.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing: the exporter failed", "request_id", "-", "err", err)
	}))
	popts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp), sdktrace.WithResource(res)}
	if s := sampler(cfg, ratio); s != nil {
		popts = append(popts, sdktrace.WithSampler(s))
	}
	return tracing.New(sdktrace.NewTracerProvider(popts...), o.Version, cfg.IncludeState), nil
}

// enabled decides whether tracing is on, from the same variables the
// exporters read.
func enabled(cfg config.Tracing, getenv func(string) string) (bool, error) {
	if strings.EqualFold(strings.TrimSpace(getenv(EnvSDKDisabled)), "true") {
		return false, nil
	}
	// The variable is a list of exporters, its values case-insensitive,
	// as the spec has it: each must be otlp, or the list none alone.
	e := strings.TrimSpace(getenv(EnvTracesExporter))
	var otlp, none bool
	for x := range strings.SplitSeq(e, ",") {
		switch x = strings.ToLower(strings.TrimSpace(x)); x {
		case "":
		case "otlp":
			otlp = true
		case "none":
			none = true
		default:
			return false, fmt.Errorf("tracing: %s=%q: %s is not an exporter system1 has: it exports traces over OTLP only (otlp, or none for off)", EnvTracesExporter, e, x)
		}
	}
	switch {
	case none && otlp:
		return false, fmt.Errorf("tracing: %s=%q: none turns tracing off and cannot be listed with otlp", EnvTracesExporter, e)
	case none:
		return false, nil
	}
	return cfg.Endpoint != "" || getenv(EnvTracesEndpoint) != "" || getenv(EnvEndpoint) != "", nil
}

// protocolOf is the block's protocol, else the variables', else the
// default.
func protocolOf(cfg config.Tracing, getenv func(string) string) (string, error) {
	if cfg.Protocol != "" {
		return cfg.Protocol, nil
	}
	for _, name := range []string{EnvTracesProtocol, EnvProtocol} {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			if slices.Contains(config.TracingProtocols, v) {
				return v, nil
			}
			return "", fmt.Errorf("tracing: %s=%q is not one of %s", name, v, strings.Join(config.TracingProtocols, ", "))
		}
	}
	return DefaultProtocol, nil
}

func serviceName(cfg config.Tracing, getenv func(string) string) string {
	return cmp.Or(cfg.ServiceName, strings.TrimSpace(getenv(EnvServiceName)), DefaultServiceName)
}

// newExporter builds the OTLP exporter. With no endpoint in the block,
// the exporter reads OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT itself.
func newExporter(ctx context.Context, protocol, endpoint string, headers map[string]string) (sdktrace.SpanExporter, error) {
	if protocol == "grpc" {
		var opts []otlptracegrpc.Option
		if endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(endpoint))
		}
		if headers != nil {
			opts = append(opts, otlptracegrpc.WithHeaders(headers))
		}
		return otlptracegrpc.New(ctx, opts...)
	}
	var opts []otlptracehttp.Option
	if endpoint != "" {
		u, err := tracesURL(endpoint)
		if err != nil {
			return nil, err
		}
		opts = append(opts, otlptracehttp.WithEndpointURL(u))
	}
	if headers != nil {
		opts = append(opts, otlptracehttp.WithHeaders(headers))
	}
	return otlptracehttp.New(ctx, opts...)
}

// tracesURL is where OTLP over HTTP sends traces for the block's
// endpoint, a base URL as OTEL_EXPORTER_OTLP_ENDPOINT is: its path with
// /v1/traces added.
func tracesURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", errors.New("tracing.endpoint does not parse as a URL")
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + tracesPath
	u.RawPath = ""
	return u.String(), nil
}

// newResource describes this process: service.name and service.version,
// what OTEL_RESOURCE_ATTRIBUTES adds, and the SDK's own name and version.
func newResource(ctx context.Context, service, version string) (*sdkresource.Resource, error) {
	res, err := sdkresource.New(ctx,
		sdkresource.WithFromEnv(),
		sdkresource.WithTelemetrySDK(),
		// Last, so that service.name is the one serviceName chose over
		// OTEL_SERVICE_NAME, which WithFromEnv reads too.
		sdkresource.WithAttributes(semconv.ServiceName(service), semconv.ServiceVersion(version)),
	)
	if err != nil && !errors.Is(err, sdkresource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing: the resource: %w", err)
	}
	// A partial resource (a malformed OTEL_RESOURCE_ATTRIBUTES) still
	// names the service; the SDK said what it skipped.
	return res, nil
}

// ratioOf is the ratio of the block's sampler: its sample_ratio, else
// OTEL_TRACES_SAMPLER_ARG where the block names a sampler that takes a
// ratio (a variable fills what the block leaves empty), else 1.
func ratioOf(cfg config.Tracing, getenv func(string) string) (float64, error) {
	v := strings.TrimSpace(getenv(EnvSamplerArg))
	if cfg.SampleRatio != nil || !config.TakesRatio(cfg.Sampler) || v == "" {
		return cfg.Ratio(), nil
	}
	r, err := strconv.ParseFloat(v, 64)
	if err != nil || !(r >= 0 && r <= 1) {
		return 0, fmt.Errorf("tracing: %s=%q is not a ratio in [0,1], for tracing.sampler %s", EnvSamplerArg, v, cfg.Sampler)
	}
	return r, nil
}

// sampler is the block's sampler, of ratio where it takes one, or nil to
// leave the choice to OTEL_TRACES_SAMPLER (read by the SDK) and its
// default, parentbased_always_on.
func sampler(cfg config.Tracing, r float64) sdktrace.Sampler {
	name := cfg.Sampler
	if name == "" && cfg.SampleRatio != nil {
		name = "parentbased_traceidratio"
	}
	ratio := sdktrace.TraceIDRatioBased(r)
	return map[string]sdktrace.Sampler{
		"always_on":                sdktrace.AlwaysSample(),
		"always_off":               sdktrace.NeverSample(),
		"traceidratio":             ratio,
		"parentbased_always_on":    sdktrace.ParentBased(sdktrace.AlwaysSample()),
		"parentbased_always_off":   sdktrace.ParentBased(sdktrace.NeverSample()),
		"parentbased_traceidratio": sdktrace.ParentBased(ratio),
	}[name]
}

// headersOf reads the headers the block's headers_env names, written as
// OTEL_EXPORTER_OTLP_HEADERS writes them: key=value pairs separated by
// commas, values percent-encoded. Nil when the block names no variable or
// it is empty. Errors name the variable and the pair's place, never its
// text: it holds a key.
func headersOf(cfg config.Tracing, getenv func(string) string) (map[string]string, error) {
	if cfg.HeadersEnv == "" {
		return nil, nil
	}
	v := getenv(cfg.HeadersEnv)
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	h := map[string]string{}
	for i, pair := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		bad := func(why string) error {
			return fmt.Errorf("tracing.headers_env: entry %d of $%s %s (the variable holds key=value pairs separated by commas)", i, cfg.HeadersEnv, why)
		}
		if !ok || k == "" {
			return nil, bad("is not key=value")
		}
		if !token(k) {
			return nil, bad("has a key that is not a header name")
		}
		val, err := url.PathUnescape(strings.TrimSpace(val))
		if err != nil {
			return nil, bad("has a value that is not percent-encoded text")
		}
		if strings.ContainsFunc(val, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			return nil, bad("has a control character in its value")
		}
		h[k] = val
	}
	return h, nil
}

// token reports whether s is an HTTP token (a header name).
func token(s string) bool {
	for _, r := range s {
		if r > '~' || r <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return s != ""
}
