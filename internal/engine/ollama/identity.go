package ollama

import (
	"context"
	"fmt"
	"strings"

	"system1/internal/engine"
	"system1/internal/engine/openai"
	"system1/internal/fingerprint"
)

// identitySource names where an Ollama identity is read.
const identitySource = "ollama /api/tags+/api/version"

// Identity reads model's entry of GET /api/tags: its digest, the
// manifest's SHA-256, which covers the weights, the template, the system
// prompt and the parameters, so that `ollama create` or `ollama cp` of
// anything else under the name changes it; its size; and its details
// (format, family, parameter size, quantization level); with the server's
// version from GET /api/version, since another Ollama runs the same
// weights through other code. modified_at is left out: it changes when a
// model is pulled again unchanged. A name without a tag is the name with
// ":latest", as Ollama reads it.
func (e *Engine) Identity(ctx context.Context, model string) (fingerprint.Identity, error) {
	var tags struct {
		Models []struct {
			Name    string `json:"name"`
			Model   string `json:"model"`
			Size    *int64 `json:"size"`
			Digest  string `json:"digest"`
			Details struct {
				Format            string   `json:"format"`
				Family            string   `json:"family"`
				Families          []string `json:"families"`
				ParameterSize     string   `json:"parameter_size"`
				QuantizationLevel string   `json:"quantization_level"`
			} `json:"details"`
		} `json:"models"`
	}
	if err := openai.Get(ctx, e.HTTP, e.url("/api/tags"), e.Key, fingerprint.MaxReply, &tags); err != nil {
		return fingerprint.Identity{}, fmt.Errorf("reading /api/tags: %w", err)
	}
	var version struct {
		Version string `json:"version"`
	}
	if err := openai.Get(ctx, e.HTTP, e.url("/api/version"), e.Key, fingerprint.MaxReply, &version); err != nil {
		return fingerprint.Identity{}, fmt.Errorf("reading /api/version: %w", err)
	}
	want := Tagged(model)
	for _, m := range tags.Models {
		if Tagged(m.Name) != want && Tagged(m.Model) != want {
			continue
		}
		if m.Digest == "" {
			return fingerprint.Identity{}, &engine.Failure{Kind: engine.Malformed, Err: fmt.Errorf("model %q has no digest in /api/tags", model)}
		}
		f := map[string]string{
			"digest":             m.Digest,
			"format":             m.Details.Format,
			"family":             m.Details.Family,
			"families":           strings.Join(m.Details.Families, ","),
			"parameter_size":     m.Details.ParameterSize,
			"quantization_level": m.Details.QuantizationLevel,
			"version":            version.Version,
		}
		if m.Size != nil {
			f["size"] = fmt.Sprint(*m.Size)
		}
		return fingerprint.Identity{Source: identitySource, Fields: f}, nil
	}
	return fingerprint.Identity{}, &engine.Failure{Kind: engine.Unavailable, Err: fmt.Errorf("model %q is not among the %d models of /api/tags", model, len(tags.Models))}
}

// Tagged is a model name as Ollama resolves it, with its tag, ":latest"
// when it has none, so that "stories" and "stories:latest" are one model:
// the part after the last "/" (a registry host may have a port) holds the
// tag.
func Tagged(name string) string {
	if name == "" || strings.Contains(name[strings.LastIndex(name, "/")+1:], ":") {
		return name
	}
	return name + ":latest"
}
