package answer_test

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"system1/internal/answer"
	"system1/internal/calibration"
	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/fakeengine"
	"system1/internal/fleet"
)

// A fit learnt on the build a node serves tempers its answers and is
// recorded with its fingerprint; once the node serves another build
// under the name, the fit is not applied: the answer is uncalibrated and
// its warning names the model, the node and when it changed.
func TestFitsApplyToTheirBuildAlone(t *testing.T) {
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"m"}, Build: "one"})
	t.Cleanup(f.Close)
	n, err := fleet.NewNode(config.Node{Name: "n", URL: f.URL, Dialect: "llamacpp", Models: []string{"m"}, Timeout: config.Duration(5 * time.Second)},
		func(string) string { return "" }, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	r := fleet.New([]*fleet.Node{n}, fleet.Options{Fingerprint: fleet.FingerprintOptions{Log: slog.New(slog.DiscardHandler)}})
	r.Probe(t.Context())
	first := n.Fingerprint("m")
	fits := &calibration.Fits{Version: calibration.FitsVersion, Revision: "r1", Fits: []calibration.Fit{
		{Model: "m", Kind: decision.Choice, Bucket: "3-4", Temperature: 2, Fingerprint: first},
		{Model: "m", Kind: decision.Noul, Bucket: "2", Temperature: 2, Fingerprint: first},
	}}
	var rec records
	svc := answer.New(answer.Options{Router: r, Fits: func() *calibration.Fits { return fits }, Recorder: &rec})
	a := ask(t, svc, twoQuestions("m"))
	if !a.Calibrated || len(a.Warnings) != 0 || a.Questions[0].Fingerprint != first || rec.got[0].Fingerprint != first {
		t.Fatalf("the fit's own build: calibrated %v, warnings %v, fingerprint %q, recorded %q (want %q)",
			a.Calibrated, a.Warnings, a.Questions[0].Fingerprint, rec.got[0].Fingerprint, first)
	}

	f.SetBuild("two")
	r.Probe(t.Context())
	a = ask(t, svc, twoQuestions("m"))
	now := n.Fingerprint("m")
	if a.Calibrated || a.FitVersion != "" || now == first || a.Questions[0].Fingerprint != now || rec.got[len(rec.got)-1].Fingerprint != now {
		t.Fatalf("another build: calibrated %v, fit %q, fingerprint %q (node %q, first %q)", a.Calibrated, a.FitVersion, a.Questions[0].Fingerprint, now, first)
	}
	if len(a.Warnings) != 2 {
		t.Fatalf("warnings %v, want one a question", a.Warnings)
	}
	for _, w := range a.Warnings {
		since := a.Questions[0].Since.UTC().Format(time.RFC3339)
		if s := w.String(); !w.OtherBuild || !strings.Contains(s, "model m") || !strings.Contains(s, "node n serves changed at "+since) || !strings.Contains(s, now) {
			t.Errorf("warning %q", s)
		}
	}
	for _, q := range a.Questions {
		for _, st := range q.Steps {
			if st.Name == decision.StepTemperature {
				t.Errorf("a temperature of the old build was applied: %+v", q.Steps)
			}
		}
	}
}
