package bench_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"testing"

	"system1/internal/answer"
	"system1/internal/bench"
	"system1/internal/calibration"
	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/decisionlog"
	"system1/internal/fakeengine"
	"system1/internal/fleet"
)

type records struct{ got []decisionlog.Record }

func (r *records) Record(rec decisionlog.Record) { r.got = append(r.got, rec) }

// router is a router over one fake llama.cpp node serving "m", leaning
// toward the option the state names, its builds fingerprinted on use.
func router(t *testing.T, url string) *fleet.Router {
	t.Helper()
	n, err := fleet.NewNode(config.Node{Name: "n", URL: url, Dialect: "llamacpp", Models: []string{"m"}, MaxOptions: 20, PinSlots: new(bool)}, func(string) string { return "" }, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	return fleet.New([]*fleet.Node{n}, fleet.Options{Fingerprint: fleet.FingerprintOptions{OnUse: true}})
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

// The bench asks the answer path and keeps each question's distribution
// before calibration: for every debiasing, prior and calibrator, it is
// the fleet's reading with the prior the fleet read divided out (the
// fleet's reading itself without a prior, as the bench kept when it
// asked the fleet directly), the distribution the decision log gives a
// refit of the same answer (decisionlog.Entry.Uncalibrated), whatever
// fits the path applies; and each question names the build that
// answered it.
func TestFleetKeepsTheDistributionBeforeCalibration(t *testing.T) {
	eng := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"m"}, Build: "one", Behavior: fakeengine.Behavior{Prompted: fakeengine.Leaning}})
	t.Cleanup(eng.Close)
	tempered := &calibration.Fits{Version: calibration.FitsVersion, Revision: "r1", Fits: []calibration.Fit{
		{Model: "m", Kind: decision.Choice, Bucket: "3-4", Temperature: 2, N: 50},
	}}
	questions := []decision.Question{
		{ID: "colour", Kind: decision.Choice, Instructions: json.RawMessage(`"Which colour?"`),
			Options: []decision.Option{{Key: "red", Name: "red"}, {Key: "green", Name: "green"}, {Key: "blue", Name: "blue"}}},
		{ID: "paint", Kind: decision.Choice, Instructions: json.RawMessage(`"Which paint?"`),
			Options: []decision.Option{{Key: "b", Name: "blue"}, {Key: "r", Name: "red"}, {Key: "y", Name: "yellow"}, {Key: "g", Name: "green"}}},
	}
	for _, debias := range []string{decision.DebiasOff, decision.DebiasPermute} {
		for _, prior := range []string{decision.PriorOff, decision.PriorContentFree} {
			for _, fits := range []*calibration.Fits{nil, tempered} {
				t.Run(fmt.Sprintf("%s/%s/fits=%v", debias, prior, fits != nil), func(t *testing.T) {
					req := decision.Request{Model: "m", State: json.RawMessage(`"about red"`), Questions: questions, Debias: debias, Prior: prior}
					// The fleet asked directly, as the bench did before.
					res, err := router(t, eng.URL).Decide(context.Background(), req)
					if err != nil {
						t.Fatal(err)
					}
					r := router(t, eng.URL)
					path := answer.New(answer.Options{Router: r, Fits: func() *calibration.Fits { return fits }})
					got, err := bench.Fleet{Path: path}.Ask(context.Background(), req)
					if err != nil {
						t.Fatal(err)
					}
					var rec records
					logged := answer.New(answer.Options{Router: r, Fits: func() *calibration.Fits { return fits }, Recorder: &rec})
					if _, err := logged.Answer(context.Background(), answer.Request{Request: req, Face: decisionlog.FaceSystemOne, RequestID: "r"}); err != nil {
						t.Fatal(err)
					}
					if got.Model != res.Model || len(got.Dists) != len(questions) || len(got.Builds) != len(questions) || len(rec.got) != len(questions) {
						t.Fatalf("bench %+v, fleet %+v, recorded %d", got, res, len(rec.got))
					}
					for i, q := range res.Questions {
						if q.Err != nil {
							t.Fatal(q.Err)
						}
						want := q.Dist
						if prior == decision.PriorContentFree {
							if q.Prior == nil {
								t.Fatal("the content-free prior was not read")
							}
							want = want.DivideOut(q.Prior)
						}
						if !near(got.Dists[i], want) {
							t.Errorf("question %d: bench kept %v, the fleet read %v (prior %v)", i, got.Dists[i], q.Dist, q.Prior)
						}
						if u := (decisionlog.Entry{Record: rec.got[i]}).Uncalibrated(); !near(got.Dists[i], u) {
							t.Errorf("question %d: bench kept %v, the decision log gives a refit %v", i, got.Dists[i], u)
						}
						if fits != nil && near(got.Dists[i], decision.Distribution(rec.got[i].Answered())) {
							t.Errorf("question %d: bench kept the calibrated %v", i, got.Dists[i])
						}
						if got.Builds[i] == "" || got.Builds[i] != q.Fingerprint {
							t.Errorf("question %d: bench names build %q, the fleet %q", i, got.Builds[i], q.Fingerprint)
						}
					}
				})
			}
		}
	}
}

// answered is an answer path that answers every request with a, or err.
type answered struct {
	a   *answer.Answer
	err error
}

func (p answered) Answer(context.Context, answer.Request) (*answer.Answer, error) { return p.a, p.err }

// A question the gate refused keeps its distribution, as the bench
// measures the model; one a node declined with no reading, or a request
// the answer path failed, is an error naming why.
func TestFleetRefusalsAndFailures(t *testing.T) {
	req := decision.Request{Model: "m", Questions: []decision.Question{{ID: "q", Kind: decision.Noul, Options: decision.NoulOptions(nil, nil)}}}
	d := decision.Distribution{0.7, 0.3}
	for _, tc := range []struct {
		name string
		path answered
		want decision.Distribution
		err  string
	}{
		{"refused by the gate", answered{a: &answer.Answer{Model: "m", Questions: []answer.Question{{Engine: d, Dist: d, Fingerprint: "fp",
			Refusal: &answer.Refusal{Reason: answer.RefusedLabelMass, LabelMass: 0.2, MinLabelMass: 0.5}}}}}, d, ""},
		{"declined with no reading", answered{a: &answer.Answer{Model: "m", Questions: []answer.Question{{
			Refusal: &answer.Refusal{Reason: answer.RefusedUpstream, Detail: "out of scope"}}}}}, nil, "question q: the node declined to answer it: out of scope"},
		{"failed", answered{err: fmt.Errorf("no node answered")}, nil, "no node answered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := bench.Fleet{Path: tc.path}.Ask(context.Background(), req)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || len(got.Dists) != 1 || !near(got.Dists[0], tc.want) || got.Builds[0] != "fp" {
				t.Fatalf("%+v %v", got, err)
			}
		})
	}
}
