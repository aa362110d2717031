package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"system1/internal/fakeengine"
	"system1/internal/testbin"
)

// runQuestions is a job's questions: two, the first answered by the
// state under byTopic.
const runQuestions = `{"model":"fake","questions":{` +
	`"dept":{"type":"choice","instructions":"Which team?","criteria":{"billing":null,"tech":null}},` +
	`"urgent":{"type":"noul","instructions":"Today?"}}}`

// byTopic answers as fakeengine.Behavior.Prompted, for the option the
// state is about ("about <option>") with 0.9 over the others.
func byTopic(r fakeengine.Request) []float64 {
	p, _ := fakeengine.ParsePrompt(r.User)
	lp := make([]float64, len(r.Labels))
	for i, l := range r.Labels {
		lp[i] = math.Log(0.1)
		if strings.Contains(p.State, "about "+p.Options[l]) {
			lp[i] = math.Log(0.9)
		}
	}
	return lp
}

// runJob writes a configuration over a fake llama.cpp engine, the
// questions and n rows, the row at bad (if in range) not JSON; it
// returns the three files' paths.
func runJob(t *testing.T, b fakeengine.Behavior, n, bad int) (cfg, questions, in string) {
	t.Helper()
	eng := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Behavior: b})
	t.Cleanup(eng.Close)
	dir := t.TempDir()
	cfg = filepath.Join(dir, "config.yaml")
	yaml := fmt.Sprintf("decision_log: {off: true}\nnodes:\n  - {name: local, url: %q, dialect: llamacpp, models: [fake]}\n", eng.URL)
	questions, in = filepath.Join(dir, "questions.json"), filepath.Join(dir, "rows.jsonl")
	var rows strings.Builder
	for i := range n {
		if i == bad {
			rows.WriteString(`{"id": "broken", "state": ` + "\n")
			continue
		}
		topic := []string{"billing", "tech"}[i%2]
		fmt.Fprintf(&rows, `{"id":"t-%d","state":{"body":"ticket %d about %s"}}`+"\n", i, i, topic)
	}
	for path, data := range map[string]string{cfg: yaml, questions: runQuestions, in: rows.String()} {
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return cfg, questions, in
}

// outLine is one line of system1 run's output.
type outLine struct {
	ID      json.RawMessage `json:"id"`
	Answers map[string]struct {
		Choice string  `json:"choice"`
		Noul   float64 `json:"noul"`
	} `json:"answers"`
	Error *struct {
		Type string `json:"type"`
		Line int    `json:"line"`
	} `json:"error"`
}

func readLines(t *testing.T, path string) []outLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []outLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l outLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %d: %v: %s", len(out)+1, err, sc.Bytes())
		}
		out = append(out, l)
	}
	return out
}

// checkRun holds a run's output to its input: every row once, in order,
// each answered by the state it was asked about, the malformed row at bad
// an error row naming its line.
func checkRun(t *testing.T, lines []outLine, n, bad int) {
	t.Helper()
	if len(lines) != n {
		t.Fatalf("%d lines for %d rows", len(lines), n)
	}
	for i, l := range lines {
		if i == bad {
			if l.Error == nil || l.Error.Type != "invalid_row" || l.Error.Line != i+1 {
				t.Errorf("the malformed row %d: %+v", i, l)
			}
			continue
		}
		want := []string{"billing", "tech"}[i%2]
		if string(l.ID) != fmt.Sprintf(`"t-%d"`, i) || l.Error != nil || l.Answers["dept"].Choice != want {
			t.Errorf("line %d: id %s, error %+v, dept %q (want %q)", i+1, l.ID, l.Error, l.Answers["dept"].Choice, want)
		}
	}
}

