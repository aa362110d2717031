package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"system1/internal/decision"
	"system1/internal/fakeengine"
	"system1/internal/testbin"
)

// fakeNode starts a fake llama.cpp engine serving the model "fake" and
// writes a configuration over it, with a decide chain over that model and
// the decision log off unless log is set; it returns the engine, whose
// requests a test reads, and the configuration's path.
func fakeNode(t *testing.T, b fakeengine.Behavior, extra string) (*fakeengine.Fake, string) {
	t.Helper()
	eng := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Behavior: b})
	t.Cleanup(eng.Close)
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	yaml := fmt.Sprintf("nodes:\n  - {name: local, url: %q, dialect: llamacpp, models: [fake]}\n"+
		"gateway:\n  threshold: 0.5\n  chain:\n    - {name: local, model: fake}\n%s", eng.URL, extra)
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return eng, cfg
}

// prompts returns the user turns the engine got that ask "Which team?"
// (not the fingerprint's canary), sorted, and forgets them.
func prompts(eng *fakeengine.Fake) []string {
	var out []string
	for _, r := range eng.Inferences() {
		if strings.Contains(r.User, "Which team?") {
			out = append(out, r.User)
		}
	}
	slices.Sort(out)
	eng.Reset()
	return out
}

// writeFiles writes name -> content into a new folder and returns it.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// The model reads a CSV row's cells as the same state given as JSON
// Lines: no cell is re-encoded on the way ("&", "<", ">", U+2028 stay as
// written; quotes and line breaks are escaped as JSON must).
func TestRunCSVStateIsTheJSONLState(t *testing.T) {
	eng, cfg := fakeNode(t, fakeengine.Behavior{Prompted: byTopic}, "decision_log: {off: true}\n")
	dir := writeFiles(t, map[string]string{
		"q.json": runQuestions,
		// A JSON Lines file as a person or a tool writes it: escaped
		// where JSON must be, the rest as is.
		"rows.jsonl": "{\"id\":\"a\",\"state\":{\"subject\":\"Tom & Jerry <b>\",\"body\":\"say \\\"hi\\\" & <i>bye</i>\\nthen\\tgo\u2028 café\"}}\n" +
			"{\"id\":\"b\",\"state\":{\"subject\":\"a > b & c\",\"body\":\"plain about billing\"}}\n",
		"rows.csv": "id,subject,body\n" +
			"a,Tom & Jerry <b>,\"say \"\"hi\"\" & <i>bye</i>\nthen\tgo\u2028 café\"\n" +
			"b,a > b & c,plain about billing\n",
	})
	var got [][]string
	for _, in := range []string{"rows.jsonl", "rows.csv"} {
		out := filepath.Join(dir, in+".out")
		code, stdout, stderr := system1(t, nil, "run", "--config", cfg, "--questions", filepath.Join(dir, "q.json"), "--in", filepath.Join(dir, in), "--out", out)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s%s", in, code, stdout, stderr)
		}
		got = append(got, prompts(eng))
	}
	if len(got[0]) == 0 || !slices.Equal(got[0], got[1]) {
		t.Fatalf("the CSV's prompts differ from the JSONL's:\njsonl %q\ncsv   %q", got[0], got[1])
	}
	if !strings.Contains(strings.Join(got[1], ""), `say \"hi\" & <i>bye</i>\nthen\tgo`+"\u2028") {
		t.Errorf("the state was re-encoded: %q", got[1])
	}
}

// system1 decide --context sends the context to the model as given, as
// POST /v1/decide does.
func TestDecideContextAsGiven(t *testing.T) {
	eng, cfg := fakeNode(t, fakeengine.Behavior{Prompted: byTopic}, "decision_log: {off: true}\n")
	const ctx = `{"t":"Tom & Jerry <b> about billing"}`
	code, stdout, stderr := system1(t, nil, "decide", "--config", cfg, "--context", ctx, "Which team?", "billing", "tech")
	if code != 0 && code != 3 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	ps := prompts(eng)
	if len(ps) == 0 {
		t.Fatal("nothing was asked")
	}
	for _, p := range ps {
		if !strings.Contains(p, ctx) {
			t.Errorf("the prompt does not hold the context as given %s:\n%s", ctx, p)
		}
	}
}

