// Package cli tests the system1 command line as a person at a terminal
// meets it: the built binary's help texts, messages and exit statuses.
package cli

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"system1/internal/fakeengine"
	"system1/internal/mcpserver"
	"system1/internal/testbin"
)

func TestMain(m *testing.M) {
	testbin.Main(m)
}

// system1 runs the built binary in an empty home and returns its exit
// status, stdout and stderr.
func system1(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	bin := testbin.Binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	home := t.TempDir()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "XDG_STATE_HOME=" + filepath.Join(home, "state")}, env...)
	code, stdout, stderr, err := testbin.Run(cmd)
	if err != nil {
		t.Fatalf("system1 %v: %v", args, err)
	}
	return code, stdout, stderr
}

// shell runs a command line as a person pastes it into a shell, in an
// empty folder and home, with the built binary on the PATH as system1.
func shell(t *testing.T, line string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	home := t.TempDir()
	cmd := exec.CommandContext(ctx, "sh", "-c", line)
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"HOME=" + home, "PATH=" + filepath.Dir(testbin.Binary(t)) + string(os.PathListSeparator) + os.Getenv("PATH"), "XDG_STATE_HOME=" + filepath.Join(home, "state")}
	code, stdout, stderr, err := testbin.Run(cmd)
	if err != nil {
		t.Fatalf("sh -c %q: %v", line, err)
	}
	return code, stdout, stderr
}

// config writes a configuration whose one provider is a System One
// endpoint answering as told.
func config(t *testing.T, r fakeengine.Reply) string {
	t.Helper()
	ep := fakeengine.StartSystemOne(t, r)
	path := filepath.Join(t.TempDir(), "config.yaml")
	yaml := "gateway:\n  threshold: 0.6\n  timeout: 5s\nproviders:\n  - {name: jev, kind: systemone, url: \"" + ep.URL + "\", model: jev-latest}\n"
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// decide's exit status tells its outcomes apart, as its help and the
// README say: 0 decided, 1 error, 2 usage, 3 abstained.
func TestDecideExitStatus(t *testing.T) {
	confident := config(t, fakeengine.Reply{Probs: []float64{0.9, 0.1}})
	unsure := config(t, fakeengine.Reply{Probs: []float64{0.55, 0.45}})
	down := config(t, fakeengine.Reply{Status: 500, Message: "down"})
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string // a substring, when not empty
		stderr string
	}{
		{"decided", []string{"decide", "--config", confident, "Which?", "a", "b"}, 0, "decided: a (p=0.900)", ""},
		{"abstained", []string{"decide", "--config", unsure, "Which?", "a", "b"}, 3, "abstained", ""},
		{"abstained as JSON", []string{"decide", "--json", "--config", unsure, "Which?", "a", "b"}, 3, `"status": "abstained"`, ""},
		{"paused", []string{"decide", "--config", confident, "--state-dir", "PAUSED", "Which?", "a", "b"}, 3, "system1 toggle on", ""},
		{"every provider failed", []string{"decide", "--config", down, "Which?", "a", "b"}, 1, "", "No provider answered"},
		{"invalid request", []string{"decide", "--config", confident, "Which?", "a", "a"}, 1, "", "invalid_request"},
		{"no question", []string{"decide", "--config", confident}, 2, "", "usage: system1 decide"},
		{"unknown flag", []string{"decide", "--bogus", "Which?"}, 2, "", "flag provided but not defined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i, a := range tc.args {
				if a == "PAUSED" {
					dir := t.TempDir()
					if code, _, errOut := system1(t, nil, "toggle", "--state-dir", dir, "off"); code != 0 {
						t.Fatalf("toggle off: %d %s", code, errOut)
					}
					tc.args[i] = dir
				}
			}
			code, out, errOut := system1(t, nil, tc.args...)
			if code != tc.code || !strings.Contains(out, tc.stdout) || !strings.Contains(errOut, tc.stderr) {
				t.Errorf("system1 %s: exit %d (want %d)\nstdout: %s\nstderr: %s", strings.Join(tc.args, " "), code, tc.code, out, errOut)
			}
		})
	}
}

