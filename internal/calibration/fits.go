package calibration

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"system1/internal/decision"
)

// FitsVersion is the version of the fits file format this package reads
// and writes. Fields added since (a fit's method, biases, confidence map
// and prediction sets) are optional and omitted when unused, so a file of
// temperatures is what it always was, and every file written before them
// still loads; a reader older than them refuses a file that uses one,
// naming the field.
const FitsVersion = 1

// dateLayout is the layout of a fit's date: YYYY-MM-DD.
const dateLayout = "2006-01-02"

// Fits is a fits file: the temperatures to apply, per provider or model,
// kind and option-count bucket.
type Fits struct {
	// Version is FitsVersion.
	Version int `json:"version"`
	// Created says when the file was written, free-form; by convention an
	// RFC 3339 time.
	Created string `json:"created"`
	// Revision names this version of the fits: what a decide answer and
	// the decision log say was applied. Refits write a new one; a file
	// without one gets its content's hash when it is read (ContentRevision).
	Revision string `json:"revision,omitempty"`
	Fits     []Fit  `json:"fits"`
}

// Fit is one fitted temperature and what it did. At most one fit of a file
// has a given provider, model, kind and bucket.
type Fit struct {
	// Provider is the gateway provider the cases came through, and Model
	// the model that answered them; either may be empty, and a fit with
	// both empty is never found by Lookup.
	Provider string        `json:"provider"`
	Model    string        `json:"model"`
	Kind     decision.Kind `json:"kind"`
	// Bucket is a name Bucket returns.
	Bucket string `json:"bucket"`
	// Fingerprint is the build of the model the fit was learnt on (the
	// fingerprint of docs/fingerprints.md that answers carry); empty for
	// a fit learnt before fingerprints or without them, which applies to
	// any build of its model. LookupServed never applies a fit learnt on
	// another build.
	Fingerprint string `json:"fingerprint,omitempty"`
	// Temperature is a positive number at most MaxTemperature, applied
	// with Distribution.Temper.
	Temperature float64 `json:"temperature"`
	// Method is how the fit calibrates (see Calibrator): empty, the
	// temperature alone, as in every file written before methods,
	// MethodLevel, a score's temperature that keeps its expected level,
	// or MethodVector, the temperature and a bias per position, Biases.
	// MethodTemperature is read as empty and written as empty.
	Method string    `json:"method,omitempty"`
	Biases []float64 `json:"biases,omitempty"`
	// ConfidenceMap, when set, maps the calibrated confidence of the
	// predicted answer to the probability it is right, and is applied
	// after the calibrator: the predicted answer is served at that
	// probability (ConfidenceMap.Apply), the answer itself unchanged.
	ConfidenceMap *ConfidenceMap `json:"confidence_map,omitempty"`
	// Sets are split conformal prediction sets of the distributions
	// before the fit's calibrator (fitting.Selection.Sets says why), at most one
	// per method and coverage.
	Sets []Conformal `json:"sets,omitempty"`
	// N is the number of cases fitted on.
	N int `json:"n"`
	// NLLBefore and NLLAfter are the mean NLL on the fitted cases before
	// and after the temperature, ECEBefore and ECEAfter their ECE.
	NLLBefore float64 `json:"nll_before"`
	NLLAfter  float64 `json:"nll_after"`
	ECEBefore float64 `json:"ece_before"`
	ECEAfter  float64 `json:"ece_after"`
	// Holdout is how the temperature did on held-out cases, nil when none
	// were held out.
	Holdout *Score `json:"holdout,omitempty"`
	// Gate is the confidence gate suggested with the fit (see fitting.SetGate),
	// nil when none was suggested: files written before gates have none,
	// and too few outcomes pass no bound.
	Gate *FitGate `json:"gate,omitempty"`
	// Escalations are the thresholds certified for cascades that have the
	// fit's model as a stage, one per target error (see
	// CertifyEscalation); bound to the fit's build like the rest of it.
	Escalations []Escalation `json:"escalations,omitempty"`
	// Date is the day of the fit, YYYY-MM-DD, or empty.
	Date string `json:"date"`
}

