package outcomes

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"system1/internal/calibration"
	"system1/internal/calibration/fitting"
	"system1/internal/decision"
	"system1/internal/decisionlog"
	"system1/internal/testengine"
)

// reference is the report the cases themselves give, read from the log
// record by record (Window), as reports were made before the tracker:
// per bucket the metrics raw and calibrated by fits, the gate on the
// calibrated cases' statistics, and per model the label-mass gate.
func reference(t *testing.T, l *decisionlog.Log, fits *calibration.Fits, since, until time.Time, target, maxLoss float64) CalibrationReport {
	t.Helper()
	entries, err := l.WindowLabelled(context.Background(), since, until.Add(time.Nanosecond), "")
	if err != nil {
		t.Fatal(err)
	}
	rep := CalibrationReport{Buckets: []BucketCalibration{}, LabelMass: []LabelMassGate{}}
	for _, g := range decisionlog.Groups(entries) {
		preds := g.Predictions(decisionlog.Entry.Uncalibrated)
		c := calibration.Identity()
		if ft, ok := fits.Lookup("", g.Model, g.Kind, preds[0].Options); ok {
			c = ft.Calibrator()
		}
		var bs fitting.BucketStats
		bs.Calibrator = c
		for _, p := range preds {
			bs.Raw.Add(p)
			p.Dist = c.Apply(p.Dist)
			bs.Calibrated.Add(p)
		}
		rep.Buckets = append(rep.Buckets, BucketCalibration{BucketReport: bs.Report(g.Model, g.Kind, g.Bucket, target)})
	}
	in, out := map[string][]float64{}, map[string][]float64{}
	var models []string
	for _, e := range entries {
		if e.LabelMass == nil || (e.Face != decisionlog.FaceDecide && e.Face != decisionlog.FaceMCP) {
			continue
		}
		if !slices.Contains(models, e.Model) {
			models = append(models, e.Model)
		}
		if e.NoOptionFit() {
			out[e.Model] = append(out[e.Model], *e.LabelMass)
		} else if slices.Contains(e.Options, e.Outcome.Value) {
			in[e.Model] = append(in[e.Model], *e.LabelMass)
		}
	}
	slices.Sort(models)
	for _, m := range models {
		// fitting's tests hold MassStats to the gate on the masses themselves.
		var ms fitting.MassStats
		for _, x := range in[m] {
			ms.Add(x, true)
		}
		for _, x := range out[m] {
			ms.Add(x, false)
		}
		rep.LabelMass = append(rep.LabelMass, LabelMassGate{Model: m, MassGate: ms.SuggestMassGate(maxLoss)})
	}
	return rep
}

// sameReport compares the tracker's report with the reference: counts
// and gates exactly, sums to rounding.
func sameReport(t *testing.T, what string, got, want CalibrationReport) {
	t.Helper()
	if len(got.Buckets) != len(want.Buckets) {
		t.Fatalf("%s: %d buckets, want %d", what, len(got.Buckets), len(want.Buckets))
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9 }
	for i, g := range got.Buckets {
		w := want.Buckets[i]
		if g.Model != w.Model || g.Kind != w.Kind || g.Bucket != w.Bucket || g.Outcomes != w.Outcomes || g.Accuracy != w.Accuracy ||
			g.AccuracyCalibrated != w.AccuracyCalibrated || g.Method != w.Method || !reflect.DeepEqual(g.Gate, w.Gate) ||
			!near(g.ECE, w.ECE) || !near(g.ECECalibrated, w.ECECalibrated) || !near(g.NLL, w.NLL) || !near(g.NLLCalibrated, w.NLLCalibrated) ||
			!near(g.Brier, w.Brier) || (g.MAE == nil) != (w.MAE == nil) || (g.MAE != nil && (!near(*g.MAE, *w.MAE) || !near(*g.MAECalibrated, *w.MAECalibrated))) {
			t.Errorf("%s: bucket %d\n got %+v\nwant %+v", what, i, g.BucketReport, w.BucketReport)
		}
	}
	if !reflect.DeepEqual(got.LabelMass, want.LabelMass) {
		t.Errorf("%s: label mass %+v, want %+v", what, got.LabelMass, want.LabelMass)
	}
}

