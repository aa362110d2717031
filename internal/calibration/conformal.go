package calibration

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"system1/internal/decision"
)

// The scores of split conformal prediction sets.
const (
	// ConformalLAC is the least ambiguous set-valued classifier: the
	// score of an option is 1 - p, and a set holds every option whose
	// probability is at least 1 - threshold. It gives the smallest sets
	// on average, at the price of coverage that varies with difficulty.
	ConformalLAC = "lac"
	// ConformalAPS is adaptive prediction sets, non-randomised: the
	// options sorted by probability, most probable first (the earlier on
	// a tie), the score of an option is the probability of the options
	// up to and including it, and a set is the options whose score is at
	// most the threshold: a prefix of that order, longer where the model
	// is less sure. Without randomisation the sets are deterministic and
	// cover at least as often as asked, a little more than the
	// randomised variant would; an answer whose most probable option
	// alone already exceeds the threshold gets an empty set.
	ConformalAPS = "aps"
)

// The coverages a prediction set may be asked for.
const (
	MinCoverage = 0.5
	MaxCoverage = 0.99
)

// setTolerance is how far above the threshold a score may fall through
// floating-point arithmetic and still count as at it: the same score
// computed twice the same way is equal, so this only ever adds an option
// that lies on the threshold, which keeps the guarantee.
const setTolerance = 1e-12

// Conformal is a split conformal prediction set rule fitted on one
// bucket's labelled cases (Mondrian: one per model, kind and option
// bucket): for exchangeable cases, the set of a new case holds its right
// option with probability at least Coverage.
type Conformal struct {
	// Method is ConformalLAC or ConformalAPS.
	Method string `json:"method"`
	// Coverage is the share of sets that hold the right option, in
	// [MinCoverage, MaxCoverage].
	Coverage float64 `json:"coverage"`
	// N is the number of calibration cases, at least
	// ConformalMinCases(Coverage).
	N int `json:"n"`
	// Threshold is the ceil((N+1) Coverage)-th smallest score of the
	// calibration cases, in [0, 1].
	Threshold float64 `json:"threshold"`
	// Holdout is how sets of the same rule did on cases their threshold
	// was not fitted on (fitting.Selection.Sets: each fold's cases under a
	// threshold fitted on the other folds), nil when not measured.
	Holdout *SetCoverage `json:"holdout,omitempty"`
	// Calibrator, when set, is what the scores are of: the distribution
	// before the fit's calibrator, calibrated by this one, which was
	// fitted on other outcomes than the N the threshold rests on (split
	// conformal, fitting.Selection.Sets), so that the guarantee holds under it.
	// Absent: the distribution before the fit's calibrator, as it came.
	Calibrator *Calibrator `json:"calibrator,omitempty"`
}

// SetOf is the set of d, the distribution before the fit's calibrator:
// scored under the rule's own calibrator where it has one (Set).
func (c Conformal) SetOf(d decision.Distribution) []int {
	if c.Calibrator != nil {
		d = c.Calibrator.Apply(d)
	}
	return c.Set(d)
}

// ConformalRank is ceil((n+1) * coverage), the rank of the calibration
// score that is the threshold; a product a hair above an integer
// through rounding counts as that integer.
func ConformalRank(n int, coverage float64) int {
	return int(math.Ceil(float64(n+1)*coverage - 1e-9))
}

// ConformalMinCases is the fewest calibration cases a set of the given
// coverage needs: the least n with ceil((n+1) coverage) <= n, about
// coverage / (1 - coverage) (4 at 0.8, 9 at 0.9, 19 at 0.95, 99 at
// 0.99). With fewer, even the largest score is not a high enough
// quantile, and only the set of every option would cover. A coverage
// outside [MinCoverage, MaxCoverage] needs -1: it is refused.
func ConformalMinCases(coverage float64) int {
	if !(coverage >= MinCoverage && coverage <= MaxCoverage) {
		return -1
	}
	n := 1
	for ConformalRank(n, coverage) > n {
		n++
	}
	return n
}

// ConformalScore is the score of option y of d: how unlike the right
// answer it looks.
func ConformalScore(method string, d decision.Distribution, y int) float64 {
	return conformalScores(method, d)[y]
}

// conformalScores is the score of every option of d, in option order.
// An APS score is the running sum along apsOrder, which never falls, so
// the options at or under a threshold are a prefix of that order.
func conformalScores(method string, d decision.Distribution) []float64 {
	out := make([]float64, len(d))
	if method == ConformalLAC {
		for i, p := range d {
			out[i] = 1 - p
		}
		return out
	}
	var cum float64
	for _, i := range apsOrder(d) {
		cum += d[i]
		out[i] = cum
	}
	return out
}

// apsOrder is the options of d by probability, most probable first, the
// earlier on a tie.
func apsOrder(d decision.Distribution) []int {
	order := make([]int, len(d))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(d[b], d[a]) })
	return order
}