// A stray quote in a CSV costs its own row, never the next: every line of
// the input has its line in the answers, the broken one an error row
// naming its line, and the exit status says that rows failed (3).
func TestRunCSVStrayQuote(t *testing.T) {
	_, cfg := fakeNode(t, fakeengine.Behavior{Prompted: byTopic}, "decision_log: {off: true}\n")
	const n, bad = 40, 17
	var rows strings.Builder
	rows.WriteString("id,subject,body\n")
	for i := range n {
		topic := []string{"billing", "tech"}[i%2]
		if i == bad {
			// A stray quote opens a field that runs into the next line,
			// up to the quote that opens that line's body.
			fmt.Fprintf(&rows, "t-%d,\"Invoice 88,ticket %d about %s\n", i, i, topic)
			continue
		}
		fmt.Fprintf(&rows, "t-%d,Ticket %d,\"ticket %d, about %s\"\n", i, i, i, topic)
	}
	dir := writeFiles(t, map[string]string{"q.json": runQuestions, "rows.csv": rows.String()})
	out := filepath.Join(dir, "answers.jsonl")
	code, stdout, stderr := system1(t, nil, "run", "--config", cfg, "--questions", filepath.Join(dir, "q.json"), "--in", filepath.Join(dir, "rows.csv"), "--out", out)
	if code != 3 || !strings.Contains(stdout, fmt.Sprintf("rows        %d of %d", n, n)) || !strings.Contains(stdout, "invalid_row 1") {
		t.Fatalf("exit %d (want 3)\n%s%s", code, stdout, stderr)
	}
	lines := readLines(t, out)
	if len(lines) != n {
		t.Fatalf("%d lines for %d rows", len(lines), n)
	}
	for i, l := range lines {
		switch {
		case i == bad && (l.Error == nil || l.Error.Type != "invalid_row" || l.Error.Line != i+2):
			t.Errorf("the broken row: %+v", l)
		case i != bad && (l.Error != nil || string(l.ID) != fmt.Sprintf(`"t-%d"`, i)):
			t.Errorf("line %d: id %s, error %+v", i+1, l.ID, l.Error)
		}
	}
}

