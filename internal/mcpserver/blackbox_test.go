package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"system1/internal/fakeengine"
	"system1/internal/gateway"
	"system1/internal/mcpserver"
	"system1/internal/testbin"
	"system1/internal/testengine"
)

// The server answers initialize and lists its tools (Tools) without
// contacting any provider; the decide tool's input schema leaves the
// checks to the handler; every output schema uses plain arrays. When the
// client closes stdin the server exits with status 0, and every log line
// on stderr carries a request id.
func TestStartupContactsNoProvider(t *testing.T) {
	ep := fakeengine.StartSystemOne(t, fakeengine.Reply{})
	w := newWorld(t, chain("", so("jev", ep.URL)))
	s := w.start()
	tools := s.listTools()
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name)
	}
	if !slices.Equal(sorted(names), sorted(mcpserver.Tools)) {
		t.Fatalf("tools %v; want %v", names, mcpserver.Tools)
	}
	if ep.Calls.Load() != 0 || ep.Probes.Load() != 0 {
		t.Errorf("the provider was contacted before any tool call: %d calls, %d probes", ep.Calls.Load(), ep.Probes.Load())
	}
	for _, tool := range tools {
		b, _ := json.Marshal(tool.OutputSchema)
		if regexp.MustCompile(`"type":\[[^\]]*"array"`).Match(b) {
			t.Errorf("%s: an array type is a union: %s", tool.Name, b)
		}
		if tool.Description == "" {
			t.Errorf("%s has no description", tool.Name)
		}
	}
	in, _ := json.Marshal(s.tools[mcpserver.ToolDecide].InputSchema)
	if strings.Contains(string(in), "additionalProperties") || strings.Contains(string(in), `"required"`) {
		t.Errorf("the decide tool's input schema lets the SDK refuse requests itself: %s", in)
	}
	res := s.decide(map[string]any{"question": "Ship it?"})
	if res.Status != gateway.Decided {
		t.Fatalf("first call: %+v", res)
	}
	s.close()
	if code := s.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit status %d after stdin closed; want 0\n%s", code, s.stderr)
	}
	lines := strings.Split(strings.TrimSpace(s.stderr.String()), "\n")
	for _, l := range lines {
		if !strings.Contains(l, "request_id=") {
			t.Errorf("log line without a request id: %s", l)
		}
	}
	if !strings.Contains(s.stderr.String(), "request_id="+res.RequestID) {
		t.Errorf("no log line for request %s:\n%s", res.RequestID, s.stderr)
	}
}

