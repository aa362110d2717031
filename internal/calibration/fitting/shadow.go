package fitting

import (
	"fmt"
	"math"

	"system1/internal/calibration"
	"system1/internal/decision"
)

// Pair is one question answered by both sides of a shadow rollout or a
// replay: the model serving it (Primary) and the one tried beside it
// (Candidate), over the same options.
type Pair struct {
	Kind decision.Kind
	// Options is the number of options: 2 for a noul.
	Options int
	// Primary and Candidate are the distributions each side answered.
	Primary, Candidate decision.Distribution
	// Expected is the index of the option that turned out right, -1 when
	// no outcome was reported.
	Expected int
	// Request names the request, so that the questions of one request
	// count once in the spread of the paired differences; "" is a request
	// of its own.
	Request string
}

// Recommendations a Comparison makes.
const (
	// RecommendPromote: the candidate is better on the outcomes.
	RecommendPromote = "promote"
	// RecommendKeep: the candidate is worse on the outcomes, or its
	// answers differ and too few outcomes exist to say it is right.
	RecommendKeep = "keep"
	// RecommendEquivalent: the two answer alike (on the outcomes, or
	// without any, in their top answers and probabilities).
	RecommendEquivalent = "equivalent"
	// RecommendUndecided: too few pairs to say anything.
	RecommendUndecided = "undecided"
)

// Thresholds of a Comparison's recommendation, in one place.
const (
	// MinComparePairs is the least pairs a comparison recommends on.
	MinComparePairs = 20
	// MinCompareOutcomes is the least pairs with outcomes whose accuracy
	// and log-loss decide; below it the recommendation rests on agreement.
	MinCompareOutcomes = 30
	// EquivalentAgreement and EquivalentChange are the least agreement
	// of the top answer and the largest mean absolute change of
	// probabilities at which two sides without outcomes count as alike.
	EquivalentAgreement = 0.95
	EquivalentChange    = 0.05
	// CompareZ is how many standard errors a paired difference in
	// log-loss or accuracy must lie from 0 to count: about 95%, two-sided.
	CompareZ = 2.0
)

// Side is one side's measures on the pairs with outcomes.
type Side struct {
	Accuracy float64 `json:"accuracy"`
	ECE      float64 `json:"ece"`
	NLL      float64 `json:"nll"`
}

// Comparison compares the two sides of a set of pairs. Every number is
// finite.
type Comparison struct {
	// N is the number of pairs compared; Skipped those left out because
	// a side's distribution does not fit the options.
	N       int `json:"n"`
	Skipped int `json:"skipped"`
	// Agreement is the share of pairs whose predicted answers
	// (Prediction.Predicted) are the same.
	Agreement float64 `json:"agreement"`
	// MeanAbsChange is the mean over pairs of the mean over options of
	// |candidate_i - primary_i|: how far the probabilities moved, 0 to 1.
	MeanAbsChange float64 `json:"mean_abs_change"`
	// ConfidenceShift is the mean of the candidate's confidence
	// (Prediction.Confidence) less the primary's: above 0, the candidate
	// is surer of itself.
	ConfidenceShift float64 `json:"confidence_shift"`
	// Labelled is the number of pairs with an outcome; PrimaryScore and
	// CandidateScore measure each side on them, nil when there is none.
	Labelled int `json:"labelled"`
	// LabelledRequests is the number of requests they came in; the
	// outcomes decide only from 2 on, the least that has a spread.
	LabelledRequests int   `json:"labelled_requests"`
	PrimaryScore     *Side `json:"primary_score,omitempty"`
	CandidateScore   *Side `json:"candidate_score,omitempty"`
	// NLLDiff and AccuracyDiff are the candidate's log-loss and accuracy
	// less the primary's on the pairs with outcomes, with the standard
	// error of each paired difference (over requests): the evidence of
	// the recommendation.
	NLLDiff        float64 `json:"nll_diff"`
	NLLDiffSE      float64 `json:"nll_diff_se"`
	AccuracyDiff   float64 `json:"accuracy_diff"`
	AccuracyDiffSE float64 `json:"accuracy_diff_se"`
	// Recommendation is one of RecommendPromote, RecommendKeep,
	// RecommendEquivalent, RecommendUndecided; Evidence says why, in a
	// sentence with the numbers.
	Recommendation string `json:"recommendation"`
	Evidence       string `json:"evidence"`
}

