package mcpserver_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"system1/internal/fakeengine"
	"system1/internal/gateway"
	"system1/internal/mcpserver"
	"system1/internal/outcomes"
)

// feedback calls system1_feedback and decodes the result.
func (s *server) feedback(args any) (*outcomes.FeedbackResult, bool) {
	s.t.Helper()
	data, isErr := s.call(mcpserver.ToolFeedback, args)
	var res outcomes.FeedbackResult
	if err := json.Unmarshal(data, &res); err != nil {
		s.t.Fatal(err)
	}
	return &res, isErr
}

// futureID is in the shape of system1's request ids, made in the year
// 10889: feedback on it is refused at once, not after a wait for a
// replica's writer (which would never end).
const futureID = "req_ffffffffffffffffffffffffffffffff"

// An agent decides, then reports the outcome over MCP and, from a shell,
// with system1 feedback: both land in the decision log the mcp server
// opened in the plugin's data folder, matched to the decision.
func TestFeedbackOverMCPAndCLI(t *testing.T) {
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Behavior: fakeengine.Behavior{Logprobs: fakeengine.Probs(0.7, 0.2, 0.1)}})
	t.Cleanup(f.Close)
	yaml := fmt.Sprintf("gateway:\n  threshold: 0\n  chain:\n    - {name: local, model: %s}\nnodes:\n  - {name: n, url: %s, dialect: llamacpp, models: [%s]}\n",
		fakeengine.DefaultModel, f.URL, fakeengine.DefaultModel)
	w := newWorld(t, yaml)
	s := w.start()
	res := s.decide(map[string]any{"question": "Which team?", "options": []string{"billing", "technical", "sales"}, "request_id": "mcp-1"})
	if res.Status != gateway.Decided {
		t.Fatalf("decide: %+v", res)
	}
	yn := s.decide(map[string]any{"question": "Urgent?", "request_id": "mcp-yn"})
	if yn.Status == gateway.Failed {
		t.Fatalf("decide yes/no: %+v", yn)
	}
	got, isErr := s.feedback(map[string]any{"request_id": "mcp-1", "outcome": "technical"})
	if isErr || got.Error != nil || len(got.Recorded) != 1 || got.Recorded[0].Outcome != "technical" || got.Recorded[0].Question != "decision" {
		t.Fatalf("feedback: %+v", got)
	}
	got, isErr = s.feedback(map[string]any{"request_id": "mcp-yn", "outcome": true})
	if isErr || got.Error != nil || got.Recorded[0].Outcome != "true" {
		t.Fatalf("feedback yes/no: %+v", got)
	}
	for _, c := range []struct {
		args        map[string]any
		code, param string
	}{
		{map[string]any{"request_id": "nope", "outcome": "billing"}, outcomes.FeedbackUnknownRequest, "request_id"},
		// An id in system1's shape but from the future: no replica made
		// it, so there is nothing to wait for.
		{map[string]any{"request_id": futureID, "outcome": "billing"}, outcomes.FeedbackUnknownRequest, "request_id"},
		{map[string]any{"request_id": "mcp-1", "outcome": "marketing"}, outcomes.FeedbackInvalid, "outcome"},
		{map[string]any{"request_id": "mcp-1", "question": "other", "outcome": "billing"}, outcomes.FeedbackInvalid, "question"},
	} {
		got, isErr := s.feedback(c.args)
		if !isErr || got.Error == nil || got.Error.Code != c.code || got.Error.Param != c.param || len(got.Recorded) != 0 {
			t.Errorf("%v: isError %v, %+v", c.args, isErr, got.Error)
		}
	}

	// The CLI, while the server still runs, on the same file.
	out, stderr, code := w.run("feedback", "--config", w.config, "mcp-1", "sales")
	if code != 0 || !strings.Contains(out, `"outcomes": 2`) {
		t.Fatalf("system1 feedback: exit %d\n%s\n%s", code, out, stderr)
	}
	s.close()
	for _, c := range []struct {
		args []string
		exit int
	}{
		{[]string{"nope", "sales"}, 5},
		{[]string{futureID, "sales"}, 5},
		{[]string{"mcp-1", "marketing"}, 4},
		{[]string{"--question", "x", "mcp-1", "sales"}, 4},
		{[]string{"only-one-arg"}, 2},
	} {
		out, stderr, code := w.run(append([]string{"feedback", "--config", w.config}, c.args...)...)
		if code != c.exit {
			t.Errorf("system1 feedback %v: exit %d; want %d\n%s\n%s", c.args, code, c.exit, out, stderr)
		}
	}
	body := filepath.Join(w.dir, "batch.json")
	if err := os.WriteFile(body, []byte(`{"outcomes":[{"request_id":"mcp-1","outcome":"billing"},{"request_id":"mcp-yn","outcome":"no"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, code = w.run("feedback", "--config", w.config, "--file", body)
	if code != 0 || !strings.Contains(out, `"outcomes": 3`) || !strings.Contains(out, `"outcome": "false"`) {
		t.Fatalf("system1 feedback --file: exit %d\n%s\n%s", code, out, stderr)
	}
	if _, err := os.Stat(filepath.Join(w.stateDir, "decisions.db")); err != nil {
		t.Errorf("the log is not in the plugin's data folder: %v", err)
	}
}