func sorted(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// A decision among options: one of the options, its probability as the
// confidence, the probabilities in option order, the provider and its
// attempt; request_id echoed; no calibration without a fit.
func TestDecided(t *testing.T) {
	ep := fakeengine.StartSystemOne(t, fakeengine.Reply{Probs: []float64{0.1, 0.85, 0.05}})
	w := newWorld(t, chain("", so("jev", ep.URL)))
	s := w.start()
	res := s.decide(map[string]any{"question": "Which queue?", "options": []string{"billing", "support", "sales"},
		"context": map[string]any{"ticket": "I cannot log in"}, "request_id": "my-id-1"})
	if res.Status != gateway.Decided || str(res.Decision) != "support" || *res.Confidence != 0.85 || str(res.Provider) != "jev" ||
		res.Calibrated || res.RequestID != "my-id-1" || *res.Threshold != 0.6 || attempted(res) != "jev:ok" {
		t.Fatalf("response %+v", res)
	}
	var order []string
	for _, p := range res.Probabilities {
		order = append(order, p.Option)
	}
	if !slices.Equal(order, []string{"billing", "support", "sales"}) {
		t.Errorf("probabilities in order %v", order)
	}
	// The context went to the provider as the state, the question as the
	// instructions, the options as the choice's criteria.
	var sent struct {
		State     map[string]any `json:"state"`
		Questions map[string]struct {
			Type         string         `json:"type"`
			Instructions string         `json:"instructions"`
			Criteria     map[string]any `json:"criteria"`
		} `json:"questions"`
	}
	if err := json.Unmarshal([]byte(ep.LastRequest()), &sent); err != nil {
		t.Fatal(err)
	}
	q := sent.Questions["decision"]
	if sent.State["ticket"] != "I cannot log in" || q.Type != "choice" || q.Instructions != "Which queue?" || len(q.Criteria) != 3 {
		t.Errorf("sent %s", ep.LastRequest())
	}
}

// Without options the question is a noul, answered yes or no.
func TestYesNo(t *testing.T) {
	ep := fakeengine.StartSystemOne(t, fakeengine.Reply{Probs: []float64{0.2}})
	s := newWorld(t, chain("", so("jev", ep.URL))).start()
	res := s.decide(map[string]any{"question": "Is the build green?"})
	if res.Status != gateway.Decided || str(res.Decision) != "no" || *res.Confidence != 0.8 {
		t.Fatalf("response %+v", res)
	}
	if p, _ := res.Probabilities.Get("yes"); p != 0.2 {
		t.Errorf("probabilities %v", res.Probabilities)
	}
	if !strings.Contains(ep.LastRequest(), `"type":"noul"`) {
		t.Errorf("sent %s", ep.LastRequest())
	}
}

// A confidence under the threshold abstains: no decision, the best guess's
// probability, a rationale telling the agent to reason it through, and no
// fallback. A request's min_confidence overrides the threshold either way.
func TestAbstainsUnderThreshold(t *testing.T) {
	unsure := fakeengine.StartSystemOne(t, fakeengine.Reply{Probs: []float64{0.5, 0.3, 0.2}})
	backup := fakeengine.StartSystemOne(t, fakeengine.Reply{})
	s := newWorld(t, chain("", so("jev", unsure.URL), so("laya", backup.URL))).start()
	args := map[string]any{"question": "Which?", "options": []string{"a", "b", "c"}}
	res := s.decide(args)
	if res.Status != gateway.Abstained || res.Decision != nil || *res.Confidence != 0.5 || attempted(res) != "jev:ok" ||
		!strings.Contains(res.Rationale, "Reason this through yourself") || !strings.Contains(res.Rationale, "under the threshold 0.6") {
		t.Fatalf("response %+v", res)
	}
	if backup.Calls.Load() != 0 {
		t.Error("an abstention fell back to the next provider")
	}
	args["min_confidence"] = 0.4
	if res := s.decide(args); res.Status != gateway.Decided || str(res.Decision) != "a" || *res.Threshold != 0.4 {
		t.Errorf("min_confidence 0.4: %+v", res)
	}
	args["min_confidence"] = 0.99
	sure := fakeengine.StartSystemOne(t, fakeengine.Reply{Probs: []float64{0.9, 0.05, 0.05}})
	s = newWorld(t, chain("", so("jev", sure.URL))).start()
	if res := s.decide(args); res.Status != gateway.Abstained {
		t.Errorf("min_confidence 0.99 over 0.9: %+v", res)
	}
}

// A provider that abstains by itself (laya-serve's gate) makes the call
// abstain, with its reason, and does not fall back.
func TestProviderAbstains(t *testing.T) {
	laya := fakeengine.StartSystemOne(t, fakeengine.Reply{Probs: []float64{0.7, 0.3}, Abstain: true})
	backup := fakeengine.StartSystemOne(t, fakeengine.Reply{})
	s := newWorld(t, chain("", so("laya", laya.URL), so("jev", backup.URL))).start()
	res := s.decide(map[string]any{"question": "Which?", "options": []string{"a", "b"}})
	if res.Status != gateway.Abstained || res.Decision != nil || attempted(res) != "laya:abstained" ||
		!strings.Contains(res.Rationale, "declined to decide") || backup.Calls.Load() != 0 {
		t.Fatalf("response %+v (backup calls %d)", res, backup.Calls.Load())
	}
}

// A provider that does not answer in time is recorded as a timeout and
// the next one decides.
func TestFallbackOnTimeout(t *testing.T) {
	slow := fakeengine.StartSystemOne(t, fakeengine.Reply{Fault: fakeengine.Hang})
	ok := fakeengine.StartSystemOne(t, fakeengine.Reply{})
	s := newWorld(t, chain("", so("local", slow.URL, "timeout: 300ms"), so("jev", ok.URL))).start()
	res := s.decide(map[string]any{"question": "Which?", "options": []string{"a", "b"}})
	if res.Status != gateway.Decided || str(res.Provider) != "jev" || attempted(res) != "local:timeout jev:ok" ||
		!strings.Contains(res.Attempts[0].Detail, "no answer within 300ms") {
		t.Fatalf("response %+v", res)
	}
}

// A provider that fails (a 5xx, a refused connection) is recorded as an
// error and the next one decides.
func TestFallbackOnError(t *testing.T) {
	broken := fakeengine.StartSystemOne(t, fakeengine.Reply{Status: 503, Message: "overloaded"})
	ok := fakeengine.StartSystemOne(t, fakeengine.Reply{})
	s := newWorld(t, chain("", so("local", fakeengine.Down(t)), so("laya", broken.URL), so("jev", ok.URL))).start()
	res := s.decide(map[string]any{"question": "Which?", "options": []string{"a", "b"}})
	if res.Status != gateway.Decided || str(res.Provider) != "jev" || attempted(res) != "local:error laya:error jev:ok" ||
		!strings.Contains(res.Attempts[1].Detail, "(HTTP 503): overloaded") {
		t.Fatalf("response %+v", res)
	}
}

// Answers that fail the checks (the System One client's) are malformed and fall back: a
// body that is not an object, a confidence outside [0,1], a probability
// that is not a finite number, a decision that is not an option.
func TestFallbackOnMalformed(t *testing.T) {
	cases := map[string]string{
		"not an object":          `["billing"]`,
		"confidence over 1":      `{"model":"m","answers":{"decision":{"type":"choice","choice":"a","confidence":1.5,"probabilities":{"a":0.9,"b":0.1}}},"usage":{"input_tokens":1,"output_tokens":1}}`,
		"probability not finite": `{"model":"m","answers":{"decision":{"type":"choice","choice":"a","confidence":0.8,"probabilities":{"a":1e999,"b":0.1}}},"usage":{"input_tokens":1,"output_tokens":1}}`,
		"decision not an option": `{"model":"m","answers":{"decision":{"type":"choice","choice":"purple","confidence":0.8,"probabilities":{"a":0.9,"b":0.1}}},"usage":{"input_tokens":1,"output_tokens":1}}`,
		"noul out of range":      `{"model":"m","answers":{"decision":{"type":"noul","noul":-0.2}},"usage":{"input_tokens":1,"output_tokens":1}}`,
	}
	ok := fakeengine.StartSystemOne(t, fakeengine.Reply{})
	for name, raw := range cases {
		t.Run(name, func(t *testing.T) {
			bad := fakeengine.StartSystemOne(t, fakeengine.Reply{Raw: raw})
			s := newWorld(t, chain("", so("local", bad.URL), so("jev", ok.URL))).start()
			args := map[string]any{"question": "Which?", "options": []string{"a", "b"}}
			if strings.Contains(raw, "noul") {
				args = map[string]any{"question": "Is it?"}
			}
			res := s.decide(args)
			if res.Status != gateway.Decided || str(res.Provider) != "jev" || attempted(res) != "local:malformed jev:ok" {
				t.Fatalf("response %+v", res)
			}
		})
	}
	// Every provider malformed: the error says so.
	bad := fakeengine.StartSystemOne(t, fakeengine.Reply{Raw: `not json`})
	s := newWorld(t, chain("", so("local", bad.URL))).start()
	res := s.decide(map[string]any{"question": "Is it?"})
	if res.Status != gateway.Failed || res.Error.Code != gateway.CodeMalformed {
		t.Fatalf("response %+v", res)
	}
}

// A provider's 400 or 422 is the caller's error: surfaced with the
// provider's own message as invalid_request, and not sent to any other
// provider.
func TestCallerErrorIsNotRetried(t *testing.T) {
	for _, status := range []int{400, 422} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			picky := fakeengine.StartSystemOne(t, fakeengine.Reply{Status: status, Message: "options over the head budget of 256 tokens"})
			backup := fakeengine.StartSystemOne(t, fakeengine.Reply{})
			s := newWorld(t, chain("", so("laya", picky.URL), so("jev", backup.URL))).start()
			res := s.decide(map[string]any{"question": "Which?", "options": []string{"a", "b"}})
			if res.Status != gateway.Failed || res.Error.Code != gateway.CodeInvalidRequest ||
				!strings.Contains(res.Error.Message, "options over the head budget of 256 tokens") || attempted(res) != "laya:error" {
				t.Fatalf("response %+v", res)
			}
			if backup.Calls.Load() != 0 || picky.Calls.Load() != 1 {
				t.Errorf("calls: laya %d, jev %d; want 1 and 0", picky.Calls.Load(), backup.Calls.Load())
			}
		})
	}
}

