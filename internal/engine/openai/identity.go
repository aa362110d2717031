package openai

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"system1/internal/engine"
	"system1/internal/fingerprint"
)

// identitySource names where an OpenAI-compatible identity is read.
const identitySource = "openai /v1/models+/version"

// Identity reads model's entry of GET /v1/models: vLLM's root (the
// weights' path or repository), parent (the base model of a LoRA
// adapter), max_model_len and owned_by; and the server's version from
// GET /version at the server's root, where vLLM serves it (a server
// without it, a hosted API, answers 404 and has no version field). The
// entry's created is left out: vLLM and llama-server stamp it with the
// time of the request. A hosted API that serves a new snapshot under the
// same id reports nothing different here; only the canary can see that.
func (e *Engine) Identity(ctx context.Context, model string) (fingerprint.Identity, error) {
	type entry struct {
		ID          string  `json:"id"`
		OwnedBy     *string `json:"owned_by"`
		Root        *string `json:"root"`
		Parent      *string `json:"parent"`
		MaxModelLen *int64  `json:"max_model_len"`
	}
	var list struct {
		Data []entry `json:"data"`
	}
	if err := Get(ctx, e.HTTP, e.url("/models"), e.Key, fingerprint.MaxReply, &list); err != nil {
		return fingerprint.Identity{}, fmt.Errorf("reading /v1/models: %w", err)
	}
	at := slices.IndexFunc(list.Data, func(m entry) bool { return m.ID == model })
	if at < 0 {
		return fingerprint.Identity{}, &engine.Failure{Kind: engine.Unavailable, Err: fmt.Errorf("model %q is not among the %d models of /v1/models", model, len(list.Data))}
	}
	m, f := list.Data[at], map[string]string{}
	for name, v := range map[string]*string{"owned_by": m.OwnedBy, "root": m.Root, "parent": m.Parent} {
		if v != nil {
			f[name] = *v
		}
	}
	if m.MaxModelLen != nil {
		f["max_model_len"] = fmt.Sprint(*m.MaxModelLen)
	}
	var version struct {
		Version string `json:"version"`
	}
	err := Get(ctx, e.HTTP, strings.TrimSuffix(e.url(""), "/v1")+"/version", e.Key, fingerprint.MaxReply, &version)
	var fail *engine.Failure
	switch {
	case errors.As(err, &fail) && fail.Status == http.StatusNotFound:
	case err != nil:
		return fingerprint.Identity{}, fmt.Errorf("reading /version: %w", err)
	case version.Version != "":
		f["version"] = version.Version
	}
	return fingerprint.Identity{Source: identitySource, Fields: f}, nil
}