// The tracker's report is the report of the cases themselves, over any
// window (edges that cut its slots included), with every kind, outcomes
// corrected after the fact (the latest wins), out-of-scope outcomes, and
// a fit that changes between reports; and it reads only what was
// recorded since its last read.
func TestTrackerReportIsTheCasesReport(t *testing.T) {
	l := openLog(t)
	r := rand.New(rand.NewPCG(5, 5))
	now := time.Now()
	var cs []labelledCase
	for _, group := range [][]labelledCase{banking12Like(300, 1), calibratedNouls(300, 2), sst5Like(300, 3), firstBiased(300, 4)} {
		cs = append(cs, group...)
	}
	for i := range cs {
		// Spread over four days, so that windows cut slots.
		cs[i].at = now.Add(-time.Duration(r.Int64N(int64(96 * time.Hour))))
		if cs[i].kind == decision.Choice && i%3 == 0 {
			m := math.Pow(10, -4*r.Float64())
			cs[i].mass, cs[i].face = &m, decisionlog.FaceDecide
			if i%9 == 0 {
				cs[i].expected = -1 // none fit
			}
		}
	}
	record(t, l, "m", cs, inOrder(len(cs)))
	fits := &calibration.Fits{Version: calibration.FitsVersion, Revision: "r1", Fits: []calibration.Fit{
		{Model: "m", Kind: decision.Choice, Bucket: "11-20", Temperature: 1.9},
		{Model: "m", Kind: decision.Score, Bucket: "5-10", Temperature: 3},
	}}
	tr := NewTracker(l)
	check := func(what string, fits *calibration.Fits) {
		t.Helper()
		for _, w := range []struct{ since, until time.Time }{
			{now.Add(-100 * time.Hour), now},
			{now.Add(-37 * time.Hour), now},
			{now.Add(-50 * time.Hour), now.Add(-13 * time.Hour)},
			{now.Add(-7 * time.Hour), now.Add(-5 * time.Hour)},
		} {
			opt := ReportOptions{Since: w.since, Until: w.until, TargetError: 0.1, MaxInScopeLoss: 0.2}
			got, err := tr.Report(context.Background(), fits, opt)
			if err != nil {
				t.Fatal(err)
			}
			sameReport(t, fmt.Sprintf("%s, window %s to %s", what, now.Sub(w.since), now.Sub(w.until)), got, reference(t, l, fits, w.since, w.until, 0.1, 0.2))
		}
	}
	check("first read", fits)
	// Outcomes corrected: the latest wins, here and in the reference.
	for i := 0; i < 60; i++ {
		c := cs[i]
		if _, err := l.Outcome(context.Background(), fmt.Sprintf("req-%d", i), "q", options(c.kind, len(c.dist))[(max(c.expected, 0)+1)%len(c.dist)]); err != nil {
			t.Fatal(err)
		}
	}
	check("after corrections", fits)
	// Another fit: the calibrated statistics follow it.
	fits2 := &calibration.Fits{Version: calibration.FitsVersion, Revision: "r2", Fits: []calibration.Fit{
		{Model: "m", Kind: decision.Choice, Bucket: "3-4", Method: calibration.MethodVector, Temperature: 2, Biases: []float64{-1, 0, 0, 0}},
	}}
	check("another fit", fits2)
	if n := tr.Cases(); n != len(cs) {
		t.Errorf("the tracker counts %d cases of %d", n, len(cs))
	}
}

// Records the log prunes leave the tracker's statistics.
func TestTrackerForgetsPrunedRecords(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/decisions.db"
	l, err := decisionlog.Open(ctx, decisionlog.Options{Path: path, Linger: -1, MaxRows: 100})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(ctx) })
	cs := banking12Like(150, 9)
	record(t, l, "m", cs, inOrder(len(cs)))
	tr := NewTracker(l)
	now := time.Now()
	opt := ReportOptions{Since: now.Add(-48 * time.Hour), Until: now}
	rep, err := tr.Report(ctx, nil, opt)
	if err != nil || rep.Buckets[0].Outcomes != 150 {
		t.Fatalf("before pruning: %+v %v", rep.Buckets, err)
	}
	if n, err := l.Prune(ctx); err != nil || n != 50 {
		t.Fatalf("pruned %d: %v", n, err)
	}
	tr.pruned = time.Time{} // as if a minute had passed
	rep, err = tr.Report(ctx, nil, opt)
	if err != nil || rep.Buckets[0].Outcomes != 100 || tr.Cases() != 100 {
		t.Fatalf("after pruning: %d outcomes, %d cases, %v", rep.Buckets[0].Outcomes, tr.Cases(), err)
	}
	sameReport(t, "after pruning", rep, reference(t, l, nil, opt.Since, opt.Until, 0, 0))
}