// When every provider fails there is no decision and no number: status
// error, probabilities and confidence absent, every attempt recorded; the
// code is the last failure's.
func TestAllProvidersFail(t *testing.T) {
	broken := fakeengine.StartSystemOne(t, fakeengine.Reply{Status: 500, Message: "inference failed"})
	s := newWorld(t, chain("", so("local", fakeengine.Down(t)), so("jev", broken.URL))).start()
	res := s.decide(map[string]any{"question": "Which?", "options": []string{"a", "b"}})
	if res.Status != gateway.Failed || res.Error.Code != gateway.CodeProviderError || attempted(res) != "local:error jev:error" ||
		res.Probabilities != nil || res.Confidence != nil || res.Provider != nil ||
		!strings.Contains(res.Rationale, "no decision and no probability") {
		t.Fatalf("response %+v", res)
	}
	slow := fakeengine.StartSystemOne(t, fakeengine.Reply{Fault: fakeengine.Hang})
	s = newWorld(t, chain("", so("local", slow.URL, "timeout: 300ms"))).start()
	if res := s.decide(map[string]any{"question": "Is it?"}); res.Error == nil || res.Error.Code != gateway.CodeProviderTimeout {
		t.Errorf("all timed out: %+v", res)
	}
}

// The overall deadline bounds the call: once it passes, the provider
// being asked is cut off as a timeout and the rest are not asked.
func TestOverallDeadline(t *testing.T) {
	a := fakeengine.StartSystemOne(t, fakeengine.Reply{Fault: fakeengine.Hang})
	b := fakeengine.StartSystemOne(t, fakeengine.Reply{Fault: fakeengine.Hang})
	c := fakeengine.StartSystemOne(t, fakeengine.Reply{})
	// a times out on its own after 300ms; b, allowed a minute, is cut by
	// the overall deadline of 1.5s; c is never asked.
	yaml := "gateway:\n  timeout: 300ms\n  deadline: 1500ms\nproviders:\n  - " + so("a", a.URL) + "\n  - " + so("b", b.URL, "timeout: 1m") + "\n  - " + so("c", c.URL) + "\n"
	s := newWorld(t, yaml).start()
	res := s.decide(map[string]any{"question": "Is it?"})
	if res.Status != gateway.Failed || res.Error.Code != gateway.CodeProviderTimeout || attempted(res) != "a:timeout b:timeout c:skipped" ||
		!strings.Contains(res.Attempts[1].Detail, "overall deadline of 1.5s") || !strings.Contains(res.Attempts[2].Detail, "overall deadline") {
		t.Fatalf("response %+v", res)
	}
	if c.Calls.Load() != 0 {
		t.Error("a provider was asked after the deadline")
	}
}

