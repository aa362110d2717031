package fitting

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"system1/internal/calibration"
	"system1/internal/decision"
)

// Defaults of Select, and the fixed confidence and least gain it adopts at.
const (
	// DefaultFolds is the number of cross-validation folds.
	DefaultFolds = 5
	// DefaultResamples is the number of bootstrap resamples of requests
	// an interval is drawn from.
	DefaultResamples = 1000
	// DefaultAdoptConfidence is the one-sided confidence with which a
	// gain must be above zero to be adopted.
	DefaultAdoptConfidence = 0.95
	// DefaultMinGain is the least out-of-fold gain in mean NLL, in nats
	// per case, worth a change of fit. A smaller one moves reported
	// probabilities by less than their two-decimal rounding: a
	// temperature of 1.09 on a noul (a 0.0004-nat gain on BoolQ) moves
	// 0.80 to 0.78.
	DefaultMinGain = 0.001
)

// bootstrapMaxRequests is the most requests an interval is bootstrapped
// over; beyond it the normal approximation of the mean is used, which is
// as good there and costs one pass instead of DefaultResamples.
const bootstrapMaxRequests = 5000

// ErrTooFewRequests means there were fewer requests than folds.
var ErrTooFewRequests = errors.New("too few requests to cross-validate")

// SelectOptions configure Select. The zero value is the defaults.
type SelectOptions struct {
	// Folds is the number of folds, at least 2; 0 is DefaultFolds.
	Folds int
	// Seed picks the folds and the bootstrap resamples: the same cases,
	// options and seed always give the same selection, in whatever order
	// the cases come.
	Seed uint64
	// Resamples is the number of bootstrap resamples; 0 is
	// DefaultResamples.
	Resamples int
	// Methods are the candidates, from Methods(); empty is all of them.
	Methods []string
}

func (o SelectOptions) withDefaults() (SelectOptions, error) {
	if o.Folds == 0 {
		o.Folds = DefaultFolds
	}
	if o.Folds < 2 {
		return o, fmt.Errorf("folds %d: at least 2", o.Folds)
	}
	o.Resamples = cmp.Or(max(o.Resamples, 0), DefaultResamples)
	o.Resamples = min(o.Resamples, 100000)
	if len(o.Methods) == 0 {
		o.Methods = calibration.Methods()
	}
	for i, m := range o.Methods {
		if !slices.Contains(calibration.Methods(), m) {
			return o, fmt.Errorf("method %q is not one of %v", m, calibration.Methods())
		}
		if slices.Index(o.Methods, m) < i {
			return o, fmt.Errorf("method %q is named twice", m)
		}
	}
	asked := o.Methods // tried in the order of Methods(), simplest first
	o.Methods = slices.DeleteFunc(calibration.Methods(), func(m string) bool { return !slices.Contains(asked, m) })
	return o, nil
}

// Interval is a gain with its bootstrap bounds: how much better a
// candidate does than what it is compared with, per case, positive when
// it does better.
type Interval struct {
	// Mean is the gain over every case.
	Mean float64 `json:"mean"`
	// Low and High are its one-sided bounds at the selection's
	// confidence: the gain is above Low, and below High, each with that
	// confidence. Together they are a two-sided interval at twice the
	// confidence less one (90% for 95%).
	Low  float64 `json:"low"`
	High float64 `json:"high"`
}

// String writes i as "0.075 [0.051, 0.101]", to three significant digits.
func (i Interval) String() string {
	return fmt.Sprintf("%s [%s, %s]", sig(i.Mean), sig(i.Low), sig(i.High))
}

// Measures are a candidate's out-of-fold metrics (Measure's).
type Measures struct {
	NLL      float64 `json:"nll"`
	ECE      float64 `json:"ece"`
	Brier    float64 `json:"brier"`
	Accuracy float64 `json:"accuracy"`
	// MAE is for scores only: the mean distance of the expected level
	// from the right one.
	MAE *float64 `json:"mae,omitempty"`
}

func measures(m Metrics) Measures {
	return Measures{NLL: m.NLL, ECE: m.ECE, Brier: m.Brier, Accuracy: m.Accuracy, MAE: m.MAE}
}

