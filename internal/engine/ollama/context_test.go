package ollama

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"system1/internal/engine"
)

// A prompt longer than the context is never cut: the request says
// truncate false, and Ollama's 400 for it (recorded) is the caller's, a
// rejection that is not retried elsewhere and that names the cause.
func TestContextTooLongIsRejected(t *testing.T) {
	url, _ := fake(t, answer{status: http.StatusBadRequest, body: recorded(t, "contextlength.json")})
	_, err := (&Engine{BaseURL: url}).Read(context.Background(), "tiny", prompt("A", "B", "C"))
	f := engine.Classify(err)
	if f == nil || f.Kind != engine.Rejected || !f.ContextTooLong || f.Status != http.StatusBadRequest || !strings.Contains(f.Error(), "the input length exceeds the context length") {
		t.Fatalf("%v; want a rejection naming the context length", err)
	}
}

// truncate false is always sent; num_ctx only when the node sets it.
func TestReadSendsTruncateAndNumCtx(t *testing.T) {
	for _, numCtx := range []int{0, 8192} {
		url, got := fake(t, answer{status: 200, body: recorded(t, "chat.json")})
		if _, err := (&Engine{BaseURL: url, NumCtx: numCtx}).Read(context.Background(), "tiny", prompt("A", "B", "C")); err != nil {
			t.Fatal(err)
		}
		var sent struct {
			Truncate *bool          `json:"truncate"`
			Options  map[string]any `json:"options"`
		}
		if err := json.Unmarshal(got().body, &sent); err != nil {
			t.Fatal(err)
		}
		if sent.Truncate == nil || *sent.Truncate {
			t.Errorf("num_ctx %d: truncate %v, want false", numCtx, sent.Truncate)
		}
		ctx, ok := sent.Options["num_ctx"]
		if numCtx == 0 && ok || numCtx > 0 && ctx != float64(numCtx) {
			t.Errorf("num_ctx %d: options %v", numCtx, sent.Options)
		}
	}
}

// An Ollama that cuts a prompt anyway (one that ignores "truncate":
// false) reports exactly num_ctx prompt tokens: on a node that sets
// num_ctx such a reading is refused, not answered.
func TestReadingOverAFullContextIsRefused(t *testing.T) {
	var chat map[string]any
	if err := json.Unmarshal([]byte(recorded(t, "chat.json")), &chat); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		numCtx, promptTokens int
		refused              bool
	}{
		{2048, 2048, true},
		{2048, 2047, false},
		{0, 2048, false}, // the context is Ollama's own, unknown here
	} {
		chat["prompt_eval_count"] = tc.promptTokens
		body, _ := json.Marshal(chat)
		url, _ := fake(t, answer{status: 200, body: string(body)})
		_, err := (&Engine{BaseURL: url, NumCtx: tc.numCtx}).Read(context.Background(), "tiny", prompt("A", "B", "C"))
		f := engine.Classify(err)
		if refused := f != nil && f.Kind == engine.Rejected && f.ContextTooLong && strings.Contains(f.Error(), "whole context"); refused != tc.refused || (!tc.refused && err != nil) {
			t.Errorf("num_ctx %d, %d prompt tokens: %v; want refused %v", tc.numCtx, tc.promptTokens, err, tc.refused)
		}
	}
}