// A provider with a lower option limit is skipped for a larger question,
// with the reason recorded; when none can take it, invalid_request names
// the limits and nothing is asked.
func TestOptionLimits(t *testing.T) {
	laya := fakeengine.StartSystemOne(t, fakeengine.Reply{})
	jev := fakeengine.StartSystemOne(t, fakeengine.Reply{})
	opts := make([]string, 25)
	for i := range opts {
		opts[i] = fmt.Sprint("intent-", i)
	}
	s := newWorld(t, chain("", so("laya", laya.URL, "max_options: 20"), so("jev", jev.URL))).start()
	res := s.decide(map[string]any{"question": "Which intent?", "options": opts})
	if res.Status != gateway.Decided || str(res.Provider) != "jev" || attempted(res) != "laya:skipped jev:ok" ||
		res.Attempts[0].Detail != "not asked: 25 options exceed its limit of 20" || laya.Calls.Load() != 0 {
		t.Fatalf("response %+v", res)
	}
	// Within the limit, laya answers.
	if res := s.decide(map[string]any{"question": "Which intent?", "options": opts[:20]}); str(res.Provider) != "laya" {
		t.Errorf("20 options: %+v", res)
	}
	s = newWorld(t, chain("", so("laya", laya.URL, "max_options: 20"), so("small", jev.URL, "max_options: 10"))).start()
	before := laya.Calls.Load() + jev.Calls.Load()
	res = s.decide(map[string]any{"question": "Which intent?", "options": opts})
	if res.Status != gateway.Failed || res.Error.Code != gateway.CodeInvalidRequest ||
		!strings.Contains(res.Error.Message, "laya takes at most 20, small takes at most 10") || laya.Calls.Load()+jev.Calls.Load() != before {
		t.Fatalf("no provider can take it: %+v", res)
	}
}

// Unknown fields and every other contract violation come back as a
// structured invalid_request that lists every problem, and nothing is
// asked.
func TestInvalidRequest(t *testing.T) {
	ep := fakeengine.StartSystemOne(t, fakeengine.Reply{})
	s := newWorld(t, chain("", so("jev", ep.URL))).start()
	res := s.decide(map[string]any{"question": "Which?", "options": []string{"a", "b"}, "temperature": 0.2, "request_id": "bad-1"})
	if res.Status != gateway.Failed || res.Error.Code != gateway.CodeInvalidRequest || !strings.Contains(res.Error.Message, `unknown field(s) "temperature"`) ||
		res.RequestID != "bad-1" {
		t.Fatalf("unknown field: %+v", res)
	}
	res = s.decide(json.RawMessage(`{"question":"","options":["a"],"min_confidence":3,"context":"text","schema_version":"9"}`))
	for _, want := range []string{"question is required", "1 item(s)", "context must be a JSON object", "min_confidence is 3", `schema_version "9"`} {
		if res.Error == nil || !strings.Contains(res.Error.Message, want) {
			t.Errorf("problems %q lack %q", res.Error, want)
		}
	}
	if res := s.decide(map[string]any{}); res.Error == nil || res.Error.Code != gateway.CodeInvalidRequest {
		t.Errorf("no arguments: %+v", res)
	}
	if ep.Calls.Load() != 0 {
		t.Error("an invalid request reached the provider")
	}
}

