package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"system1/internal/calibration"
	"system1/internal/calibration/fitting"
	"system1/internal/decision"
	"system1/internal/systemone"
)

func runJob(t *testing.T, in, out string, d Decider, tweak ...func(*Options)) (Summary, error) {
	t.Helper()
	opt := Options{In: in, Out: out, Job: testJob(t), Decider: d, SyncEvery: 10 * time.Millisecond}
	for _, f := range tweak {
		f(&opt)
	}
	return Run(context.Background(), opt)
}

// randomDelay is a delay of 0 to 3ms, fixed per state but in no order.
func randomDelay(state []byte) time.Duration {
	h := fnv.New32()
	h.Write(state)
	return time.Duration(h.Sum32()%3000) * time.Microsecond
}

// batchFake is fakeDecider that also takes batches, asking each state.
type batchFake struct {
	fakeDecider
	max     int
	batches atomic.Int64
}

func (b *batchFake) MaxBatch() int { return b.max }

func (b *batchFake) DecideBatch(ctx context.Context, job decision.Request, states []json.RawMessage) ([]Result, []error, error) {
	b.batches.Add(1)
	res, errs := make([]Result, len(states)), make([]error, len(states))
	for i, s := range states {
		req := job
		req.State = s
		res[i], errs[i] = b.Decide(ctx, req)
	}
	return res, errs, nil
}

// Rows finish in any order; they are written in input order, each once,
// however small the window.
func TestOrderUnderRandomDelays(t *testing.T) {
	for _, tc := range []struct {
		name   string
		d      Decider
		window int
	}{
		{"16 in flight", &fakeDecider{capacity: 16, delay: randomDelay}, 0},
		{"a window of 8", &fakeDecider{capacity: 16, delay: randomDelay}, 8},
		{"a window of 1", &fakeDecider{capacity: 4, delay: randomDelay}, 1},
		{"batches", &batchFake{fakeDecider: fakeDecider{capacity: 4, delay: randomDelay}, max: 7}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			in, out := writeRows(t, dir, 300), filepath.Join(dir, "out.jsonl")
			s, err := runJob(t, in, out, tc.d, func(o *Options) { o.Window = tc.window })
			if err != nil {
				t.Fatal(err)
			}
			checkAnswers(t, readOut(t, out), 300)
			if s.Rows != 300 || s.Total != 300 || s.Errors != 0 {
				t.Fatalf("summary %+v", s)
			}
			if b, ok := tc.d.(*batchFake); ok && (b.batches.Load() == 0 || b.calls.Load() != 300) {
				t.Fatalf("%d batches, %d rows asked", b.batches.Load(), b.calls.Load())
			}
		})
	}
}

// The decider's capacity is what is kept in flight: no more, and (with
// rows waiting) no less. The first rows are held until capacity rows are
// in flight at once, so that reaching it does not depend on the runner
// sending rows faster than the decider answers them; a runner that keeps
// fewer in flight is let go after 10 s and fails.
func TestConcurrencyFollowsCapacity(t *testing.T) {
	for _, capacity := range []int{1, 3, 12} {
		var now, peak atomic.Int64
		full := make(chan struct{})
		var once sync.Once
		fill := func() { once.Do(func() { close(full) }) }
		timer := time.AfterFunc(10*time.Second, fill)
		d := &fakeDecider{capacity: capacity, delay: func([]byte) time.Duration {
			n := now.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			if n >= int64(capacity) {
				fill()
			}
			<-full
			return 2 * time.Millisecond
		}}
		d.fail = func([]byte) error { now.Add(-1); return nil }
		dir := t.TempDir()
		if _, err := runJob(t, writeRows(t, dir, 200), filepath.Join(dir, "out.jsonl"), d); err != nil {
			t.Fatal(err)
		}
		timer.Stop()
		if got := peak.Load(); got != int64(capacity) {
			t.Errorf("capacity %d: %d rows were in flight at most", capacity, got)
		}
	}
}