// Set is the prediction set of d under c: the indices, in option order,
// of the options whose score is at most the threshold. It may be empty
// (every option looks less likely than the calibration cases' right
// ones) or hold every option. A d that is not a distribution over its
// own length, or a c that fails Check, has no set: nil.
func (c Conformal) Set(d decision.Distribution) []int {
	if c.Check() != nil || len(d) == 0 || d.Check(len(d)) != nil {
		return nil
	}
	out := []int{}
	for i, s := range conformalScores(c.Method, d) {
		if s <= c.Threshold+setTolerance {
			out = append(out, i)
		}
	}
	return out
}

// Check reports what is wrong with c: an unknown method, a coverage out
// of range, fewer cases than the coverage needs, or a threshold that is
// not in [0, 1].
func (c Conformal) Check() error {
	switch {
	case c.Method != ConformalLAC && c.Method != ConformalAPS:
		return fmt.Errorf("method %q is not %s or %s", c.Method, ConformalLAC, ConformalAPS)
	case !(c.Coverage >= MinCoverage && c.Coverage <= MaxCoverage):
		return fmt.Errorf("coverage %v is not in [%v, %v]", c.Coverage, MinCoverage, MaxCoverage)
	case c.N < ConformalMinCases(c.Coverage):
		return fmt.Errorf("n %d is under the %d that coverage %v needs", c.N, ConformalMinCases(c.Coverage), c.Coverage)
	case !(c.Threshold >= 0 && c.Threshold <= 1):
		return fmt.Errorf("threshold %v is not in [0, 1]", c.Threshold)
	}
	if cal := c.Calibrator; cal != nil {
		if err := cal.Check(); err != nil {
			return fmt.Errorf("calibrator: %w", err)
		}
		if cal.Map != nil || cal.Method == MethodNone {
			return fmt.Errorf("calibrator %s: a set's calibrator is a method other than none, without a map", cal)
		}
	}
	if h := c.Holdout; h != nil {
		switch {
		case h.N < 0 || h.Covered < 0 || h.Covered > h.N || h.Empty < 0 || h.Singletons < 0 || h.Empty+h.Singletons > h.N:
			return fmt.Errorf("holdout counts n %d, covered %d, empty %d, singletons %d do not nest", h.N, h.Covered, h.Empty, h.Singletons)
		case !(h.Coverage >= 0 && h.Coverage <= 1):
			return fmt.Errorf("holdout coverage %v is not in [0, 1]", h.Coverage)
		case !(h.MeanSize >= 0 && h.MeanSize <= 255):
			return fmt.Errorf("holdout mean_size %v is not in [0, 255]", h.MeanSize)
		}
	}
	return nil
}

// SetCoverage is how a prediction set rule did on held-out cases.
type SetCoverage struct {
	// N is the number of cases measured; those that fail
	// Prediction.Check are left out.
	N int `json:"n"`
	// Covered is how many sets held the right option, and Coverage
	// their share (0 when N is 0).
	Covered  int     `json:"covered"`
	Coverage float64 `json:"coverage"`
	// MeanSize is the mean number of options in a set, Empty how many
	// sets were empty, and Singletons how many held one option.
	MeanSize   float64 `json:"mean_size"`
	Empty      int     `json:"empty"`
	Singletons int     `json:"singletons"`
}

// SetCount counts prediction sets as they are measured, for their
// SetCoverage; the zero value counts none.
type SetCount struct{ n, covered, size, empty, singletons int }

// Add counts one set of a case whose right option is expected, d times:
// a d of -1 takes back one counted before.
func (s *SetCount) Add(set []int, expected, d int) {
	s.n += d
	s.size += d * len(set)
	switch len(set) {
	case 0:
		s.empty += d
	case 1:
		s.singletons += d
	}
	if slices.Contains(set, expected) {
		s.covered += d
	}
}

// Coverage is how the sets counted fared.
func (s SetCount) Coverage() SetCoverage {
	out := SetCoverage{N: s.n, Covered: s.covered, Empty: s.empty, Singletons: s.singletons}
	if s.n > 0 {
		out.Coverage = float64(s.covered) / float64(s.n)
		out.MeanSize = float64(s.size) / float64(s.n)
	}
	return out
}

// Evaluate measures c's sets on held-out cases, their distributions
// before the fit's calibrator (SetOf): the share holding the right
// option and their size.
func (c Conformal) Evaluate(preds []Prediction) SetCoverage {
	var s SetCount
	s.AddSets(c, preds)
	return s.Coverage()
}

// AddSets counts c's set of each of preds that passes Prediction.Check,
// its distribution before the fit's calibrator (SetOf), as Evaluate
// measures them: sets of several rules, each on its own cases, pool.
func (s *SetCount) AddSets(c Conformal, preds []Prediction) {
	for _, p := range preds {
		if p.Check() == nil {
			s.Add(c.SetOf(p.Dist), p.Expected, 1)
		}
	}
}