// A state over the System One wire's limit is the same error row whether
// the run decides locally (--config) or through an endpoint (--url): a
// 422 naming the limit, never asked of the engine.
func TestRunStateLimitOnEveryPath(t *testing.T) {
	eng, cfg := fakeNode(t, fakeengine.Behavior{Prompted: byTopic}, "decision_log: {off: true}\n")
	big := strings.Repeat("x", 300000) + " about billing"
	dir := writeFiles(t, map[string]string{
		"q.json":     runQuestions,
		"rows.jsonl": `{"id":"small","state":"about tech"}` + "\n" + `{"id":"big","state":"` + big + `"}` + "\n",
	})
	base, _, stop, err := testbin.Serve(testbin.Binary(t), time.Minute, "--config", cfg, "--state-dir", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	type errorRow struct {
		Type    string `json:"type"`
		Message string `json:"message"`
		Status  int    `json:"status"`
		Line    int    `json:"line"`
	}
	var rows []errorRow
	for _, via := range [][]string{{"--config", cfg}, {"--url", base}} {
		out := filepath.Join(t.TempDir(), "answers.jsonl")
		args := append([]string{"run", "--questions", filepath.Join(dir, "q.json"), "--in", filepath.Join(dir, "rows.jsonl"), "--out", out}, via...)
		code, stdout, stderr := system1(t, nil, args...)
		data, _ := os.ReadFile(out)
		var got []struct {
			ID    string    `json:"id"`
			Error *errorRow `json:"error"`
		}
		for l := range strings.Lines(string(data)) {
			var one struct {
				ID    string    `json:"id"`
				Error *errorRow `json:"error"`
			}
			if err := json.Unmarshal([]byte(l), &one); err != nil {
				t.Fatal(err)
			}
			got = append(got, one)
		}
		if code != 3 || len(got) != 2 || got[0].Error != nil || got[1].Error == nil {
			t.Fatalf("%v: exit %d, %d lines (%+v)\n%s%s", via, code, len(got), got, stdout, stderr)
		}
		rows = append(rows, *got[1].Error)
		for _, r := range eng.Inferences() {
			if strings.Contains(r.User, big[:1000]) {
				t.Fatalf("%v: the engine was asked about the state over the limit", via)
			}
		}
	}
	want := fmt.Sprintf("at most %d are accepted", decision.DefaultLimits().MaxStateBytes)
	if rows[0] != rows[1] || rows[0].Type != "rejected" || rows[0].Status != 422 || !strings.Contains(rows[0].Message, want) {
		t.Fatalf("the error rows differ or do not name the limit (%q):\n--config %+v\n--url    %+v", want, rows[0], rows[1])
	}
}

// rowsFile writes n JSONL rows about billing or tech, each id t-<i>
// followed by idTail, and the questions, and returns their paths.
func rowsFile(t *testing.T, n int, idTail string) (questions, in string) {
	t.Helper()
	var rows strings.Builder
	for i := range n {
		fmt.Fprintf(&rows, `{"id":"t-%d%s","state":{"body":"ticket %d about %s"}}`+"\n", i, idTail, i, []string{"billing", "tech"}[i%2])
	}
	dir := writeFiles(t, map[string]string{"q.json": runQuestions, "rows.jsonl": rows.String()})
	return filepath.Join(dir, "q.json"), filepath.Join(dir, "rows.jsonl")
}

// --out may be something else than a regular file: a pipe (/dev/stdout
// into another program) is written as a stream, in order, with no resume,
// and the summary goes to stderr so that stdout holds only answer lines;
// a device that refuses the writes (/dev/full) ends the run at once with
// the write's error and exit 1.
func TestRunOutNotARegularFile(t *testing.T) {
	_, cfg := fakeNode(t, fakeengine.Behavior{Prompted: byTopic}, "decision_log: {off: true}\n")
	const n = 50
	questions, in := rowsFile(t, n, "")
	t.Run("stdout", func(t *testing.T) {
		code, stdout, stderr := system1(t, nil, "run", "--config", cfg, "--questions", questions, "--in", in, "--out", "/dev/stdout")
		lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
		if code != 0 || len(lines) != n || !strings.Contains(stderr, fmt.Sprintf("rows        %d of %d", n, n)) {
			t.Fatalf("exit %d, %d lines on stdout\n%s\n%s", code, len(lines), stdout, stderr)
		}
		for i, l := range lines {
			var one struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal([]byte(l), &one); err != nil || one.ID != fmt.Sprintf("t-%d", i) {
				t.Fatalf("line %d: %s (%v)", i+1, l, err)
			}
		}
	})
	t.Run("full", func(t *testing.T) {
		if _, err := os.Stat("/dev/full"); err != nil {
			t.Skip("no /dev/full")
		}
		code, stdout, stderr := system1(t, nil, "run", "--config", cfg, "--questions", questions, "--in", in, "--out", "/dev/full")
		if code != 1 || !strings.Contains(stderr, "writing /dev/full") || !strings.Contains(stderr, "no space left on device") {
			t.Fatalf("exit %d (want 1)\n%s%s", code, stdout, stderr)
		}
	})
}

// SIGTERM ends a run whose --out is a pipe nobody reads: the writes
// blocked on it are given up, and the run exits 1 saying it was
// interrupted.
func TestRunSIGTERMWithAStuckPipe(t *testing.T) {
	var asked atomic.Int64 // rows asked their first question
	counting := func(r fakeengine.Request) []float64 {
		if strings.Contains(r.User, "Which team?") {
			asked.Add(1)
		}
		return byTopic(r)
	}
	_, cfg := fakeNode(t, fakeengine.Behavior{Prompted: counting}, "decision_log: {off: true}\n")
	// Each answer line is longer than the pipe (its id is): a write of
	// up to PIPE_BUF bytes is all or nothing, so lines short enough to be
	// flushed a few at a time could leave the run blocked on a pipe not
	// yet full (CI saw it wait two minutes at 67 rows); a longer write
	// fills what room there is, and the pipe fills whole.
	const n = 200
	questions, in := rowsFile(t, n, "-"+strings.Repeat("x", 8192))
	fifo := filepath.Join(t.TempDir(), "answers")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no named pipes here:", err)
	}
	// The reader end is held open and never read, the pipe made as small
	// as Linux allows, so that the answer lines overflow it whatever
	// their length.
	r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	const setPipeSize, getPipeSize = 1031, 1032 // F_SETPIPE_SZ, F_GETPIPE_SZ
	syscall.Syscall(syscall.SYS_FCNTL, r.Fd(), setPipeSize, 4096)
	size, _, errno := syscall.Syscall(syscall.SYS_FCNTL, r.Fd(), getPipeSize, 0)
	if errno != 0 {
		t.Skip("the pipe's size cannot be read here:", errno)
	}
	queued := func() int { // bytes written to the pipe and not read (FIONREAD)
		var n int32
		syscall.Syscall(syscall.SYS_IOCTL, r.Fd(), syscall.TIOCINQ, uintptr(unsafe.Pointer(&n)))
		return int(n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testbin.Binary(t), "run", "--config", cfg, "--questions", questions, "--in", in, "--out", fifo)
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The pipe full: the run cannot write the rest of its lines, and
	// waits on the pipe until the signal.
	for queued() < int(size) && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	if asked.Load() == 0 {
		t.Fatal("the pipe filled before a row was asked")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf("the run did not end on SIGTERM\n%s", stderr.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(stderr.String(), "interrupted") {
		t.Fatalf("exit %d (%v), want 1 saying it was interrupted\n%s", code, err, stderr.String())
	}
}

// A labelled CSV teaches calibration: --outcome dept=label keeps the
// label column out of the state the model reads, the summary measures the
// answers against it, and each label is recorded as feedback on its
// answer in the decision log, where calibrate --report reads it.
func TestRunOutcomeColumns(t *testing.T) {
	eng, cfg := fakeNode(t, fakeengine.Behavior{Prompted: byTopic}, "")
	const n = 20
	var rows strings.Builder
	rows.WriteString("id,body,label\n")
	for i := range n {
		topic := []string{"billing", "tech"}[i%2]
		label := topic
		if i%5 == 0 {
			label = []string{"tech", "billing"}[i%2] // the model is wrong here
		}
		fmt.Fprintf(&rows, "t-%d,ticket %d about %s,%s\n", i, i, topic, label)
	}
	dir := writeFiles(t, map[string]string{"q.json": runQuestions, "rows.csv": rows.String()})
	state := t.TempDir()
	out := filepath.Join(dir, "answers.jsonl")
	code, stdout, stderr := system1(t, nil, "run", "--config", cfg, "--state-dir", state, "--questions", filepath.Join(dir, "q.json"),
		"--in", filepath.Join(dir, "rows.csv"), "--out", out, "--outcome", "dept=label")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	for _, p := range prompts(eng) {
		if strings.Contains(p, "label") {
			t.Fatalf("the outcome column reached the model:\n%s", p)
		}
	}
	// 16 of 20 right; the table's row for dept says so.
	if !regexp.MustCompile(`(?m)^dept\s+20\s+0\.800\s`).MatchString(stdout) || !strings.Contains(stdout, "20 outcomes recorded") {
		t.Fatalf("summary:\n%s", stdout)
	}
	code, report, stderr := system1(t, nil, "calibrate", "--report", "--config", cfg, "--state-dir", state)
	var rep struct {
		Buckets []struct {
			Kind     string  `json:"kind"`
			Outcomes int     `json:"outcomes"`
			Accuracy float64 `json:"accuracy"`
		} `json:"buckets"`
	}
	if code != 0 || json.Unmarshal([]byte(report), &rep) != nil || len(rep.Buckets) != 1 ||
		rep.Buckets[0].Kind != "choice" || rep.Buckets[0].Outcomes != n || rep.Buckets[0].Accuracy != 0.8 {
		t.Fatalf("calibrate --report does not hold the %d outcomes: exit %d\n%s%s", n, code, report, stderr)
	}
}

// With the decision log off, the outcomes are still measured, and the
// summary says that none could be recorded and why.
func TestRunOutcomesWithTheLogOff(t *testing.T) {
	_, cfg := fakeNode(t, fakeengine.Behavior{Prompted: byTopic}, "decision_log: {off: true}\n")
	dir := writeFiles(t, map[string]string{"q.json": runQuestions,
		"rows.jsonl": `{"id":1,"state":"about billing","label":"billing"}` + "\n" + `{"id":2,"state":"about tech","label":"billing"}` + "\n"})
	code, stdout, stderr := system1(t, nil, "run", "--config", cfg, "--questions", filepath.Join(dir, "q.json"),
		"--in", filepath.Join(dir, "rows.jsonl"), "--out", filepath.Join(dir, "out.jsonl"), "--outcome", "dept=label")
	if code != 0 || !regexp.MustCompile(`(?m)^dept\s+2\s+0\.500\s`).MatchString(stdout) ||
		!strings.Contains(stdout, "0 outcomes recorded, then no more: the decision log is off") {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
}

// system1 run keeps serve's floor under the collector's heap target: a
// run's live heap is a few MiB, and Go's default collected it every
// hundred rows. Read from the runtime's own trace of each collection
// (GODEBUG=gctrace=1, on stderr): once the floor is set, after the first
// collection, the goal is at least its 16 MiB; a GOGC in the environment
// turns it off, and the goal follows the live heap, under it.
func TestRunKeepsTheCollectorFloor(t *testing.T) {
	_, cfg := fakeNode(t, fakeengine.Behavior{Prompted: byTopic}, "decision_log: {off: true}\n")
	questions, in := rowsFile(t, 5000, "")
	goal := regexp.MustCompile(`(?m)^gc \d+ .* (\d+) MB goal`)
	for _, tc := range []struct {
		env   []string
		floor bool
	}{
		{env: []string{"GODEBUG=gctrace=1"}, floor: true},
		{env: []string{"GODEBUG=gctrace=1", "GOGC=100"}, floor: false},
	} {
		t.Run(strings.Join(tc.env, " "), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "answers.jsonl")
			code, _, stderr := system1(t, tc.env, "run", "--config", cfg, "--questions", questions, "--in", in, "--out", out)
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, stderr)
			}
			goals := goal.FindAllStringSubmatch(stderr, -1)
			// The floor is set after the first collection; the last is
			// one after it.
			if len(goals) < 2 {
				t.Fatalf("%d collections over 5,000 rows, want 2 or more to see the floor:\n%s", len(goals), stderr)
			}
			last, _ := strconv.Atoi(goals[len(goals)-1][1])
			if got := last >= 16; got != tc.floor {
				t.Errorf("the last collection's heap goal %d MB (of %d collections); at least the 16 MiB floor: %v, want %v", last, len(goals), got, tc.floor)
			}
		})
	}
}

