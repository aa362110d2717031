package outcomes

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"system1/internal/calibration"
	"system1/internal/calibration/fitting"
	"system1/internal/decisionlog"
)

// Defaults of a calibration report.
const (
	// DefaultTargetError is the share of wrong decisions a suggested gate
	// keeps under.
	DefaultTargetError = 0.02
	// DefaultReportWindow is how far back a report reads the log.
	DefaultReportWindow = 7 * 24 * time.Hour
)

// CalibrationReport is how calibrated the answers recorded in a window
// were, measured on their outcomes: per model, kind and option bucket.
type CalibrationReport struct {
	Since       time.Time `json:"since"`
	Until       time.Time `json:"until"`
	TargetError float64   `json:"target_error"`
	// FitVersion is the revision of the fits whose calibrators the
	// report applies, "" when none are loaded or they hold no fit.
	FitVersion string              `json:"fit_version,omitempty"`
	Buckets    []BucketCalibration `json:"buckets"`
	// LabelMass suggests, per model and build, a min_label_mass from decide
	// answers whose label mass is known and whose outcome is either one
	// of their options (in scope) or that none fit (out of scope).
	LabelMass []LabelMassGate `json:"label_mass"`
	// Drift compares, per model and question signature, the answers of
	// the last ReportOptions.Drift.Window before Until with a reference
	// window before it, without outcomes (see drift.go).
	Drift []SignatureDrift `json:"drift"`
	// Loop is what the server's learning loop does and waits for; absent
	// where no server runs one (system1 calibrate --report).
	Loop *LoopStatus `json:"loop,omitempty"`
	// Cascades report each configured cascade (ReportCascades); absent
	// where none is configured.
	Cascades []CascadeReport `json:"cascades,omitempty"`
}

// LabelMassGate is one model build's suggested min_label_mass
// (fitting.MassStats.SuggestMassGate).
type LabelMassGate struct {
	Model string `json:"model"`
	// Fingerprint is the build the answers came from; empty for answers
	// recorded without one.
	Fingerprint string `json:"fingerprint,omitempty" jsonschema:"The build of the model the answers came from (its fingerprint); absent for answers recorded without one."`
	fitting.MassGate
}

// BucketCalibration is one bucket's report: the measures of
// fitting.BucketReport, and its reliability diagram.
type BucketCalibration struct {
	fitting.BucketReport
	// Fingerprint is the build of the model the bucket's answers came
	// from (a model's builds are reported apart); empty for answers
	// recorded without one.
	Fingerprint string `json:"fingerprint,omitempty" jsonschema:"The build of the model the bucket's answers came from (its fingerprint): a model's builds are reported apart. Absent for answers recorded without one."`
	// Reliability are the bins of the calibrated confidences that hold
	// answers: the mean confidence, the share right, and the count.
	Reliability []ReliabilityBin `json:"reliability"`
	// Sets are how the fit's prediction sets at ReportCoverages fare;
	// empty where the bucket has no fit with sets.
	Sets []SetReport `json:"sets"`
}

// ReliabilityBin is one bin of a reliability diagram.
type ReliabilityBin struct {
	Confidence float64 `json:"confidence"`
	Accuracy   float64 `json:"accuracy"`
	Count      int     `json:"count"`
}

// ReportOptions are the window a calibration report reads and what its
// suggestions aim at.
type ReportOptions struct {
	Since, Until time.Time
	// TargetError is the share of wrong decisions a suggested gate keeps
	// under; 0 or less is DefaultTargetError.
	TargetError float64
	// MaxInScopeLoss is the share of in-scope answers a suggested
	// min_label_mass may lose; outside (0, 1) is
	// fitting.DefaultMaxInScopeLoss.
	MaxInScopeLoss float64
	// Drift are the windows and alarm of the report's drift entry.
	Drift DriftOptions
	// Loop, when set, is the server's learning loop: the report then
	// says what it does and waits for.
	Loop *LoopOptions
}

// ReportCalibrationWith reports on the log's answers with outcomes in
// opt's window, each bucket calibrated by the fit fits hold for its model
// (none where none does). It reads the whole log once; a server keeps a
// Tracker and asks it instead.
func ReportCalibrationWith(ctx context.Context, log *decisionlog.Log, fits *calibration.Fits, opt ReportOptions) (CalibrationReport, error) {
	if log == nil {
		return emptyReport(fits, opt), fmt.Errorf("the decision log is off")
	}
	t := NewTracker(log)
	defer t.drift.close()
	return t.Report(ctx, fits, opt)
}

func emptyReport(fits *calibration.Fits, opt ReportOptions) CalibrationReport {
	target := opt.TargetError
	if !(target > 0) {
		target = DefaultTargetError
	}
	rep := CalibrationReport{Since: opt.Since.UTC(), Until: opt.Until.UTC(), TargetError: target, Buckets: []BucketCalibration{}, LabelMass: []LabelMassGate{}, Drift: []SignatureDrift{}}
	if fits != nil && len(fits.Fits) > 0 {
		// An empty file names no fit: a report that named its revision
		// would say a fit was applied where none was.
		rep.FitVersion = fits.Revision
	}
	return rep
}

