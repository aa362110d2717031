package outcomes

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"system1/internal/calibration"
	"system1/internal/decision"
	"system1/internal/decisionlog"
)

// Defaults of the label-free drift report.
const (
	// DefaultDriftWindow is the current window: the answers of the last
	// hour.
	DefaultDriftWindow = time.Hour
	// DefaultDriftReference is the reference window, just before the
	// current one.
	DefaultDriftReference = 24 * time.Hour
)

// DriftOptions are the windows a drift report compares and its alarm;
// zero values are the defaults.
type DriftOptions struct {
	// Window is the current window, ending at the report's end;
	// Reference the window just before it.
	Window, Reference time.Duration
	// Threshold is calibration.MeasureDrift's.
	Threshold float64
}

func (o DriftOptions) withDefaults() DriftOptions {
	if o.Window <= 0 {
		o.Window = DefaultDriftWindow
	}
	if o.Reference <= 0 {
		o.Reference = DefaultDriftReference
	}
	if !(o.Threshold > 0) {
		o.Threshold = calibration.DefaultDriftThreshold
	}
	return o
}

// SignatureDrift is one model and question signature's drift: how its
// answers in the current window compare with the reference window,
// without any outcome (calibration.MeasureDrift).
type SignatureDrift struct {
	Model     string        `json:"model"`
	Signature string        `json:"signature"`
	Kind      decision.Kind `json:"kind"`
	Options   []string      `json:"options"`
	// PSI is the larger of the two statistics.
	PSI float64 `json:"psi"`
	calibration.Drift
}

// ReportDrift compares, per model and signature, the answers served in
// the window ending at until with those of the reference window before
// it. Shadow answers are not served ones and are left out; a signature
// seen in one window only is reported with zero answers in the other.
func ReportDrift(ctx context.Context, log *decisionlog.Log, until time.Time, opt DriftOptions) ([]SignatureDrift, error) {
	if log == nil {
		return nil, fmt.Errorf("the decision log is off")
	}
	opt = opt.withDefaults()
	cut := until.Add(-opt.Window)
	es, err := log.Window(ctx, cut.Add(-opt.Reference), until.Add(time.Nanosecond), "")
	if err != nil {
		return nil, err
	}
	type key struct{ model, sig string }
	type sides struct {
		kind     decision.Kind
		options  []string
		ref, cur []calibration.Answer
	}
	by := map[key]*sides{}
	for _, e := range es {
		if e.Face == decisionlog.FaceShadow {
			continue
		}
		a, ok := calibration.AnswerOf(calibration.Prediction{Kind: e.Kind, Dist: e.Answered(), Options: len(e.Options)})
		if !ok {
			continue
		}
		k := key{e.Model, Signature(e.Kind, e.Options)}
		s := by[k]
		if s == nil {
			s = &sides{kind: e.Kind, options: e.Options}
			by[k] = s
		}
		if e.Time.Before(cut) {
			s.ref = append(s.ref, a)
		} else {
			s.cur = append(s.cur, a)
		}
	}
	out := make([]SignatureDrift, 0, len(by))
	for k, s := range by {
		d := calibration.MeasureDrift(s.ref, s.cur, opt.Threshold)
		out = append(out, SignatureDrift{Model: k.model, Signature: k.sig, Kind: s.kind, Options: s.options, PSI: d.PSI(), Drift: d})
	}
	slices.SortFunc(out, func(a, b SignatureDrift) int {
		return cmp.Or(cmp.Compare(a.Model, b.Model), cmp.Compare(a.Signature, b.Signature))
	})
	return out, nil
}
