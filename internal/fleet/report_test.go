package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"system1/internal/calibration"
	"system1/internal/decision"
	"system1/internal/engine"
)

// Every face reads a failure's class here: the engine's refusal of the
// request is the caller's, a 429 says how long to wait, anything else is
// no answer.
func TestClassify(t *testing.T) {
	for _, c := range []struct {
		err   error
		class Class
		wait  time.Duration
	}{
		{fmt.Errorf("node a: %w", engine.StatusFailure(400, 0, "bad")), CallerError, 0},
		{fmt.Errorf("node a: %w", engine.StatusFailure(422, 0, "bad")), CallerError, 0},
		{fmt.Errorf("node a: %w", &engine.Failure{Kind: engine.Rejected, Err: errors.New("too few labels")}), CallerError, 0},
		{fmt.Errorf("node a: %w", engine.StatusFailure(429, 3*time.Second, "slow down")), NoAnswer, 3 * time.Second},
		{fmt.Errorf("node a: %w", engine.StatusFailure(503, 0, "down")), NoAnswer, 0},
		{fmt.Errorf("node a: %w", &engine.Failure{Kind: engine.Timeout, Err: context.DeadlineExceeded}), TimedOut, 0},
		{fmt.Errorf("node a: %w", &engine.Failure{Kind: engine.Malformed, Err: errors.New("NaN")}), Malformed, 0},
		{context.DeadlineExceeded, TimedOut, 0},
		{errors.New("every node is cooling down"), NoAnswer, 0},
	} {
		class, wait := Classify(c.err)
		if class != c.class || wait != c.wait {
			t.Errorf("%v: %s, %s; want %s, %s", c.err, class, wait, c.class, c.wait)
		}
	}
	if got := Cause(fmt.Errorf("node a: %w", engine.StatusFailure(422, 0, "options over budget"))); got.Error() != "options over budget" {
		t.Errorf("cause %q", got)
	}
}

// The report calibrates by the fits, sums usage and collects warnings in
// question order, the same for every face.
func TestReport(t *testing.T) {
	req := decision.Request{Model: "m", Questions: []decision.Question{
		{ID: "q1", Kind: decision.Choice, Options: make([]decision.Option, 3)},
		{ID: "q2", Kind: decision.Noul, Options: make([]decision.Option, 2)},
	}}
	res := &Result{Questions: []Answered{
		{Outcome: engine.Outcome{Dist: decision.Distribution{0.7, 0.2, 0.1}, Model: "m", InputTokens: 10, OutputTokens: 1, Missing: []string{"c"}}},
		{Outcome: engine.Outcome{Dist: decision.Distribution{0.6, 0.4}, Model: "m", InputTokens: 5, OutputTokens: 1, Estimated: true}},
	}}
	rep := res.Report(req, nil, "")
	if rep.Calibrated || rep.Usage != (Usage{15, 2, true}) || len(rep.Warnings) != 1 || !strings.HasPrefix(rep.Warnings[0].String(), "q1: options c were not") || rep.Dists[0][0] != 0.7 {
		t.Fatalf("without fits: %+v", rep)
	}
	fits := &calibration.Fits{Version: calibration.FitsVersion, Fits: []calibration.Fit{{Model: "m", Kind: decision.Choice, Bucket: "3-4", Temperature: 2, N: 50}}}
	rep = res.Report(req, fits, "")
	if rep.Calibrated || len(rep.Warnings) != 2 || !strings.Contains(rep.Warnings[1].String(), "q2: no calibration fit") || rep.Dists[0][0] >= 0.7 {
		t.Fatalf("with a fit for the choice only: %+v", rep)
	}
}

// A router over some nodes shares their state with the whole fleet and
// substitutes no aliases.
func TestOnly(t *testing.T) {
	r, fakes, _ := newTestRouter(20, 20)
	only := r.Only([]string{"b", "nobody"})
	if len(only.Nodes()) != 1 || only.Nodes()[0] != r.Nodes()[1] {
		t.Fatalf("nodes %v", only.Nodes())
	}
	if _, err := only.Limits("jev-latest"); !errors.Is(err, ErrUnknownModel) {
		t.Errorf("an alias was substituted: %v", err)
	}
	if a := decide(t, only, choiceRequest("m", 3)); a.Err != nil || a.Node != "b" || fakes[0].count() != 0 {
		t.Errorf("answered by %q (%v), node a asked %d times", a.Node, a.Err, fakes[0].count())
	}
}

// A node whose key variable is named but unset is never asked: every
// call fails at once and says why.
func TestUnsetKeyIsNeverSent(t *testing.T) {
	n := &Node{Name: "k", Backend: unusable{errors.New("not asked: its key variable K is not set")}, MaxOptions: 20, Timeout: time.Second, claimed: []string{"m"}}
	r := New([]*Node{n}, Options{})
	if a := decide(t, r, choiceRequest("m", 2)); a.Err == nil || !strings.Contains(a.Err.Error(), "K is not set") {
		t.Fatalf("%+v", a)
	}
	if p := r.Ping(context.Background(), "m"); len(p) != 1 || p[0].Err == nil {
		t.Fatalf("ping %+v", p)
	}
}
