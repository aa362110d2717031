package httpapi_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"system1/internal/fakeengine"
)

// Jev 1.14's images, which system1 does not read, are refused whole with
// hosted Jev's 400 api_usage_error, naming the feature, the box
// questions and the model, before any engine is asked, with the request
// id kept: an assets map or an images list that is not empty, a box
// question, a multipart body. The Danger-Zone headers change nothing,
// with images or without; empty assets are no images. An unknown
// top-level field is hosted Jev's 400 too.
func TestJev114Refusals(t *testing.T) {
	n := startNode(t, "n", fakeengine.LlamaCpp, fakeengine.Behavior{})
	s := serve(t, setup{nodes: []node{n}})
	const danger = "TypeSafe-Danger-Zone-Images: true"
	const asset = `{"photo-1":{"type":"image","format":"png","data_base64":"iVBORw0KGgo="}}`
	for _, tc := range []struct {
		name, body  string
		headers     []string
		unsupported []string
		inMsg       []string
	}{
		{"assets", `{"model":"fake","state":{"photo":"photo-1"},"assets":` + asset + `,"questions":{"red":{"type":"noul","instructions":"Is there a red square in photo?"}}}`,
			[]string{danger}, []string{"assets"}, []string{"`assets`", `model "fake"`}},
		{"assets without the header", `{"model":"fake","state":"photo-1","assets":` + asset + `,"questions":{"red":{"type":"noul"}}}`,
			nil, []string{"assets"}, []string{"`assets`"}},
		{"images", `{"model":"fake","state":"s","images":["iVBORw0KGgo="],"questions":{"red":{"type":"noul"}}}`,
			[]string{danger}, []string{"images"}, []string{"`images`"}},
		{"images before assets", `{"model":"fake","state":"s","images":["iVBORw0KGgo="],"assets":` + asset + `,"questions":{"red":{"type":"noul"}}}`,
			nil, []string{"assets", "images"}, []string{"`assets` and `images`"}},
		{"a box", `{"model":"fake","state":"photo-1","questions":{"red":{"type":"noul"},"where":{"type":"box","instructions":"the red square in photo"}}}`,
			[]string{danger}, []string{"box"}, []string{`the box question "where"`}},
		{"everything", `{"model":"fake","state":"photo-1","assets":` + asset + `,"questions":{"b1":{"type":"box"},"b2":{"type":"box"}}}`,
			[]string{danger}, []string{"assets", "box"}, []string{"`assets`", `the box questions "b1", "b2"`}},
		{"a multipart body", "--x\r\nContent-Disposition: form-data; name=\"request\"\r\n\r\n{}\r\n--x--\r\n",
			[]string{"Content-Type: multipart/form-data; boundary=x", danger}, []string{"multipart"}, []string{"multipart/form-data"}},
		{"a multipart body whose parameters do not parse", "--a b\r\nContent-Disposition: form-data; name=\"request\"\r\n\r\n{}\r\n--a b--\r\n",
			[]string{"Content-Type: multipart/form-data; boundary=a b"}, []string{"multipart"}, []string{"multipart/form-data"}},
	} {
		r := s.ask(t, tc.body, tc.headers...)
		var body struct {
			Detail struct {
				ErrorType   string   `json:"error_type"`
				Message     string   `json:"message"`
				Unsupported []string `json:"unsupported"`
			} `json:"detail"`
		}
		if r.status != http.StatusBadRequest || json.Unmarshal(r.body, &body) != nil || body.Detail.ErrorType != "api_usage_error" ||
			!slices.Equal(body.Detail.Unsupported, tc.unsupported) || !strings.HasPrefix(body.Detail.Message, "Images are not supported") {
			t.Errorf("%s: %s", tc.name, r)
			continue
		}
		for _, m := range tc.inMsg {
			if !strings.Contains(body.Detail.Message, m) {
				t.Errorf("%s: the message does not name %s: %s", tc.name, m, body.Detail.Message)
			}
		}
	}
	if got := len(n.fake.Inferences()); got != 0 {
		t.Fatalf("the engine was asked %d times for requests with images", got)
	}

	// What hosted Jev refuses besides: an unknown top-level field.
	wantError(t, s.ask(t, `{"model":"fake","state":"s","questions":{"q":{"type":"noul"}},"temperature":0,"stream":true}`),
		http.StatusBadRequest, "api_usage_error", `"temperature", "stream"`)
	// A state and its old name, document, both sent: one would be dropped
	// in silence, so document is a field the request does not take.
	wantError(t, s.ask(t, `{"model":"fake","state":"s","document":"d","questions":{"q":{"type":"noul"}}}`),
		http.StatusBadRequest, "api_usage_error", `"document"`)

	// The headers alone, empty assets, unknown fields inside a question
	// and the legacy "document" change nothing: answered.
	for _, body := range []string{
		`{"model":"fake","state":"s","questions":{"q":{"type":"noul"}}}`,
		`{"model":"fake","state":"s","assets":{},"images":[],"questions":{"q":{"type":"noul"}}}`,
		`{"model":"fake","state":"s","questions":{"q":{"type":"noul","passingAnswer":true}}}`,
		`{"model":"fake","document":"s","questions":{"q":{"type":"noul"}}}`,
	} {
		if r := s.ask(t, body, danger, "TypeSafe-Danger-Zone-Long-Context: true"); r.status != http.StatusOK {
			t.Errorf("%s: %s", body, r)
		}
	}
}