// A malformed row is an error row naming its line; the rows around it are
// answered, and the run succeeds.
func TestMalformedRowBecomesErrorRow(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	content := `{"id":"r0","state":{"text":"row 0"}}` + "\n" +
		`{"id":"r1","state":{"text":` + "\n" +
		`{"id":"r2","state":{"text":"row 2"}}` + "\n" +
		`{"id":"r3"}` + "\n"
	if err := os.WriteFile(in, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.jsonl")
	s, err := runJob(t, in, out, &fakeDecider{capacity: 2})
	if err != nil {
		t.Fatal(err)
	}
	lines := readOut(t, out)
	if len(lines) != 4 {
		t.Fatalf("%d lines", len(lines))
	}
	if string(lines[0].ID) != `"r0"` || lines[0].Error != nil || string(lines[2].ID) != `"r2"` || lines[2].Error != nil {
		t.Fatalf("answered rows: %+v %+v", lines[0], lines[2])
	}
	if e := lines[1].Error; string(lines[1].ID) != "null" || e == nil || e.Type != ErrorInvalidRow || e.Line != 2 || !strings.Contains(e.Message, "line 2 is not valid JSON") {
		t.Fatalf("line 2: id %s error %+v", lines[1].ID, e)
	}
	if e := lines[3].Error; string(lines[3].ID) != `"r3"` || e == nil || e.Type != ErrorInvalidRow || e.Message != "line 4: state: required" {
		t.Fatalf("line 4: id %s error %+v", lines[3].ID, e)
	}
	if s.Rows != 4 || s.Errors != 2 || s.ErrorTypes[ErrorInvalidRow] != 2 {
		t.Fatalf("summary %+v", s)
	}
}

// A row the decider fails is an error row of its type; the run goes on.
func TestRowErrorsAreWritten(t *testing.T) {
	dir := t.TempDir()
	in, out := writeRows(t, dir, 6), filepath.Join(dir, "out.jsonl")
	d := &fakeDecider{capacity: 3, fail: func(state []byte) error {
		switch string(state) {
		case `{"text":"row 1"}`:
			return &systemone.StatusError{Code: 422, Message: "state: too long"}
		case `{"text":"row 4"}`:
			return fmt.Errorf("%w: answers.dept: missing", systemone.ErrMalformed)
		}
		return nil
	}}
	s, err := runJob(t, in, out, d)
	if err != nil {
		t.Fatal(err)
	}
	lines := readOut(t, out)
	if e := lines[1].Error; e == nil || e.Type != ErrorRejected || e.Status != 422 || e.Message != "state: too long" || e.Line != 2 {
		t.Fatalf("row 1: %+v", e)
	}
	if e := lines[4].Error; e == nil || e.Type != ErrorMalformedReply {
		t.Fatalf("row 4: %+v", e)
	}
	if s.Errors != 2 || s.Rows != 6 {
		t.Fatalf("summary %+v", s)
	}
}

// A decider that is unavailable stops the run before the row: nothing is
// written for it or after it, and the next run resumes there.
func TestUnavailableStopsAndResumes(t *testing.T) {
	dir := t.TempDir()
	in, out := writeRows(t, dir, 40), filepath.Join(dir, "out.jsonl")
	down := &fakeDecider{capacity: 4, fail: func(state []byte) error {
		if string(state) == `{"text":"row 17"}` {
			return fmt.Errorf("%w: status 503: busy (tried 5 times)", ErrUnavailable)
		}
		return nil
	}}
	s, err := runJob(t, in, out, down)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "run again to resume") {
		t.Fatalf("err %v", err)
	}
	lines := readOut(t, out)
	if len(lines) > 17 || s.Rows != len(lines) {
		t.Fatalf("%d lines written, summary %d rows", len(lines), s.Rows)
	}
	checkAnswers(t, lines, len(lines))
	up := &fakeDecider{capacity: 4}
	s, err = runJob(t, in, out, up)
	if err != nil {
		t.Fatal(err)
	}
	checkAnswers(t, readOut(t, out), 40)
	if s.Resumed != len(lines) || int(up.calls.Load()) != 40-len(lines) {
		t.Fatalf("resumed %d, asked %d, after %d lines", s.Resumed, up.calls.Load(), len(lines))
	}
}

