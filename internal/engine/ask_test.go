package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"system1/internal/decision"
)

// lucky is a fake engine whose model gives each option a fixed weight by
// name, whatever else is shown (it satisfies Luce's axiom, so even rounds
// over separate prompts stitch exactly). It reads the option names back
// from the prompt, as a model would.
type lucky struct {
	weight  map[string]float64
	caps    Caps
	preMask bool            // report raw values over all shown labels, not renormalised
	labels  int             // single-token labels the model has; 0 is unlimited
	drop    map[string]bool // options whose label is never reported
	later   map[string]bool // options whose label is reported only in the first call
	counted bool

	mu    sync.Mutex
	calls int
}

func (f *lucky) Read(ctx context.Context, model string, p Prompt) (Reading, error) {
	f.mu.Lock()
	f.calls++
	calls := f.calls
	f.mu.Unlock()
	shown := map[string]string{} // label -> option name
	for _, line := range strings.Split(p.Question, "\n") {
		if label, name, ok := strings.Cut(line, ". "); ok && len(label) <= 2 {
			shown[label] = name
		}
	}
	asked := p.Asked()
	// A pre-mask engine's values are one softmax over everything shown (plus
	// mass elsewhere); a post-mask one renormalises over the asked labels.
	var total float64
	pool := asked
	if f.preMask {
		pool = p.Labels
		total = 1 // mass outside the labels
	}
	for _, l := range pool {
		total += f.weight[shown[l]]
	}
	r := Reading{Model: model, PreMask: f.preMask, Counted: f.counted, InputTokens: 7, OutputTokens: 1}
	for _, l := range asked {
		w := f.weight[shown[l]]
		r.Logprobs = append(r.Logprobs, math.Log(w/total))
		r.Found = append(r.Found, !f.drop[shown[l]] && !(calls > 1 && f.later[shown[l]]))
	}
	return r, nil
}

func (f *lucky) Models(context.Context) ([]string, error) { return []string{"m"}, nil }

func (f *lucky) Labels(ctx context.Context, model string, c []string, want int) ([]string, error) {
	n := want
	if f.labels > 0 {
		n = min(n, f.labels)
	}
	return c[:min(n, len(c))], nil
}

func (f *lucky) Caps() Caps { return f.caps }

func question(kind decision.Kind, n int) (decision.Question, map[string]float64) {
	q := decision.Question{ID: "q", Kind: kind}
	w := map[string]float64{}
	for i := range n {
		name := fmt.Sprintf("opt%03d", i)
		q.Options = append(q.Options, decision.Option{Key: name, Name: name})
		w[name] = float64(1+(i*7)%13) / 10 // uneven, known weights
	}
	return q, w
}

func TestAskStitchesRounds(t *testing.T) {
	for _, tc := range []struct {
		name       string
		options    int
		engine     *lucky
		rounds     int
		shared     bool
		massIsReal bool
	}{
		{"one call", 12, &lucky{caps: Caps{PerCall: 20}}, 1, false, false},
		{"one call, pre-mask", 12, &lucky{caps: Caps{PerCall: 0}, preMask: true}, 1, false, true},
		{"shared prompt, post-mask", 77, &lucky{caps: Caps{PerCall: 20, Subsets: true}}, 4, true, false},
		{"shared prompt, pre-mask", 77, &lucky{caps: Caps{PerCall: 20, Subsets: true}, preMask: true}, 4, true, true},
		{"separate prompts: no constraint", 255, &lucky{caps: Caps{PerCall: 20}}, 14, false, false},
		{"separate prompts: too few labels", 255, &lucky{caps: Caps{Subsets: true}, labels: 107, preMask: true}, 3, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, w := question(decision.Choice, tc.options)
			e := tc.engine
			e.weight = w
			o, err := Ask(context.Background(), e, "m", json.RawMessage(`"s"`), q)
			if err != nil {
				t.Fatal(err)
			}
			var sum float64
			for _, opt := range q.Options {
				sum += w[opt.Name]
			}
			for i, opt := range q.Options {
				if want := w[opt.Name] / sum; math.Abs(o.Dist[i]-want) > 1e-12 {
					t.Fatalf("p[%s] = %v, want %v", opt.Key, o.Dist[i], want)
				}
			}
			if o.Rounds != tc.rounds || e.calls != tc.rounds || o.Shared != tc.shared {
				t.Errorf("%d rounds (%d calls), shared %v; want %d, %v", o.Rounds, e.calls, o.Shared, tc.rounds, tc.shared)
			}
			if math.IsNaN(o.Mass) == tc.massIsReal {
				t.Errorf("label mass %v", o.Mass)
			}
			if !o.Estimated || o.InputTokens == 0 || o.OutputTokens != tc.rounds {
				t.Errorf("usage %d/%d estimated %v: every round counts", o.InputTokens, o.OutputTokens, o.Estimated)
			}
		})
	}
}

func TestAskFailsRatherThanGuess(t *testing.T) {
	t.Run("anchor missing in a later round", func(t *testing.T) {
		q, w := question(decision.Choice, 30)
		e := &lucky{weight: w, caps: Caps{PerCall: 20}}
		// The anchor is the first round's favourite; hide it from later
		// readings, so they cannot be tied to the first.
		d := decision.Distribution{}
		for _, o := range q.Options[:20] {
			d = append(d, w[o.Name])
		}
		e.later = map[string]bool{q.Options[d.Argmax()].Name: true}
		_, err := Ask(context.Background(), e, "m", json.RawMessage(`"s"`), q)
		if f := Classify(err); f == nil || f.Kind != Malformed {
			t.Fatalf("err %v, want a malformed reading", err)
		}
	})
	t.Run("score with more levels than labels", func(t *testing.T) {
		q, w := question(decision.Score, 10)
		e := &lucky{weight: w, labels: 5}
		_, err := Ask(context.Background(), e, "m", json.RawMessage(`"s"`), q)
		if f := Classify(err); f == nil || f.Kind != Rejected {
			t.Fatalf("err %v, want rejected", err)
		}
	})
	t.Run("a missing label is flagged, not invented", func(t *testing.T) {
		q, w := question(decision.Choice, 4)
		e := &lucky{weight: w, caps: Caps{PerCall: 20}, drop: map[string]bool{"opt002": true}, counted: true}
		o, err := Ask(context.Background(), e, "m", json.RawMessage(`"s"`), q)
		if err != nil {
			t.Fatal(err)
		}
		if len(o.Missing) != 1 || o.Missing[0] != "opt002" || o.Dist[2] != 0 || o.Estimated || o.InputTokens != 7 {
			t.Fatalf("outcome %+v", o)
		}
	})
}

func TestCandidatesArePrefixFreeWhereItMatters(t *testing.T) {
	c := Candidates(decision.Question{Kind: decision.Choice})
	if len(c) < 255 || c[0] != "A" || c[25] != "Z" || c[26] != "AA" {
		t.Fatalf("candidates start %v (%d)", c[:30], len(c))
	}
	seen := map[string]bool{}
	for _, l := range c {
		if seen[l] {
			t.Fatalf("candidate %q twice", l)
		}
		seen[l] = true
	}
	if s := Candidates(decision.Question{Kind: decision.Score}); len(s) != 10 || s[0] != "0" {
		t.Fatalf("score candidates %v", s)
	}
}