// Candidate is how one calibrator did in cross-validation, against the
// current one.
type Candidate struct {
	// Method is the candidate's method, or "current" for the current
	// calibrator.
	Method string `json:"method"`
	// Calibrator is the candidate fitted on every case; for the current
	// one, the calibrator in use.
	Calibrator calibration.Calibrator `json:"calibrator"`
	// OutOfFold measures each case calibrated by the candidate fitted on
	// the other folds; the current calibrator, fitted before, is
	// measured as it is.
	OutOfFold Measures `json:"out_of_fold"`
	// NLLGain, AccuracyGain and MAEGain (scores only) are the candidate's
	// gains over the current calibrator: in NLL (nats per case, lower NLL
	// is a gain), in accuracy (a share) and in MAE (levels, lower MAE is
	// a gain). Not set for the current calibrator itself.
	NLLGain      Interval  `json:"nll_gain"`
	AccuracyGain Interval  `json:"accuracy_gain"`
	MAEGain      *Interval `json:"mae_gain,omitempty"`
	// AccuracyGainRaw and MAEGainRaw are the same gains over the
	// uncalibrated distributions: a calibrator must not do worse than
	// the model's own answers either, or a harmful current one would
	// let harm ratchet in.
	AccuracyGainRaw Interval  `json:"accuracy_gain_raw"`
	MAEGainRaw      *Interval `json:"mae_gain_raw,omitempty"`
	// Refused says why the candidate was not adopted; empty for the one
	// adopted, and for the current calibrator.
	Refused string `json:"refused,omitempty"`

	folds []calibration.Calibrator // fitted per fold, for the confidence map
	oof   []calibration.Prediction // the out-of-fold calibrated cases
}

// MapSelection is what cross-validation said of a ConfidenceMap on top
// of the selected calibrator: its out-of-fold log-loss of whether the
// predicted answer is right, and its top-label ECE, before (the
// calibrator's confidence) and after (mapped).
type MapSelection struct {
	Adopt bool `json:"adopt"`
	// Map is fitted on every case, calibrated by the selection's
	// calibrator; nil unless adopted.
	Map       *calibration.ConfidenceMap `json:"map,omitempty"`
	NLLBefore float64                    `json:"nll_before"`
	NLLAfter  float64                    `json:"nll_after"`
	ECEBefore float64                    `json:"ece_before"`
	ECEAfter  float64                    `json:"ece_after"`
	// Gain is NLLBefore less NLLAfter, with its bounds.
	Gain   Interval `json:"gain"`
	Reason string   `json:"reason"`

	oof []calibration.Prediction // out of fold under each fold's calibrator and map, when adopted
}

// Selection is Select's decision for one kind and bucket, with the
// evidence for it.
type Selection struct {
	Kind   decision.Kind `json:"kind"`
	Bucket string        `json:"bucket"`
	// N is the number of cases, Requests the number of requests they
	// came in (the unit of folds and resamples).
	N        int `json:"n"`
	Requests int `json:"requests"`
	Folds    int `json:"folds"`
	// Resamples is 0 where the intervals are the normal approximation
	// (more than 5,000 requests).
	Resamples  int     `json:"resamples"`
	Confidence float64 `json:"confidence"`
	MinGain    float64 `json:"min_gain"`
	// Raw measures the cases as they came, uncalibrated, on every case.
	Raw Measures `json:"raw"`
	// Current is the calibrator in use, measured on every case.
	Current Candidate `json:"current"`
	// Candidates are the methods tried, simplest first.
	Candidates []Candidate `json:"candidates"`
	// Best is the eligible method of least out-of-fold NLL, Chosen the
	// simplest eligible one that Best does not beat; empty when no
	// candidate is eligible.
	Best   string `json:"best"`
	Chosen string `json:"chosen"`
	// Adopt is true when Chosen beats the current calibrator.
	Adopt bool `json:"adopt"`
	// Calibrator is what to apply from now: Chosen fitted on every case
	// when adopted, else the current calibrator.
	Calibrator calibration.Calibrator `json:"calibrator"`
	// Reason says, in a sentence a report can print, why.
	Reason string `json:"reason"`
	// Map is the verdict on a confidence map on top of Calibrator.
	Map MapSelection `json:"confidence_map"`

	preds []calibration.Prediction // the cases, in canonical order
	oof   []calibration.Prediction // out-of-fold cases under the selected calibrator
	fold  []int                    // the fold of each case
}

