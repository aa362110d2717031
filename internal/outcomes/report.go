package outcomes

import (
	"context"
	"fmt"
	"slices"
	"time"

	"system1/internal/calibration"
	"system1/internal/decision"
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
	// FitVersion is the revision of the fits whose temperatures the
	// report applies, "" when none are loaded.
	FitVersion string              `json:"fit_version,omitempty"`
	Buckets    []BucketCalibration `json:"buckets"`
	// LabelMass suggests, per model, a min_label_mass from decide
	// answers whose label mass is known and whose outcome is either one
	// of their options (in scope) or that none fit (out of scope).
	LabelMass []LabelMassGate `json:"label_mass"`
	// Drift compares, per model and question signature, the answers of
	// the last ReportOptions.Drift.Window before Until with a reference
	// window before it, without outcomes (ReportDrift).
	Drift []SignatureDrift `json:"drift"`
}

// LabelMassGate is one model's suggested min_label_mass
// (calibration.SuggestMassGate).
type LabelMassGate struct {
	Model string `json:"model"`
	calibration.MassGate
}

// BucketCalibration is one bucket's report: the measures of
// calibration.BucketReport, and its reliability diagram.
type BucketCalibration struct {
	calibration.BucketReport
	// Reliability are the bins of the calibrated confidences that hold
	// answers: the mean confidence, the share right, and the count.
	Reliability []ReliabilityBin `json:"reliability"`
}

// ReliabilityBin is one bin of a reliability diagram.
type ReliabilityBin struct {
	Confidence float64 `json:"confidence"`
	Accuracy   float64 `json:"accuracy"`
	Count      int     `json:"count"`
}

// ReportCalibration reports on the log's answers with outcomes from since to
// until, both included (until is the report's end, usually now: never
// later than the report was made), each bucket tempered by the temperature fits hold for its model
// (1 where none does), with a gate suggested at target (0 or less:
// DefaultTargetError).
func ReportCalibration(ctx context.Context, log *decisionlog.Log, fits *calibration.Fits, since, until time.Time, target float64) (CalibrationReport, error) {
	return ReportCalibrationWith(ctx, log, fits, ReportOptions{Since: since, Until: until, TargetError: target})
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
	// calibration.DefaultMaxInScopeLoss.
	MaxInScopeLoss float64
	// Drift are the windows and alarm of the report's drift entry.
	Drift DriftOptions
}

// ReportCalibrationWith is ReportCalibration with every option.
func ReportCalibrationWith(ctx context.Context, log *decisionlog.Log, fits *calibration.Fits, opt ReportOptions) (CalibrationReport, error) {
	since, until, target := opt.Since, opt.Until, opt.TargetError
	if !(target > 0) {
		target = DefaultTargetError
	}
	rep := CalibrationReport{Since: since.UTC(), Until: until.UTC(), TargetError: target, Buckets: []BucketCalibration{}, LabelMass: []LabelMassGate{}, Drift: []SignatureDrift{}}
	if fits != nil {
		rep.FitVersion = fits.Revision
	}
	if log == nil {
		return rep, fmt.Errorf("the decision log is off")
	}
	entries, err := log.WindowLabelled(ctx, since, until.Add(time.Nanosecond), "") // the log's until is excluded
	if err != nil {
		return rep, err
	}
	rep.LabelMass = labelMassGates(entries, opt.MaxInScopeLoss)
	if rep.Drift, err = ReportDrift(ctx, log, until, opt.Drift); err != nil {
		return rep, err
	}
	for _, g := range decisionlog.Groups(entries) {
		preds := g.Predictions(decisionlog.Entry.Uncalibrated)
		if len(preds) == 0 {
			continue
		}
		t := 1.0
		if ft, ok := fits.Lookup("", g.Model, g.Kind, preds[0].Options); ok {
			t = ft.Temperature
		}
		b := BucketCalibration{BucketReport: calibration.NewBucketReport(g.Model, g.Kind, g.Bucket, preds, t, target), Reliability: []ReliabilityBin{}}
		for _, bin := range calibration.Measure(calibration.Temper(preds, t)).Bins {
			if bin.Count > 0 {
				b.Reliability = append(b.Reliability, ReliabilityBin{Confidence: bin.Confidence, Accuracy: bin.Accuracy, Count: bin.Count})
			}
		}
		rep.Buckets = append(rep.Buckets, b)
	}
	return rep, nil
}

// labelMassGates suggests a min_label_mass per model, in model order,
// from the decide answers (both faces of decide, where min_label_mass
// acts) with a known label mass and an outcome. A question asked with
// none_option is left out: its label mass includes the implicit option's
// label, and the option itself flags what fits none.
func labelMassGates(entries []decisionlog.Entry, maxLoss float64) []LabelMassGate {
	type masses struct{ in, out []float64 }
	by := map[string]*masses{}
	var models []string
	for _, e := range entries {
		if e.LabelMass == nil || e.Outcome == nil || (e.Face != decisionlog.FaceDecide && e.Face != decisionlog.FaceMCP) || slices.Contains(e.Options, decision.NoneOption) {
			continue
		}
		m := by[e.Model]
		if m == nil {
			m = &masses{}
			by[e.Model] = m
			models = append(models, e.Model)
		}
		switch {
		case e.NoOptionFit():
			m.out = append(m.out, *e.LabelMass)
		case slices.Contains(e.Options, e.Outcome.Value):
			m.in = append(m.in, *e.LabelMass)
		}
	}
	slices.Sort(models)
	out := make([]LabelMassGate, 0, len(models))
	for _, model := range models {
		out = append(out, LabelMassGate{Model: model, MassGate: calibration.SuggestMassGate(by[model].in, by[model].out, maxLoss)})
	}
	return out
}