// Where a fit's gate was chosen.
const (
	GateOnHeldOut = "held_out" // the held-out cases, tempered by the fit
	GateOnFitted  = "fitted"   // the fitted cases, where none were held out
)

// FitGate is the gate fitting.SuggestGate found on a fit's own cases, tempered by
// its temperature: the calibrated confidence of the predicted answer (the
// probability of the option chosen, what a decide answer's confidence
// is) at or above which the error rate stayed under TargetError with
// fitting.GateConfidence.
type FitGate struct {
	// Threshold is the gate, in (0, 1].
	Threshold   float64 `json:"threshold"`
	TargetError float64 `json:"target_error"`
	// On says which cases it was chosen on: GateOnHeldOut or GateOnFitted.
	On string `json:"on"`
	// N is how many cases it was chosen over, Above how many of them were
	// at or above it, WrongAbove how many of those were wrong, and
	// UpperBound the Clopper–Pearson bound on their error rate.
	N          int     `json:"n"`
	Above      int     `json:"above"`
	WrongAbove int     `json:"wrong_above"`
	UpperBound float64 `json:"upper_bound"`
}

// Calibrator is the calibrator the fit applies, whole: its temperature,
// with its biases for MethodVector (a temperature of exactly 1 without
// biases is Identity, as SetCalibrator writes it, so that a step names
// it none), then its confidence map where it has one. Every face, the
// reports and the refits apply this one composition, and a step's
// version names all of it (Calibrator.String).
func (f Fit) Calibrator() Calibrator {
	var c Calibrator
	switch {
	case f.Method == MethodVector:
		c = Calibrator{Method: MethodVector, Temperature: f.Temperature, Biases: f.Biases}
	case f.Method == MethodLevel:
		c = Calibrator{Method: MethodLevel, Temperature: f.Temperature}
	case f.Temperature == 1:
		c = Identity()
	default:
		c = TemperatureCalibrator(f.Temperature)
	}
	return c.WithMap(f.ConfidenceMap, f.Kind)
}

// Calibrates reports whether applying f changes a distribution at all:
// a calibrator other than none, or a confidence map. A fit of
// temperature 1 without a map (one a refit wrote for its prediction
// sets alone) calibrates nothing.
func (f Fit) Calibrates() bool {
	c := f.Calibrator()
	return c.Method != MethodNone || c.Map != nil
}

// SetCalibrator makes f apply c, its confidence map included:
// MethodNone is written as a temperature of 1, and MethodTemperature as
// the empty method, as files before methods have it.
func (f *Fit) SetCalibrator(c Calibrator) {
	f.Method, f.Temperature, f.Biases, f.ConfidenceMap = "", c.Temperature, nil, c.Map
	switch c.Method {
	case MethodNone:
		f.Temperature = 1
	case MethodVector:
		f.Method, f.Biases = MethodVector, slices.Clone(c.Biases)
	case MethodLevel:
		f.Method = MethodLevel
	}
}

// Apply calibrates d with f's whole calibrator (Calibrator.Apply), its
// confidence map included.
func (f Fit) Apply(d decision.Distribution) decision.Distribution {
	return f.Calibrator().Apply(d)
}

func (g *FitGate) validate() error {
	switch {
	case !(g.Threshold > 0 && g.Threshold <= 1):
		return fmt.Errorf("threshold %v is not in (0, 1]", g.Threshold)
	case !(g.TargetError > 0 && g.TargetError < 1):
		return fmt.Errorf("target_error %v is not in (0, 1)", g.TargetError)
	case g.On != GateOnHeldOut && g.On != GateOnFitted:
		return fmt.Errorf("on %q is not %s or %s", g.On, GateOnHeldOut, GateOnFitted)
	case g.N < 0 || g.Above < 0 || g.Above > g.N || g.WrongAbove < 0 || g.WrongAbove > g.Above:
		return fmt.Errorf("counts n %d, above %d, wrong_above %d do not nest", g.N, g.Above, g.WrongAbove)
	case !(g.UpperBound >= 0 && g.UpperBound <= 1):
		return fmt.Errorf("upper_bound %v is not in [0, 1]", g.UpperBound)
	}
	return nil
}

