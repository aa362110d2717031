package fitting

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"

	"system1/internal/calibration"
	"system1/internal/decision"
)

// The temperatures FitTemperature searches, and how closely it finds the
// best one, in log T.
const (
	MinTemperature = 0.05
	MaxTemperature = 20
	logTTolerance  = 1e-6
	gridPoints     = 61
)

// ErrNoCases means that there was nothing to fit.
var ErrNoCases = errors.New("no cases to fit")

// FitTemperature finds the temperature T in [MinTemperature, MaxTemperature]
// whose tempered distributions, Dist.Temper(T), have the least mean NLL (as
// Measure computes it, with the ProbFloor) on preds.
//
// It searches log T: a grid of 61 points over the range finds the best
// neighbourhood, and a golden-section search inside it narrows the best T
// to within 1e-6 in log T. The grid guards against the kinks the floor puts
// in an otherwise unimodal loss. Tempering keeps a zero at zero, so a case
// whose expected option was reported as 0 costs the same at every T. When no
// temperature does better than 1 by more than 1e-12, as when every
// distribution is certain, the result is 1: the data say nothing. A best T
// on the edge of the range is returned as that edge.
//
// An empty set is ErrNoCases, and a case that fails Prediction.Check is an
// error naming its index.
func FitTemperature(preds []calibration.Prediction) (float64, error) {
	if len(preds) == 0 {
		return 0, ErrNoCases
	}
	for i, p := range preds {
		if err := p.Check(); err != nil {
			return 0, fmt.Errorf("case %d: %w", i, err)
		}
	}
	// The loss is FitVector's with every bias 0: Measure's NLL on
	// Dist.Temper(T), up to rounding.
	cases, k := logCases(preds)
	x, grad := make([]float64, k+1), make([]float64, k+1)
	loss := func(u float64) float64 {
		x[0] = -u // ln beta, beta = 1/T
		return vectorLoss(cases, x, grad) / float64(len(cases))
	}
	return math.Exp(minimizeLogT(loss)), nil
}

// logCase is a case reduced to what its loss needs: the positions and
// logs of its non-zero probabilities, and which of them is the expected
// option (-1 when that one is zero and costs the floor whatever the
// calibrator).
type logCase struct {
	pos      []int
	logs     []float64
	expected int
}

func newLogCase(p calibration.Prediction) logCase {
	c := logCase{expected: -1}
	for i, q := range p.Dist {
		if q > 0 {
			if i == p.Expected {
				c.expected = len(c.pos)
			}
			c.pos = append(c.pos, i)
			c.logs = append(c.logs, math.Log(q))
		}
	}
	return c
}

// logCases is preds as logCases, with the most options any of them has.
func logCases(preds []calibration.Prediction) (cases []logCase, options int) {
	cases = make([]logCase, len(preds))
	for i, p := range preds {
		options = max(options, len(p.Dist))
		cases[i] = newLogCase(p)
	}
	return cases, options
}

// Temper returns a copy of preds with every distribution tempered by t, as
// Distribution.Temper does it. A t of 1, or one that is not a positive
// finite number, leaves the distributions as they are, shared with preds.
func Temper(preds []calibration.Prediction, t float64) []calibration.Prediction {
	return calibration.Calibrate(preds, calibration.TemperatureCalibrator(t))
}

// Split divides preds into a set to fit on and a held-out set to score the
// fit on, with round(holdout * len(preds)) cases held out; a holdout that is
// NaN or at most 0 holds out nothing, and one of 1 or more holds out all.
// The same preds, holdout and seed always give the same split: each index
// gets a key from a fixed 64-bit mix of the seed and the index, and the
// cases with the smallest keys are held out. Both sets keep the cases in
// their order in preds; the distributions are shared with preds, not
// copied.
func Split(preds []calibration.Prediction, holdout float64, seed uint64) (fit, held []calibration.Prediction) {
	n := len(preds)
	h := 0
	switch {
	case holdout >= 1:
		h = n
	case holdout > 0:
		h = int(math.Round(holdout * float64(n)))
	}
	keys := make([]uint64, n)
	for i := range keys {
		keys[i] = mix(seed ^ mix(uint64(i)))
	}
	// mix is a bijection, so the keys differ: the h smallest are those
	// up to the h-th.
	sorted := slices.Sorted(slices.Values(keys))
	for i, p := range preds {
		if h > 0 && keys[i] <= sorted[h-1] {
			held = append(held, p)
		} else {
			fit = append(fit, p)
		}
	}
	return fit, held
}