// A write that fails stops the run, and the summary counts only the rows
// whose lines reached the output: with every write failing (/dev/full),
// none, where it counted every row answered before the failure.
func TestWriteFailureCountsOnlyWrittenRows(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	dir := t.TempDir()
	in := writeRows(t, dir, 50)
	s, err := runJob(t, in, "/dev/full", &fakeDecider{capacity: 4})
	if err == nil || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("err %v", err)
	}
	if s.Rows != 0 || s.Errors != 0 || s.InputTokens != 0 || s.RowsPerSecond != 0 || len(s.Questions) != 0 {
		t.Fatalf("nothing was written, but the summary says %d rows, %d errors, %d input tokens, %.1f rows/s",
			s.Rows, s.Errors, s.InputTokens, s.RowsPerSecond)
	}
}

// Cutting the last line anywhere (a crash during its write) costs only
// that row: the next run removes the torn part, asks the row again, and
// the answers are those of an uninterrupted run.
func TestResumeAfterTornLastLine(t *testing.T) {
	dir := t.TempDir()
	in, full := writeRows(t, dir, 5), filepath.Join(dir, "full.jsonl")
	if _, err := runJob(t, in, full, &fakeDecider{capacity: 2}); err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile(full)
	if err != nil {
		t.Fatal(err)
	}
	lastStart := bytes.LastIndexByte(whole[:len(whole)-1], '\n') + 1
	for cut := lastStart; cut <= len(whole); cut++ {
		out := filepath.Join(dir, fmt.Sprintf("out-%d.jsonl", cut))
		if err := os.WriteFile(out, whole[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		d := &fakeDecider{capacity: 2}
		s, err := runJob(t, in, out, d)
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		got, _ := os.ReadFile(out)
		if withoutLatency(got) != withoutLatency(whole) {
			t.Fatalf("cut at %d:\n%s\nwant\n%s", cut, got, whole)
		}
		wantAsked := 1
		if cut == len(whole) {
			wantAsked = 0
		}
		if int(d.calls.Load()) != wantAsked || s.Resumed != 5-wantAsked {
			t.Fatalf("cut at %d: asked %d rows, resumed %d", cut, d.calls.Load(), s.Resumed)
		}
		if cut == len(whole) {
			continue
		}
		// Asked again, the row may come back shorter (here an error):
		// nothing of the torn line may remain after it.
		if err := os.WriteFile(out, whole[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		failing := &fakeDecider{capacity: 2, fail: func([]byte) error { return errors.New("no") }}
		if _, err := runJob(t, in, out, failing); err != nil {
			t.Fatal(err)
		}
		got, _ = os.ReadFile(out)
		want := string(whole[:lastStart]) + `{"id":"r4","error":{"type":"failed","message":"no","line":5}}` + "\n"
		if string(got) != want {
			t.Fatalf("cut at %d, the row failing:\n%s\nwant\n%s", cut, got, want)
		}
	}
}

// Ctrl-C (the context cancelled) stops the run with whole lines only;
// the next run asks only the rows not written, and the answers hold every
// row once, in order.
func TestResumeAfterCleanStop(t *testing.T) {
	dir := t.TempDir()
	in, out := writeRows(t, dir, 200), filepath.Join(dir, "out.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	var asked atomic.Int64
	d := &fakeDecider{capacity: 8, delay: func([]byte) time.Duration {
		if asked.Add(1) == 60 {
			cancel()
		}
		return time.Millisecond
	}}
	opt := Options{In: in, Out: out, Job: testJob(t), Decider: d}
	s, err := Run(ctx, opt)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "interrupted after") {
		t.Fatalf("err %v", err)
	}
	first := readOut(t, out)
	if len(first) == 0 || len(first) >= 200 || s.Rows != len(first) {
		t.Fatalf("%d lines after the stop, summary %d", len(first), s.Rows)
	}
	d2 := &fakeDecider{capacity: 8}
	s, err = Run(context.Background(), Options{In: in, Out: out, Job: testJob(t), Decider: d2})
	if err != nil {
		t.Fatal(err)
	}
	checkAnswers(t, readOut(t, out), 200)
	for state, n := range d2.asked {
		if n != 1 {
			t.Fatalf("%s asked %d times", state, n)
		}
	}
	if len(d2.asked) != 200-len(first) || s.Resumed != len(first) || s.Rows != 200 {
		t.Fatalf("asked %d rows after %d written; summary %+v", len(d2.asked), len(first), s)
	}
}

// The answers of another input (other ids, other questions, more rows)
// are never appended to: the run refuses, and the file is left as it was.
func TestResumeRefusesOtherInput(t *testing.T) {
	dir := t.TempDir()
	in, out := writeRows(t, dir, 10), filepath.Join(dir, "out.jsonl")
	if _, err := runJob(t, in, out, &fakeDecider{capacity: 2}); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(out)
	other := filepath.Join(dir, "other.jsonl")
	if err := os.WriteFile(other, bytes.ReplaceAll(mustRead(t, in), []byte(`"r3"`), []byte(`"x3"`)), 0o644); err != nil {
		t.Fatal(err)
	}
	shorter := filepath.Join(dir, "short.jsonl")
	if err := os.WriteFile(shorter, bytes.Join(bytes.SplitAfter(mustRead(t, in), []byte("\n"))[:4], nil), 0o644); err != nil {
		t.Fatal(err)
	}
	otherJob, err := ParseQuestions([]byte(`{"urgent":{"type":"noul"},"mood":{"type":"score","criteria":["calm","angry"]}}`), "m1", decision.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, in string
		job      *decision.Request
		err      string
	}{
		{"another id", other, nil, `line 4: id "r3", but the input's row there (line 4) has id "x3"`},
		{"fewer rows", shorter, nil, "line 5: the answers have more rows than the input"},
		{"other questions", in, &otherJob, "line 1: does not answer this job's questions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &fakeDecider{capacity: 2}
			_, err := runJob(t, tc.in, out, d, func(o *Options) {
				if tc.job != nil {
					o.Job = *tc.job
				}
			})
			if !errors.Is(err, ErrOtherInput) || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err %v, want %q", err, tc.err)
			}
			if after, _ := os.ReadFile(out); !bytes.Equal(after, before) || d.calls.Load() != 0 {
				t.Fatalf("the answers changed or rows were asked (%d)", d.calls.Load())
			}
		})
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The summary counts the whole job, resumed rows included, and measures
// the answers against the outcomes the rows give.
func TestSummaryMeasuresExpectedOutcomes(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	job := testJob(t)
	var b bytes.Buffer
	var preds []calibration.Prediction
	for i := range 50 {
		state := fmt.Appendf(nil, `{"text":"row %d"}`, i)
		d := dists(state)[1]
		// Every third row's outcome is not what the decider picks.
		exp := d.Argmax()
		if i%3 == 0 {
			exp = (exp + 1) % 3
		}
		fmt.Fprintf(&b, `{"id":%d,"state":%s,"expected":{"dept":%q}}`+"\n", i, state, job.Questions[1].Options[exp].Key)
		res, _ := answersFor(job, state)
		preds = append(preds, calibration.Prediction{Kind: decision.Choice, Dist: dist(job.Questions[1], res.Answers[1]), Expected: exp, Options: 3})
	}
	if err := os.WriteFile(in, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.jsonl")
	// Half the job, then the rest: the summary is the job's either way.
	half := filepath.Join(dir, "half.jsonl")
	if err := os.WriteFile(half, bytes.Join(bytes.SplitAfter(b.Bytes(), []byte("\n"))[:25], nil), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runJob(t, half, out, &fakeDecider{capacity: 3}); err != nil {
		t.Fatal(err)
	}
	s, err := runJob(t, in, out, &fakeDecider{capacity: 3})
	if err != nil {
		t.Fatal(err)
	}
	if s.Rows != 50 || s.Resumed != 25 || len(s.Questions) != 1 || s.Questions[0].ID != "dept" {
		t.Fatalf("summary %+v", s)
	}
	want := fitting.Measure(preds)
	got := s.Questions[0].Metrics
	if got.N != 50 || math.Abs(got.Accuracy-want.Accuracy) > 1e-12 || math.Abs(got.ECE-want.ECE) > 1e-12 || math.Abs(got.NLL-want.NLL) > 1e-12 {
		t.Fatalf("metrics %+v, want %+v", got, want)
	}
	if math.Abs(got.Accuracy-33.0/50) > 1e-12 {
		t.Fatalf("accuracy %v, want 0.66 (every third row is wrong)", got.Accuracy)
	}
	var tokens int
	for i := range 50 {
		tokens += len(fmt.Sprintf(`{"text":"row %d"}`, i))
	}
	if s.InputTokens != tokens || s.OutputTokens != 50 {
		t.Fatalf("tokens %d in %d out, want %d and 50", s.InputTokens, s.OutputTokens, tokens)
	}
	var text bytes.Buffer
	if err := s.WriteText(&text); err != nil || !strings.Contains(text.String(), "rows        50 of 50 (25 written by earlier runs)") ||
		!strings.Contains(text.String(), "dept") {
		t.Fatalf("%v\n%s", err, text.String())
	}
}

// Progress on a writer that is not a terminal is plain lines: rows, rate,
// errors. The last row is held until a line has been drawn while the run
// is going, so that a tick lands mid-run however the progress goroutine
// is scheduled (on a busy machine it may first wake once the run is over,
// when it may draw only the last line).
func TestProgressLines(t *testing.T) {
	dir := t.TempDir()
	in, out := writeRows(t, dir, 30), filepath.Join(dir, "out.jsonl")
	p := &signalledWriter{wrote: make(chan struct{})}
	last := []byte(`{"text":"row 29"}`)
	_, err := runJob(t, in, out, &fakeDecider{capacity: 2, delay: func(state []byte) time.Duration {
		if bytes.Equal(state, last) {
			select {
			case <-p.wrote:
			case <-time.After(time.Minute): // a hang guard: the tick is every 5 ms
			}
		}
		return time.Millisecond
	}}, func(o *Options) {
		o.Progress, o.ProgressEvery = p, 5*time.Millisecond
	})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(p.b.String()), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[len(lines)-1], "30/30 rows (100.0%), ") ||
		!strings.HasSuffix(lines[len(lines)-1], ", 0 errors") || strings.Contains(p.b.String(), "\r") {
		t.Fatalf("progress:\n%s", p.b.String())
	}
}

// signalledWriter is a progress writer that closes wrote at its first
// write. Only the progress goroutine writes; the test reads b once the
// run has returned.
type signalledWriter struct {
	b     bytes.Buffer
	wrote chan struct{}
	once  sync.Once
}

func (w *signalledWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.wrote) })
	return w.b.Write(p)
}

// An error row's type is what docs/run.md's table says of its failure:
// a decider's 4xx is rejected, with its status; a 5xx that outlived the
// retries is the row's failure, with its status, not a refusal.
func TestErrorRowTypes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		row    inputRow
		err    error
		typ    string
		status int
		msg    string
	}{
		{"unreadable row", inputRow{Line: 3, Err: errors.New("line 3: id: required")}, errors.New("line 3: id: required"), ErrorInvalidRow, 0, "line 3: id: required"},
		{"422", inputRow{Line: 3}, &systemone.StatusError{Code: 422, Message: "state: too long"}, ErrorRejected, 422, "state: too long"},
		{"413", inputRow{Line: 3}, &systemone.StatusError{Code: 413, Message: "too large"}, ErrorRejected, 413, "too large"},
		{"500 past the retries", inputRow{Line: 3}, &systemone.StatusError{Code: 500, Message: "boom"}, ErrorFailed, 500, "boom"},
		{"malformed reply", inputRow{Line: 3}, fmt.Errorf("%w: no answers", systemone.ErrMalformed), ErrorMalformedReply, 0, ""},
		{"other", inputRow{Line: 3}, errors.New("no route to host"), ErrorFailed, 0, "no route to host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := classify(tc.row, tc.err)
			if e.Type != tc.typ || e.Status != tc.status || e.Line != 3 || (tc.msg != "" && e.Message != tc.msg) {
				t.Fatalf("%+v, want type %s, status %d, message %q", e, tc.typ, tc.status, tc.msg)
			}
		})
	}
}

