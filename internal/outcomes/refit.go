package outcomes

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"system1/internal/calibration"
	"system1/internal/calibration/fitting"
)

// DefaultMinOutcomes is the number of outcomes new since a bucket's last
// refit that make it due another, unless told otherwise.
const DefaultMinOutcomes = 30

// RefitOptions configure a refit.
type RefitOptions struct {
	// Window is how far back, in decision time, a refit reads a bucket's
	// labelled answers (0: DefaultReportWindow).
	Window time.Duration
	// MinOutcomes is how many outcomes a bucket needs new since its last
	// refit to be refitted (0: DefaultMinOutcomes).
	MinOutcomes int
	// Seed picks the cross-validation folds and bootstrap resamples.
	Seed uint64
	// Folds is the number of cross-validation folds (0:
	// fitting.DefaultFolds).
	Folds int
	// TargetError is the error rate each fit's gate keeps under (0:
	// DefaultTargetError).
	TargetError float64
	// EscalationTargets are the target errors of the cascades
	// (docs/cascades.md): each refitted fit certifies an escalation
	// threshold at each (fitting.CertifyEscalation).
	EscalationTargets []float64
	// Now is the refit's time; zero is time.Now().
	Now time.Time
}

func (o RefitOptions) withDefaults() RefitOptions {
	o.Window = cmp.Or(max(o.Window, 0), DefaultReportWindow)
	o.MinOutcomes = cmp.Or(max(o.MinOutcomes, 0), DefaultMinOutcomes)
	if !(o.TargetError > 0 && o.TargetError < 1) {
		o.TargetError = DefaultTargetError
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	return o
}

// Refit refits every bucket the tracker counts MinOutcomes outcomes new
// for since its last refit (fitting.RefitState), over all of its
// labelled answers in the window, against the fit in use, and writes a
// new version of the file when a fit changed. It returns each refitted
// bucket's decision and the new revision ("" when nothing was written).
// A bucket is not refitted again, adopted or not, until MinOutcomes more
// outcomes come, unless the new version could not be written: then the
// next refit tries again.
//
// Per bucket, fitting.Select chooses the calibrator by K-fold
// cross-validation over requests and adopts it only when its gain beats
// the noise of a paired bootstrap (and does not cost accuracy or a
// score's MAE); prediction sets are fitted on the bucket's held-out
// calibrated outcomes at every fitting.SetCoverages level each
// refit, whether the calibrator changed or not, since they need no
// adoption: their guarantee holds at any number of outcomes. A bucket
// without a fit whose outcomes support sets but no calibrator gets a fit
// of temperature 1 (none) that carries them.
func (f *FitsFile) Refit(ctx context.Context, t *Tracker, o RefitOptions) ([]RefitDecision, string, error) {
	o = o.withDefaults()
	if err := t.Sync(ctx); err != nil {
		return nil, "", err
	}
	due := t.due(o.MinOutcomes, o.Now.Add(-o.Window))
	if len(due) == 0 {
		return nil, "", nil
	}
	// The file as it is now, not as last looked at: system1 calibrate may
	// have written it since.
	_, _ = f.Reload()
	base := f.Current()
	next, ds := refit(due, base, o)
	// The buckets count as refitted once what they decided is kept: a
	// write that failed, or was refused because the file changed while
	// the refit ran, is tried again at the next refit.
	if next != nil {
		if err := f.replace(base, next); err != nil {
			return ds, "", err
		}
	}
	for _, b := range due {
		t.refitted(b.key, b.state.Outcomes)
	}
	if next == nil {
		return ds, "", nil
	}
	t.Prepare(next)
	return ds, next.Revision, nil
}

// refit decides each due bucket against current: the fits with every
// change in place (a new revision, written at o.Now), or nil when none
// changed, and each bucket's decision.
func refit(due []bucketCases, current *calibration.Fits, o RefitOptions) (*calibration.Fits, []RefitDecision) {
	next := &calibration.Fits{Version: calibration.FitsVersion, Fits: []calibration.Fit{}}
	if current != nil {
		next.Fits = append(next.Fits, current.Fits...)
	}
	var out []RefitDecision
	changed := false
	for _, b := range due {
		out = append(out, RefitDecision{Model: b.key.model, Fingerprint: b.key.fingerprint, Kind: string(b.key.kind), Bucket: b.key.bucket, Outcomes: len(b.preds), New: b.state.New()})
		d := &out[len(out)-1]
		idx := slices.IndexFunc(next.Fits, func(f calibration.Fit) bool {
			// Each build of a model has fits of its own: answers of another
			// build neither refit nor replace them.
			return f.Provider == "" && f.Model == b.key.model && f.Fingerprint == b.key.fingerprint && f.Kind == b.key.kind && f.Bucket == b.key.bucket
		})
		// The fit in use is the build's own, else one for every build (no
		// fingerprint, such as system1 calibrate writes, a provider's
		// included) that its answers are served under: measured against,
		// and kept unless beaten. Answers of no known build are looked up
		// among those alone, so that a build's fit is not copied into one
		// for every build.
		inUse, used := calibration.Fit{}, idx >= 0
		switch {
		case used:
			inUse = next.Fits[idx]
		case b.key.fingerprint != "":
			inUse, used, _ = next.LookupServed("", b.key.model, b.key.fingerprint, b.key.kind, b.options)
		default:
			inUse, used = next.LookupEveryBuild("", b.key.model, b.key.kind, b.options)
		}
		cur := calibration.Identity()
		if used {
			cur = inUse.Calibrator()
		}
		d.Current = cur.String()
		d.Calibrator = d.Current
		if len(b.preds) == 0 {
			d.Reason = "no labelled answer in the window"
			continue
		}
		s, err := fitting.Select(b.preds, cur, fitting.SelectOptions{Seed: o.Seed, Folds: o.Folds})
		if err != nil {
			d.Reason = err.Error()
			continue
		}
		d.Selection = &s
		d.Reason = s.Reason
		if s.Map.Adopt || s.Map.Reason != "" {
			d.Reason += "; " + s.Map.Reason
		}
		sets, _ := s.Sets(calibration.ConformalLAC, fitting.SetCoverages()) // LAC is a known method
		var ft calibration.Fit
		switch adopted, ok := s.AdoptedFit(o.TargetError); {
		case ok:
			ft = adopted
			d.Adopted = true
		case used:
			ft = inUse
		case len(sets) > 0:
			ft = setsOnly(s, o.TargetError)
		default:
			continue
		}
		ft.Sets = sets
		fitting.SetEscalations(&ft, s.HeldOut(), o.EscalationTargets)
		ft.Model, ft.Provider, ft.Kind, ft.Bucket, ft.Fingerprint = b.key.model, "", b.key.kind, b.key.bucket, b.key.fingerprint
		if used && sameFit(inUse, ft) {
			continue
		}
		ft.Date = o.Now.UTC().Format("2006-01-02")
		d.Calibrator = ft.Calibrator().String()
		d.Sets = len(sets)
		d.Written = true
		if idx >= 0 {
			next.Fits[idx] = ft
		} else {
			next.Fits = append(next.Fits, ft)
		}
		changed = true
	}
	if !changed {
		return nil, out
	}
	next.Created = o.Now.UTC().Format(time.RFC3339)
	next.Revise(o.Now)
	return next, out
}

// setsOnly is the fit of a bucket with no calibrator to adopt, written
// for its prediction sets: no calibration (temperature 1), measured on
// every case, with the gate its outcomes suggest (no parameter was
// fitted on them, so they are held out from the fit).
func setsOnly(s fitting.Selection, target float64) calibration.Fit {
	ft := calibration.Fit{Kind: s.Kind, Bucket: s.Bucket, N: s.N}
	ft.SetCalibrator(calibration.Identity())
	ft.NLLBefore, ft.NLLAfter, ft.ECEBefore, ft.ECEAfter = s.Raw.NLL, s.Raw.NLL, s.Raw.ECE, s.Raw.ECE
	ft.Gate = fitting.FitGateOf(s.HeldOut(), target, calibration.GateOnHeldOut)
	return ft
}

// sameFit reports whether a and b calibrate, map, gate and set alike:
// a refit that changes none of it writes nothing.
func sameFit(a, b calibration.Fit) bool {
	key := func(f calibration.Fit) string {
		f.Date, f.N, f.NLLBefore, f.NLLAfter, f.ECEBefore, f.ECEAfter, f.Holdout = "", 0, 0, 0, 0, 0, nil
		return fmt.Sprintf("%s|%+v|%+v|%+v|%+v", f.Calibrator(), f.ConfidenceMap, f.Gate, setsKey(f.Sets), f.Escalations)
	}
	return key(a) == key(b)
}

func setsKey(sets []calibration.Conformal) string {
	var b strings.Builder
	for _, c := range sets {
		cal := "-"
		if c.Calibrator != nil {
			cal = c.Calibrator.String()
		}
		fmt.Fprintf(&b, "%s@%v:%d:%v:%s;", c.Method, c.Coverage, c.N, c.Threshold, cal)
	}
	return b.String()
}

// RefitDecision is what a refit decided for one bucket.
type RefitDecision struct {
	Model string `json:"model"`
	// Fingerprint is the build the bucket's answers came from; empty for
	// answers recorded without one.
	Fingerprint string `json:"fingerprint,omitempty"`
	Kind        string `json:"kind"`
	Bucket      string `json:"bucket"`
	// Outcomes is the number of labelled answers fitted on, New how many
	// outcomes had come since the last refit.
	Outcomes int `json:"outcomes"`
	New      int `json:"new"`
	// Current is the calibrator in use before (calibration.Calibrator's
	// String), Calibrator the one in use after.
	Current    string `json:"current"`
	Calibrator string `json:"calibrator"`
	// Adopted is set when the selection adopted a calibrator or a
	// confidence map; Written when the bucket's fit changed (a new
	// calibrator, map, gate or prediction sets) and was written; Sets
	// is the number of coverage levels the written fit has sets for.
	Adopted bool `json:"adopted"`
	Written bool `json:"written"`
	Sets    int  `json:"sets"`
	// Reason says why, in the selection's words.
	Reason string `json:"reason"`
	// Selection is the evidence: every candidate's out-of-fold measures
	// and gains with their bounds; nil when the bucket could not be
	// cross-validated.
	Selection *fitting.Selection `json:"selection,omitempty"`
}

// Evidence writes the candidates' out-of-fold NLL, ECE, accuracy and
// gain over the current calibrator, and why each was refused, for a log
// line.
func (d RefitDecision) Evidence() string {
	if d.Selection == nil {
		return ""
	}
	s := d.Selection
	parts := []string{fmt.Sprintf("current %s: nll %.4f ece %.4f acc %.3f", s.Current.Calibrator, s.Current.OutOfFold.NLL, s.Current.OutOfFold.ECE, s.Current.OutOfFold.Accuracy)}
	for _, c := range s.Candidates {
		p := fmt.Sprintf("%s %s: nll %.4f ece %.4f acc %.3f, gain %s", c.Method, c.Calibrator, c.OutOfFold.NLL, c.OutOfFold.ECE, c.OutOfFold.Accuracy, c.NLLGain)
		if c.OutOfFold.MAE != nil {
			p += fmt.Sprintf(", mae %.3f", *c.OutOfFold.MAE)
		}
		if c.Refused != "" {
			p += " (" + c.Refused + ")"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}