// Select chooses a calibrator for one kind and option-count bucket by
// K-fold cross-validation over preds, its labelled cases, against
// current, the calibrator in use (Identity where none is).
//
// Folds are made of requests (Prediction.Request; a case without one is
// a request of its own), so that the questions of one request, which
// share a state, never sit on both sides of a fold. Each request goes to
// a fold by a hash of the seed and its id, and a case without one by its
// content, so the selection does not depend on the order of preds. Each
// candidate method is fitted on every fold but one and scores the cases
// of that one, and so is the current calibrator's method: the incumbent
// and every candidate are judged on the same out-of-fold outcomes, never
// on outcomes they were fitted on.
//
// A candidate beats another when its mean NLL gain over it is above
// zero with the selection's confidence (the one-sided bound of a paired
// bootstrap over requests: resample requests with replacement, take the
// ratio of the summed per-case NLL differences to the cases drawn; the
// normal approximation beyond 5,000 requests) and at least MinGain. A
// candidate is eligible unless its out-of-fold accuracy, or for scores
// its MAE (the expected level against the right one), is worse at all
// than the current calibrator's or the uncalibrated answers': a loss
// larger than the fold noise of an identity calibrator, which is none.
// A calibrator that trades answers for likelihood is refused, as a
// temperature of 7.4 that took SST-5's accuracy from 0.277 to 0.186
// should have been, and a bias per position that cost banking12 3 of
// 240 answers. Best is the eligible candidate of least NLL; Chosen is
// the simplest eligible candidate Best does not beat; it is adopted when
// it beats the current calibrator, when it is the current method fitted
// again on every case (its parameters refreshed), or when the current
// calibrator itself does worse than the uncalibrated answers by the same
// test. Otherwise the current calibrator stays.
//
// Then a ConfidenceMap on top of the selected calibrator is scored the
// same way (fitted per fold on the calibrated training cases) on the
// log-loss of whether each predicted answer is right, and adopted when
// it beats the calibrator's own confidence by the same rule and does not
// raise the out-of-fold top-label ECE.
//
// preds must share one kind and bucket and pass Prediction.Check (an
// error names the first that does not); fewer requests than folds is
// ErrTooFewRequests. A current calibrator that fails Check is Identity.
func Select(preds []calibration.Prediction, current calibration.Calibrator, opt SelectOptions) (Selection, error) {
	opt, err := opt.withDefaults()
	if err != nil {
		return Selection{}, err
	}
	if len(preds) == 0 {
		return Selection{}, ErrNoCases
	}
	kind, bucket := preds[0].Kind, calibration.Bucket(preds[0].Options)
	if err := checkGroup(preds, "case", kind, bucket); err != nil {
		return Selection{}, err
	}
	if current.Check() != nil {
		current = calibration.Identity()
	}
	cv := newFolds(preds, opt.Folds, opt.Seed)
	if cv.groups < opt.Folds {
		return Selection{}, fmt.Errorf("%w: %d requests for %d folds", ErrTooFewRequests, cv.groups, opt.Folds)
	}
	s := Selection{
		Kind: kind, Bucket: bucket, N: len(preds), Requests: cv.groups, Folds: opt.Folds,
		Resamples: opt.Resamples, Confidence: DefaultAdoptConfidence, MinGain: DefaultMinGain,
		preds: cv.preds, fold: cv.fold,
	}
	if cv.groups > bootstrapMaxRequests {
		s.Resamples = 0
	}
	boot := sampler{group: cv.group, groups: cv.groups, resamples: s.Resamples, seed: opt.Seed}
	s.Raw = measures(Measure(cv.preds))

	temps := make([]float64, opt.Folds+1) // per fold, then on every case: FitTemperature's, once
	curLoss, rawLoss := s.scoreCurrent(cv, current, boot, temps)
	harmed := s.scoreCandidates(cv, opt.Methods, current, curLoss, rawLoss, boot, temps)
	best, chosen := s.rank(boot)
	sel := s.conclude(current, best, chosen)
	if len(harmed) > 0 {
		s.Reason += "; refused for harm: " + strings.Join(harmed, "; ")
	}
	s.oof = sel.oof
	s.Map = cv.selectMap(sel, s.Calibrator, kind, boot)
	return s, nil
}