// system1 run --config asks every row through the configuration's nodes
// and writes one line per row in input order; a row that is not JSON is
// an error row and the run goes on; the summary counts both.
func TestRunConfig(t *testing.T) {
	const n, bad = 40, 7
	cfg, questions, in := runJob(t, fakeengine.Behavior{Prompted: byTopic}, n, bad)
	out := filepath.Join(t.TempDir(), "answers.jsonl")
	code, stdout, stderr := system1(t, nil, "run", "--config", cfg, "--questions", questions, "--in", in, "--out", out)
	if code != 3 { // an error row
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	checkRun(t, readLines(t, out), n, bad)
	if !strings.Contains(stdout, fmt.Sprintf("rows        %d of %d", n, n)) || !strings.Contains(stdout, "invalid_row 1") {
		t.Errorf("summary:\n%s", stdout)
	}
	// Run again: everything is there, nothing is asked.
	code, stdout, stderr = system1(t, nil, "run", "--config", cfg, "--questions", questions, "--in", in, "--out", out)
	if code != 3 || !strings.Contains(stdout, fmt.Sprintf("(%d written by earlier runs)", n)) {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	checkRun(t, readLines(t, out), n, bad)
}

// The command line is checked before anything runs: one of --config and
// --url, the three files.
func TestRunUsage(t *testing.T) {
	for _, args := range [][]string{
		{"run", "--in", "a", "--out", "b", "--questions", "c"},
		{"run", "--in", "a", "--out", "b", "--questions", "c", "--config", "x", "--url", "http://y"},
		{"run", "--out", "b", "--questions", "c", "--config", "x"},
		{"run", "--in", "a", "--out", "b", "--questions", "c", "--config", "x", "--key-env", "K"},
	} {
		if code, _, stderr := system1(t, nil, args...); code != 2 || !strings.Contains(stderr, "system1 run:") {
			t.Errorf("%v: exit %d\n%s", args, code, stderr)
		}
	}
}

// system1 run killed with SIGKILL mid-run and started again with the
// same arguments ends with every row exactly once, in input order.
func TestRunKilledResumes(t *testing.T) {
	const n, bad, held = 300, 150, 200
	// The engine holds every row from the held-th on until the first run
	// is killed, so the kill lands mid-run however fast the machine is: the
	// answers are written in input order, so that run writes at most held
	// lines.
	release := make(chan struct{})
	var once sync.Once
	releaseAll := func() { once.Do(func() { close(release) }) }
	holding := func(r fakeengine.Request) []float64 {
		var row int
		_, after, _ := strings.Cut(r.User, "ticket ")
		if _, err := fmt.Sscanf(after, "%d", &row); err == nil && row >= held {
			<-release
		}
		return byTopic(r)
	}
	cfg, questions, in := runJob(t, fakeengine.Behavior{Prompted: holding}, n, bad)
	t.Cleanup(releaseAll) // before the engine closes: it waits for its handlers
	out := filepath.Join(t.TempDir(), "answers.jsonl")
	bin, err := testbin.Path()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"run", "--config", cfg, "--questions", questions, "--in", in, "--out", out}
	count := func() int { b, _ := os.ReadFile(out); return bytes.Count(b, []byte("\n")) }
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for count() < n/3 {
		if ctx.Err() != nil {
			t.Fatalf("%d lines\n%s", count(), stderr.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	releaseAll()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || count() > held {
		t.Fatalf("the run was not killed mid-run: %d lines\n%s", count(), stderr.String())
	}
	t.Logf("killed at %d lines", count())
	code, stdout, errOut := system1(t, nil, args...)
	if code != 3 { // the row at bad is an error row
		t.Fatalf("the resumed run: exit %d\n%s%s", code, stdout, errOut)
	}
	checkRun(t, readLines(t, out), n, bad)
}

// A row whose question the model ranked no label of is that row's 422,
// as POST /v1/systemone refuses it, and the run goes on: asking again
// would read the same.
func TestRunUnrankedRowIsItsRefusal(t *testing.T) {
	const n, unranked = 6, 3
	cfg, questions, in := runJob(t, fakeengine.Behavior{Prompted: func(r fakeengine.Request) []float64 {
		if p, _ := fakeengine.ParsePrompt(r.User); strings.Contains(p.State, fmt.Sprintf("ticket %d ", unranked)) {
			lp := make([]float64, len(r.Labels))
			for i := range lp {
				lp[i] = math.Inf(-1) // out of the top log-probabilities
			}
			return lp
		}
		return byTopic(r)
	}}, n, -1)
	out := filepath.Join(t.TempDir(), "answers.jsonl")
	code, stdout, stderr := system1(t, nil, "run", "--config", cfg, "--questions", questions, "--in", in, "--out", out)
	if code != 3 { // an error row
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != n {
		t.Fatalf("%d lines for %d rows:\n%s", len(lines), n, data)
	}
	for i, l := range lines {
		refused := strings.Contains(l, `"status":422`) && strings.Contains(l, "questions.dept: system1 will not stand behind this answer: the model gave no reading of it")
		if refused != (i == unranked) || (i != unranked && !strings.Contains(l, `"answers"`)) {
			t.Errorf("line %d: %s", i+1, l)
		}
	}
}

// With no calibration section, serve applies to /v1/systemone the fits
// its default learning loop keeps in fits.json in the state folder; run
// --config asks its rows through the answer path /v1/systemone's requests
// take, under the same fits.
func TestRunAppliesTheLoopsFits(t *testing.T) {
	_, cfg := fakeNode(t, fakeengine.Behavior{Logprobs: fakeengine.Probs(0.6, 0.4)}, "")
	state := t.TempDir()
	fits := `{"version":1,"fits":[{"model":"fake","kind":"choice","bucket":"2","temperature":4}]}`
	dir := writeFiles(t, map[string]string{
		"q.json":     `{"model":"fake","questions":{"dept":{"type":"choice","instructions":"Which team?","criteria":{"billing":null,"tech":null}}}}`,
		"rows.jsonl": `{"id":"a","state":"I was charged twice"}` + "\n",
	})
	if err := os.WriteFile(filepath.Join(state, "fits.json"), []byte(fits), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.jsonl")
	code, stdout, stderr := system1(t, nil, "run", "--config", cfg, "--state-dir", state, "--questions", filepath.Join(dir, "q.json"),
		"--in", filepath.Join(dir, "rows.jsonl"), "--out", out)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var line struct {
		Answers map[string]struct{ Probabilities map[string]float64 }
	}
	if err := json.Unmarshal(b, &line); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	// 0.6 and 0.4 at temperature 4: 0.53 and 0.47.
	if p := line.Answers["dept"].Probabilities["billing"]; p != 0.53 {
		t.Errorf("billing %v; want 0.53, the engine's 0.6 under the loop's temperature 4: %s", p, b)
	}
}