// Compare measures how the candidate's answers differ from the primary's
// and, where outcomes exist, which side is right more often and better
// calibrated, and recommends: keep the primary when the candidate's
// log-loss is higher or its accuracy lower by more than CompareZ standard
// errors, promote it when it is better on one and not worse on the
// other, equivalent when neither moves that far (or, without enough
// outcomes, when the answers agree closely), and otherwise keep, since a
// candidate that answers differently has not shown it is right.
func Compare(pairs []Pair) Comparison {
	var c Comparison
	var prim, cand []calibration.Prediction
	// Per request with outcomes: the summed differences and the cases.
	at := map[string]int{}
	var nll, acc, sizes []float64
	for i, p := range pairs {
		a := calibration.Prediction{Kind: p.Kind, Dist: p.Primary, Options: p.Options}
		b := calibration.Prediction{Kind: p.Kind, Dist: p.Candidate, Options: p.Options}
		if a.Check() != nil || b.Check() != nil {
			c.Skipped++
			continue
		}
		c.N++
		if a.Predicted() == b.Predicted() {
			c.Agreement++
		}
		var change float64
		for j := range p.Primary {
			change += math.Abs(p.Candidate[j] - p.Primary[j])
		}
		c.MeanAbsChange += change / float64(len(p.Primary))
		c.ConfidenceShift += b.Confidence() - a.Confidence()
		if p.Expected < 0 || p.Expected >= p.Options {
			continue
		}
		a.Expected, b.Expected = p.Expected, p.Expected
		prim, cand = append(prim, a), append(cand, b)
		key := p.Request
		if key == "" {
			key = fmt.Sprintf("\x00%d", i)
		}
		j, ok := at[key]
		if !ok {
			j = len(nll)
			at[key] = j
			nll, acc, sizes = append(nll, 0), append(acc, 0), append(sizes, 0)
		}
		nll[j] += caseNLL(b) - caseNLL(a)
		acc[j] += boolf(b.Correct()) - boolf(a.Correct())
		sizes[j]++
	}
	if c.N > 0 {
		n := float64(c.N)
		c.Agreement /= n
		c.MeanAbsChange /= n
		c.ConfidenceShift /= n
	}
	c.Labelled = len(prim)
	if c.Labelled > 0 {
		mp, mc := Measure(prim), Measure(cand)
		c.PrimaryScore = &Side{Accuracy: mp.Accuracy, ECE: mp.ECE, NLL: mp.NLL}
		c.CandidateScore = &Side{Accuracy: mc.Accuracy, ECE: mc.ECE, NLL: mc.NLL}
		c.NLLDiff, c.AccuracyDiff = mc.NLL-mp.NLL, mc.Accuracy-mp.Accuracy
		// The requests are the independent draws: the questions of one
		// share a state.
		c.LabelledRequests = len(nll)
		c.NLLDiffSE = clusterSE(nll, sizes, c.NLLDiff)
		c.AccuracyDiffSE = clusterSE(acc, sizes, c.AccuracyDiff)
	}
	c.Recommendation, c.Evidence = c.recommend()
	return c
}

// recommend applies Compare's rule.
func (c Comparison) recommend() (string, string) {
	if c.N < MinComparePairs {
		return RecommendUndecided, fmt.Sprintf("%d pairs compared; at least %d are needed", c.N, MinComparePairs)
	}
	agree := fmt.Sprintf("the top answers agree on %.1f%% of %d questions, probabilities moved by %.3f on average, confidence by %+.3f", 100*c.Agreement, c.N, c.MeanAbsChange, c.ConfidenceShift)
	if c.Labelled >= MinCompareOutcomes && c.LabelledRequests >= 2 {
		worseNLL := c.NLLDiff > CompareZ*c.NLLDiffSE
		betterNLL := c.NLLDiff < -CompareZ*c.NLLDiffSE
		worseAcc := c.AccuracyDiff < -CompareZ*c.AccuracyDiffSE
		betterAcc := c.AccuracyDiff > CompareZ*c.AccuracyDiffSE
		on := fmt.Sprintf("on %d questions with outcomes the candidate's accuracy is %.3f against %.3f (%+.3f ± %.3f), its log-loss %.3f against %.3f (%+.3f ± %.3f), its ECE %.3f against %.3f; %s",
			c.Labelled, c.CandidateScore.Accuracy, c.PrimaryScore.Accuracy, c.AccuracyDiff, c.AccuracyDiffSE,
			c.CandidateScore.NLL, c.PrimaryScore.NLL, c.NLLDiff, c.NLLDiffSE, c.CandidateScore.ECE, c.PrimaryScore.ECE, agree)
		switch {
		case worseNLL || worseAcc:
			return RecommendKeep, "the candidate is worse: " + on
		case betterNLL || betterAcc:
			return RecommendPromote, "the candidate is better: " + on
		}
		return RecommendEquivalent, "no difference beyond the noise: " + on
	}
	if c.Agreement >= EquivalentAgreement && c.MeanAbsChange <= EquivalentChange {
		return RecommendEquivalent, fmt.Sprintf("the two answer alike: %s; %d questions have outcomes, fewer than the %d that would measure which is right", agree, c.Labelled, MinCompareOutcomes)
	}
	return RecommendKeep, fmt.Sprintf("the candidate answers differently and has not shown it is right: %s; %d questions have outcomes, fewer than the %d that would measure which is right", agree, c.Labelled, MinCompareOutcomes)
}

// clusterSE is the standard error of a mean per case, mean, made of
// clusters whose sums are sums and sizes sizes: the ratio estimator's
// sqrt(k/(k-1) * sum_j (s_j - mean*n_j)^2) / n over k clusters and n
// cases. It is 0 with fewer than two clusters, which Compare does not
// decide on.
func clusterSE(sums, sizes []float64, mean float64) float64 {
	k := len(sums)
	if k < 2 {
		return 0
	}
	var ss, n float64
	for j, s := range sums {
		d := s - mean*sizes[j]
		ss += d * d
		n += sizes[j]
	}
	return math.Sqrt(float64(k)/float64(k-1)*ss) / n
}