// The first read (decisionlog.Log.EachCase, which reads of each record
// only what a case needs) counts exactly what the records decoded whole
// give, on both stores: the same cases, the same statistics to the last
// bit, and so the same report. The records have steps (the distribution before
// the first temperature step is the one counted), decide answers with
// label masses, none_option, outcomes that none fit and corrected ones.
func TestFirstReadCountsTheRecordsDecodedWhole(t *testing.T) {
	stores := []struct {
		name string
		opt  func(t *testing.T) decisionlog.Options
	}{
		{"sqlite", func(t *testing.T) decisionlog.Options {
			return decisionlog.Options{Path: filepath.Join(t.TempDir(), "decisions.db")}
		}},
		{"postgres", func(t *testing.T) decisionlog.Options {
			return decisionlog.Options{URL: testengine.PostgresSchema(t, "t_")}
		}},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			opt := st.opt(t)
			opt.Linger = -1
			l, err := decisionlog.Open(ctx, opt)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close(ctx) })
			r := rand.New(rand.NewPCG(11, 12))
			now := time.Now()
			type out struct{ req, value string }
			var outs []out
			for i, c := range slices.Concat(banking12Like(200, 1), calibratedNouls(200, 2), sst5Like(200, 3)) {
				opts := options(c.kind, len(c.dist))
				rec := decisionlog.Record{RequestID: fmt.Sprintf("req-%d", i), QuestionID: "q", Time: now.Add(-time.Duration(r.Int64N(int64(72 * time.Hour)))),
					Face: decisionlog.FaceSystemOne, Model: "m", Node: "n", Kind: c.kind, Options: opts, EngineDist: c.dist}
				if i%2 == 0 { // steps: the debiased distribution is the one counted
					debiased := softmax(c.dist, 0.8)
					rec.Steps = []decisionlog.Step{{Name: decision.StepDebias, Version: "d1", Dist: debiased},
						{Name: decision.StepTemperature, Version: "t1", Dist: softmax(debiased, 0.5)}}
				}
				if c.kind == decision.Choice && i%3 == 0 {
					rec.Face, rec.LabelMass = decisionlog.FaceDecide, new(math.Pow(10, -4*r.Float64()))
					if i%9 == 0 {
						rec.Options = append(rec.Options, decision.NoneOption)
					}
				}
				if i%5 == 1 {
					rec.Fingerprint = "fp"
				}
				l.Record(rec)
				switch {
				case i%11 == 0 && c.kind == decision.Choice: // none fit
					outs = append(outs, out{rec.RequestID, decisionlog.NoneFit})
				case i%13 == 0: // no outcome
				default:
					outs = append(outs, out{rec.RequestID, opts[max(c.expected, 0)]})
				}
				if i%7 == 0 { // corrected: the latest wins
					outs = append(outs, out{rec.RequestID, opts[0]})
				}
			}
			if err := l.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			for _, o := range outs {
				if _, err := l.Outcome(ctx, o.req, "q", o.value); err != nil {
					t.Fatal(err)
				}
			}
			first := NewTracker(l)
			if err := first.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			// The same log counted from its records decoded whole, in
			// record order, as the first read counted them before.
			whole := NewTracker(l)
			entries, err := l.WindowLabelled(ctx, now.Add(-100*time.Hour), now, "")
			if err != nil {
				t.Fatal(err)
			}
			slices.SortFunc(entries, func(a, b decisionlog.Entry) int { return int(a.ID - b.ID) })
			for _, e := range entries {
				whole.apply(e.Case())
			}
			whole.after, whole.pruned, whole.oldest = first.after, first.pruned, first.oldest
			if len(first.cases) != len(entries) || len(entries) < 500 {
				t.Fatalf("the first read counts %d cases, the records %d", len(first.cases), len(entries))
			}
			for id, c := range first.cases {
				w := whole.cases[id]
				if w == nil || c.at != w.at || c.request != w.request || !slices.Equal(c.dist, w.dist) || c.options != w.options ||
					c.expected != w.expected || c.massIn != w.massIn || !(c.mass == w.mass || math.IsNaN(c.mass) && math.IsNaN(w.mass)) || c.b.key != w.b.key {
					t.Errorf("case %d: %+v, from the records %+v", id, c, w)
				}
			}
			for key, b := range first.bucket {
				wb := whole.bucket[key]
				if wb == nil || len(b.slots) != len(wb.slots) {
					t.Fatalf("bucket %+v: %d slots, from the records %v", key, len(b.slots), wb)
				}
				for si, s := range b.slots {
					ws := wb.slots[si]
					if ws == nil || !reflect.DeepEqual(s.raw, ws.raw) || !reflect.DeepEqual(s.cal, ws.cal) || !reflect.DeepEqual(s.mass, ws.mass) || s.minAt != ws.minAt || s.maxAt != ws.maxAt {
						t.Errorf("bucket %+v, slot %d: the statistics differ", key, si)
					}
				}
			}
			opts := ReportOptions{Since: now.Add(-50 * time.Hour), Until: now, TargetError: 0.1, MaxInScopeLoss: 0.2}
			got, err := first.Report(ctx, nil, opts)
			if err != nil {
				t.Fatal(err)
			}
			want, err := whole.Report(ctx, nil, opts)
			if err != nil {
				t.Fatal(err)
			}
			// A report adds the slots up in map order, so its sums may
			// differ in the last bits from one report to the next.
			sameReport(t, "report", got, want)
		})
	}
}
