// Package ollama_test drives system1's HTTP face over a live Ollama (built
// by scripts/ollama.sh, serving the shared tiny model): what a long
// prompt, a missing model, an uninformative reading and a name without a
// tag do on the real engine, not on a replay.
package ollama_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"system1/internal/answer"
	"system1/internal/config"
	"system1/internal/fleet"
	"system1/internal/httpapi"
	"system1/internal/testengine"
)

// policy is the router's default with a cooldown longer than any test, so
// that whatever a test cooled stays cooled while it looks.
var policy = fleet.Policy{AllowedFails: fleet.DefaultPolicy.AllowedFails, Window: time.Hour, Cooldown: time.Hour}

// server is system1's HTTP face over one Ollama node.
type server struct {
	URL    string
	router *fleet.Router
}

func serve(t *testing.T, node config.Node) *server {
	t.Helper()
	if problems := (&config.Config{Nodes: []config.Node{node}}).Check(); len(problems) > 0 {
		t.Fatalf("node config: %v", problems)
	}
	n, err := fleet.NewNode(node, func(string) string { return "" }, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	r := fleet.New([]*fleet.Node{n}, fleet.Options{Policy: policy})
	r.Refresh(t.Context())
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Answer: answer.New(answer.Options{Router: r}), Rounding: 2, Version: "test"}))
	t.Cleanup(srv.Close)
	return &server{URL: srv.URL, router: r}
}

func ollamaNode(o *testengine.Ollama, edit func(*config.Node)) config.Node {
	c := config.Node{Name: "ollama", URL: o.URL, Dialect: "ollama", Timeout: config.Duration(2 * time.Minute)}
	if edit != nil {
		edit(&c)
	}
	return c
}

type reply struct {
	status int
	body   string
}

func (s *server) ask(t *testing.T, model, state string, questions string) reply {
	t.Helper()
	st, _ := json.Marshal(state)
	body := fmt.Sprintf(`{"model":%q,"state":%s,"questions":%s}`, model, st, questions)
	resp, err := http.Post(s.URL+"/v1/systemone", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, string(b)}
}

// health is the node as GET /health shows it.
type health struct {
	Healthy        bool     `json:"healthy"`
	Models         []string `json:"models"`
	ModelCooldowns []struct {
		Model string `json:"model"`
	} `json:"model_cooldowns"`
}

func (s *server) node(t *testing.T) health {
	t.Helper()
	resp, err := http.Get(s.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h struct{ Nodes []health }
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || len(h.Nodes) != 1 {
		t.Fatalf("health: %v %+v", err, h)
	}
	return h.Nodes[0]
}

// tagged is the tiny model's full name, as the node lists it.
const tagged = testengine.OllamaModel + ":latest"

const animal = `{"animal":{"type":"choice","instructions":"Which animal is in the story?","criteria":{"dog":null,"cat":null,"bird":"a small bird"}}}`

// story is a state of about words words.
func story(words int) string {
	return strings.Repeat("Once upon a time, there was a little dog. ", words/9+1)
}

// A state longer than the context is refused as the caller's (422 naming
// the context length), never answered over a cut prompt: Ollama's default
// would drop the start of the prompt and answer 200.
func TestLiveOllamaNeverAnswersOverATruncatedPrompt(t *testing.T) {
	o := testengine.StartOllama(t)
	s := serve(t, ollamaNode(o, nil))
	long := story(4000) // about 4,900 tokens of the tiny model's
	r := s.ask(t, tagged, long, animal)
	if r.status != http.StatusUnprocessableEntity || !strings.Contains(r.body, "the input length exceeds the context length") {
		t.Fatalf("a state over the context: %d %.400s; want 422 naming the context length", r.status, r.body)
	}
	if logged(t, o, "truncating input prompt") {
		t.Fatal("Ollama truncated a prompt")
	}
	if h := s.node(t); !h.Healthy || len(h.ModelCooldowns) > 0 {
		t.Fatalf("a prompt too long is the caller's, not the node's: %+v", h)
	}
}

// A node's num_ctx is sent: a state that fits the model's own 2048 tokens
// is answered, and refused (never cut) at num_ctx 256.
func TestLiveOllamaNumCtx(t *testing.T) {
	o := testengine.StartOllama(t)
	s := serve(t, ollamaNode(o, nil))
	medium := story(300) // about 370 tokens
	if r := s.ask(t, tagged, medium, animal); r.status != http.StatusOK {
		t.Fatalf("a state within the model's context: %d %.400s", r.status, r.body)
	}
	small := serve(t, ollamaNode(o, func(c *config.Node) { c.NumCtx = 256 }))
	if r := small.ask(t, tagged, medium, animal); r.status != http.StatusUnprocessableEntity || !strings.Contains(r.body, "exceeds the context length") {
		t.Fatalf("the same state at num_ctx 256: %d %.400s; want 422", r.status, r.body)
	}
	if logged(t, o, "truncating input prompt") {
		t.Fatal("Ollama truncated a prompt")
	}
}

// With models [stories, ghost] and ghost not pulled, a request for ghost
// fails (503, Ollama's 404 named) and cools ghost on the node, not the
// node: requests for stories keep their 200 however often ghost is asked.
func TestLiveOllamaMissingModelCoolsOnlyThatModel(t *testing.T) {
	o := testengine.StartOllama(t)
	s := serve(t, ollamaNode(o, func(c *config.Node) { c.Models = []string{testengine.OllamaModel, "ghost"} }))
	for i := range 3 {
		r := s.ask(t, "ghost", "Once upon a time.", animal)
		if r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, "ghost") {
			t.Fatalf("ghost, try %d: %d %.400s; want 503", i+1, r.status, r.body)
		}
		if i == 0 && !strings.Contains(r.body, "404") {
			t.Fatalf("ghost: %.400s; want Ollama's 404 named", r.body)
		}
		if r := s.ask(t, testengine.OllamaModel, "Once upon a time.", animal); r.status != http.StatusOK {
			t.Fatalf("stories after %d requests for ghost: %d %.400s", i+1, r.status, r.body)
		}
	}
	h := s.node(t)
	if !h.Healthy || len(h.ModelCooldowns) != 1 || h.ModelCooldowns[0].Model != "ghost" {
		t.Fatalf("node %+v; want it healthy with ghost cooling on it", h)
	}
}