// worse is the harm rule: any mean loss of accuracy (or MAE) out of fold
// larger than the fold noise of an identity calibrator, which is none: it
// fits nothing, so its out-of-fold answers are the raw ones exactly, on
// every fold. A loss need not be significant to be refused (banking12
// lost 3 of 240 answers, 0.950 to 0.938, within the bootstrap's noise),
// since a calibrator is adopted for its probabilities and must not trade
// answers for them.
func worse(g Interval) bool { return g.Mean < -calibration.Edge }

// beats is the adoption rule: a gain above zero with DefaultAdoptConfidence
// and at least DefaultMinGain.
func beats(g Interval) bool { return g.Low > 0 && g.Mean >= DefaultMinGain }

// scoreCurrent scores the calibrator in use on the same out-of-fold
// outcomes as every candidate: its method fitted on every fold but one,
// scoring that one. Scored as it is, it would be scored partly on the
// outcomes it was fitted on, and a fit made on a partial batch would
// look better than any candidate and stick. It is held to the same
// standard: one that does worse than the uncalibrated answers is
// replaced, gain or none. It returns the current's and the raw answers'
// losses per case.
func (s *Selection) scoreCurrent(cv folds, current calibration.Calibrator, boot sampler, temps []float64) (curLoss, rawLoss losses) {
	c := cv.crossFit(current.Base().Method, temps) // Select made current pass Check; none leaves the cases as they came
	s.Current = Candidate{Method: "current", Calibrator: current, OutOfFold: measures(Measure(c.oof)), oof: c.oof, folds: c.folds}
	curLoss, rawLoss = caseLosses(c.oof), caseLosses(cv.preds)
	s.Current.AccuracyGainRaw = boot.interval(diff(curLoss.right, rawLoss.right))
	if s.Kind == decision.Score {
		s.Current.MAEGainRaw = new(boot.interval(diff(rawLoss.abs, curLoss.abs)))
	}
	var harms []string
	if g := s.Current.AccuracyGainRaw; worse(g) {
		harms = append(harms, fmt.Sprintf("lowers accuracy by %s", neg(g)))
	}
	if g := s.Current.MAEGainRaw; g != nil && worse(*g) {
		harms = append(harms, fmt.Sprintf("raises MAE by %s levels", neg(*g)))
	}
	s.Current.Refused = strings.Join(harms, ", and ")
	return curLoss, rawLoss
}

// scoreCandidates fits and scores each method out of fold, against the
// current calibrator and the raw answers, refusing those that would do
// harm; it returns the refused, each with why.
func (s *Selection) scoreCandidates(cv folds, methods []string, current calibration.Calibrator, curLoss, rawLoss losses, boot sampler, temps []float64) (harmed []string) {
	for _, m := range methods {
		if m == calibration.MethodLevel && s.Kind != decision.Score {
			continue // a level is a score's
		}
		c := cv.crossFit(m, temps)
		c.OutOfFold = measures(Measure(c.oof))
		l := caseLosses(c.oof)
		c.NLLGain = boot.interval(diff(curLoss.nll, l.nll))
		c.AccuracyGain = boot.interval(diff(l.right, curLoss.right))
		c.AccuracyGainRaw = boot.interval(diff(l.right, rawLoss.right))
		if s.Kind == decision.Score {
			c.MAEGain = new(boot.interval(diff(curLoss.abs, l.abs)))
			c.MAEGainRaw = new(boot.interval(diff(rawLoss.abs, l.abs)))
		}
		var harms []string
		for _, h := range []struct {
			what, unit, than string
			gain             *Interval
		}{
			{"accuracy would fall", "", "the current calibrator's", &c.AccuracyGain},
			{"accuracy would fall", "", "the uncalibrated answers'", &c.AccuracyGainRaw},
			{"MAE would rise", " levels", "the current calibrator's", c.MAEGain},
			{"MAE would rise", " levels", "the uncalibrated answers'", c.MAEGainRaw},
		} {
			if h.than != "the current calibrator's" && current.Method == calibration.MethodNone {
				continue // the same comparison twice
			}
			if h.gain != nil && worse(*h.gain) {
				harms = append(harms, fmt.Sprintf("%s by %s%s from %s", h.what, neg(*h.gain), h.unit, h.than))
			}
		}
		c.Refused = strings.Join(harms, ", and ")
		if c.Refused != "" {
			harmed = append(harmed, c.Method+" ("+c.Refused+")")
		}
		s.Candidates = append(s.Candidates, c)
	}
	return harmed
}

