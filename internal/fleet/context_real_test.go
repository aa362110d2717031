package fleet

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"system1/internal/config"
	"system1/internal/engine"
	"system1/internal/testengine"
)

// A real llama-server refuses a prompt longer than its context (here 256
// tokens a slot) with a 400 rather than cutting it: the question is
// rejected as the caller's, never answered, not tried elsewhere, and the
// node is not cooled for it.
func TestRealEngineRefusesAPromptOverItsContext(t *testing.T) {
	srv := testengine.StartWith(t, testengine.Config{Slots: 1, Ctx: 256})
	n, err := NewNode(config.Node{Name: "small", URL: srv.URL, Dialect: "llamacpp"}, func(string) string { return "" }, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	r := New([]*Node{n}, Options{})
	r.Refresh(t.Context())
	req := choiceRequest(testengine.Model, 3)
	state, _ := json.Marshal(strings.Repeat("Once upon a time, there was a little dog. ", 60)) // about 600 tokens
	req.State = state
	a := decide(t, r, req)
	f := engine.Classify(a.Err)
	if f == nil || f.Kind != engine.Rejected || f.Status != http.StatusBadRequest {
		t.Fatalf("a prompt over the context: %v (%s); want a 400 rejection", a.Err, outcomes(a))
	}
	t.Logf("llama-server: %v", f)
	if s := n.State(r.now()); !s.Healthy {
		t.Fatalf("the node cooled for the caller's prompt: %+v", s)
	}
	req.State = json.RawMessage(`"Once upon a time."`)
	if a := decide(t, r, req); a.Err != nil {
		t.Fatalf("a prompt within the context: %v", a.Err)
	}
}
