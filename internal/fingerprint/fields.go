package fingerprint

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
)

// MaxReply bounds each reply an identity read takes: a model list or a
// server's properties, never a model's weights or vocabulary.
const MaxReply = 1 << 20

// Listed is the identity a model list gives model: the entry whose key
// names it, its fields named in fields as FieldText (those it has), from
// source; and whether an entry named it. A model the list leaves out has
// no fields.
func Listed(source string, entries []map[string]json.RawMessage, key, model string, fields ...string) (Identity, bool) {
	id := Identity{Source: source}
	for _, m := range entries {
		if FieldText(m[key]) != model {
			continue
		}
		id.Fields = map[string]string{}
		for _, k := range fields {
			if v, ok := m[k]; ok {
				id.Fields[k] = FieldText(v)
			}
		}
		return id, true
	}
	return id, false
}

// FieldText is a JSON value as an identity field: a string as itself,
// anything else as its compact JSON text, "" for null or nothing.
func FieldText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	t := strings.TrimSpace(string(raw))
	if t == "null" {
		return ""
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return t
	}
	return b.String()
}

// TextHash is a long text as an identity field: the first 16 hex digits
// of its SHA-256, so that a chat template is compared without being kept.
func TextHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])[:16]
}
