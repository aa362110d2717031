package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/png"
	"math"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"system1/internal/calibration"
	"system1/internal/calibration/fitting"
	"system1/internal/cases"
	"system1/internal/decision"
)

func TestPercentile(t *testing.T) {
	xs := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tc := range []struct{ p, want float64 }{
		{50, 5}, {95, 10}, {99, 10}, {10, 1}, {11, 2}, {100, 10}, {1, 1},
	} {
		if got := Percentile(xs, tc.p); got != tc.want {
			t.Errorf("p%v of 1..10 = %v, want %v", tc.p, got, tc.want)
		}
	}
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(i + 1)
	}
	for _, tc := range []struct{ p, want float64 }{{50, 50}, {95, 95}, {99, 99}} {
		if got := Percentile(hundred, tc.p); got != tc.want {
			t.Errorf("p%v of 1..100 = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := Percentile([]float64{7}, 99); got != 7 {
		t.Errorf("p99 of one value = %v", got)
	}
	if got := Percentile(nil, 50); got != 0 {
		t.Errorf("p50 of none = %v", got)
	}
}

// rec builds an answered one-question record.
func rec(id, set string, kind decision.Kind, expected int, startMS, latencyMS float64, dist ...float64) Record {
	return Record{ID: id, Set: set, Model: "m", StartMS: startMS, LatencyMS: latencyMS,
		Questions: []Question{{ID: "q", Kind: kind, Options: len(dist), Expected: expected, Dist: dist}}}
}

func failed(id, set string, options int, msg string) Record {
	return Record{ID: id, Set: set, StartMS: 0, LatencyMS: 5000, Error: msg,
		Questions: []Question{{ID: "q", Kind: decision.Choice, Options: options, Expected: 0}}}
}

// Hand-computed: three answered choice cases and a failure.
//
//	a: [0.8 0.2], expected 0: right, conf 0.8, NLL -ln 0.8, Brier 0.04+0.04
//	b: [0.6 0.4], expected 1: wrong, conf 0.6, NLL -ln 0.4, Brier 0.36+0.36
//	c: [0.9 0.1], expected 0: right, conf 0.9, NLL -ln 0.9, Brier 0.01+0.01
func TestSummarizeHandComputed(t *testing.T) {
	records := []Record{
		rec("a", "s", decision.Choice, 0, 0, 10, 0.8, 0.2),
		rec("b", "s", decision.Choice, 1, 10, 30, 0.6, 0.4),
		failed("x", "s", 2, "status 503: down"),
		rec("c", "s", decision.Choice, 0, 40, 20, 0.9, 0.1),
	}
	s := Summarize("s", records, 0, nil)
	near := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-12 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if s.Cases != 4 || s.N != 3 || s.Errors != 1 || s.Calibrated != nil || s.MAE != nil {
		t.Fatalf("%+v", s)
	}
	near("accuracy", s.Accuracy, 2.0/3)
	near("floor", s.Floor, 2.0/3)
	near("brier", s.Brier, (0.08+0.72+0.02)/3)
	near("nll", s.NLL, -(math.Log(0.8)+math.Log(0.4)+math.Log(0.9))/3)
	// Bins: 0.6 in bin 9 (wrong), 0.8 in bin 12 (right), 0.9 in bin 13 (right).
	near("ece", s.ECE, (0.6+0.2+0.1)/3)
	if a := s.Selective["0.7"]; a.N != 2 || *a.Accuracy != 1 || math.Abs(a.Coverage-2.0/3) > 1e-12 {
		t.Errorf("selective 0.7 %+v", a)
	}
	if a := s.Selective["0.9"]; a.N != 1 || *a.Accuracy != 1 {
		t.Errorf("selective 0.9 %+v", a)
	}
	// Latency of the answered requests only: 10, 20, 30.
	if s.LatencyMS != (Latency{P50: 20, P95: 30, P99: 30}) {
		t.Errorf("latency %+v", s.LatencyMS)
	}
	// 3 answered between 0 ms and 60 ms.
	near("throughput", s.ThroughputRPS, 3/0.060)
	if o := Summarize("overall", records, 2, nil); o.ThroughputRPS != 1.5 {
		t.Errorf("overall throughput over a 2 s run: %v", o.ThroughputRPS)
	}
}

func TestSummarizeScoreAndNoAnswers(t *testing.T) {
	s := Summarize("sc", []Record{rec("a", "sc", decision.Score, 2, 0, 1, 0, 0.5, 0.5)}, 0, nil)
	// Expected level 1.5 rounds half up to 2: right; MAE |1.5 - 2|.
	if s.MAE == nil || *s.MAE != 0.5 || s.Accuracy != 1 {
		t.Errorf("score: mae %v accuracy %v", s.MAE, s.Accuracy)
	}
	none := Summarize("down", []Record{failed("a", "down", 3, "refused"), failed("b", "down", 3, "refused")}, 0, nil)
	if none.N != 0 || none.Errors != 2 || none.ThroughputRPS != 0 || none.LatencyMS != (Latency{}) || none.Selective["0.9"].Accuracy != nil {
		t.Errorf("%+v", none)
	}
}

// With fits, every answered distribution found a fit for is tempered; the
// others are measured as they are.
func TestSummarizeCalibrated(t *testing.T) {
	fits := &calibration.Fits{Version: 1, Fits: []calibration.Fit{{Model: "m", Kind: decision.Choice, Bucket: "2", Temperature: 2}}}
	records := []Record{
		rec("a", "s", decision.Choice, 0, 0, 1, 0.8, 0.2),
		rec("b", "s", decision.Noul, 1, 0, 1, 0.6, 0.4),
	}
	s := Summarize("s", records, 0, fits)
	c := s.Calibrated
	if c == nil || *c.Fitted != 1 || c.N != 2 || c.LatencyMS != s.LatencyMS || c.Calibrated != nil {
		t.Fatalf("%+v", c)
	}
	tempered := decision.Distribution{0.8, 0.2}.Temper(2)
	want := fitting.Measure([]calibration.Prediction{
		{Kind: decision.Choice, Dist: tempered, Expected: 0, Options: 2},
		{Kind: decision.Noul, Dist: decision.Distribution{0.6, 0.4}, Expected: 1, Options: 2},
	})
	if c.NLL != want.NLL || c.ECE != want.ECE || c.Brier != want.Brier {
		t.Errorf("calibrated %v %v %v, want %v %v %v", c.NLL, c.ECE, c.Brier, want.NLL, want.ECE, want.Brier)
	}
	if s.NLL == c.NLL {
		t.Error("the raw numbers were tempered too")
	}
}

func TestAssembleAndMarkdown(t *testing.T) {
	rep := &Report{Version: ReportVersion, WallS: 1, Cases: []Record{
		rec("a1", "agnews", decision.Choice, 0, 0, 10, 0.7, 0.1, 0.1, 0.1),
		rec("s1", "sst2", decision.Noul, 0, 0, 20, 0.9, 0.1),
		failed("a2", "agnews", 4, "status 503: every node is cooling down:\n  node a | node b"),
		rec("a3", "agnews", decision.Choice, 1, 0, 30, 0.7, 0.1, 0.1, 0.1),
	}}
	// By hand: agnews a1 Brier 0.3²+3·0.1² = 0.12, a3 0.7²+0.9²+2·0.1² = 1.32,
	// NLL (-ln 0.7 - ln 0.1)/2 = 1.3296; both in bin 10, accuracy 0.5 at
	// confidence 0.7: ECE 0.2. sst2: Brier 2·0.1², NLL -ln 0.9.
	rep.Assemble(nil)
	if len(rep.Sets) != 2 || rep.Sets[0].Name != "agnews" || rep.Sets[1].Name != "sst2" || rep.Overall.Name != "overall" {
		t.Fatalf("sets %+v", rep.Sets)
	}
	if rep.Sets[0].Errors != 1 || rep.Sets[0].N != 2 || rep.Overall.Errors != 1 || rep.Overall.Cases != 4 || len(rep.Failures) != 1 || rep.Failures[0].ID != "a2" {
		t.Fatalf("errors not counted: %+v %+v", rep.Sets[0], rep.Failures)
	}
	if strings.Join(rep.Models, ",") != "m" {
		t.Errorf("models %v", rep.Models)
	}
	var b bytes.Buffer
	if err := rep.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	want := `| set | n | errors | floor | accuracy | MAE | ECE | wrong@0.8 | wrong@0.9 | wrong@gate (gate, cov) | Brier | NLL | acc@0.7 (cov) | acc@0.9 (cov) | p50 ms | p95 ms | p99 ms | req/s |
| --- | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: |
| agnews | 2 | 1 | 50.0% | 50.0% | – | 0.200 | 0 | 0 | – (none) | 0.720 | 1.330 | 50.0% (100.0%) | – (0.0%) | 10.0 | 30.0 | 30.0 | 66.7 |
| sst2 | 1 | 0 | 100.0% | 100.0% | – | 0.100 | 0 | 0 | – (none) | 0.020 | 0.105 | 100.0% (100.0%) | 100.0% (100.0%) | 20.0 | 20.0 | 20.0 | 50.0 |
| overall | 3 | 1 | 66.7% | 66.7% | – | 0.167 | 0 | 0 | – (none) | 0.487 | 0.922 | 66.7% (100.0%) | 100.0% (33.3%) | 20.0 | 30.0 | 30.0 | 3.0 |

1 failed request(s):

- a2 (agnews): status 503: every node is cooling down: node a \| node b
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}

	// One set: no overall row. With fits: a calibrated row under each.
	one := &Report{Version: ReportVersion, WallS: 1, Cases: rep.Cases[:1]}
	one.Assemble(&calibration.Fits{Version: 1, Fits: []calibration.Fit{{Model: "m", Kind: decision.Choice, Bucket: "3-4", Temperature: 1.5}}})
	b.Reset()
	if err := one.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "| set | numbers | n |") ||
		!strings.HasPrefix(lines[2], "| agnews | raw | 1 | 0 |") || !strings.HasPrefix(lines[3], "| agnews | calibrated (1/1 fitted) | 1 | 0 |") ||
		!strings.HasSuffix(lines[3], "|  |  |  |  |") {
		t.Errorf("table with fits:\n%s", b.String())
	}
}

func TestPlotPNG(t *testing.T) {
	var preds []calibration.Prediction
	for i := range 200 {
		c := 0.3 + 0.7*float64(i)/200
		preds = append(preds, calibration.Prediction{Kind: decision.Noul, Dist: decision.Distribution{c, 1 - c}, Expected: i % 3 % 2, Options: 2})
	}
	m := fitting.Measure(preds)
	cal := fitting.Measure(fitting.Temper(preds, 2))
	for _, p := range []Plot{
		{Title: "raw only", Raw: m.Bins, RawECE: m.ECE},
		{Title: "raw and calibrated", Raw: m.Bins, RawECE: m.ECE, Calibrated: cal.Bins, CalibratedECE: cal.ECE, CalibratedNote: "fits.json"},
	} {
		var b bytes.Buffer
		if err := p.WritePNG(&b); err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(&b)
		if err != nil {
			t.Fatal(err)
		}
		if r := img.Bounds(); r.Dx() != imgWidth || r.Dy() != imgHeight {
			t.Errorf("%s: %v", p.Title, r)
		}
	}
}

// fakeAsker answers from a function and counts what it is asked.
type fakeAsker struct {
	f      func(decision.Request) (Answer, error)
	asked  atomic.Int64
	models atomic.Value
}

func (a *fakeAsker) Ask(ctx context.Context, req decision.Request) (Answer, error) {
	a.asked.Add(1)
	a.models.Store(req.Model)
	return a.f(req)
}

func TestRunKeepsOrderAndFailures(t *testing.T) {
	var cs []cases.Case
	for i := range 50 {
		q := decision.Question{ID: "q", Kind: decision.Noul, Options: decision.NoulOptions(nil, nil)}
		cs = append(cs, cases.Case{ID: string(rune('A' + i)), Set: "s", Expected: []int{i % 2},
			Request: decision.Request{State: []byte(`"x"`), Questions: []decision.Question{q}}})
	}
	a := &fakeAsker{f: func(req decision.Request) (Answer, error) {
		return Answer{Model: "served", Dists: []decision.Distribution{{0.7, 0.3}}}, nil
	}}
	var calls atomic.Int64
	broken := &fakeAsker{f: func(req decision.Request) (Answer, error) {
		if calls.Add(1)%5 == 0 {
			return Answer{}, errors.New("boom")
		}
		if calls.Load()%7 == 0 {
			return Answer{Model: "served"}, nil // no distributions: an error too
		}
		return Answer{Model: "served", Dists: []decision.Distribution{{0.7, 0.3}}}, nil
	}}
	var progress []Progress
	run := Run{Asker: a, Model: "asked", Provider: "p", Concurrency: 7, Timeout: time.Second,
		Progress: func(p Progress) { progress = append(progress, p) }}
	recs, wall := run.Do(context.Background(), cs)
	if len(recs) != 50 || wall <= 0 || a.asked.Load() != 50 || a.models.Load() != "asked" {
		t.Fatalf("%d records, asked %d", len(recs), a.asked.Load())
	}
	for i, r := range recs {
		if r.ID != cs[i].ID || r.Failed() || r.Model != "served" || r.Provider != "p" || r.Questions[0].Expected != i%2 || len(r.Questions[0].Dist) != 2 {
			t.Fatalf("record %d: %+v", i, r)
		}
	}
	if len(progress) != 50 || progress[49].Done != 50 || progress[49].Total != 50 {
		t.Fatalf("progress %+v", progress[len(progress)-1])
	}
	run.Asker, run.Progress = broken, nil
	recs, _ = run.Do(context.Background(), cs)
	errs := 0
	for _, r := range recs {
		if r.Failed() {
			errs++
			if r.Questions[0].Dist != nil || r.Model != "" {
				t.Errorf("a failed record carries an answer: %+v", r)
			}
		}
	}
	if errs != 10+(50/7-50/35) { // every 5th fails, every 7th that is not also a 5th has no distributions
		t.Errorf("%d failed records", errs)
	}

	// Cancelled before the start: every case is a failure, none is asked.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	a.asked.Store(0)
	run.Asker = a
	recs, _ = run.Do(ctx, cs)
	if a.asked.Load() != 0 || !recs[0].Failed() || !strings.Contains(recs[0].Error, "not sent") {
		t.Fatalf("asked %d, %+v", a.asked.Load(), recs[0])
	}
}

func TestLoadAndFit(t *testing.T) {
	var records []Record
	for i := range 100 {
		records = append(records, rec("c"+string(rune(i)), "s", decision.Choice, i%3%2, 0, 1, 0.9, 0.1))
	}
	records = append(records, failed("f", "s", 2, "down"))
	records = append(records, rec("n1", "s", decision.Noul, 0, 0, 1, 0.9, 0.1))
	var b bytes.Buffer
	if err := WritePredictions(&b, records); err != nil {
		t.Fatal(err)
	}
	loaded, rep, err := Load(b.Bytes())
	if err != nil || rep != nil || len(loaded) != len(records) {
		t.Fatalf("%v %v %d", err, rep, len(loaded))
	}
	res := FitRecords(loaded, FitOptions{Holdout: 0.2, MinCases: 30, Seed: 1, Date: "2026-11-30"})
	if res.Failed != 1 || len(res.Buckets) != 2 || len(res.Fits.Fits) != 1 {
		t.Fatalf("%+v", res)
	}
	f := res.Fits.Fits[0]
	if f.Model != "m" || f.Kind != decision.Choice || f.Bucket != "2" || f.N != 80 || f.Holdout == nil || f.Holdout.N != 20 || f.Date != "2026-11-30" || !(f.Temperature > 1) {
		t.Errorf("fit %+v", f)
	}
	if r := res.Buckets[1]; r.Fit != nil || r.Kind != decision.Noul || !strings.Contains(r.Refused, "1 cases to fit on (1 in the bucket, 0 held out); at least 30 are needed") {
		t.Errorf("refusal %+v", r)
	}
	// Renamed: the fits are keyed by the names given.
	res = FitRecords(loaded, FitOptions{MinCases: 1, Model: "other", Provider: "local"})
	for _, f := range res.Fits.Fits {
		if f.Model != "other" || f.Provider != "local" || f.Holdout != nil {
			t.Errorf("fit %+v", f)
		}
	}
	if _, err := res.Fits.Encode(); err != nil {
		t.Fatal(err)
	}
	// Nameless cases cannot be fitted: no one could find the fit.
	for i := range loaded {
		loaded[i].Model = ""
	}
	res = FitRecords(loaded, FitOptions{MinCases: 1})
	if len(res.Fits.Fits) != 0 || !strings.Contains(res.Buckets[0].Refused, "pass --model") {
		t.Errorf("%+v", res.Buckets)
	}
	var md bytes.Buffer
	if err := res.WriteMarkdown(&md); err != nil || !strings.Contains(md.String(), "| refused |") {
		t.Errorf("%v\n%s", err, md.String())
	}

	for _, bad := range []string{"", "{", `{"version":2,"cases":[]}`, `{"id":"x","questions":[{"id":"q","kind":"noul","options":2,"expected":0}]}`, `{"id":"x","questions":[],"extra":1}`} {
		if _, _, err := Load([]byte(bad)); err == nil {
			t.Errorf("loaded %q", bad)
		}
	}
	if recs, rep, err := Load([]byte(`{"version":1,"model":"m","cases":[{"id":"x","set":"s","questions":[{"id":"q","kind":"noul","options":2,"expected":0,"dist":[0.5,0.5]}]}]}`)); err != nil || rep == nil || len(recs) != 1 {
		t.Errorf("report: %v %v %d", err, rep, len(recs))
	}
}

func TestSummarizeWrongAnswersSurvivingGates(t *testing.T) {
	var recs []Record
	add := func(n, expected int, conf float64) {
		for range n {
			recs = append(recs, rec(fmt.Sprint(len(recs)), "s", decision.Choice, expected, 0, 10, conf, 1-conf))
		}
	}
	add(1000, 0, 0.95)
	add(3, 1, 0.95)
	add(2, 1, 0.85)
	add(20, 1, 0.82)
	s := Summarize("s", recs, 1, nil)
	// Gates by hand: at 0.85, 5 wrong of 1005 bound the error at 0.0104,
	// under 2%; at 0.82, 25 of 1025 at 0.034, over it.
	if s.WrongSurviving["0.8"] != 25 || s.WrongSurviving["0.9"] != 3 || s.WrongSurviving["gate"] != 5 {
		t.Fatalf("surviving %v", s.WrongSurviving)
	}
	if g := s.Gate; g.Threshold == nil || *g.Threshold != 0.85 || g.Above != 1005 || g.TargetError != fitting.DefaultTargetError {
		t.Fatalf("gate %+v", g)
	}
	rep := &Report{Version: ReportVersion, WallS: 1, Cases: recs}
	rep.Assemble(&calibration.Fits{Version: 1, Fits: []calibration.Fit{{Model: "m", Kind: decision.Choice, Bucket: "2", Temperature: 3}}})
	c := rep.Overall.Calibrated
	// Tempered by 3, 0.95 becomes 0.73 and 0.85 0.64: nothing reaches 0.8.
	if c == nil || c.WrongSurviving["0.8"] != 0 || c.Gate.Threshold == nil || *c.Gate.Threshold >= 0.8 {
		t.Fatalf("calibrated %+v", c)
	}
	var b bytes.Buffer
	if err := rep.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "| 25 | 3 | 5 (0.850, 98.0%) |") {
		t.Errorf("table:\n%s", b.String())
	}
}

// A --concurrency far above the case count starts no more workers than
// there are cases: 2 cases at --concurrency 20000 run beside a handful
// of goroutines, where each unit of it started one (1e9, a billion
// goroutines' stacks, more memory than any machine has).
func TestRunStartsNoMoreWorkersThanCases(t *testing.T) {
	q := decision.Question{ID: "q", Kind: decision.Noul, Options: decision.NoulOptions(nil, nil)}
	var cs []cases.Case
	for _, id := range []string{"a", "b"} {
		cs = append(cs, cases.Case{ID: id, Set: "s", Expected: []int{0},
			Request: decision.Request{State: []byte(`"x"`), Questions: []decision.Question{q}}})
	}
	before := runtime.NumGoroutine()
	var most atomic.Int64
	a := &fakeAsker{f: func(decision.Request) (Answer, error) {
		most.Store(max(most.Load(), int64(runtime.NumGoroutine())))
		return Answer{Model: "m", Dists: []decision.Distribution{{0.7, 0.3}}}, nil
	}}
	recs, _ := Run{Asker: a, Model: "m", Concurrency: 20000}.Do(context.Background(), cs)
	if len(recs) != 2 || recs[0].Failed() || recs[1].Failed() {
		t.Fatalf("records %+v", recs)
	}
	if n := most.Load() - int64(before); n > 10 {
		t.Errorf("%d goroutines more than before the run while asking 2 cases, want at most 10", n)
	}
}

// With fits learnt on builds, a case's answer is calibrated by the fit
// of the build that answered it, as the server would serve it
// (calibration.Fits.LookupServed): a fit of another build is not
// applied, where one of every build (no fingerprint) is.
func TestSummarizeCalibratedByTheBuildThatAnswered(t *testing.T) {
	fits := &calibration.Fits{Version: 1, Fits: []calibration.Fit{
		{Model: "m", Kind: decision.Choice, Bucket: "2", Temperature: 2, Fingerprint: "build-a"},
		{Model: "m", Kind: decision.Noul, Bucket: "2", Temperature: 2},
	}}
	for _, tc := range []struct {
		build  string
		kind   decision.Kind
		fitted int
	}{
		{"build-a", decision.Choice, 1},
		{"build-b", decision.Choice, 0}, // served uncalibrated: the fit is build-a's
		{"", decision.Choice, 1},        // build not known: looked up by model, as served
		{"build-b", decision.Noul, 1},   // a fit of every build
	} {
		r := rec("a", "s", tc.kind, 0, 0, 1, 0.8, 0.2)
		r.Questions[0].Build = tc.build
		c := Summarize("s", []Record{r}, 0, fits).Calibrated
		if c == nil || c.Fitted == nil {
			t.Fatalf("build %q, %s: no calibrated summary", tc.build, tc.kind)
		}
		if *c.Fitted != tc.fitted {
			t.Errorf("build %q, %s: %d fitted, want %d", tc.build, tc.kind, *c.Fitted, tc.fitted)
		}
	}
}