// rank finds the candidate not refused with the least out-of-fold NLL
// (best) and the first, in the order of the methods (simplest first),
// that the best does not beat beyond noise (chosen); -1 where none is
// left. The candidates after the chosen one are refused for it.
func (s *Selection) rank(boot sampler) (best, chosen int) {
	best = -1
	for i, c := range s.Candidates {
		if c.Refused == "" && (best < 0 || c.OutOfFold.NLL < s.Candidates[best].OutOfFold.NLL) {
			best = i
		}
	}
	chosen = -1
	if best >= 0 {
		s.Best = s.Candidates[best].Method
		bestLoss := caseLosses(s.Candidates[best].oof).nll
		for i := range s.Candidates {
			c := &s.Candidates[i]
			if c.Refused != "" {
				continue
			}
			if chosen >= 0 {
				c.Refused = fmt.Sprintf("%s, simpler, does as well", s.Candidates[chosen].Method)
				continue
			}
			if i == best {
				chosen = i
				continue
			}
			if g := boot.interval(diff(caseLosses(c.oof).nll, bestLoss)); beats(g) {
				c.Refused = fmt.Sprintf("%s does better by %s nats", s.Best, g)
				continue
			}
			chosen = i
		}
	}
	return best, chosen
}

// conclude sets what the selection serves (Chosen, Adopt, Calibrator)
// and says why, from the ranked candidates; it returns the candidate whose
// out-of-fold answers the confidence map is chosen on.
func (s *Selection) conclude(current calibration.Calibrator, best, chosen int) Candidate {
	s.Calibrator = current
	sel := s.Current
	switch {
	case chosen < 0:
		s.Reason = fmt.Sprintf("keeps the current %s: every candidate would worsen accuracy or MAE", current)
	case s.Current.Refused != "":
		c := s.Candidates[chosen]
		s.Chosen, s.Adopt, s.Calibrator, sel = c.Method, true, c.Calibrator, c
		s.Reason = fmt.Sprintf("replaces the current %s, which %s against the uncalibrated answers, by %s (%s), the simplest candidate as good as any that does no such harm: out-of-fold NLL %s against %s",
			current, s.Current.Refused, c.Method, c.Calibrator, sig(c.OutOfFold.NLL), sig(s.Current.OutOfFold.NLL))
	case s.Candidates[chosen].Method == current.Base().Method && s.Candidates[chosen].Calibrator.String() != current.Base().String():
		// The current method, fitted on every outcome now: it is scored
		// out of fold exactly as the current calibrator is, so it cannot
		// beat it, and without this a fit made on a partial batch would
		// never be refreshed.
		c := s.Candidates[chosen]
		s.Chosen, s.Adopt, s.Calibrator, sel = c.Method, true, c.Calibrator, c
		s.Reason = fmt.Sprintf("refits the current %s on every outcome: %s (out-of-fold NLL %s, the current's method scored on the same folds; no simpler candidate does better beyond noise)",
			current, c.Calibrator, sig(c.OutOfFold.NLL))
	case !beats(s.Candidates[chosen].NLLGain):
		c := &s.Candidates[chosen]
		s.Chosen = c.Method
		why := func(g Interval) string {
			if g.Low > 0 {
				return "under the least gain worth a change, " + sig(DefaultMinGain)
			}
			return "not above zero with " + pct(DefaultAdoptConfidence) + " confidence"
		}
		c.Refused = fmt.Sprintf("its NLL gain over the current calibrator, %s nats, is %s", c.NLLGain, why(c.NLLGain))
		b := s.Candidates[best]
		if c.Method == calibration.MethodNone && current.Method == calibration.MethodNone {
			s.Reason = "keeps no calibration: no candidate that does no harm does better out of fold"
			if best != chosen {
				s.Reason = fmt.Sprintf("keeps no calibration: the best candidate, %s (%s), gains %s nats of out-of-fold NLL over none, %s", b.Method, b.Calibrator, b.NLLGain, why(b.NLLGain))
			}
			break
		}
		if chosen == best {
			s.Reason = fmt.Sprintf("keeps the current %s: the best candidate, %s (%s), gains %s nats of out-of-fold NLL, %s",
				current, b.Method, b.Calibrator, b.NLLGain, why(b.NLLGain))
			break
		}
		s.Reason = fmt.Sprintf("keeps the current %s: the best candidate, %s (%s), does not beat the simpler %s beyond noise, and %s gains %s nats of out-of-fold NLL over the current, %s",
			current, b.Method, b.Calibrator, c.Method, c.Method, c.NLLGain, why(c.NLLGain))
	default:
		c := s.Candidates[chosen]
		s.Chosen, s.Adopt, s.Calibrator, sel = c.Method, true, c.Calibrator, c
		s.Reason = fmt.Sprintf("adopts %s (%s): out-of-fold NLL %s against %s for the current %s, a gain of %s nats at %s confidence",
			c.Method, c.Calibrator, sig(c.OutOfFold.NLL), sig(s.Current.OutOfFold.NLL), current, c.NLLGain, pct(DefaultAdoptConfidence))
		if c.Method == calibration.MethodNone {
			s.Reason = fmt.Sprintf("drops the current %s: the uncalibrated distributions do better out of fold, NLL %s against %s, a gain of %s nats",
				current, sig(c.OutOfFold.NLL), sig(s.Current.OutOfFold.NLL), c.NLLGain)
		}
	}
	return sel
}