// Rank is a fixed pseudo-random rank of id under seed: the same id and
// seed always give the same rank, and ranks of nearby ids scatter. Folds
// are dealt by it, and a benchmark can split cases by it alike.
func Rank(seed uint64, id string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	return mix(seed ^ h.Sum64())
}

// mix is the finaliser of SplitMix64, a fixed bijection of 64-bit integers
// that scatters nearby inputs.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Group is the cases of one kind and option-count bucket, the unit a fit
// is made for.
type Group struct {
	Kind   decision.Kind
	Bucket string
	Preds  []calibration.Prediction
}

// Groups sorts preds into groups by kind and Bucket(Options), keeping the
// cases' order within each group. The groups come by kind (choice, noul,
// score, then any unknown kind by name) and then by bucket, fewest options
// first; cases of an unknown kind are grouped like the others and will fail
// to fit.
func Groups(preds []calibration.Prediction) []Group {
	var out []Group
	at := map[[2]string]int{}
	for _, p := range preds {
		k := [2]string{string(p.Kind), calibration.Bucket(p.Options)}
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, Group{Kind: p.Kind, Bucket: k[1]})
		}
		out[i].Preds = append(out[i].Preds, p)
	}
	slices.SortFunc(out, func(a, b Group) int { return calibration.CompareGroups(a.Kind, a.Bucket, b.Kind, b.Bucket) })
	return out
}

// NewFit fits a temperature on fit and measures it: NLL and ECE before and
// after on the fitted cases, and, when held is not empty, on the held-out
// cases as Holdout. Every case of both sets must pass Prediction.Check and
// share one kind and bucket, which the fit takes; Provider, Model and Date
// are left for the caller to fill in.
func NewFit(fit, held []calibration.Prediction) (calibration.Fit, error) {
	if len(fit) == 0 {
		return calibration.Fit{}, ErrNoCases
	}
	f := calibration.Fit{Kind: fit[0].Kind, Bucket: calibration.Bucket(fit[0].Options), N: len(fit)}
	if err := checkGroup(fit, "fitted case", f.Kind, f.Bucket); err != nil {
		return calibration.Fit{}, err
	}
	if err := checkGroup(held, "held-out case", f.Kind, f.Bucket); err != nil {
		return calibration.Fit{}, err
	}
	t, err := FitTemperature(fit)
	if err != nil {
		return calibration.Fit{}, err
	}
	f.Temperature = t
	s := score(fit, t)
	f.NLLBefore, f.NLLAfter, f.ECEBefore, f.ECEAfter = s.NLLBefore, s.NLLAfter, s.ECEBefore, s.ECEAfter
	if len(held) > 0 {
		f.Holdout = new(score(held, t))
	}
	return f, nil
}

// checkGroup reports the first of preds, named by what and its index,
// that fails Prediction.Check or is not of kind and bucket.
func checkGroup(preds []calibration.Prediction, what string, kind decision.Kind, bucket string) error {
	for i, p := range preds {
		if err := p.Check(); err != nil {
			return fmt.Errorf("%s %d: %w", what, i, err)
		}
		if p.Kind != kind || calibration.Bucket(p.Options) != bucket {
			return fmt.Errorf("%s %d is %s over %d options, not %s in bucket %s", what, i, p.Kind, p.Options, kind, bucket)
		}
	}
	return nil
}

// score measures preds before and after tempering by t.
func score(preds []calibration.Prediction, t float64) calibration.Score {
	before, after := Measure(preds), Measure(Temper(preds, t))
	return calibration.Score{N: before.N, NLLBefore: before.NLL, NLLAfter: after.NLL, ECEBefore: before.ECE, ECEAfter: after.ECE}
}
