package answer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"

	"system1/internal/answer"
	"system1/internal/calibration"
	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/decisionlog"
	"system1/internal/engine"
	"system1/internal/engine/llamacpp"
	"system1/internal/fakeengine"
	"system1/internal/fleet"
)

// leaningRouter is a router over one fake llama.cpp node serving m that
// answers by leaning toward the option the state names, with an engine
// for asking the same questions directly.
func leaningRouter(t *testing.T, p fleet.Prior) (*fleet.Router, engine.Engine) {
	t.Helper()
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"m"}, Behavior: fakeengine.Behavior{Prompted: fakeengine.Leaning}})
	t.Cleanup(f.Close)
	n, err := fleet.NewNode(config.Node{Name: "n", URL: f.URL, Dialect: "llamacpp", Models: []string{"m"}, MaxOptions: 20, PinSlots: new(bool)}, func(string) string { return "" }, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	return fleet.New([]*fleet.Node{n}, fleet.Options{Prior: p}), &llamacpp.Engine{BaseURL: f.URL}
}

func colourQuestion(opts ...string) decision.Question {
	q := decision.Question{ID: "q", Kind: decision.Choice, Instructions: json.RawMessage(`"Which colour?"`)}
	for _, o := range opts {
		q.Options = append(q.Options, decision.Option{Key: o, Name: o})
	}
	return q
}

func near(a, b decision.Distribution) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-9 {
			return false
		}
	}
	return true
}

// ratio divides prior out of d, written apart from DivideOut so that the
// test checks it.
func ratio(d, prior decision.Distribution) decision.Distribution {
	out := make(decision.Distribution, len(d))
	sum := 0.0
	for i := range d {
		out[i] = d[i] / prior[i]
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}

// Nothing is applied without being named: for every combination of
// debiasing, prior correction and temperature, over a stream of requests
// that warms the batch estimate, the answer is the engine's reading
// transformed by exactly the steps named, in their order (debias, prior,
// temperature), each step's distribution is the one it left, the steps
// named are the ones asked for (batch only once enough answers were
// seen), and the decision log's record holds the same steps.
func TestNothingAppliedWithoutBeingNamed(t *testing.T) {
	const minRequests, window = 3, 100
	states := []string{"about red", "about green", "about blue", "about red", "nothing in particular", "about green", "about red"}
	for _, debias := range []string{decision.DebiasOff, decision.DebiasPermute} {
		for _, prior := range []string{decision.PriorOff, decision.PriorBatch, decision.PriorContentFree} {
			for _, tempered := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/tempered=%v", debias, prior, tempered), func(t *testing.T) {
					r, e := leaningRouter(t, fleet.Prior{MinRequests: minRequests, Window: window})
					q := colourQuestion("red", "green", "blue")
					orders := 1
					if debias == decision.DebiasPermute {
						orders = 3
					}
					var fits *calibration.Fits
					if tempered {
						fits = &calibration.Fits{Version: calibration.FitsVersion, Revision: "r1", Fits: []calibration.Fit{{Model: "m", Kind: decision.Choice, Bucket: "3-4", Temperature: 2, N: 50}}}
					}
					var rec records
					svc := answer.New(answer.Options{Router: r, Fits: func() *calibration.Fits { return fits }, Recorder: &rec})
					var seen []decision.Distribution // the debiased readings so far, for the batch mean
					for k, s := range states {
						state := json.RawMessage(fmt.Sprintf("%q", s))
						req := decision.Request{Model: "m", State: state, Questions: []decision.Question{q}, Debias: debias, Prior: prior}
						ans, err := svc.Answer(context.Background(), answer.Request{Request: req, Face: decisionlog.FaceSystemOne, RequestID: "r"})
						if err != nil {
							t.Fatalf("request %d: %v", k, err)
						}
						a := ans.Questions[0]
						direct, err := engine.Ask(context.Background(), e, "m", state, q)
						if err != nil {
							t.Fatal(err)
						}
						if !near(a.Engine, direct.Dist) {
							t.Fatalf("request %d: engine reading %v, asked directly %v", k, a.Engine, direct.Dist)
						}
						mean, err := engine.AskOrders(context.Background(), e, "m", state, q, orders)
						if err != nil {
							t.Fatal(err)
						}
						var want []string
						if orders > 1 {
							want = append(want, "debias=permute/3")
						}
						switch {
						case prior == decision.PriorBatch && k >= minRequests:
							want = append(want, fmt.Sprintf("prior=batch/n=%d/window=%d", k, window))
						case prior == decision.PriorContentFree:
							want = append(want, "prior=content_free/empty_state")
						}
						if tempered {
							want = append(want, "temperature=v1/T=2@r1")
						}
						got := decision.StepNames(a.Steps)
						if !slices.Equal(got, want) {
							t.Fatalf("request %d: steps %v, want %v", k, got, want)
						}
						// Replay the named steps on the engine's reading.
						x := a.Engine
						for _, st := range a.Steps {
							switch st.Name {
							case decision.StepDebias:
								x = mean.Dist
							case decision.StepPrior:
								var p decision.Distribution
								if strings.HasPrefix(st.Version, "batch/") {
									p = make(decision.Distribution, len(x))
									for _, d := range seen {
										for i := range p {
											p[i] += d[i] / float64(len(seen))
										}
									}
								} else {
									cf, err := engine.AskOrders(context.Background(), e, "m", json.RawMessage(`""`), q, orders)
									if err != nil {
										t.Fatal(err)
									}
									p = cf.Dist
								}
								x = ratio(x, p)
							case decision.StepTemperature:
								x = x.Temper(2)
							default:
								t.Fatalf("unknown step %q", st.Name)
							}
							if !near(st.Dist, x) {
								t.Fatalf("request %d: step %s left %v, replayed %v", k, st.Name, st.Dist, x)
							}
						}
						if !near(a.Dist, x) {
							t.Fatalf("request %d: answer %v, the named steps give %v", k, a.Dist, x)
						}
						if len(rec.got) != k+1 || !near(rec.got[k].Final, a.Dist) || len(rec.got[k].Steps) != len(want) || rec.got[k].Face != decisionlog.FaceSystemOne {
							t.Fatalf("request %d: recorded %+v", k, rec.got)
						}
						for i, st := range rec.got[k].Steps {
							if st.Name+"="+st.Version != want[i] || !near(st.Dist, a.Steps[i].Dist) {
								t.Fatalf("request %d: recorded step %d %+v, want %s", k, i, st, want[i])
							}
						}
						seen = append(seen, mean.Dist)
					}
				})
			}
		}
	}
}
