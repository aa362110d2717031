package fakeengine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"hash/fnv"
	"net/http"
	"strings"
	"time"
)

// models answers GET /v1/models: llama-server's shape, with both lists,
// aliases and a vocabulary of 512, or OpenAI's; with a build, llama.cpp's
// meta has the build's counts and OpenAI's entries vLLM's root.
func (f *Fake) models(build string) []byte {
	var data []map[string]any
	var jev []map[string]any
	for i, id := range f.opt.Models {
		m := map[string]any{"id": id, "object": "model", "created": time.Now().Unix(), "owned_by": "fake"}
		if f.opt.Dialect == LlamaCpp {
			m["owned_by"] = "llamacpp"
			meta := map[string]any{"n_vocab": 512}
			if build != "" {
				n := buildNumber(build)
				meta["n_ctx"], meta["n_ctx_train"], meta["n_params"], meta["size"], meta["ftype"] = 2048, 2048, n, 2*n, "F16"
			}
			m["meta"] = meta
			if i == 0 {
				m["aliases"] = f.opt.Aliases
			}
			jev = append(jev, map[string]any{"name": id, "model": id})
		} else if build != "" {
			m["root"], m["max_model_len"] = "/models/"+build, 2048
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

// tags answers Ollama's GET /api/tags, each model's digest the SHA-256 of
// the build ("0" without one).
func (f *Fake) tags(build string) []byte {
	digest := "0"
	if build != "" {
		h := sha256.Sum256([]byte(build))
		digest = hex.EncodeToString(h[:])
	}
	var ms []map[string]any
	for _, id := range f.opt.Models {
		ms = append(ms, map[string]any{"name": id, "model": id, "size": 1, "digest": digest,
			"modified_at": time.Now().UTC().Format(time.RFC3339Nano),
			"details":     map[string]any{"format": "gguf", "family": "fake", "parameter_size": "1K", "quantization_level": "F16"}})
	}
	out, _ := json.Marshal(map[string]any{"models": ms})
	return out
}

// props answers llama.cpp's GET /props: total_slots when Options.Slots
// sets them, and with a build its model file, build and weights' type.
func (f *Fake) props(build string) []byte {
	p := map[string]any{"default_generation_settings": map[string]any{"n_ctx": 2048}}
	if f.opt.Slots > 0 {
		p["total_slots"] = f.opt.Slots
	}
	if build != "" {
		p["model_path"], p["build_info"], p["model_ftype"] = "/models/"+build+".gguf", "b1-fake", "F16"
		p["chat_template"], p["bos_token"], p["eos_token"] = "{{ messages }}", "<s>", "</s>"
	}
	out, _ := json.Marshal(p)
	return out
}

// buildNumber is a count derived from a build's name, so that two builds
// report different parameter counts.
func buildNumber(build string) int {
	h := fnv.New32a()
	h.Write([]byte(build))
	return 1000 + int(h.Sum32()%1000000)
}

// tokenize answers llama.cpp's POST /tokenize: one token per byte, after
// a leading space token, as SentencePiece tokenizers add one; with pairs,
// two capital letters that are the whole text (after a newline) are one.
func tokenize(body []byte, pairs bool) []byte {
	var req struct {
		Content string `json:"content"`
	}
	_ = json.Unmarshal(body, &req)
	type token struct {
		ID    int    `json:"id"`
		Piece string `json:"piece"`
	}
	toks := []token{{TokenID(" "), " "}}
	if word := strings.TrimPrefix(req.Content, "\n"); pairs && len(word) == 2 && isUpper(word[0]) && isUpper(word[1]) {
		if word != req.Content {
			toks = append(toks, token{TokenID("\n"), "\n"})
		}
		toks = append(toks, token{TokenID(word), word})
	} else {
		for i := range len(req.Content) {
			p := req.Content[i : i+1]
			toks = append(toks, token{TokenID(p), p})
		}
	}
	out, _ := json.Marshal(map[string]any{"tokens": toks})
	return out
}

func isUpper(b byte) bool { return b >= 'A' && b <= 'Z' }

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
	writeBody(w, status, string(out))
}
