package outcomes

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"system1/internal/calibration"
	"system1/internal/decisionlog"
)

// RefitOptions configure RefitFromLog.
type RefitOptions struct {
	// Window is how far back the log is read (0: DefaultReportWindow).
	Window time.Duration
	// MinOutcomes a bucket needs (0: 30); Holdout the share held out to
	// score the refit (0: 0.2); Seed the split's seed.
	MinOutcomes int
	Holdout     float64
	Seed        uint64
	// TargetError is the error rate each adopted fit's gate keeps under
	// (0: DefaultTargetError).
	TargetError float64
}

// RefitFromLog refits every bucket of the log's labelled answers against
// the fits in use, and writes a new version of the file when a refit
// lowered held-out NLL. It returns each bucket's decision, and the new
// revision ("" when nothing was adopted).
func (f *FitsFile) RefitFromLog(ctx context.Context, log *decisionlog.Log, o RefitOptions) ([]RefitDecision, string, error) {
	if o.Window <= 0 {
		o.Window = DefaultReportWindow
	}
	if o.MinOutcomes <= 0 {
		o.MinOutcomes = 30
	}
	if o.Holdout <= 0 {
		o.Holdout = 0.2
	}
	if log == nil {
		return nil, "", fmt.Errorf("the decision log is off")
	}
	now := time.Now()
	groups, err := log.Labelled(ctx, now.Add(-o.Window), now.Add(time.Second), "")
	if err != nil {
		return nil, "", err
	}
	next, ds := Refit(groups, f.Current(), o.Holdout, o.Seed, o.MinOutcomes, o.TargetError, now)
	if next == nil {
		return ds, "", nil
	}
	if err := f.Write(next); err != nil {
		return ds, "", err
	}
	return ds, next.Revision, nil
}

// Refit decides, bucket by bucket, whether a temperature fitted on the
// log's labelled answers lowers held-out NLL against the one current
// fits hold (1 where none), with at least minCases answers to a bucket.
// It returns the fits with every adopted temperature in place (a new
// revision, written at now) or nil when none was adopted, and each
// bucket's decision. Each adopted fit carries the gate its held-out
// answers suggest at target (calibration.Fit.SetGate; 0 or less:
// DefaultTargetError).
func Refit(groups []decisionlog.Group, current *calibration.Fits, holdout float64, seed uint64, minCases int, target float64, now time.Time) (*calibration.Fits, []RefitDecision) {
	if !(target > 0) {
		target = DefaultTargetError
	}
	next := &calibration.Fits{Version: calibration.FitsVersion, Fits: []calibration.Fit{}}
	if current != nil {
		next.Fits = append(next.Fits, current.Fits...)
	}
	var out []RefitDecision
	adopted := false
	for _, g := range groups {
		preds := g.Predictions(decisionlog.Entry.Uncalibrated)
		d := RefitDecision{Model: g.Model, Kind: string(g.Kind), Bucket: g.Bucket, Outcomes: len(preds)}
		cur := 1.0
		idx := slices.IndexFunc(next.Fits, func(f calibration.Fit) bool {
			return f.Provider == "" && f.Model == g.Model && f.Kind == g.Kind && f.Bucket == g.Bucket
		})
		if idx >= 0 {
			cur = next.Fits[idx].Temperature
		}
		r, err := calibration.DecideRefit(preds, cur, holdout, seed, minCases)
		if err != nil {
			d.Refused = err.Error()
			out = append(out, d)
			continue
		}
		d.Refit = r
		if !r.Adopt {
			d.Refused = fmt.Sprintf("held-out NLL %.4f at T=%.3f is not below %.4f at the current T=%.3f", r.HeldNLL, r.Temperature, r.HeldNLLCurrent, r.Current)
			out = append(out, d)
			continue
		}
		train, held := calibration.Split(preds, holdout, seed)
		f, err := calibration.NewFit(train, held)
		if err != nil || math.Abs(f.Temperature-r.Temperature) > 1e-9 {
			f = calibration.Fit{Kind: g.Kind, Bucket: g.Bucket, Temperature: r.Temperature, N: r.Train}
		}
		f.Model, f.Provider, f.Kind, f.Bucket, f.Date = g.Model, "", g.Kind, g.Bucket, now.UTC().Format("2006-01-02")
		f.SetGate(train, held, target)
		if idx >= 0 {
			next.Fits[idx] = f
		} else {
			next.Fits = append(next.Fits, f)
		}
		adopted = true
		out = append(out, d)
	}
	if !adopted {
		return nil, out
	}
	next.Created = now.UTC().Format(time.RFC3339)
	next.Revise(now)
	return next, out
}

// RefitDecision is what a refit decided for one bucket.
type RefitDecision struct {
	Model    string `json:"model"`
	Kind     string `json:"kind"`
	Bucket   string `json:"bucket"`
	Outcomes int    `json:"outcomes"`
	calibration.Refit
	// Refused says why the bucket kept its temperature; empty when the
	// new one was adopted.
	Refused string `json:"refused,omitempty"`
}