// While paused (system1 toggle off, written to $CLAUDE_PLUGIN_DATA),
// decide abstains saying so and contacts no provider, health says paused,
// the tools stay listed; toggle on resumes the same running server.
func TestPaused(t *testing.T) {
	ep := fakeengine.StartSystemOne(t, fakeengine.Reply{})
	w := newWorld(t, chain("", so("jev", ep.URL)))
	s := w.start()
	out, _, code := w.run("toggle", "off")
	if code != 0 || !strings.Contains(out, "OFF") {
		t.Fatalf("toggle off: %d %s", code, out)
	}
	if _, err := os.Stat(filepath.Join(w.stateDir, "state.json")); err != nil {
		t.Fatalf("the state is not in $CLAUDE_PLUGIN_DATA: %v", err)
	}
	res := s.decide(map[string]any{"question": "Ship it?"})
	if res.Status != gateway.Abstained || res.Decision != nil || len(res.Attempts) != 0 || res.Error != nil ||
		!strings.Contains(res.Rationale, "paused") || !strings.Contains(res.Rationale, "/system1:toggle on") {
		t.Fatalf("paused decide: %+v", res)
	}
	if h := s.health(); h.Status != gateway.HealthPaused || !h.Paused {
		t.Errorf("paused health: %+v", h)
	}
	if len(s.listTools()) != len(mcpserver.Tools) {
		t.Error("tools were hidden while paused")
	}
	if ep.Calls.Load() != 0 {
		t.Errorf("a paused gateway asked the provider %d times", ep.Calls.Load())
	}
	if out, _, _ := w.run("toggle", "status"); !strings.Contains(out, "OFF") {
		t.Errorf("toggle status: %s", out)
	}
	if out, _, code := w.run("toggle", "on"); code != 0 || !strings.Contains(out, "ON") {
		t.Fatalf("toggle on: %d %s", code, out)
	}
	if res := s.decide(map[string]any{"question": "Ship it?"}); res.Status != gateway.Decided {
		t.Errorf("after toggle on: %+v", res)
	}
	if _, errOut, code := w.run("toggle", "sideways"); code != 2 || !strings.Contains(errOut, "on, off or status") {
		t.Errorf("toggle sideways: %d %s", code, errOut)
	}
}

// A configuration that is missing, does not parse, or is wrong does not
// stop the server: it starts, health and capabilities report the errors,
// and decide answers config_error without asking anything.
func TestConfigErrors(t *testing.T) {
	ep := fakeengine.StartSystemOne(t, fakeengine.Reply{})
	cases := map[string]struct{ yaml, want string }{
		"missing file":   {"", "no configuration file at"},
		"not YAML":       {"providers: [unclosed", "config.yaml"},
		"unknown key":    {"gateway:\n  treshold: 0.5\n", "treshold"},
		"bad kind":       {"providers:\n  - {name: x, kind: oracle, model: m}\n", `kind "oracle"`},
		"bad threshold":  {"gateway:\n  threshold: 1.5\nproviders:\n  - " + so("jev", ep.URL) + "\n", "gateway.threshold"},
		"no providers":   {"gateway:\n  threshold: 0.5\n", "no chain is configured"},
		"duplicate name": {"providers:\n  - " + so("jev", ep.URL) + "\n  - " + so("jev", ep.URL) + "\n", "used twice"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, c.yaml)
			s := w.start()
			h := s.health()
			if h.Status != gateway.HealthDown || len(h.ConfigErrors) == 0 || !strings.Contains(strings.Join(h.ConfigErrors, "\n"), c.want) || h.Config != w.config {
				t.Errorf("health %+v", h)
			}
			caps := s.capabilities()
			if len(caps.ConfigErrors) == 0 {
				t.Errorf("capabilities report no config errors: %+v", caps.ConfigErrors)
			}
			res := s.decide(map[string]any{"question": "Ship it?"})
			if res.Status != gateway.Failed || res.Error.Code != gateway.CodeConfigError || !strings.Contains(res.Error.Message, c.want) {
				t.Errorf("decide %+v", res)
			}
		})
	}
	if ep.Calls.Load() != 0 {
		t.Error("a broken configuration asked a provider")
	}
}

// A word on the command line that is not a flag is a usage error, as
// serve's is: the flag parser stops at it, so a --config after it would
// be dropped and the server would serve another configuration.
func TestMCPRefusesStrayArguments(t *testing.T) {
	w := newWorld(t, "")
	for _, args := range [][]string{
		{"mcp", "--config", w.config, "stdio"},
		{"mcp", "stdio", "--config", w.config},
	} {
		out, errOut, code := w.run(args...)
		if code != 2 || out != "" || !strings.Contains(errOut, `system1 mcp: unexpected argument "stdio"`) {
			t.Errorf("%q: exit %d\nstdout: %s\nstderr: %s", args, code, out, errOut)
		}
	}
}

