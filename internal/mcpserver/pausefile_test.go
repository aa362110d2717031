package mcpserver_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"system1/internal/fakeengine"
	"system1/internal/gateway"
)

// A state file corrupted after `toggle off` fails closed: decide abstains
// over MCP and on the command line without asking any provider, health
// says the file is unreadable and how to repair it, toggle status reports
// the corruption, and toggle on rewrites the file.
func TestCorruptStateFailsClosed(t *testing.T) {
	ep := fakeengine.StartSystemOne(t, fakeengine.Reply{})
	w := newWorld(t, chain("", so("jev", ep.URL)))
	state := filepath.Join(w.stateDir, "state.json")
	for _, tc := range []struct {
		name    string
		corrupt func()
	}{
		{"garbage", func() { mustWrite(t, state, "{\"paused\": tr\x00") }},
		{"empty", func() { mustWrite(t, state, "") }},
		{"no key", func() { mustWrite(t, state, "{}") }},
		{"null", func() { mustWrite(t, state, `{"paused":null}`) }},
		{"wrong type", func() { mustWrite(t, state, `{"paused":"no"}`) }},
		{"trailing", func() { mustWrite(t, state, `{"paused":false} {"paused":false}`) }},
		{"huge", func() { mustWrite(t, state, `{"paused":false,"pad":"`+strings.Repeat("x", 1<<20)+`"}`) }},
		{"directory", func() { mustRemove(t, state); mustMkdir(t, filepath.Join(state, "x")) }},
		{"dangling", func() { mustRemove(t, state); mustSymlink(t, filepath.Join(w.dir, "gone"), state) }},
	} {
		name, corrupt := tc.name, tc.corrupt
		t.Run(name, func(t *testing.T) {
			if _, errOut, code := w.run("toggle", "off"); code != 0 {
				t.Fatalf("toggle off: %d %s", code, errOut)
			}
			corrupt()
			s := w.start()
			res := s.decide(map[string]any{"question": "Ship it?"})
			if res.Status != gateway.Abstained || len(res.Attempts) != 0 || !strings.Contains(res.Rationale, "state file") ||
				!strings.Contains(res.Rationale, "toggle on") {
				t.Errorf("decide over a corrupt state file: %+v", res)
			}
			h := s.health()
			if h.Status != gateway.HealthPaused || !h.Paused || !strings.Contains(h.Summary, "unreadable") ||
				!strings.Contains(h.Summary, "system1 toggle on") || !strings.Contains(h.Summary, state) {
				t.Errorf("health over a corrupt state file: %+v", h)
			}
			out, _, code := w.run("decide", "--config", w.config, "--json", "Ship it?")
			var cli gateway.Response
			if err := json.Unmarshal([]byte(out), &cli); err != nil || cli.Status != gateway.Abstained || code != 3 { // 3: abstained
				t.Errorf("system1 decide over a corrupt state file: %d %s", code, out)
			}
			out, errOut, code := w.run("toggle", "status")
			if code != 1 || !strings.Contains(out+errOut, "unreadable") || !strings.Contains(out+errOut, "system1 toggle on") {
				t.Errorf("toggle status over a corrupt state file: %d %s %s", code, out, errOut)
			}
			if name == "directory" {
				if _, errOut, code := w.run("toggle", "on"); code != 1 || !strings.Contains(errOut, "not empty") {
					t.Errorf("toggle on over a folder that holds a file: %d %s", code, errOut)
				}
				mustRemove(t, filepath.Join(state, "x"))
			}
			if out, errOut, code := w.run("toggle", "on"); code != 0 || !strings.Contains(out, "ON") {
				t.Fatalf("toggle on does not repair: %d %s %s", code, out, errOut)
			}
			if res := s.decide(map[string]any{"question": "Ship it?"}); res.Status != gateway.Decided {
				t.Errorf("after the repair: %+v", res)
			}
			if ep.Calls.Load() != 1 {
				t.Errorf("the provider was asked %d times; want once, after the repair", ep.Calls.Load())
			}
			ep.Calls.Store(0)
			s.close()
		})
	}
}

func mustWrite(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustRemove(t *testing.T, path string) {
	t.Helper()
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
}

func mustMkdir(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}
