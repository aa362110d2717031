// Package calibration is what a request reads of calibration: the fits
// file (ParseFits, Fits.Encode), the fit a request's provider, model,
// kind and option-count bucket finds there (Fits.LookupServed), and what
// that fit applies: its calibrator, its confidence map and its
// prediction sets. It is pure: it parses and encodes the fits file's
// bytes, but reads and writes no file (package outcomes does) and holds
// no global state. The fitting lab that measures cases and writes fits,
// package fitting below it, imports this one and never the reverse.
//
// Confidence here is always the probability the distribution gives its own
// predicted answer, the quantity calibration is about; it is not the
// chance-corrected confidence of decision.ChoiceConfidence and
// decision.ScoreConfidence that the wire reports.
package calibration

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"system1/internal/decision"
)

// Edge is how close to a boundary a number may fall through floating-point
// arithmetic and still count as on it: a score whose expected level is
// exactly x.5 rounds up, a confidence of exactly 0.7 reaches the threshold
// 0.7, and a confidence of exactly k/15 falls in bin k, whatever path the
// arithmetic took. Probabilities are reported to two decimals, so no real
// case lies this close to a boundary without lying on it.
const Edge = 1e-9

// Prediction is one labelled case: the distribution as reported and the
// index of the right option.
type Prediction struct {
	Kind decision.Kind
	// Dist is the distribution as reported: over the options in order for
	// a choice, [P(true), P(false)] for a noul, over the levels 0..k-1 for
	// a score.
	Dist decision.Distribution
	// Expected is the index of the right option: of the choice, of the
	// level, or 0 for a noul whose answer is true and 1 for false.
	Expected int
	// Options is the number of options the question had: 2 for a noul.
	Options int
	// Request names the request the case was asked in (the decision
	// log's request id). Cross-validation keeps the cases of one request
	// in one fold and resamples requests, not cases, since the questions
	// of one request share a state and are not independent. Empty means
	// the case is a request of its own.
	Request string
}

// Check reports whether p is a case this package can score: a known kind,
// at least two options (exactly two for a noul), a distribution over them
// that passes decision's Check, and an expected index among them.
func (p Prediction) Check() error {
	if !p.Kind.Valid() {
		return fmt.Errorf("unknown kind %q", p.Kind)
	}
	if p.Options < 2 {
		return fmt.Errorf("%d options; at least 2 are needed", p.Options)
	}
	if p.Kind == decision.Noul && p.Options != 2 {
		return fmt.Errorf("a noul has 2 options, not %d", p.Options)
	}
	if err := p.Dist.Check(p.Options); err != nil {
		return err
	}
	if p.Expected < 0 || p.Expected >= p.Options {
		return fmt.Errorf("expected option %d is not among %d options", p.Expected, p.Options)
	}
	return nil
}

// Predicted is the answer the distribution gives, as an option index: the
// argmax (the first on a tie) for a choice; 0 (true) for a noul when
// P(true) >= 0.5, so that an even split is true, else 1; and for a score
// the expected level sum(i * p_i) rounded half up and kept among the levels.
// It assumes p passes Check.
func (p Prediction) Predicted() int {
	switch p.Kind {
	case decision.Noul:
		if p.Dist[0] >= 0.5 {
			return 0
		}
		return 1
	case decision.Score:
		level := int(math.Floor(decision.ExpectedLevel(p.Dist) + 0.5 + Edge))
		return min(max(level, 0), len(p.Dist)-1)
	default:
		return p.Dist.Argmax()
	}
}

// Confidence is the probability the distribution gives its predicted
// answer: p[argmax] for a choice, max(p, 1-p) for a noul with P(true) = p,
// and the probability of the predicted level for a score (which need not be
// the largest one). It assumes p passes Check.
func (p Prediction) Confidence() float64 {
	if p.Kind == decision.Noul {
		return math.Max(p.Dist[0], 1-p.Dist[0])
	}
	return p.Dist[p.Predicted()]
}

// Correct reports whether the predicted answer is the expected one.
func (p Prediction) Correct() bool { return p.Predicted() == p.Expected }

// Bucket names the option-count bucket fits are kept by: "2", "3-4",
// "5-10", "11-20", "21-50" or "51-255". Fewer than 2 options count as "2"
// and more than 255 as "51-255", so every count has a bucket.
func Bucket(options int) string {
	switch {
	case options <= 2:
		return "2"
	case options <= 4:
		return "3-4"
	case options <= 10:
		return "5-10"
	case options <= 20:
		return "11-20"
	case options <= 50:
		return "21-50"
	default:
		return "51-255"
	}
}

// Buckets lists every name Bucket returns, from the fewest options to the
// most.
func Buckets() []string {
	return []string{"2", "3-4", "5-10", "11-20", "21-50", "51-255"}
}

// bucketIndex is the position of name among Buckets, or -1 when it is not
// one of them.
func bucketIndex(name string) int { return slices.Index(Buckets(), name) }

// CompareGroups orders groups of cases by kind (choice, noul, score, then
// any unknown kind by name) and then by bucket, fewest options first: the
// order fits are made and reported in.
func CompareGroups(kindA decision.Kind, bucketA string, kindB decision.Kind, bucketB string) int {
	rank := func(k decision.Kind) int {
		if r := slices.Index([]decision.Kind{decision.Choice, decision.Noul, decision.Score}, k); r >= 0 {
			return r
		}
		return 3 // an unknown kind, after the known ones
	}
	return cmp.Or(cmp.Compare(rank(kindA), rank(kindB)), cmp.Compare(kindA, kindB), cmp.Compare(bucketIndex(bucketA), bucketIndex(bucketB)))
}
