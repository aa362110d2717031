package fakeengine

import (
	"encoding/json"
	"net/http"
)

// models answers GET /v1/models: llama-server's shape, with both lists,
// aliases and the vocabulary size, or OpenAI's.
func (f *Fake) models() []byte {
	var data []map[string]any
	var jev []map[string]any
	for i, id := range f.opt.Models {
		m := map[string]any{"id": id, "object": "model", "created": 0, "owned_by": "fake"}
		if f.opt.Dialect == LlamaCpp {
			m["owned_by"] = "llamacpp"
			m["meta"] = map[string]int{"n_vocab": f.opt.NVocab}
			if i == 0 {
				m["aliases"] = f.opt.Aliases
			}
			jev = append(jev, map[string]any{"name": id, "model": id})
		}
		data = append(data, m)
	}
	body := map[string]any{"object": "list", "data": data}
	if jev != nil {
		body["models"] = jev
	}
	out, _ := json.Marshal(body)
	return out
}

// tags answers Ollama's GET /api/tags.
func (f *Fake) tags() []byte {
	var ms []map[string]any
	for _, id := range f.opt.Models {
		ms = append(ms, map[string]any{"name": id, "model": id, "size": 1, "digest": "0"})
	}
	out, _ := json.Marshal(map[string]any{"models": ms})
	return out
}

// tokenize answers llama.cpp's POST /tokenize: one token per byte, after
// a leading space token, as SentencePiece tokenizers add one.
func tokenize(body []byte) []byte {
	var req struct {
		Content string `json:"content"`
	}
	_ = json.Unmarshal(body, &req)
	type token struct {
		ID    int    `json:"id"`
		Piece string `json:"piece"`
	}
	toks := []token{{TokenID(" "), " "}}
	for i := range len(req.Content) {
		p := req.Content[i : i+1]
		toks = append(toks, token{TokenID(p), p})
	}
	out, _ := json.Marshal(map[string]any{"tokens": toks})
	return out
}

// writeError writes an error body in the dialect's shape.
func writeError(w http.ResponseWriter, d Dialect, status int, msg string) {
	var body any
	if d == Ollama {
		body = map[string]string{"error": msg}
	} else {
		typ := "server_error"
		switch {
		case status == http.StatusNotFound:
			typ = "not_found_error"
		case status == http.StatusTooManyRequests:
			typ = "rate_limit_error"
		case status < 500:
			typ = "invalid_request_error"
		}
		body = map[string]any{"error": map[string]any{"code": status, "message": msg, "type": typ}}
	}
	out, _ := json.Marshal(body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(out)
}