// With prompts_per_call, the questions that wait for the node together
// go in llama.cpp's /completion calls of several prompts, and every row
// is answered as it is with each question in a call of its own.
func TestRunPromptsPerCall(t *testing.T) {
	// Calls that take a while: while the first learns the template, the
	// others go alone, and the 20 ms leave it time over 400 questions.
	eng := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Slots: 16,
		Behavior: fakeengine.Behavior{Prompted: byTopic, Latency: 20 * time.Millisecond}})
	t.Cleanup(eng.Close)
	const n = 200
	questions, in := rowsFile(t, n, "")
	answers := map[int][]string{}
	for _, per := range []int{0, 8} {
		dir := t.TempDir()
		cfg := filepath.Join(dir, "config.yaml")
		yaml := fmt.Sprintf("decision_log: {off: true}\nnodes:\n  - {name: local, url: %q, dialect: llamacpp, models: [fake], prompts_per_call: %d}\n", eng.URL, per)
		if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "answers.jsonl")
		if code, _, stderr := system1(t, nil, "run", "--config", cfg, "--questions", questions, "--in", in, "--out", out); code != 0 {
			t.Fatalf("prompts_per_call %d: exit %d\n%s", per, code, stderr)
		}
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		latency := regexp.MustCompile(`"latency_ms":\d+`)
		for l := range strings.Lines(string(data)) {
			answers[per] = append(answers[per], latency.ReplaceAllString(l, ""))
		}
		slices.Sort(answers[per])
		calls, listed, alone := map[string]bool{}, 0, 0
		for _, r := range eng.Inferences() {
			if !strings.Contains(r.User, `"body":"ticket`) { // the fingerprint's canary, not a row
				continue
			}
			switch r.Path {
			case "/completion":
				listed++
				calls[string(r.Body)] = true
			case fakeengine.LlamaCpp.InferencePath():
				alone++
			}
		}
		eng.Reset()
		switch {
		case per == 0 && (listed != 0 || alone != 2*n):
			t.Errorf("prompts_per_call 0: %d prompts in lists and %d chat calls, want 0 and %d", listed, alone, 2*n)
		// Reads go alone only while the first learns the template.
		case per > 0 && (listed < n || len(calls) >= listed):
			t.Errorf("prompts_per_call %d: %d prompts in %d calls and %d chat calls, want most of %d prompts in fewer calls", per, listed, len(calls), alone, 2*n)
		}
	}
	if len(answers[0]) != n || !slices.Equal(answers[0], answers[8]) {
		t.Errorf("answers differ:\n%s\n%s", strings.Join(answers[0][:3], ""), strings.Join(answers[8][:3], ""))
	}
}