// AdoptedFit is the fit to write when the selection adopted a calibrator or
// a confidence map: the calibrator (fitted on every case), its map, its
// metrics on every case (NLLBefore and ECEBefore uncalibrated) with the
// out-of-fold ones as Holdout, and the gate SuggestGate finds at target on
// the out-of-fold confidences: each case calibrated by a fit that did not
// see it, so the gate is on held-out cases. Provider, Model and Date are
// left to the caller. It reports false when nothing was adopted.
func (s *Selection) AdoptedFit(target float64) (calibration.Fit, bool) {
	if !s.Adopt && !s.Map.Adopt {
		return calibration.Fit{}, false
	}
	f := calibration.Fit{Kind: s.Kind, Bucket: s.Bucket, N: s.N}
	cal, oofPreds := s.Calibrator, s.oof
	if s.Map.Adopt {
		cal, oofPreds = cal.Base().WithMap(s.Map.Map, s.Kind), s.Map.oof
	}
	f.SetCalibrator(cal)
	after := Measure(calibration.Calibrate(s.preds, cal))
	f.NLLBefore, f.NLLAfter, f.ECEBefore, f.ECEAfter = s.Raw.NLL, after.NLL, s.Raw.ECE, after.ECE
	oof := Measure(oofPreds)
	f.Holdout = &calibration.Score{N: s.N, NLLBefore: s.Raw.NLL, NLLAfter: oof.NLL, ECEBefore: s.Raw.ECE, ECEAfter: oof.ECE}
	f.Gate = FitGateOf(oofPreds, target, calibration.GateOnHeldOut)
	return f, true
}

// folds is a bucket's cases in canonical order, with the request group
// and fold of each.
type folds struct {
	preds  []calibration.Prediction
	group  []int // the group of each case, 0..groups-1
	fold   []int
	groups int
	k      int
}

// newFolds puts preds in a canonical order (by group rank, then by
// content) and assigns each request group a fold: groups are ranked by a
// hash of the seed and their key and dealt to the folds in turn, so the
// folds differ by at most one group.
func newFolds(preds []calibration.Prediction, k int, seed uint64) folds {
	type item struct {
		key           string
		rank, content uint64
		i             int
	}
	items := make([]item, len(preds))
	for i, p := range preds {
		c := contentHash(p)
		key := p.Request
		if key == "" {
			key = "\x00" + strconv.FormatUint(c, 16)
		}
		items[i] = item{key, Rank(seed, key), c, i}
	}
	slices.SortStableFunc(items, func(a, b item) int {
		return cmp.Or(cmp.Compare(a.rank, b.rank), strings.Compare(a.key, b.key), cmp.Compare(a.content, b.content))
	})
	f := folds{k: k, preds: make([]calibration.Prediction, len(preds)), group: make([]int, len(preds)), fold: make([]int, len(preds))}
	g := -1
	for j, it := range items {
		if j == 0 || it.key != items[j-1].key {
			g++
		}
		f.preds[j], f.group[j], f.fold[j] = preds[it.i], g, g%k
	}
	f.groups = g + 1
	return f
}