// Score is how a temperature did on a set of cases.
type Score struct {
	N         int     `json:"n"`
	NLLBefore float64 `json:"nll_before"`
	NLLAfter  float64 `json:"nll_after"`
	ECEBefore float64 `json:"ece_before"`
	ECEAfter  float64 `json:"ece_after"`
}

// Revise sets f's Revision for a new version written at now: the time and
// a hash of the fits, so that two versions never share one.
func (f *Fits) Revise(now time.Time) {
	f.Revision = ""
	data, _ := json.Marshal(f) // plain data always marshals
	f.Revision = now.UTC().Format("20060102T150405Z") + "-" + ContentRevision(data)[:8]
}

// ContentRevision is the revision of a fits file that names none: the
// start of its content's SHA-256, so that two contents never share one.
func ContentRevision(data []byte) string {
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:6])
}

// ParseFits reads a fits file, of any version written since the first. It
// rejects anything that is not one JSON object of the Fits shape (unknown
// fields, keys twice or in another case, invalid UTF-8 and trailing data
// included), a version other than FitsVersion, and a file that fails
// Validate. It never panics, whatever the bytes.
func ParseFits(data []byte) (*Fits, error) {
	if err := exactKeys(data); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f Fits
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("fits: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("fits: data after the JSON object")
	}
	for i := range f.Fits {
		if len(f.Fits[i].Sets) == 0 {
			f.Fits[i].Sets = nil // "sets": [] is none, as Encode writes it
		}
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return &f, nil
}

// Validate reports the first thing wrong with f: a version other than
// FitsVersion, or a fit, named by its index, that lacks a kind or bucket,
// has an unknown kind or bucket, a temperature that is not a positive
// number at most MaxTemperature, a negative count, a metric that is negative or not finite
// (or an ECE above 1), a gate whose threshold is not in (0, 1] or whose
// other fields are out of range, a date that is not YYYY-MM-DD, a
// calibrator that fails Calibrator.Check (an unknown method, biases
// without MethodVector), a confidence map that fails ConfidenceMap.Check,
// a prediction set that fails Conformal.Check or repeats another's
// method and coverage, or the same provider, model, kind and bucket as
// an earlier fit.
func (f *Fits) Validate() error {
	if f == nil {
		return errors.New("fits: none")
	}
	if f.Version != FitsVersion {
		return fmt.Errorf("fits: version %d; only %d is known", f.Version, FitsVersion)
	}
	seen := map[[5]string]int{}
	for i, ft := range f.Fits {
		if err := ft.validate(); err != nil {
			return fmt.Errorf("fits: fit %d: %w", i, err)
		}
		k := [5]string{ft.Provider, ft.Model, ft.Fingerprint, string(ft.Kind), ft.Bucket}
		if j, ok := seen[k]; ok {
			return fmt.Errorf("fits: fit %d repeats fit %d (provider %q, model %q, fingerprint %q, %s, bucket %s)", i, j, ft.Provider, ft.Model, ft.Fingerprint, ft.Kind, ft.Bucket)
		}
		seen[k] = i
	}
	return nil
}

func (ft Fit) validate() error {
	switch {
	case ft.Kind == "":
		return errors.New("no kind")
	case !ft.Kind.Valid():
		return fmt.Errorf("kind %q is not choice, noul or score", ft.Kind)
	case ft.Bucket == "":
		return errors.New("no bucket")
	case bucketIndex(ft.Bucket) < 0:
		return fmt.Errorf("bucket %q is not one of %v", ft.Bucket, Buckets())
	case !(ft.Temperature > 0 && ft.Temperature <= MaxTemperature):
		return fmt.Errorf("temperature %v is not a positive finite number up to %d", ft.Temperature, MaxTemperature)
	case ft.Method != "" && ft.Method != MethodTemperature && ft.Method != MethodLevel && ft.Method != MethodVector:
		return fmt.Errorf("method %q is not %s, %s or %s", ft.Method, MethodTemperature, MethodLevel, MethodVector)
	case ft.Method == MethodLevel && ft.Kind != decision.Score:
		return fmt.Errorf("method %s is for scores, not a %s", MethodLevel, ft.Kind)
	case ft.Method != MethodVector && ft.Biases != nil:
		return fmt.Errorf("biases without method %s", MethodVector)
	}
	if ft.ConfidenceMap != nil {
		if err := ft.ConfidenceMap.Check(); err != nil {
			return fmt.Errorf("confidence_map: %w", err)
		}
	}
	if err := ft.Calibrator().Check(); err != nil {
		return err
	}
	for i, c := range ft.Sets {
		if err := c.Check(); err != nil {
			return fmt.Errorf("set %d: %w", i, err)
		}
		for j, d := range ft.Sets[:i] {
			if d.Method == c.Method && d.Coverage == c.Coverage {
				return fmt.Errorf("set %d repeats set %d (%s at %v)", i, j, c.Method, c.Coverage)
			}
		}
	}
	if ft.Date != "" {
		if d, err := time.Parse(dateLayout, ft.Date); err != nil || d.Format(dateLayout) != ft.Date {
			return fmt.Errorf("date %q is not YYYY-MM-DD", ft.Date)
		}
	}
	s := Score{ft.N, ft.NLLBefore, ft.NLLAfter, ft.ECEBefore, ft.ECEAfter}
	if err := s.validate(); err != nil {
		return err
	}
	if ft.Holdout != nil {
		if err := ft.Holdout.validate(); err != nil {
			return fmt.Errorf("holdout: %w", err)
		}
	}
	if ft.Gate != nil {
		if err := ft.Gate.validate(); err != nil {
			return fmt.Errorf("gate: %w", err)
		}
	}
	for i, e := range ft.Escalations {
		if err := e.Check(); err != nil {
			return fmt.Errorf("escalation %d: %w", i, err)
		}
	}
	return nil
}

func (s Score) validate() error {
	if s.N < 0 {
		return fmt.Errorf("n is %d", s.N)
	}
	for _, m := range []struct {
		name string
		v    float64
		hi   float64
	}{
		{"nll_before", s.NLLBefore, math.MaxFloat64},
		{"nll_after", s.NLLAfter, math.MaxFloat64},
		{"ece_before", s.ECEBefore, 1},
		{"ece_after", s.ECEAfter, 1},
	} {
		if !(m.v >= 0 && m.v <= m.hi) {
			return fmt.Errorf("%s is %v", m.name, m.v)
		}
	}
	return nil
}

// Encode writes f as an indented fits file, after checking it with
// Validate, so that ParseFits reads back what was written.
func (f *Fits) Encode() ([]byte, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("fits: %w", err)
	}
	return append(b, '\n'), nil
}