// A serving node with prompts_per_call reports the calls of several
// prompts it was sent, and the prompts they carried, on /health and
// /metrics: the counts of what the engine got.
func TestServeReportsPromptLists(t *testing.T) {
	eng := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Slots: 8,
		Behavior: fakeengine.Behavior{Prompted: byTopic, Latency: 5 * time.Millisecond}})
	t.Cleanup(eng.Close)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	// No canary: only the requests' questions reach the engine.
	yaml := fmt.Sprintf("decision_log: {off: true}\nfingerprint: {off: true}\nnodes:\n  - {name: local, url: %q, dialect: llamacpp, models: [fake], prompts_per_call: 4}\n", eng.URL)
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	base, _, stop, err := testbin.Serve(testbin.Binary(t), time.Minute, "--config", cfg, "--state-dir", filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	ask := func(i int) {
		body := fmt.Sprintf(`{"model":"fake","state":{"body":"ticket %d about billing"},"questions":{"dept":{"type":"choice","instructions":"Which team?","criteria":{"billing":null,"tech":null}},"urgent":{"type":"noul","instructions":"Today?"}}}`, i)
		if resp, data := testbin.Do(t, http.DefaultClient, http.MethodPost, base+"/v1/systemone", body); resp.StatusCode != http.StatusOK {
			t.Errorf("%d %s", resp.StatusCode, data)
		}
	}
	// The first question learns the template; the rest go in lists.
	ask(0)
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() { ask(i + 1) })
	}
	wg.Wait()
	calls, prompts := map[string]bool{}, 0
	for _, r := range eng.Inferences() {
		if r.Path == "/completion" {
			prompts++
			calls[string(r.Body)] = true
		}
	}
	_, data := testbin.Do(t, http.DefaultClient, http.MethodGet, base+"/health", "")
	var health struct {
		Nodes []struct {
			PromptLists *struct{ Calls, Prompts int } `json:"prompt_lists"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(data, &health); err != nil || len(health.Nodes) != 1 || health.Nodes[0].PromptLists == nil {
		t.Fatalf("/health: %v\n%s", err, data)
	}
	got := *health.Nodes[0].PromptLists
	if got.Calls != len(calls) || got.Prompts != prompts || prompts == 0 {
		t.Errorf("/health says %d calls of %d prompts; the engine got %d calls of %d", got.Calls, got.Prompts, len(calls), prompts)
	}
	_, data = testbin.Do(t, http.DefaultClient, http.MethodGet, base+"/metrics", "")
	for _, want := range []string{fmt.Sprintf(`system1_node_list_calls_total{node="local"} %d`, got.Calls), fmt.Sprintf(`system1_node_list_prompts_total{node="local"} %d`, got.Prompts)} {
		if !strings.Contains(string(data), want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