// The configuration comes from --config, else $SYSTEM1_CONFIG, else the
// user's configuration folder.
func TestConfigLocation(t *testing.T) {
	ep := fakeengine.StartSystemOne(t, fakeengine.Reply{})
	w := newWorld(t, "")
	yaml := chain("", so("jev", ep.URL))
	// Default path: $HOME/.config/system1/config.yaml.
	dflt := filepath.Join(w.dir, ".config", "system1", "config.yaml")
	if err := os.MkdirAll(filepath.Dir(dflt), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dflt, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, code := w.run("decide", "--json", "Ship it?")
	if code != 0 || !strings.Contains(out, `"status": "decided"`) {
		t.Errorf("default path: %d %s", code, out)
	}
	cmd := exec.Command(bin, "mcp")
	cmd.Env = append(w.env(), "SYSTEM1_CONFIG="+filepath.Join(w.dir, "elsewhere.yaml"))
	w.write("elsewhere.yaml", chain("", so("jev", ep.URL)))
	// $SYSTEM1_CONFIG wins over the default.
	client := newClient(t, cmd)
	data, _ := client.call(mcpserver.ToolCapabilities, map[string]any{})
	var caps gateway.Capabilities
	_ = json.Unmarshal(data, &caps)
	if caps.Config != filepath.Join(w.dir, "elsewhere.yaml") {
		t.Errorf("$SYSTEM1_CONFIG not used: config %q", caps.Config)
	}
}

// With no --config, no $SYSTEM1_CONFIG and no file in the user's
// configuration folder, the server reads the configuration scripts/run.sh
// wrote for the engine it started (config-PORT.yaml under its cache,
// $SYSTEM1_CACHE and $SYSTEM1_PORT as run.sh reads them), so the plugin
// works beside a run.sh with nothing else set up; with none of them,
// system1_health names the file it looked for and where run.sh writes one.
func TestConfigFromRunScript(t *testing.T) {
	ep := fakeengine.StartSystemOne(t, fakeengine.Reply{})
	mcpAt := func(w *world, env ...string) *server {
		cmd := exec.Command(bin, "mcp")
		cmd.Env = append(w.env(), env...)
		return newClient(t, cmd)
	}
	for _, tc := range []struct {
		name, file string
		env        []string
	}{
		{"default cache and port", filepath.Join(".cache", "system1", "run", "config-3000.yaml"), nil},
		{"cache and port moved", filepath.Join("elsewhere", "run", "config-3001.yaml"), []string{"SYSTEM1_CACHE=elsewhere", "SYSTEM1_PORT=3001"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, "")
			path := filepath.Join(w.dir, tc.file)
			os.MkdirAll(filepath.Dir(path), 0o755)
			if err := os.WriteFile(path, []byte(chain("", so("jev", ep.URL))), 0o644); err != nil {
				t.Fatal(err)
			}
			env := tc.env
			if len(env) > 0 { // $SYSTEM1_CACHE as run.sh takes it: a path, here absolute
				env = []string{"SYSTEM1_CACHE=" + filepath.Join(w.dir, "elsewhere"), env[1]}
			}
			s := mcpAt(w, env...)
			h := s.health()
			if h.Config != path || len(h.ConfigErrors) != 0 {
				t.Errorf("health reads %q (errors %v), want run.sh's %s", h.Config, h.ConfigErrors, path)
			}
			if res := s.decide(map[string]any{"question": "Ship it?"}); res.Status != gateway.Decided {
				t.Errorf("decide over run.sh's configuration: %+v", res)
			}
		})
	}
	t.Run("none", func(t *testing.T) {
		w := newWorld(t, "")
		h := mcpAt(w).health()
		errs := strings.Join(h.ConfigErrors, "\n")
		want := filepath.Join(w.dir, ".config", "system1", "config.yaml")
		if h.Status != gateway.HealthDown || h.Config != want || !strings.Contains(errs, "no configuration file at "+want) ||
			!strings.Contains(errs, filepath.Join(w.dir, ".cache", "system1", "run", "config-3000.yaml")) || !strings.Contains(errs, "scripts/run.sh") {
			t.Errorf("health without any configuration: %s %q %v", h.Status, h.Config, h.ConfigErrors)
		}
	})
}

// Health: ok when the primary is up, degraded when only a fallback is,
// down when none is. Probes send no user data (no decide call reaches the
// providers).
func TestHealth(t *testing.T) {
	up1 := fakeengine.StartSystemOne(t, fakeengine.Reply{})
	up2 := fakeengine.StartSystemOne(t, fakeengine.Reply{})
	cases := []struct {
		name       string
		primary    string
		fallback   string
		status     string
		primaryOK  bool
		fallbackOK bool
	}{
		{"ok", up1.URL, fakeengine.Down(t), gateway.HealthOK, true, false},
		{"degraded", fakeengine.Down(t), up2.URL, gateway.HealthDegraded, false, true},
		{"down", fakeengine.Down(t), fakeengine.Down(t), gateway.HealthDown, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newWorld(t, chain("", so("local", c.primary), so("jev", c.fallback))).start()
			h := s.health()
			if h.Status != c.status || len(h.Providers) != 2 || h.Providers[0].OK != c.primaryOK || h.Providers[1].OK != c.fallbackOK ||
				h.Providers[0].Role != gateway.RolePrimary || h.Providers[1].Role != gateway.RoleFallback || h.SchemaVersion != "1" || h.GatewayVersion == "" {
				t.Errorf("health %+v", h)
			}
			if c.name == "degraded" {
				// The degraded chain still decides, through the fallback.
				if res := s.decide(map[string]any{"question": "Is it?"}); res.Status != gateway.Decided || str(res.Provider) != "jev" {
					t.Errorf("degraded decide: %+v", res)
				}
			}
		})
	}
	if up1.Calls.Load() != 0 || up1.Probes.Load() == 0 {
		t.Errorf("probes: %d decide calls, %d probes", up1.Calls.Load(), up1.Probes.Load())
	}
}