// Lookup finds the fit for a question of the given kind and option count
// asked of provider and model: among the fits of that kind and of
// Bucket(options), one whose Provider is provider (and, of those, one whose
// Model is also model) when provider is not empty; failing that, one whose
// Model is model (and, of those, one with no Provider) when model is not
// empty. Ties go to the earlier fit. A nil *Fits finds nothing.
func (f *Fits) Lookup(provider, model string, kind decision.Kind, options int) (Fit, bool) {
	return f.lookup(provider, model, kind, options, nil)
}

// LookupServed is Lookup for an answer served by the build fingerprint
// (fleet's fingerprint; "" when it is not known): among the fits learnt
// on that build first, then among those learnt before fingerprints (no
// Fingerprint), which apply to any build. A fit learnt on another build
// is never returned: other then reports that Lookup would have found one,
// so that the answer can say why it is not calibrated. An unknown build
// (fingerprints off, or the model not probed yet) is looked up as Lookup
// does.
func (f *Fits) LookupServed(provider, model, fingerprint string, kind decision.Kind, options int) (ft Fit, ok, other bool) {
	if fingerprint == "" {
		ft, ok = f.Lookup(provider, model, kind, options)
		return ft, ok, false
	}
	if ft, ok = f.lookup(provider, model, kind, options, func(ft Fit) bool { return ft.Fingerprint == fingerprint }); ok {
		return ft, true, false
	}
	if ft, ok = f.LookupEveryBuild(provider, model, kind, options); ok {
		return ft, true, false
	}
	_, other = f.Lookup(provider, model, kind, options)
	return Fit{}, false, other
}