// A file given as --out whose text after its last newline is not the
// start of an answer line (a file of notes, a questions file) was not written by a run cut short: the run refuses it, and the
// file is left as it was.
func TestResumeRefusesATailThatIsNoAnswerLine(t *testing.T) {
	dir := t.TempDir()
	in := writeRows(t, dir, 3)
	for _, tc := range []struct {
		name, in, out, text, err string
	}{
		{"notes", in, "notes.txt", "my notes, no newline", "line 1 (the last, without a newline) is not the start of an answer line"},
		{"a questions file", in, "questions.json", testQuestions, "line 1 (the last"},
		{"after whole answers", in, "out.jsonl", `{"id":"r0","error":{"type":"failed","message":"no","line":1}}` + "\nnotes", "line 2 (the last"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), tc.out)
			if err := os.WriteFile(out, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			before := mustRead(t, out)
			d := &fakeDecider{capacity: 2}
			_, err := runJob(t, tc.in, out, d)
			if !errors.Is(err, ErrOtherInput) || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err %v, want %q", err, tc.err)
			}
			if after := mustRead(t, out); !bytes.Equal(after, before) || d.calls.Load() != 0 {
				t.Fatalf("the file changed or rows were asked (%d):\n%s", d.calls.Load(), after)
			}
		})
	}
	// Zeros after the last newline are what a power cut leaves of lines
	// that never reached the disk: cut off, and their rows asked again.
	for _, tail := range []string{"\x00\x00\x00\x00", `{"id":"r1","mo` + "\x00\x00"} {
		out := filepath.Join(t.TempDir(), "out.jsonl")
		first := `{"id":"r0","error":{"type":"failed","message":"no","line":1}}` + "\n"
		if err := os.WriteFile(out, []byte(first+tail), 0o644); err != nil {
			t.Fatal(err)
		}
		d := &fakeDecider{capacity: 2}
		if _, err := runJob(t, in, out, d); err != nil || d.calls.Load() != 2 {
			t.Fatalf("tail %q: err %v, asked %d rows, want 2", tail, err, d.calls.Load())
		}
		if after := mustRead(t, out); !bytes.HasPrefix(after, []byte(first)) || bytes.IndexByte(after, 0) >= 0 {
			t.Fatalf("tail %q: the answers are\n%q", tail, after)
		}
	}
}