// Capabilities list the tools, the chain with each provider's option
// limit, the threshold and timeouts, the provider kinds with their
// capabilities, and the same request and response schemas as the
// committed schema files.
func TestCapabilities(t *testing.T) {
	ep := fakeengine.StartSystemOne(t, fakeengine.Reply{})
	s := newWorld(t, chain("  threshold: 0.7\n  deadline: 5s\n", so("laya", ep.URL, "max_options: 20", "timeout: 1s"), so("jev", ep.URL))).start()
	c := s.capabilities()
	if !slices.Equal(c.Tools, mcpserver.Tools) || c.Threshold != 0.7 || c.TimeoutMS != 5000 || c.DeadlineMS != 5000 || c.SchemaVersion != "1" {
		t.Errorf("capabilities %+v", c)
	}
	if len(c.Providers) != 2 || c.Providers[0].Capabilities.MaxOptions != 20 || c.Providers[0].TimeoutMS != 1000 ||
		c.Providers[1].Capabilities.MaxOptions != 255 || c.Providers[1].Role != gateway.RoleFallback {
		t.Errorf("providers %+v", c.Providers)
	}
	var kinds []string
	for _, k := range c.ProviderKinds {
		kinds = append(kinds, k.Kind)
	}
	if !slices.Equal(kinds, []string{"engine", "systemone"}) {
		t.Errorf("kinds %v", kinds)
	}
	for name, got := range map[string]json.RawMessage{"request.json": c.RequestSchema, "response.json": c.ResponseSchema} {
		want, err := os.ReadFile(filepath.Join("..", "..", "schema", name))
		if err != nil {
			t.Fatal(err)
		}
		if !jsonEqual(string(got), string(want)) {
			t.Errorf("capabilities' %s differs from schema/%s", name, name)
		}
	}
	if ep.Calls.Load() != 0 {
		t.Error("capabilities asked a provider to decide")
	}
}

