package answer_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"system1/internal/answer"
	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/fakeengine"
	"system1/internal/fleet"
)

// Admit is every face's one way to the limits of a model: a model no
// node is known to serve has the nodes list their models once, never
// twice, and a model still not served is an UnknownModel failure with the
// defaults beside it; an empty model asks no node.
func TestAdmit(t *testing.T) {
	for _, tc := range []struct {
		name     string
		b        fakeengine.Behavior
		models   []string // asked in turn of one service
		lists    int      // model lists the node got in all
		served   bool     // whether the last one is admitted
		maxOpts  int      // the last one's option cap, when served
		unknowns int      // UnknownModel failures among them
	}{
		{name: "listed on first use", models: []string{"m"}, lists: 1, served: true, maxOpts: 7},
		{name: "listed once for two", models: []string{"m", "m"}, lists: 1, served: true, maxOpts: 7},
		{name: "not served", models: []string{"x"}, lists: 1, unknowns: 1},
		{name: "not served, asked again", models: []string{"x", "x"}, lists: 1, unknowns: 2},
		{name: "no model", models: []string{""}, lists: 0, unknowns: 1},
		{name: "node down", b: fakeengine.Behavior{Fault: fakeengine.Status, Status: http.StatusServiceUnavailable, Everywhere: true},
			models: []string{"m"}, lists: 1, unknowns: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"m"}, Behavior: tc.b})
			t.Cleanup(f.Close)
			n, err := fleet.NewNode(config.Node{Name: "n", URL: f.URL, Dialect: "llamacpp", MaxOptions: 7, Timeout: config.Duration(2 * time.Second)},
				func(string) string { return "" }, http.DefaultClient)
			if err != nil {
				t.Fatal(err)
			}
			svc := answer.New(answer.Options{Router: fleet.New([]*fleet.Node{n}, fleet.Options{})})
			var lim decision.Limits
			unknowns := 0
			for _, m := range tc.models {
				lim, err = svc.Admit(t.Context(), m)
				var fl *answer.Failure
				switch {
				case err == nil:
				case errors.As(err, &fl) && fl.Class == answer.UnknownModel:
					unknowns++
				default:
					t.Fatalf("Admit(%q): %v", m, err)
				}
			}
			lists := 0
			for _, r := range f.Requests() {
				if r.Method == http.MethodGet && r.Path == "/v1/models" {
					lists++
				}
			}
			if lists != tc.lists || unknowns != tc.unknowns || (err == nil) != tc.served {
				t.Fatalf("%d model lists, %d unknown, last error %v; want %d, %d, served %v", lists, unknowns, err, tc.lists, tc.unknowns, tc.served)
			}
			want := decision.DefaultLimits()
			if tc.served {
				want.MaxChoiceOptions = tc.maxOpts
			}
			if lim != want {
				t.Fatalf("limits %+v, want %+v", lim, want)
			}
		})
	}
}