// --out naming the input file (a slip of the command line) is refused
// before anything is read or written, where a one-row input without a
// final newline read as a torn line and was replaced by its answer.
func TestOutputThatIsTheInputIsRefused(t *testing.T) {
	dir := t.TempDir()
	for _, text := range []string{`{"id":"r0","state":{"text":"row 0"}}`, `{"id":"r0","state":{"text":"row 0"}}` + "\n"} {
		in := filepath.Join(dir, "in.jsonl")
		if err := os.WriteFile(in, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(dir, "link.jsonl")
		os.Remove(link)
		if err := os.Symlink(in, link); err != nil {
			t.Fatal(err)
		}
		for _, out := range []string{in, link} {
			d := &fakeDecider{capacity: 2}
			_, err := runJob(t, in, out, d)
			if err == nil || !strings.Contains(err.Error(), "is the input") {
				t.Errorf("--out %s: err %v, want it refused as the input", filepath.Base(out), err)
			}
			if after := mustRead(t, in); string(after) != text || d.calls.Load() != 0 {
				t.Fatalf("--out %s: the input changed or rows were asked (%d):\n%s", filepath.Base(out), d.calls.Load(), after)
			}
		}
	}
}

// A second run into a file that a run is writing (the same command
// started twice) is refused, and the first run's answers stay whole: two
// runs appending to one file interleaved their lines, which no later run
// could resume.
func TestSecondRunIntoTheSameOutputIsRefused(t *testing.T) {
	dir := t.TempDir()
	in, out := writeRows(t, dir, 40), filepath.Join(dir, "out.jsonl")
	slow := &fakeDecider{capacity: 1, delay: func([]byte) time.Duration { return 25 * time.Millisecond }}
	first := make(chan error, 1)
	go func() {
		_, err := runJob(t, in, out, slow)
		first <- err
	}()
	for deadline := time.Now().Add(5 * time.Second); slow.calls.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first run asked nothing")
		}
	}
	second := &fakeDecider{capacity: 2}
	_, err := runJob(t, in, out, second)
	if err == nil || !strings.Contains(err.Error(), "another run is writing") || second.calls.Load() != 0 {
		t.Errorf("the second run: err %v, asked %d rows", err, second.calls.Load())
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(mustRead(t, out), []byte("\n")), []byte("\n"))
	if len(lines) != 40 {
		t.Fatalf("%d lines for 40 rows", len(lines))
	}
	for i, l := range lines {
		if !bytes.HasPrefix(l, fmt.Appendf(nil, `{"id":"r%d",`, i)) || !json.Valid(l) {
			t.Fatalf("line %d: %s", i+1, l)
		}
	}
}