// POST /v1/decide on system1 serve takes the same request and returns the
// same response as system1_decide.
func TestHTTPDecideMatchesMCP(t *testing.T) {
	ep := fakeengine.StartSystemOne(t, fakeengine.Reply{Probs: []float64{0.2, 0.8}})
	w := newWorld(t, fingerprinted(chain("", so("jev", ep.URL))))
	args := `{"question":"Which?","options":["a","b"],"request_id":"same-1"}`
	viaMCP, _ := w.start().call(mcpserver.ToolDecide, json.RawMessage(args))

	addr, err := testbin.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--config", w.config, "--listen", addr)
	cmd.Env = w.env()
	cmd.Stderr = &testbin.Output{}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	url := "http://" + addr
	if err := testbin.WaitHealthy(url, exited, 30*time.Second); err != nil {
		t.Fatalf("system1 serve: %v\n%s", err, cmd.Stderr)
	}
	// serve's first background probe fingerprints the node's build.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		h, err := http.Get(url + "/health")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(h.Body)
		h.Body.Close()
		if regexp.MustCompile(`"fingerprint":"[0-9a-f]{16}"`).Match(body) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no fingerprint in /health within a minute: %s", body)
		}
	}
	resp, err := http.Post(url+"/v1/decide", "application/json", strings.NewReader(args))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var viaHTTP, fromMCP map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&viaHTTP); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(viaMCP, &fromMCP)
	// serve fingerprints the build that answered at its background
	// probe, the MCP server at its first tool call (it contacts no node
	// before one): both name the same build.
	if fp := servedFingerprint(viaHTTP); len(fp) != 16 || servedFingerprint(fromMCP) != fp {
		t.Errorf("serve's decide names fingerprint %q, the MCP server's %q", fp, servedFingerprint(fromMCP))
	}
	for _, m := range []map[string]any{viaHTTP, fromMCP} {
		delete(m, "latency_ms")
		for _, a := range m["attempts"].([]any) {
			delete(a.(map[string]any), "latency_ms")
		}
	}
	a, _ := json.Marshal(viaHTTP)
	b, _ := json.Marshal(fromMCP)
	if resp.StatusCode != 200 || string(a) != string(b) {
		t.Errorf("HTTP %d\n%s\nMCP\n%s", resp.StatusCode, a, b)
	}
	resp2, err := http.Post(url+"/v1/decide", "application/json", strings.NewReader(`{"question":"q","bogus":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("invalid request: HTTP %d", resp2.StatusCode)
	}
}

// system1 decide prints the same response (--json) or a summary, and
// exits 1 on an error status.
func TestDecideCommand(t *testing.T) {
	ep := fakeengine.StartSystemOne(t, fakeengine.Reply{Probs: []float64{0.1, 0.9}})
	w := newWorld(t, chain("", so("jev", ep.URL)))
	out, errOut, code := w.run("decide", "--config", w.config, "--json", "--request-id", "cli-1", "Which?", "red", "blue")
	var res gateway.Response
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 {
		t.Fatalf("%d %v\n%s\n%s", code, err, out, errOut)
	}
	checkResponse(t, &res, []byte(out))
	if res.Status != gateway.Decided || str(res.Decision) != "blue" || res.RequestID != "cli-1" {
		t.Errorf("response %+v", res)
	}
	out, _, code = w.run("decide", "--config", w.config, "Which?", "red", "blue")
	if code != 0 || !strings.HasPrefix(out, "decided: blue (p=0.900) via jev") {
		t.Errorf("summary %d %q", code, out)
	}
	cmd := exec.Command(bin, "decide", "--config", w.config, "--json", "--request", "-")
	cmd.Env = w.env()
	cmd.Stdin = strings.NewReader(`{"question":"q","color":"red"}`)
	raw, _ := cmd.Output()
	if cmd.ProcessState.ExitCode() != 1 || !strings.Contains(string(raw), `"code": "invalid_request"`) {
		t.Errorf("--request with an unknown field: %d %s", cmd.ProcessState.ExitCode(), raw)
	}
}

// newClient connects the Go SDK client to an already built command.
func newClient(t *testing.T, cmd *exec.Cmd) *server {
	t.Helper()
	s := &server{t: t, cmd: cmd, stderr: &testbin.Output{}}
	cmd.Stderr = s.stderr
	client := newSDKClient()
	cs, err := client.Connect(context.Background(), commandTransport(cmd), nil)
	if err != nil {
		t.Fatalf("connecting: %v\n%s", err, s.stderr)
	}
	s.cs = cs
	t.Cleanup(s.close)
	return s
}

// Over a real engine: the chain's first provider is an engine provider
// over a llama-server node serving the shared tiny model. The decision
// comes from the model's own probabilities (threshold 0 so the tiny model
// may decide), the fallback is not asked, and health sees the node up.
func TestRealEngine(t *testing.T) {
	srv := testengine.Start(t, 1)
	backup := fakeengine.StartSystemOne(t, fakeengine.Reply{})
	yaml := fmt.Sprintf("gateway:\n  threshold: 0\n  timeout: 60s\n  deadline: 120s\nnodes:\n  - {name: llama, url: %s, dialect: llamacpp, models: [%s]}\n"+
		"providers:\n  - {name: local, kind: engine, model: %s}\n  - %s\n", srv.URL, testengine.Model, testengine.Model, so("jev", backup.URL))
	s := newWorld(t, yaml).start()
	res := s.decide(map[string]any{"question": "Which animal is in the story?", "options": []string{"dog", "cat", "bird"},
		"context": map[string]any{"story": "Once upon a time, there was a little dog."}})
	if res.Status != gateway.Decided || str(res.Provider) != "local" || attempted(res) != "local:ok" || !slices.Contains([]string{"dog", "cat", "bird"}, str(res.Decision)) {
		t.Fatalf("response %+v", res)
	}
	var sum float64
	for _, p := range res.Probabilities {
		sum += p.P
	}
	if sum < 0.999 || sum > 1.001 || len(res.Probabilities) != 3 {
		t.Errorf("probabilities %v sum to %v", res.Probabilities, sum)
	}
	yn := s.decide(map[string]any{"question": "Is the story happy?", "context": map[string]any{"story": "Once upon a time, there was a little dog."}})
	if yn.Status != gateway.Decided || (str(yn.Decision) != "yes" && str(yn.Decision) != "no") {
		t.Errorf("yes/no %+v", yn)
	}
	if backup.Calls.Load() != 0 {
		t.Error("the fallback was asked although the engine answered")
	}
	if h := s.health(); h.Status != gateway.HealthOK || !h.Providers[0].OK {
		t.Errorf("health %+v", h)
	}
}

// servedFingerprint is the fingerprint a decide answer's served names.
func servedFingerprint(res map[string]any) string {
	served, _ := res["served"].(map[string]any)
	fp, _ := served["fingerprint"].(string)
	return fp
}
