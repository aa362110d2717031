package outcomes

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"system1/internal/calibration"
	"system1/internal/decision"
	"system1/internal/decisionlog"
)

// labelledCase is one answer to record with its outcome: a request of
// one question.
type labelledCase struct {
	kind     decision.Kind
	dist     []float64
	expected int // -1: none fit
	mass     *float64
	face     string
	at       time.Time
}

// openLog opens a real SQLite decision log for the test.
func openLog(t testing.TB) *decisionlog.Log {
	t.Helper()
	l, err := decisionlog.Open(context.Background(), decisionlog.Options{Path: filepath.Join(t.TempDir(), "decisions.db"), Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	return l
}

// options names k options: "true"/"false" for a noul, levels for a
// score, o0.. for a choice.
func options(kind decision.Kind, k int) []string {
	switch kind {
	case decision.Noul:
		return []string{"true", "false"}
	}
	out := make([]string, k)
	for i := range out {
		if kind == decision.Score {
			out[i] = strconv.Itoa(i)
		} else {
			out[i] = "o" + strconv.Itoa(i)
		}
	}
	return out
}

// record writes the cases into l as answers of model, in the order
// given, under request ids named by their index in ids (so that two logs
// of the same cases in other orders hold the same requests), and
// reports each outcome.
func record(t testing.TB, l *decisionlog.Log, model string, cs []labelledCase, ids []int) {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	for _, i := range ids {
		c := cs[i]
		at := c.at
		if at.IsZero() {
			at = now.Add(-time.Hour)
		}
		face := c.face
		if face == "" {
			face = decisionlog.FaceSystemOne
		}
		l.Record(decisionlog.Record{RequestID: fmt.Sprintf("req-%d", i), QuestionID: "q", Time: at, Face: face, Model: model, Node: "n",
			Kind: c.kind, Options: options(c.kind, len(c.dist)), EngineDist: c.dist, LabelMass: c.mass})
	}
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, i := range ids {
		c := cs[i]
		out := decisionlog.NoneFit
		if c.expected >= 0 {
			out = options(c.kind, len(c.dist))[c.expected]
		}
		if _, err := l.Outcome(ctx, fmt.Sprintf("req-%d", i), "q", out); err != nil {
			t.Fatal(err)
		}
	}
}

func inOrder(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func shuffledOrder(n int, seed uint64) []int {
	out := inOrder(n)
	r := rand.New(rand.NewPCG(seed, 0x0bde))
	r.Shuffle(n, func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func softmax(z []float64, scale float64) []float64 {
	top := math.Inf(-1)
	for _, v := range z {
		top = math.Max(top, scale*v)
	}
	out := make([]float64, len(z))
	var s float64
	for i, v := range z {
		out[i] = math.Exp(scale*v - top)
		s += out[i]
	}
	for i := range out {
		out[i] /= s
	}
	return out
}

func draw(r *rand.Rand, d []float64) int {
	u := r.Float64()
	for j, p := range d {
		if u < p {
			return j
		}
		u -= p
	}
	return len(d) - 1
}

// banking12Like is a model over twelve options, mostly right, too sure
// by a temperature of 1.9 (as in package calibration's test of the
// banking12 failure).
func banking12Like(n int, seed uint64) []labelledCase {
	r := rand.New(rand.NewPCG(seed, 0xba9c))
	out := make([]labelledCase, n)
	z := make([]float64, 12)
	for i := range out {
		for j := range z {
			z[j] = r.NormFloat64()
		}
		z[r.IntN(12)] += 7
		out[i] = labelledCase{kind: decision.Choice, dist: softmax(z, 1.9), expected: draw(r, softmax(z, 1))}
	}
	return out
}

// calibratedNouls are nouls whose P(true) is right: no calibrator can
// gain but by chance.
func calibratedNouls(n int, seed uint64) []labelledCase {
	r := rand.New(rand.NewPCG(seed, 0xb001))
	out := make([]labelledCase, n)
	for i := range out {
		z := 1.2 * r.NormFloat64()
		p := 1 / (1 + math.Exp(-z))
		exp := 1
		if r.Float64() < p {
			exp = 0
		}
		out[i] = labelledCase{kind: decision.Noul, dist: []float64{p, 1 - p}, expected: exp}
	}
	return out
}

// sst5Like are five-level scores confidently wrong half the time: NLL
// wants a flatter distribution, whose expected level drifts to the middle
// and costs accuracy and MAE.
func sst5Like(n int, seed uint64) []labelledCase {
	r := rand.New(rand.NewPCG(seed, 0x555))
	share := []float64{.13, .26, .19, .26, .16}
	out := make([]labelledCase, n)
	for i := range out {
		level := draw(r, share)
		said := level
		if r.Float64() > 0.5 {
			said = r.IntN(5)
		}
		d := []float64{0.025, 0.025, 0.025, 0.025, 0.025}
		d[said] = 0.9
		out[i] = labelledCase{kind: decision.Score, dist: d, expected: level}
	}
	return out
}

// firstBiased are choices over four options whose reports lean a nat
// toward the first option and are too sure by 2: a temperature keeps
// which option wins, so only a bias per position removes the pull.
func firstBiased(n int, seed uint64) []labelledCase {
	r := rand.New(rand.NewPCG(seed, 0xf1a5))
	out := make([]labelledCase, n)
	z := make([]float64, 4)
	for i := range out {
		for j := range z {
			z[j] = 1.5 * r.NormFloat64()
		}
		exp := draw(r, softmax(z, 1))
		z[0] += 1
		out[i] = labelledCase{kind: decision.Choice, dist: softmax(z, 2), expected: exp}
	}
	return out
}

// predictions are the cases as calibration sees them.
func predictions(cs []labelledCase) []calibration.Prediction {
	var out []calibration.Prediction
	for i, c := range cs {
		if c.expected >= 0 {
			out = append(out, calibration.Prediction{Kind: c.kind, Dist: c.dist, Expected: c.expected, Options: len(c.dist), Request: fmt.Sprintf("req-%d", i)})
		}
	}
	return out
}

// Cases is the number of labelled records the tracker counts.
func (t *Tracker) Cases() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.cases)
}
