package mcpserver_test

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"system1/internal/fakeengine"
	"system1/internal/gateway"
	"system1/internal/outcomes"
)

// Claude Code gives an MCP server 30 s to start. A decision log on a
// PostgreSQL server that takes the connection and never answers (a
// server stuck, or packets dropped) must not hold initialize that long:
// the server answers within its bound on opening the log, with the log
// off for the session (feedback says log_off).
func TestStartsInTimeWhenTheDecisionLogHangs(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // taken, never answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	ep := fakeengine.StartSystemOne(t, fakeengine.Reply{})
	yaml := chain("", so("jev", ep.URL)) + fmt.Sprintf("decision_log: {url: \"postgres://u:p@%s/db?sslmode=disable\"}\n", ln.Addr())
	w := newWorld(t, yaml)
	start := time.Now()
	s := w.start()
	took := time.Since(start)
	// Under 30 s with room for the launcher's own wait for a build.
	if took > 20*time.Second {
		t.Errorf("initialize answered after %v; Claude Code gives a server 30 s to start\n%s", took.Round(100*time.Millisecond), s.stderr)
	}
	got, isErr := s.feedback(map[string]any{"request_id": "r", "outcome": "yes"})
	if !isErr || got.Error == nil || got.Error.Code != outcomes.FeedbackLogOff {
		t.Errorf("feedback with the log unavailable: isError %v, %+v", isErr, got.Error)
	}
}

// The server's instructions, which Claude Code gives the model with the
// tools, say what the result itself says: a decision graded ask or
// escalate is not acted on as it is, where they said to act on every
// decided result.
func TestInstructionsFollowTheGrade(t *testing.T) {
	near := fakeengine.StartSystemOne(t, fakeengine.Reply{Probs: []float64{0.45, 0.44, 0.11}})
	s := newWorld(t, chain("", so("jev", near.URL))).start()
	res := s.decide(map[string]any{"question": "Which?", "options": []string{"a", "b", "c"}, "min_confidence": 0.4})
	if res.Status != gateway.Decided || res.Grade != gateway.GradeAsk || !strings.Contains(res.Rationale, "Ask the user before acting on it") {
		t.Fatalf("response %+v", res)
	}
	in := s.cs.InitializeResult().Instructions
	for _, want := range []string{`"grade"`, `"act"`, `"ask"`, `"escalate"`} {
		if !strings.Contains(in, want) {
			t.Errorf("the instructions do not name %s, so a decision graded %s reads as one to act on: %q", want, res.Grade, in)
		}
	}
}
