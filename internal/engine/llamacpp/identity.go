package llamacpp

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"system1/internal/engine"
	"system1/internal/engine/openai"
	"system1/internal/fingerprint"
)

// identitySource names where a llama-server identity is read.
const identitySource = "llamacpp /props+/v1/models"

// modelEntry is one model of GET /v1/models, with llama.cpp's aliases and
// meta.
type modelEntry struct {
	ID      string                     `json:"id"`
	Aliases []string                   `json:"aliases"`
	Meta    map[string]json.RawMessage `json:"meta"`
}

// props is the part of GET /props an identity takes, as llama-server
// 80fb11a answers it (testdata/props.json).
type props struct {
	ModelPath    *string `json:"model_path"`
	BuildInfo    *string `json:"build_info"`
	ModelFtype   *string `json:"model_ftype"`
	ChatTemplate *string `json:"chat_template"`
	BOSToken     *string `json:"bos_token"`
	EOSToken     *string `json:"eos_token"`
}

// Identity reads what llama-server reports of the model it serves: from
// GET /props the model file's path, the server's build (build_info, the
// commit it was built from), the weights' type, the chat template (as a
// hash) and the special tokens; from GET /v1/models the entry of model
// (or the one entry, since one server serves one model whatever it is
// called) with its meta: vocabulary, parameter count, size in bytes,
// trained context, embedding width. The context the server runs with
// (n_ctx, in /props and the meta) is left out: it is a setting of the
// server, divided among its slots, and changes with -np while the model
// does not.
//
// A read that finds other fields than the last read of model found drops
// what the engine learnt of the model (label token ids, vocabulary size,
// slots), since a new model file may tokenize otherwise.
func (e *Engine) Identity(ctx context.Context, model string) (fingerprint.Identity, error) {
	var p props
	if err := openai.Get(ctx, e.HTTP, e.url("/props"), e.Key, fingerprint.MaxReply, &p); err != nil {
		return fingerprint.Identity{}, fmt.Errorf("reading /props: %w", err)
	}
	var list struct {
		Data []modelEntry `json:"data"`
	}
	if err := openai.Get(ctx, e.HTTP, e.url("/v1/models"), e.Key, fingerprint.MaxReply, &list); err != nil {
		return fingerprint.Identity{}, fmt.Errorf("reading /v1/models: %w", err)
	}
	at := slices.IndexFunc(list.Data, func(m modelEntry) bool { return m.ID == model || slices.Contains(m.Aliases, model) })
	if at < 0 && len(list.Data) == 1 {
		at = 0
	}
	if at < 0 {
		return fingerprint.Identity{}, &engine.Failure{Kind: engine.Unavailable, Err: fmt.Errorf("model %q is not among the %d models of /v1/models", model, len(list.Data))}
	}
	f := map[string]string{}
	for name, v := range map[string]*string{"model_path": p.ModelPath, "build_info": p.BuildInfo,
		"model_ftype": p.ModelFtype, "bos_token": p.BOSToken, "eos_token": p.EOSToken} {
		if v != nil {
			f[name] = *v
		}
	}
	if p.ChatTemplate != nil {
		f["chat_template_sha256"] = fingerprint.TextHash(*p.ChatTemplate)
	}
	for k, v := range list.Data[at].Meta {
		if k != "n_ctx" {
			f["meta."+k] = fingerprint.FieldText(v)
		}
	}
	id := fingerprint.Identity{Source: identitySource, Fields: f}
	e.seen(model, id)
	return id, nil
}

// seen records model's identity and forgets what was learnt of the model
// when it differs from the last one read.
func (e *Engine) seen(model string, id fingerprint.Identity) {
	e.mu.Lock()
	last, ok := e.identities[model]
	if e.identities == nil {
		e.identities = map[string]fingerprint.Identity{}
	}
	e.identities[model] = id
	changed := ok && !maps.Equal(last.Fields, id.Fields)
	if changed {
		maps.DeleteFunc(e.ids, func(k tokenKey, _ int) bool { return k.model == model })
		delete(e.stats, model)
		delete(e.templates, model)
		e.calls = nil
	}
	e.mu.Unlock()
	if changed { // outside mu: a fact's lock is held through its read
		e.nVocab.reset()
		e.nSlots.reset()
	}
}
