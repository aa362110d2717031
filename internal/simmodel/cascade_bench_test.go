package simmodel

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"system1/internal/calibration"
	"system1/internal/calibration/fitting"
	"system1/internal/cases"
	"system1/internal/decision"
)

// cascadeSets are the dev splits the cascade benchmark runs on.
var cascadeSets = []string{"sst2-dev.jsonl", "boolq-dev.jsonl", "agnews-dev.jsonl", "banking12-train-sample.jsonl"}

// Cascade benchmark settings: the target errors, the fixed raw threshold
// a raw-confidence cascade escalates below (as the peers do), and the
// price of the strong stage in units of the weak one's.
var cascadeTargets = []float64{0.1, 0.2}

const (
	rawThreshold    = 0.9
	strongPriceUnit = 10
)

// servedPreds are m's answers to cs as system1 reads them: the served
// distribution over the labels, renormalised.
func servedPreds(b *testing.B, m *Model, cs []cases.Case) []calibration.Prediction {
	exs, err := examples(cs)
	if err != nil {
		b.Fatal(err)
	}
	out := make([]calibration.Prediction, len(exs))
	for i, e := range exs {
		c := m.Classifier(e.options)
		if c == nil {
			b.Fatalf("no classifier for %q", e.signature)
		}
		lp := m.Served(c, e.state)
		d := make(decision.Distribution, len(lp))
		var sum float64
		for k, v := range lp {
			d[k] = math.Exp(v)
			sum += d[k]
		}
		for k := range d {
			d[k] /= sum
		}
		kind := decision.Choice
		if len(e.options) == 2 && e.options[0] == "true" {
			kind = decision.Noul
		}
		out[i] = calibration.Prediction{Kind: kind, Dist: d, Expected: e.expected, Options: len(e.options)}
	}
	return out
}

// stage is one stage learnt as system1 learns it from outcomes: a
// temperature fitted on one part of the labelled answers, and the
// escalation threshold certified on another, calibrated by it.
type stage struct {
	t    float64
	cert calibration.Escalation
}

func learn(b *testing.B, fitOn, certifyOn []calibration.Prediction, target float64) stage {
	t, err := fitting.FitTemperature(fitOn)
	if err != nil {
		b.Fatal(err)
	}
	var conf []float64
	var wrong []bool
	for _, p := range calibration.Calibrate(certifyOn, calibration.Calibrator{Temperature: t}) {
		conf, wrong = append(conf, p.Confidence()), append(wrong, !p.Correct())
	}
	e, err := fitting.CertifyEscalation(conf, wrong, target, calibration.EscalationDelta)
	if err != nil {
		b.Fatal(err)
	}
	return stage{t, e}
}

// keeps reports whether the stage keeps p: certified, and its calibrated
// confidence at or above the threshold.
func (s stage) keeps(p calibration.Prediction) bool {
	c := calibration.Calibrate([]calibration.Prediction{p}, calibration.Calibrator{Temperature: s.t})[0].Confidence()
	return s.cert.Certified && c >= s.cert.Threshold-1e-9
}

// BenchmarkCascade compares, on each dev split, a cascade of a weak,
// over-confident simulated model (trained on half the cases, served at
// temperature 0.3) and a strong one (trained on every case, the test
// ones included, served calibrated: it stands for a model that knows the
// task far better), each stage's threshold certified as system1
// certifies it, with always asking the strong stage (gated the same way)
// and with a raw-confidence cascade (keep the weak answer at raw
// confidence >= 0.9). The last stage's answers under its gate abstain, as
// system1's do. Run: go test -run '^$' -bench Cascade -benchtime 1x
// ./internal/simmodel; docs/cascades.md reads a run.
func BenchmarkCascade(b *testing.B) {
	var table strings.Builder
	for range b.N {
		table.Reset()
		fmt.Fprintf(&table, "| set | target | test | weak kept: share, error | cascade: answered, error, strong asked | always strong: answered, error | cost vs strong | raw cascade (0.9): weak kept error, error |\n|---|---|---|---|---|---|---|---|\n")
		for _, set := range cascadeSets {
			all := sharedCases(b, set)
			train, rest := Split(all, 0.5)
			weak, err := Train(train, Options{Temperature: 0.3})
			if err != nil {
				b.Fatal(err)
			}
			// The strong stage has seen every case, the test ones too:
			// it stands for a model that knows the task far better.
			strong, err := Train(all, Options{Temperature: 1})
			if err != nil {
				b.Fatal(err)
			}
			// rest: a third to fit temperatures, a third to certify, a
			// third to test, dealt in turn.
			var parts [3][]cases.Case
			for i, c := range rest {
				parts[i%3] = append(parts[i%3], c)
			}
			wt, st := servedPreds(b, weak, parts[2]), servedPreds(b, strong, parts[2])
			for _, target := range cascadeTargets {
				ws, ss := learn(b, servedPreds(b, weak, parts[0]), servedPreds(b, weak, parts[1]), target), learn(b, servedPreds(b, strong, parts[0]), servedPreds(b, strong, parts[1]), target)
				var weakKept, weakWrong, answered, wrong, asked, strongAnswered, strongWrong, rawKept, rawKeptWrong, rawWrong int
				for i := range wt {
					switch {
					case ws.keeps(wt[i]):
						weakKept++
						answered++
						if !wt[i].Correct() {
							weakWrong++
							wrong++
						}
					default:
						asked++
						if ss.keeps(st[i]) {
							answered++
							if !st[i].Correct() {
								wrong++
							}
						}
					}
					if ss.keeps(st[i]) {
						strongAnswered++
						if !st[i].Correct() {
							strongWrong++
						}
					}
					if wt[i].Confidence() >= rawThreshold {
						rawKept++
						if !wt[i].Correct() {
							rawKeptWrong++
							rawWrong++
						}
					} else if !st[i].Correct() {
						rawWrong++
					}
				}
				n := float64(len(wt))
				share := func(k, of int) float64 {
					if of == 0 {
						return math.NaN()
					}
					return float64(k) / float64(of)
				}
				cost := (n + strongPriceUnit*float64(asked)) / (strongPriceUnit * n)
				fmt.Fprintf(&table, "| %s | %v | %d | %.2f, %.3f | %.2f, %.3f, %.2f | %.2f, %.3f | %.2f | %.3f, %.3f |\n", strings.TrimSuffix(set, ".jsonl"), target, len(wt),
					share(weakKept, len(wt)), share(weakWrong, weakKept), share(answered, len(wt)), share(wrong, answered), share(asked, len(wt)),
					share(strongAnswered, len(wt)), share(strongWrong, strongAnswered), cost, share(rawKeptWrong, rawKept), share(rawWrong, len(wt)))
			}
		}
	}
	b.Logf("target errors %v, delta %v, strong stage %dx the weak one's price\n%s", cascadeTargets, calibration.EscalationDelta, strongPriceUnit, table.String())
}
