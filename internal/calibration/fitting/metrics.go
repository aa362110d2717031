package fitting

import (
	"math"

	"system1/internal/calibration"
	"system1/internal/decision"
)

// NumBins is the number of equal-width confidence bins of the expected
// calibration error and the reliability diagram.
const NumBins = 15

// ProbFloor is the least probability the log-loss takes of the expected
// option. Reported probabilities are rounded to two decimals, so a right
// option can be reported as 0, and temperature keeps a zero at zero; without
// a floor one such case would make the mean infinite. With it, a case costs
// at most -ln(1e-6) ≈ 13.8 nats.
const ProbFloor = 1e-6

// Metrics measure a set of predictions. Every number is finite; a rate over
// no cases is 0, except where a field says otherwise.
type Metrics struct {
	// N is the number of cases measured.
	N int `json:"n"`
	// Skipped is the number of cases left out because they fail
	// Prediction.Check.
	Skipped int `json:"skipped"`
	// Accuracy is the share of cases whose predicted answer is right.
	Accuracy float64 `json:"accuracy"`
	// ECE is the expected calibration error over the NumBins bins: the
	// sum over bins of count/N * |accuracy - confidence|.
	ECE float64 `json:"ece"`
	// Brier is the mean over cases of sum_i (p_i - y_i)^2, where y is the
	// one-hot vector of the expected option; a noul uses its 2-vector, so
	// its Brier is twice the binary one. It lies in [0, 2].
	Brier float64 `json:"brier"`
	// NLL is the mean of -ln max(p[expected], ProbFloor), in nats.
	NLL float64 `json:"nll"`
	// MAE is the mean absolute distance, in levels, of the expected level
	// sum(i * p_i) from the right level, over the score cases only. It is
	// nil (and omitted from JSON) when there is no score case.
	MAE *float64 `json:"mae,omitempty"`
	// Selective holds, keyed "0.7" and "0.9", how the cases whose
	// confidence reaches the threshold fare.
	Selective map[string]Selective `json:"selective"`
	// Floor is the majority-class floor: the share of the most frequent
	// expected index, the accuracy of always answering it. It pools the
	// kinds, so it means most for a set of one kind and bucket.
	Floor float64 `json:"floor"`
	// Bins are the NumBins confidence bins, lowest first, for a
	// reliability diagram.
	Bins []Bin `json:"bins"`
}

// Selective is the accuracy of answering only when confident enough.
type Selective struct {
	// Threshold is the least confidence answered; a confidence within
	// 1e-9 below it counts as reaching it.
	Threshold float64 `json:"threshold"`
	// N is the number of cases answered.
	N int `json:"n"`
	// Coverage is the share of all cases answered.
	Coverage float64 `json:"coverage"`
	// Accuracy is the share of answered cases that are right, nil (and
	// omitted from JSON) when none is answered: the accuracy of no case is
	// undefined, and JSON cannot carry NaN.
	Accuracy *float64 `json:"accuracy,omitempty"`
}

// Bin is one equal-width confidence bin [Lo, Hi); the last one, ending at
// 1, also holds confidence 1.
type Bin struct {
	Lo    float64 `json:"lo"`
	Hi    float64 `json:"hi"`
	Count int     `json:"count"`
	// Accuracy and Confidence are the share right and the mean confidence
	// of the bin's cases, 0 when Count is 0.
	Accuracy   float64 `json:"accuracy"`
	Confidence float64 `json:"confidence"`
}

// selectiveThresholds are the confidences Metrics.Selective is keyed by,
// with their keys.
func selectiveThresholds() []struct {
	key string
	t   float64
} {
	return []struct {
		key string
		t   float64
	}{{"0.7", 0.7}, {"0.9", 0.9}}
}

// Measure computes the metrics of a set of predictions. Cases that fail
// Prediction.Check are left out and counted in Skipped; the kinds may be
// mixed, though a fit is made per kind and bucket.
func Measure(preds []calibration.Prediction) Metrics {
	var s Stats
	s.init()
	for _, p := range preds {
		s.count(p)
	}
	return s.metrics()
}

// caseNLL is one case's log-loss, the term of Metrics.NLL.
func caseNLL(p calibration.Prediction) float64 {
	return -math.Log(math.Max(p.Dist[p.Expected], ProbFloor))
}

// levelErr is one score case's distance of the expected level from the
// right one, the term of Metrics.MAE.
func levelErr(p calibration.Prediction) float64 {
	return math.Abs(decision.ExpectedLevel(p.Dist) - float64(p.Expected))
}

// bin is the index of c's bin among n equal-width bins of [0, 1]: bin i
// holds [i, i+1)/n, the last one 1 too, and a confidence within Edge
// under an edge counts as on it.
func bin(c float64, n int) int {
	return min(max(int(math.Floor(c*float64(n)+calibration.Edge)), 0), n-1)
}

// boolf is 1 for true, 0 for false.
func boolf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// ratio is a/b, 0 when b is 0.
func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
