package systemone

import (
	"encoding/json"
	"fmt"
	"strings"

	"system1/internal/jsonx"
)

// APIUsageError is the error_type hosted Jev gives a request it will not
// take as sent: an unknown top-level field, an unknown model, and here
// Jev 1.14's images, which this server does not read. Clients key on it.
const APIUsageError = "api_usage_error"

// Features of Jev 1.14 this server does not serve, as Unsupported names
// them.
const (
	FeatureAssets    = "assets"    // images in the top-level assets map
	FeatureImages    = "images"    // Ollama's and llama.cpp's top-level images list
	FeatureBox       = "box"       // a box question, which needs an image
	FeatureMultipart = "multipart" // a multipart/form-data body: the JS SDK's image requests
)

// Unsupported is what a request holds of Jev 1.14's images: a non-empty
// top-level assets map or images list, box questions, a multipart body.
// This server reads text only, so such a request is refused whole,
// before any engine is asked: never answered with the image dropped.
type Unsupported struct {
	// Fields are "assets" and "images" where present and not empty.
	Fields []string
	// Box are the ids of the box questions, in request order.
	Box []string
	// Multipart is set for a multipart/form-data body, which is not read.
	Multipart bool
}

// Any reports whether the request holds anything unsupported.
func (u Unsupported) Any() bool { return len(u.Fields) > 0 || len(u.Box) > 0 || u.Multipart }

// Features names what is unsupported, in a fixed order: assets, images,
// box, multipart.
func (u Unsupported) Features() []string {
	out := append([]string(nil), u.Fields...)
	if len(u.Box) > 0 {
		out = append(out, FeatureBox)
	}
	if u.Multipart {
		out = append(out, FeatureMultipart)
	}
	return out
}

// Multipart reports whether a Content-Type is multipart/form-data,
// whatever its parameters: one that does not parse (a boundary with a
// space unquoted, one given twice) still says the body is parts.
func Multipart(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "multipart/form-data")
}

// AppendUnsupported writes the 400 for a request holding images, in the
// hosted API's shape {"detail": {"error_type": "api_usage_error",
// "message", "unsupported"}} (beside the {"error"} shape every error of
// this server carries), naming the features, the box questions and the
// model ("" when the body was not read).
func AppendUnsupported(b []byte, model string, u Unsupported) []byte {
	var what []string
	for _, f := range u.Fields {
		what = append(what, "`"+f+"`")
	}
	if len(u.Box) > 0 {
		ids := make([]string, len(u.Box))
		for i, id := range u.Box {
			ids[i] = fmt.Sprintf("%q", id)
		}
		noun := "question"
		if len(ids) > 1 {
			noun = "questions"
		}
		what = append(what, "the box "+noun+" "+strings.Join(ids, ", "))
	}
	served := "on this server"
	if model != "" {
		served = fmt.Sprintf("by model %q on this server", model)
	}
	var msg string
	if u.Multipart {
		msg = fmt.Sprintf("Images are not supported %s: it reads JSON bodies of text only, and a multipart/form-data body carries images. Send the request as JSON, without images.", served)
	} else {
		msg = fmt.Sprintf("Images are not supported %s: remove %s, or use an image-capable model. A TypeSafe-Danger-Zone-Images header does not change this.", served, strings.Join(what, " and "))
	}
	body := struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
		Detail struct {
			ErrorType   string   `json:"error_type"`
			Message     string   `json:"message"`
			Unsupported []string `json:"unsupported"`
		} `json:"detail"`
	}{}
	body.Error.Message, body.Error.Type = msg, APIUsageError
	body.Detail.ErrorType, body.Detail.Message, body.Detail.Unsupported = APIUsageError, msg, u.Features()
	out, _ := json.Marshal(body) // strings always marshal
	return append(b, out...)
}

// empty reports whether a top-level value carries nothing: null, {}, []
// or "".
func empty(raw json.RawMessage) bool {
	switch jsonx.Kind(raw) {
	case "null":
		return true
	case "object":
		ms, err := jsonx.Members(raw)
		return err == nil && len(ms) == 0
	case "array":
		var items []json.RawMessage
		return json.Unmarshal(raw, &items) == nil && len(items) == 0
	case "string":
		return string(raw) == `""`
	}
	return false
}