// contentHash is a hash of what a case says: its kind, distribution,
// expected index and options; identical cases get one.
func contentHash(p calibration.Prediction) uint64 {
	b := binary.LittleEndian.AppendUint64([]byte(p.Kind), uint64(p.Expected))
	b = binary.LittleEndian.AppendUint64(b, uint64(p.Options))
	for _, q := range p.Dist {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(q))
	}
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// crossFit fits method on every fold but one and calibrates that one's
// cases with it, then fits it on every case. temps caches the
// temperature of each fold's training cases (and, last, of every case),
// which vector scaling starts from; 0 is not yet fitted.
func (f folds) crossFit(method string, temps []float64) Candidate {
	fit := func(preds []calibration.Prediction, k int) calibration.Calibrator {
		if method == calibration.MethodNone {
			return calibration.Identity()
		}
		if method == calibration.MethodLevel {
			return fitLevel(preds)
		}
		if temps[k] == 0 {
			temps[k], _ = FitTemperature(preds) // checked cases, never empty
		}
		if method == calibration.MethodTemperature {
			return calibration.TemperatureCalibrator(temps[k])
		}
		return fitVectorFrom(preds, temps[k])
	}
	c := Candidate{Method: method, oof: make([]calibration.Prediction, len(f.preds)), folds: make([]calibration.Calibrator, f.k)}
	for k := range f.k {
		cal := fit(inFolds(f.preds, f.fold, func(j int) bool { return j != k }), k)
		c.folds[k] = cal
		for i, p := range f.preds {
			if f.fold[i] == k {
				p.Dist = cal.Apply(p.Dist)
				c.oof[i] = p
			}
		}
	}
	c.Calibrator = fit(f.preds, f.k)
	return c
}

// inFolds is the cases of preds whose fold, fold[i] for preds[i], keep
// takes, in their order.
func inFolds(preds []calibration.Prediction, fold []int, keep func(k int) bool) []calibration.Prediction {
	var out []calibration.Prediction
	for i, p := range preds {
		if keep(fold[i]) {
			out = append(out, p)
		}
	}
	return out
}

// selectMap scores a confidence map on top of sel, the selected
// candidate (or the current calibrator when no candidate was adopted),
// whose fit on every case is final, without any map final has: each
// fold's map is fitted on the other folds calibrated by that fold's
// calibrator, and composed with it (Calibrator.WithMap), so that what is
// scored is what would be served.
func (f folds) selectMap(sel Candidate, final calibration.Calibrator, kind decision.Kind, boot sampler) MapSelection {
	n := len(f.preds)
	base, mapped := make([]float64, n), make([]float64, n)
	right, mright := make([]bool, n), make([]bool, n)
	oof := make([]calibration.Prediction, n)
	for k, cal := range sel.folds {
		train := calibration.Calibrate(inFolds(f.preds, f.fold, func(j int) bool { return j != k }), cal)
		m := fitMap(confidences(train))
		composed := cal.WithMap(&m, kind)
		for i, p := range f.preds {
			if f.fold[i] == k {
				b := p
				b.Dist = cal.Apply(p.Dist)
				base[i], right[i] = b.Confidence(), b.Correct()
				p.Dist = composed.Apply(p.Dist)
				oof[i] = p
				mapped[i], mright[i] = p.Confidence(), p.Correct()
			}
		}
	}
	lb, lm := binaryLosses(base, right), binaryLosses(mapped, mright)
	ms := MapSelection{
		NLLBefore: mean(lb), NLLAfter: mean(lm),
		ECEBefore: TopECE(base, right), ECEAfter: TopECE(mapped, mright),
		Gain: boot.interval(diff(lb, lm)),
	}
	if !beats(ms.Gain) {
		ms.Reason = fmt.Sprintf("a confidence map would gain %s nats in the log-loss of being right, not enough; confidences stay the calibrator's", ms.Gain)
		return ms
	}
	if ms.ECEAfter > ms.ECEBefore {
		ms.Reason = fmt.Sprintf("a confidence map would gain %s nats in the log-loss of being right but raise the top-label ECE from %s to %s; confidences stay the calibrator's", ms.Gain, sig(ms.ECEBefore), sig(ms.ECEAfter))
		return ms
	}
	m := fitMap(confidences(calibration.Calibrate(f.preds, final.Base())))
	ms.Adopt, ms.Map, ms.oof = true, &m, oof
	ms.Reason = fmt.Sprintf("adopts a confidence map of the probability right, applied after the calibrator: out-of-fold log-loss of being right %s -> %s (gain %s nats), top-label ECE %s -> %s",
		sig(ms.NLLBefore), sig(ms.NLLAfter), ms.Gain, sig(ms.ECEBefore), sig(ms.ECEAfter))
	return ms
}