// Ctrl-C while a provider is asked ends decide saying it was
// interrupted: exit 1, no decision, and neither a deadline that had not
// passed nor a hint to check engines that were running.
func TestDecideInterrupted(t *testing.T) {
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	_, cfg := fakeNode(t, fakeengine.Behavior{Prompted: func(r fakeengine.Request) []float64 {
		select {
		case arrived <- struct{}{}:
		default:
		}
		<-release // held until the test ends
		return byTopic(r)
	}}, "fingerprint: {off: true}\n")
	t.Cleanup(func() { close(release) }) // before the engine closes: it waits for its handlers
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testbin.Binary(t), "decide", "--config", cfg, "Which team?", "billing", "tech")
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	<-arrived
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	out := stderr.String()
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(out, "interrupted") ||
		strings.Contains(out, "deadline of") || strings.Contains(out, "check that the engines") || strings.Contains(out, "provider failed") {
		t.Fatalf("decide interrupted: exit %d\nstdout: %s\nstderr: %s", code, stdout.String(), out)
	}
}

// Without a configuration, decide speaks to the person at the terminal
// (where system1 looks, what scripts/run.sh writes, where the docs are),
// not in the words the MCP face uses for an agent; serve points to the
// docs too.
func TestWithoutConfiguration(t *testing.T) {
	code, out, errOut := system1(t, nil, "decide", "Ship it?")
	if code != 1 || out != "" {
		t.Errorf("decide: exit %d, stdout %q", code, out)
	}
	for _, want := range append(whereConfig, "config_error") {
		if !strings.Contains(errOut, want) {
			t.Errorf("decide without a configuration does not say %q:\n%s", want, errOut)
		}
	}
	for _, agentish := range []string{"tell the user", "Reason this through yourself", "system1_health"} {
		if strings.Contains(errOut, agentish) {
			t.Errorf("decide at a terminal says %q, words for an agent:\n%s", agentish, errOut)
		}
	}
	// Every other command that reads the configuration says the same,
	// never a bare "no such file".
	caseFile := filepath.Join(t.TempDir(), "cases.jsonl")
	os.WriteFile(caseFile, []byte(`{"id": "c1", "state": "s", "questions": {"q": {"type": "noul"}}, "expected": {"q": true}}`+"\n"), 0o644)
	for _, args := range [][]string{
		{"serve"},
		{"feedback", "req_1", "yes"},
		{"calibrate", "--report"},
		{"calibrate", "--from-log", "--out", filepath.Join(t.TempDir(), "fits.json")},
		{"bench", "--provider", "local", caseFile},
	} {
		code, _, errOut = system1(t, nil, args...)
		if code != 1 || !strings.Contains(errOut, "no configuration at") || strings.Contains(errOut, "no such file") {
			t.Errorf("%s without a configuration: exit %d\n%s", strings.Join(args, " "), code, errOut)
		}
		for _, want := range whereConfig {
			if !strings.Contains(errOut, want) {
				t.Errorf("%s without a configuration does not say %q:\n%s", strings.Join(args, " "), want, errOut)
			}
		}
	}
}

// whereConfig is what a command says of a missing configuration: where
// system1 looked, how to point it elsewhere, the file scripts/run.sh
// writes for the engine it starts, and where the docs are.
var whereConfig = []string{".config/system1/config.yaml", "--config", "$SYSTEM1_CONFIG", "~/.cache/system1/run/config-3000.yaml", "README"}