// Report is the calibration report over the answers whose decision time
// is in [opt.Since, opt.Until], each bucket calibrated by the fit fits
// hold for its model (none where none does), from the statistics kept:
// it first reads the outcomes recorded since the last read, and reads
// the cases of at most the two slots the window's edges cut. Label-mass
// gates pool each model's buckets. The drift entry comes from the
// histograms the tracker keeps by minute (drift.go), brought up to date
// the same way.
func (t *Tracker) Report(ctx context.Context, fits *calibration.Fits, opt ReportOptions) (CalibrationReport, error) {
	rep := emptyReport(fits, opt)
	if err := t.Sync(ctx); err != nil {
		return rep, err
	}
	var err error
	if rep.Drift, err = t.drift.report(ctx, t.log, opt.Until, opt.Drift); err != nil {
		return rep, err
	}
	since, until := opt.Since.UnixNano(), opt.Until.UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	if opt.Loop != nil {
		rep.Loop = t.loop(*opt.Loop)
	}
	// Label masses pool each build's buckets.
	type build struct{ model, fingerprint string }
	masses := map[build]*fitting.MassStats{}
	for _, b := range t.sorted() {
		t.follow(b, fits)
		w := b.window(since, until)
		if w.mass.InScope()+w.mass.OutOfScope() > 0 {
			k := build{b.key.model, b.key.fingerprint}
			m := masses[k]
			if m == nil {
				m = &fitting.MassStats{}
				masses[k] = m
			}
			m.Merge(w.mass)
		}
		if w.raw.N == 0 && w.raw.Skipped == 0 {
			continue
		}
		bs := fitting.BucketStats{Calibrator: b.cal, Raw: w.raw, Calibrated: w.cal}
		bc := BucketCalibration{BucketReport: bs.Report(b.key.model, b.key.kind, b.key.bucket, rep.TargetError), Fingerprint: b.key.fingerprint, Reliability: []ReliabilityBin{}}
		for _, bin := range w.cal.Metrics().Bins {
			if bin.Count > 0 {
				bc.Reliability = append(bc.Reliability, ReliabilityBin{Confidence: bin.Confidence, Accuracy: bin.Accuracy, Count: bin.Count})
			}
		}
		bc.Sets = []SetReport{}
		for i, rule := range b.sets {
			if rule.Method == "" {
				continue
			}
			bc.Sets = append(bc.Sets, SetReport{Requested: ReportCoverages()[i], Method: rule.Method, Coverage: rule.Coverage, Outcomes: rule.N,
				Threshold: rule.Threshold, HeldOut: b.heldOut(fits, ReportCoverages()[i]), SinceFit: b.since[i].Coverage()})
		}
		rep.Buckets = append(rep.Buckets, bc)
	}
	builds := slices.SortedFunc(maps.Keys(masses), func(a, b build) int {
		return strings.Compare(a.model+"\x00"+a.fingerprint, b.model+"\x00"+b.fingerprint)
	})
	for _, k := range builds {
		rep.LabelMass = append(rep.LabelMass, LabelMassGate{Model: k.model, Fingerprint: k.fingerprint, MassGate: masses[k].SuggestMassGate(opt.MaxInScopeLoss)})
	}
	return rep, nil
}

// heldOut is the cross-validated coverage the fit recorded for its set
// at coverage, nil where it has none.
func (b *tbucket) heldOut(fits *calibration.Fits, coverage float64) *calibration.SetCoverage {
	ft, ok, _ := fits.LookupServed("", b.key.model, b.key.fingerprint, b.key.kind, b.options)
	if !ok {
		return nil
	}
	rule, ok := ft.SetFor(coverage)
	if !ok {
		return nil
	}
	return rule.Holdout
}

// SetReport is how a bucket's prediction sets at one coverage fare.
type SetReport struct {
	// Requested is the coverage reported on, and Coverage the level of
	// the fit's set that serves it (the least at or above it).
	Requested float64 `json:"requested"`
	Coverage  float64 `json:"coverage"`
	Method    string  `json:"method"`
	// Outcomes is the number of outcomes the set's threshold was fitted
	// on, and Threshold the threshold.
	Outcomes  int     `json:"outcomes"`
	Threshold float64 `json:"threshold"`
	// HeldOut is the sets' coverage and size by cross-validation when
	// they were fitted: each fold's outcomes under a threshold fitted on
	// the others. Absent when not measured.
	HeldOut *calibration.SetCoverage `json:"held_out,omitempty"`
	// SinceFit is the same on the outcomes reported since the sets were
	// fitted (over the whole log, not the report's window): outcomes no
	// fit has seen.
	SinceFit calibration.SetCoverage `json:"since_fit"`
}