// confidences are the confidence of each case's predicted answer and
// whether it is right.
func confidences(preds []calibration.Prediction) (conf []float64, right []bool) {
	conf, right = make([]float64, len(preds)), make([]bool, len(preds))
	for i, p := range preds {
		conf[i], right[i] = p.Confidence(), p.Correct()
	}
	return conf, right
}

// losses are per-case losses: NLL as Measure takes it, 1 for a right
// answer, and the MAE term for a score.
type losses struct{ nll, right, abs []float64 }

func caseLosses(preds []calibration.Prediction) losses {
	l := losses{make([]float64, len(preds)), make([]float64, len(preds)), make([]float64, len(preds))}
	for i, p := range preds {
		l.nll[i] = caseNLL(p)
		l.right[i] = boolf(p.Correct())
		if p.Kind == decision.Score {
			l.abs[i] = levelErr(p)
		}
	}
	return l
}

// binaryLosses is the log-loss of each right (true) or wrong answer at
// probability right q, floored like NLL.
func binaryLosses(q []float64, right []bool) []float64 {
	out := make([]float64, len(q))
	for i := range q {
		p := q[i]
		if !right[i] {
			p = 1 - p
		}
		out[i] = -math.Log(math.Max(p, ProbFloor))
	}
	return out
}

// TopECE is the ECE of confidences against whether each was right, over
// Measure's bins.
func TopECE(conf []float64, right []bool) float64 {
	var count, hits, sum [NumBins]float64
	for i, c := range conf {
		b := bin(c, NumBins)
		count[b]++
		sum[b] += c
		if right[i] {
			hits[b]++
		}
	}
	var e float64
	for b := range count {
		if count[b] > 0 {
			e += math.Abs(hits[b] - sum[b])
		}
	}
	if len(conf) == 0 {
		return 0
	}
	return e / float64(len(conf))
}

// diff is a - b, element by element.
func diff(a, b []float64) []float64 {
	out := make([]float64, len(a))
	for i := range a {
		out[i] = a[i] - b[i]
	}
	return out
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// sampler draws intervals of per-case differences by a paired bootstrap
// over groups: every interval of one selection uses the same resamples.
type sampler struct {
	group     []int
	groups    int
	resamples int // 0: the normal approximation
	seed      uint64
}

// interval is the mean of d over the cases with its one-sided bounds:
// the ratio of the summed d to the cases, over resamples of the groups
// with replacement.
func (s sampler) interval(d []float64) Interval {
	sum := make([]float64, s.groups)
	cnt := make([]float64, s.groups)
	var total float64
	for i, v := range d {
		sum[s.group[i]] += v
		cnt[s.group[i]]++
		total += v
	}
	m := total / float64(len(d))
	if s.resamples == 0 {
		// The delta-method variance of a ratio of group sums.
		se := clusterSE(sum, cnt, m)
		z := math.Sqrt2 * math.Erfinv(2*DefaultAdoptConfidence-1) // the standard normal's quantile
		return Interval{Mean: m, Low: m - z*se, High: m + z*se}
	}
	r := rand.New(rand.NewPCG(s.seed, 0xb007))
	stats := make([]float64, s.resamples)
	for b := range stats {
		var sd, sn float64
		for range s.groups {
			g := r.IntN(s.groups)
			sd += sum[g]
			sn += cnt[g]
		}
		stats[b] = sd / sn
	}
	slices.Sort(stats)
	lo := int(math.Floor((1 - DefaultAdoptConfidence) * float64(s.resamples)))
	hi := int(math.Ceil(DefaultAdoptConfidence*float64(s.resamples))) - 1
	lo = min(max(lo, 0), s.resamples-1)
	hi = min(max(hi, 0), s.resamples-1)
	return Interval{Mean: m, Low: stats[lo], High: stats[hi]}
}

// neg is the worsening of a gain, as a positive interval.
func neg(i Interval) Interval { return Interval{Mean: -i.Mean, Low: -i.High, High: -i.Low} }

// sig writes x to three significant digits.
func sig(x float64) string { return strconv.FormatFloat(x, 'g', 3, 64) }

// pct writes a share as a percentage.
func pct(x float64) string { return strconv.FormatFloat(100*x, 'g', 4, 64) + "%" }