// A command at a terminal is quiet unless something is wrong: decide
// prints its answer and no log line, -v adds what it did; a run that
// cannot start says why, without info lines or a summary of no rows.
func TestQuietUnlessSomethingIsWrong(t *testing.T) {
	ep := fakeengine.StartSystemOne(t, fakeengine.Reply{Probs: []float64{0.9, 0.1}})
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfg, []byte("nodes:\n  - {name: jev, url: \""+ep.URL+"\", dialect: systemone, models: [jev-latest]}\n"+
		"gateway:\n  chain:\n    - {name: jev, model: jev-latest}\n"), 0o644)
	code, out, errOut := system1(t, nil, "decide", "--config", cfg, "Which?", "a", "b")
	if code != 0 || !strings.Contains(out, "decided: a") || errOut != "" {
		t.Errorf("decide: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	code, _, errOut = system1(t, nil, "decide", "-v", "--config", cfg, "Which?", "a", "b")
	if code != 0 || !strings.Contains(errOut, "level=INFO") {
		t.Errorf("decide -v: exit %d, no info lines:\n%s", code, errOut)
	}
	questions := filepath.Join(t.TempDir(), "questions.json")
	os.WriteFile(questions, []byte(`{"model":"jev-latest","questions":{"q":{"type":"noul"}}}`), 0o644)
	missing := filepath.Join(t.TempDir(), "missing.jsonl")
	code, out, errOut = system1(t, nil, "run", "--config", cfg, "--in", missing, "--out", filepath.Join(t.TempDir(), "out.jsonl"), "--questions", questions)
	if code != 1 || strings.Contains(out, "rows") || strings.Contains(errOut, "level=INFO") || !strings.Contains(errOut, "missing.jsonl") {
		t.Errorf("run that cannot read its input: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
}

// The help texts list what a newcomer needs: decide's exit statuses,
// toggle's on, off and status; a flag after toggle's argument says where
// flags go.
func TestHelp(t *testing.T) {
	code, _, errOut := system1(t, nil, "decide", "-h")
	if code != 0 || !strings.Contains(errOut, "exit status: 0 decided, 1 error") || !strings.Contains(errOut, "3 abstained") {
		t.Errorf("decide -h: exit %d\n%s", code, errOut)
	}
	code, _, errOut = system1(t, nil, "toggle", "-h")
	for _, want := range []string{"on|off|status", "  off ", "  on ", "  status ", "-state-dir"} {
		if code != 0 || !strings.Contains(errOut, want) {
			t.Errorf("toggle -h: exit %d, no %q:\n%s", code, want, errOut)
		}
	}
	// Every command's -h begins with its usage line, as the list of
	// commands names it.
	for _, cmd := range []string{"serve", "mcp", "decide", "run", "bench", "calibrate", "toggle", "feedback", "shadow", "replay"} {
		code, _, errOut := system1(t, nil, cmd, "-h")
		if code != 0 || !strings.HasPrefix(errOut, "usage: system1 "+cmd+" ") {
			t.Errorf("%s -h: exit %d, no usage line:\n%s", cmd, code, errOut)
		}
	}
	dir := t.TempDir()
	code, _, errOut = system1(t, nil, "toggle", "off", "--state-dir", dir)
	if code != 2 || !strings.Contains(errOut, "flags go before on, off or status: system1 toggle --state-dir "+dir+" off") {
		t.Errorf("toggle off --state-dir: exit %d\n%s", code, errOut)
	}
	code, _, errOut = system1(t, nil, "toggle", "sideways")
	if code != 2 || !strings.Contains(errOut, `"sideways" is not on, off or status`) {
		t.Errorf("toggle sideways: exit %d\n%s", code, errOut)
	}
}

// An answer of system1 decide is recorded in the decision log, so that
// system1 feedback with the id decide printed records its outcome, as it
// does for POST /v1/decide; an id nothing answered is refused with exit 5
// and a hint naming the log that was asked and what to check.
func TestDecideThenFeedback(t *testing.T) {
	ep := fakeengine.StartSystemOne(t, fakeengine.Reply{Probs: []float64{0.9, 0.1}})
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	yaml := "nodes:\n  - {name: jev, url: \"" + ep.URL + "\", dialect: systemone, models: [jev-latest]}\n" +
		"gateway:\n  threshold: 0.6\n  timeout: 5s\n  chain:\n    - {name: jev, model: jev-latest}\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	for _, asJSON := range []bool{false, true} {
		args := []string{"decide", "--config", cfg, "--state-dir", state, "Which?", "a", "b"}
		if asJSON {
			args = append([]string{"decide", "--json"}, args[1:]...)
		}
		code, out, errOut := system1(t, nil, args...)
		if code != 0 {
			t.Fatalf("system1 %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
		}
		if asJSON {
			var res struct {
				RequestID string `json:"request_id"`
			}
			json.Unmarshal([]byte(out), &res)
			code, out, errOut = system1(t, nil, "feedback", "--config", cfg, "--state-dir", state, res.RequestID, "a")
		} else {
			// The command decide suggests runs as copied into a shell,
			// from another folder: it names the log decide wrote.
			m := regexp.MustCompile("request_id (\\S+): `(system1 feedback .*) OPTION`").FindStringSubmatch(out)
			if m == nil || !strings.Contains(m[2], m[1]) {
				t.Fatalf("system1 %s suggests no feedback command:\n%s", strings.Join(args, " "), out)
			}
			code, out, errOut = shell(t, m[2]+" a")
		}
		if code != 0 || !strings.Contains(out, `"outcome": "a"`) {
			t.Errorf("feedback after system1 %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
		}
	}

	code, out, errOut := system1(t, nil, "feedback", "--config", cfg, "--state-dir", state, "no-such-id", "a")
	if code != 5 || !strings.Contains(out, "unknown_request") {
		t.Errorf("feedback of an unknown id: exit %d (want 5)\nstdout: %s", code, out)
	}
	for _, want := range []string{"no answer is recorded under that request id", filepath.Join(state, "decisions.db"), "system1 decide prints it as request_id", "--state-dir of the run that answered"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("feedback of an unknown id does not say %q:\n%s", want, errOut)
		}
	}

	// A --file body that is not valid is not recorded either: exit 4,
	// as its help says, with the wire's error.
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte("{bad"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = system1(t, nil, "feedback", "--config", cfg, "--state-dir", state, "--file", bad)
	if code != 4 || !strings.Contains(out, "invalid_request") {
		t.Errorf("feedback of a body that is not valid: exit %d (want 4)\nstdout: %s", code, out)
	}
}

// The README names everything each face offers: every path of the HTTP
// surface (schema/openapi.json) in its Routes table, every MCP tool and every
// command of the command line; and where it mentions a path the server
// serves, it never says the path is still to come.
func TestREADMENamesEveryFace(t *testing.T) {
	root := filepath.Join("..", "..")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, faces, ok := strings.Cut(string(readme), "three faces over one core:")
	faces, _, ok2 := strings.Cut(faces, "\n\n"+"Models run in engines")
	if !ok || !ok2 {
		t.Fatal("the README has no list of its faces")
	}
	bullet := func(name string) string {
		_, b, ok := strings.Cut(faces, "- **"+name+"**")
		if !ok {
			t.Fatalf("the README's faces have no %s bullet", name)
		}
		b, _, _ = strings.Cut(b, "\n- **")
		return b
	}

	var doc struct {
		Paths map[string]json.RawMessage `json:"paths"`
	}
	b, err := os.ReadFile(filepath.Join(root, "schema", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &doc); err != nil || len(doc.Paths) == 0 {
		t.Fatalf("schema/openapi.json: %v, %d paths", err, len(doc.Paths))
	}
	// The routes have one list, the Routes table, which the HTTP face
	// points to.
	if !strings.Contains(bullet("HTTP"), "[Routes](#routes)") {
		t.Error("the README's HTTP face does not point to its Routes table")
	}
	_, routes, ok := strings.Cut(string(readme), "\n## Routes\n")
	routes, _, _ = strings.Cut(routes, "\n## ")
	if !ok {
		t.Fatal("the README has no Routes section")
	}
	for path := range doc.Paths {
		if !strings.Contains(routes, "`"+path+"`") && !strings.Contains(routes, " "+path+"`") {
			t.Errorf("the README's Routes table does not name %s:\n%s", path, routes)
		}
		for _, sentence := range strings.Split(strings.ReplaceAll(string(readme), "\n", " "), ". ") {
			if !strings.Contains(sentence, path+"`") {
				continue
			}
			for _, absent := range []string{"does not exist", "once the server has", "not served yet"} {
				if strings.Contains(sentence, absent) {
					t.Errorf("the README says %q in a sentence naming %s, which the server serves:\n%s", absent, path, sentence)
				}
			}
		}
	}

	mcp := bullet("MCP")
	for _, tool := range mcpserver.Tools {
		if !strings.Contains(mcp, "`"+tool+"`") {
			t.Errorf("the README's MCP face does not name the tool %s:\n%s", tool, mcp)
		}
	}

	code, usage, errOut := system1(t, nil, "help")
	_, list, ok := strings.Cut(usage, "commands:\n")
	if code != 0 || !ok {
		t.Fatalf("system1 help: exit %d\n%s%s", code, usage, errOut)
	}
	cli := bullet("CLI")
	n := 0
	for _, line := range strings.Split(list, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.HasPrefix(line, "  ") {
			continue
		}
		n++
		switch f[0] {
		case "serve", "mcp", "version": // the faces above, and no face at all
			continue
		}
		if !strings.Contains(cli, "`"+f[0]+"`") {
			t.Errorf("the README's CLI face does not name the command %s:\n%s", f[0], cli)
		}
	}
	if n < 5 {
		t.Fatalf("read %d commands from system1 help:\n%s", n, usage)
	}
}