// LookupEveryBuild is Lookup among the fits of every build alone (no
// Fingerprint): those learnt before fingerprints, or by system1
// calibrate.
func (f *Fits) LookupEveryBuild(provider, model string, kind decision.Kind, options int) (Fit, bool) {
	return f.lookup(provider, model, kind, options, func(ft Fit) bool { return ft.Fingerprint == "" })
}

// lookup is Lookup among the fits accept takes (nil: all).
func (f *Fits) lookup(provider, model string, kind decision.Kind, options int, accept func(Fit) bool) (Fit, bool) {
	if f == nil {
		return Fit{}, false
	}
	bucket := Bucket(options)
	best, rank := -1, 0
	for i, ft := range f.Fits {
		if ft.Kind != kind || ft.Bucket != bucket || (accept != nil && !accept(ft)) {
			continue
		}
		r := 0
		switch {
		case provider != "" && ft.Provider == provider && ft.Model == model:
			r = 4
		case provider != "" && ft.Provider == provider:
			r = 3
		case model != "" && ft.Model == model && ft.Provider == "":
			r = 2
		case model != "" && ft.Model == model:
			r = 1
		}
		if r > rank {
			best, rank = i, r
		}
	}
	if best < 0 {
		return Fit{}, false
	}
	return f.Fits[best], true
}

// Apply calibrates d, the distribution a question of the given kind got
// from provider and model, with the fit Lookup finds for it (Fit.Apply:
// its temperature, and its biases where it has them); without one it
// returns d unchanged and false.
func (f *Fits) Apply(provider, model string, kind decision.Kind, d decision.Distribution) (decision.Distribution, bool) {
	ft, ok := f.Lookup(provider, model, kind, len(d))
	if !ok {
		return d, false
	}
	return ft.Apply(d), true
}

// SetFor is the fit's prediction set rule for a request of the given
// coverage: of its sets, the one of the least coverage at or above it
// (LAC before APS at the same coverage), so that the guarantee holds
// for what was asked. It reports false when the fit has none that high:
// its outcomes were too few (ConformalMinCases).
func (f Fit) SetFor(coverage float64) (Conformal, bool) {
	best := -1
	for i, c := range f.Sets {
		if c.Check() != nil || c.Coverage < coverage-1e-9 {
			continue
		}
		if best < 0 || c.Coverage < f.Sets[best].Coverage ||
			(c.Coverage == f.Sets[best].Coverage && c.Method == ConformalLAC && f.Sets[best].Method != ConformalLAC) {
			best = i
		}
	}
	if best < 0 {
		return Conformal{}, false
	}
	return f.Sets[best], true
}

// SetsReach is the highest coverage any of the fit's sets is built for,
// and the most calibration cases any of them rests on, 0 and 0 when it
// has none: what a request its sets cannot serve is told.
func (f Fit) SetsReach() (coverage float64, outcomes int) {
	for _, s := range f.Sets {
		coverage, outcomes = max(coverage, s.Coverage), max(outcomes, s.N)
	}
	return coverage, outcomes
}