// The tiny story model never ranks a digit among its top 20 after
// system1's prompt, so a score question (levels labelled 0, 1, 2) gets no
// number: the question is refused (a 422, not a 503 to retry: a repeat
// reads the same) naming the labels the model never ranked. That is the
// model's limit, not the node's fault: three such questions in a row do
// not cool the node, and an unrelated question still answers.
func TestLiveOllamaUnrankedLabelsDoNotCoolTheNode(t *testing.T) {
	o := testengine.StartOllama(t)
	s := serve(t, ollamaNode(o, nil))
	const mood = `{"mood":{"type":"score","instructions":"How happy is the dog?","criteria":["sad","fine","happy"]}}`
	for i := range fleet.DefaultPolicy.AllowedFails {
		r := s.ask(t, tagged, "Once upon a time, there was a little dog.", mood)
		if r.status != http.StatusUnprocessableEntity || !strings.Contains(r.body, "questions.mood: system1 will not stand behind this answer") ||
			!strings.Contains(r.body, `ranked none of the labels \"0\" (\"0\"), \"1\" (\"1\"), \"2\" (\"2\")`) {
			t.Fatalf("score, try %d: %d %.600s; want a 422 refusal naming the unranked labels", i+1, r.status, r.body)
		}
		if h := s.node(t); !h.Healthy {
			t.Fatalf("after %d unranked readings the node cooled: %+v", i+1, h)
		}
	}
	if r := s.ask(t, tagged, "Once upon a time, there was a little dog.", animal); r.status != http.StatusOK {
		t.Fatalf("an unrelated question: %d %.400s", r.status, r.body)
	}
}

// Without models in the config the node lists stories:latest, and a
// request for stories (as Ollama itself accepts it) is answered, as is
// one for the full name.
func TestLiveOllamaImplicitLatest(t *testing.T) {
	o := testengine.StartOllama(t)
	s := serve(t, ollamaNode(o, nil))
	if got := s.node(t).Models; len(got) != 1 || got[0] != testengine.OllamaModel+":latest" {
		t.Fatalf("the node lists %q", got)
	}
	for _, model := range []string{testengine.OllamaModel, testengine.OllamaModel + ":latest"} {
		if r := s.ask(t, model, "Once upon a time, there was a little dog.", animal); r.status != http.StatusOK {
			t.Errorf("%s: %d %.400s", model, r.status, r.body)
		}
	}
	// Another tag is a model no node serves: hosted Jev's 400 "Unknown
	// model", before any engine is asked.
	if r := s.ask(t, testengine.OllamaModel+":q4", "Once upon a time.", animal); r.status != http.StatusBadRequest || !strings.Contains(r.body, "Unknown model: "+testengine.OllamaModel+":q4") {
		t.Errorf("another tag: %d %.400s; want 400 Unknown model", r.status, r.body)
	}
}

// logged reports whether the server's log holds s.
func logged(t testing.TB, o *testengine.Ollama, s string) bool {
	t.Helper()
	log, err := os.ReadFile(o.Log)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Contains(log, []byte(s))
}
