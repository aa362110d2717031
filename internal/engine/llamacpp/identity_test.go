package llamacpp

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"system1/internal/decision"
	"system1/internal/engine"
	"system1/internal/fakeengine"
	"system1/internal/fingerprint"
)

// serve answers /props and /v1/models with the bodies given, 404 to the
// rest.
func serve(t *testing.T, props, models string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/props":
			_, _ = w.Write([]byte(props))
		case "/v1/models":
			_, _ = w.Write([]byte(models))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func recorded(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The identity of the recorded llama-server replies: every field the
// server reports of the model and its own build, nothing of its settings.
func TestIdentityFromRecordedReplies(t *testing.T) {
	props, models := recorded(t, "props.json"), recorded(t, "models.json")
	want := map[string]string{
		"bos_token":            "<s>",
		"build_info":           "b1-80fb11a",
		"chat_template_sha256": fingerprint.TextHash("{%- for message in messages -%}\n  {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' -}}\n{%- endfor -%}\n{%- if add_generation_prompt -%}\n  {{- '<|im_start|>assistant\n' -}}\n{%- endif -%}"),
		"eos_token":            "</s>",
		"meta.ftype":           "(guessed) all F32",
		"meta.n_ctx_train":     "2048",
		"meta.n_embd":          "64",
		"meta.n_params":        "292800",
		"meta.n_vocab":         "512",
		"meta.size":            "1171200",
		"meta.vocab_type":      "true",
		"model_ftype":          "(guessed) all F32",
		"model_path":           "/work/shared/models/stories260K.gguf",
	}
	for _, tc := range []struct {
		name, props, models, model string
	}{
		{"as recorded", props, models, "tiny"},
		{"any name: one server serves one model", props, models, "whatever"},
		// The server's settings and clock are not the model's identity.
		{"another context and time", strings.Replace(props, `"n_ctx":2048`, `"n_ctx":512`, 1),
			strings.NewReplacer(`"n_ctx":2048,`, `"n_ctx":8192,`, `"created":1796187424`, `"created":1796199999`).Replace(models), "tiny"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &Engine{BaseURL: serve(t, tc.props, tc.models)}
			id, err := e.Identity(context.Background(), tc.model)
			if err != nil {
				t.Fatal(err)
			}
			if id.Source != identitySource || len(id.Fields) != len(want) {
				t.Fatalf("identity %v, want %v", id, want)
			}
			for k, v := range want {
				if id.Fields[k] != v {
					t.Errorf("%s = %q, want %q", k, id.Fields[k], v)
				}
			}
		})
	}
}

func TestIdentityFailures(t *testing.T) {
	two := `{"data":[{"id":"a","meta":{}},{"id":"b","meta":{}}]}`
	huge := `{"chat_template":"` + strings.Repeat("x", fingerprint.MaxReply) + `"}`
	for _, tc := range []struct {
		name          string
		props, models string
		kind          engine.FailureKind
	}{
		{"no /props", "", recorded(t, "models.json"), engine.Unavailable},
		{"a model not served", recorded(t, "props.json"), two, engine.Unavailable},
		{"not JSON", "<html>", recorded(t, "models.json"), engine.Malformed},
		{"a reply too large", huge, recorded(t, "models.json"), engine.Malformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := serve(t, tc.props, tc.models)
			if tc.props == "" {
				srv := httptest.NewServer(http.NotFoundHandler())
				t.Cleanup(srv.Close)
				url = srv.URL
			}
			e := &Engine{BaseURL: url}
			_, err := e.Identity(context.Background(), "c")
			var f *engine.Failure
			if !errors.As(err, &f) || f.Kind != tc.kind {
				t.Fatalf("err %v, want a %s failure", err, tc.kind)
			}
		})
	}
}

// A server that now serves another model may tokenize otherwise: the
// identity read that sees the change drops the label token ids learnt,
// and the next question asks the tokenizer again; reads of an unchanged
// identity keep them.
func TestIdentityChangeForgetsTheTokenizer(t *testing.T) {
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Build: "one", Slots: 2})
	defer f.Close()
	e := &Engine{BaseURL: f.URL}
	ctx := context.Background()
	tokenized := func() int {
		n := 0
		for _, r := range f.Requests() {
			if r.Path == "/tokenize" {
				n++
			}
		}
		f.Reset()
		return n
	}
	labels := func() {
		t.Helper()
		if _, err := e.Labels(ctx, fakeengine.DefaultModel, []string{"A", "B"}, 2); err != nil {
			t.Fatal(err)
		}
	}
	identity := func() {
		t.Helper()
		if _, err := e.Identity(ctx, fakeengine.DefaultModel); err != nil {
			t.Fatal(err)
		}
	}
	identity()
	labels()
	if n := tokenized(); n == 0 {
		t.Fatal("the first labels asked the tokenizer nothing")
	}
	identity()
	labels()
	if n := tokenized(); n != 0 {
		t.Fatalf("the same build: %d tokenizer calls, want 0", n)
	}
	f.SetBuild("two")
	identity()
	labels()
	if n := tokenized(); n == 0 {
		t.Fatal("another build: the labels were not checked with its tokenizer again")
	}
}

// A read whose labels were checked before an identity read found the
// server swapped its model (a probe between a question's labels and its
// read) asks the new model's tokenizer at once and answers, where it
// failed, which the fleet took as the node down and cooled it.
func TestReadAfterASwapLearnsTheLabelsAgain(t *testing.T) {
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Build: "one", Slots: 2})
	defer f.Close()
	e := &Engine{BaseURL: f.URL}
	ctx := t.Context()
	if _, err := e.Identity(ctx, fakeengine.DefaultModel); err != nil {
		t.Fatal(err)
	}
	q := decision.Question{ID: "q", Kind: decision.Choice, Options: []decision.Option{{Key: "a", Name: "a"}, {Key: "b", Name: "b"}}}
	labels, err := e.Labels(ctx, fakeengine.DefaultModel, engine.Candidates(q), 2)
	if err != nil {
		t.Fatal(err)
	}
	f.SetBuild("two")
	if _, err := e.Identity(ctx, fakeengine.DefaultModel); err != nil {
		t.Fatal(err)
	}
	f.Reset()
	r, err := e.Read(ctx, fakeengine.DefaultModel, engine.Layout([]byte(`"s"`), q, labels))
	if err != nil {
		t.Fatalf("a read after the swap: %v (the fleet reads it as %s)", err, engine.Classify(err).Kind)
	}
	if len(r.Logprobs) != 2 {
		t.Fatalf("reading %+v, want two labels", r)
	}
	n := 0
	for _, r := range f.Requests() {
		if r.Path == "/tokenize" {
			n++
		}
	}
	if n == 0 {
		t.Fatal("the labels were not checked with the new model's tokenizer")
	}
}
