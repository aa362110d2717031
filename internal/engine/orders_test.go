package engine

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"system1/internal/decision"
)

// positional is a fake engine whose model likes some options by name and,
// beyond that, the first position and the label "A" or "0": the biases
// order debiasing spreads out. It records the prompts it was asked.
type positional struct {
	weight map[string]float64
	first  float64 // the first shown option's weight is multiplied by this
	label  float64 // the weight of the option labelled "A" or "0" is multiplied by this

	mu      sync.Mutex
	prompts []Prompt
}

func (f *positional) Read(ctx context.Context, model string, p Prompt) (Reading, error) {
	f.mu.Lock()
	f.prompts = append(f.prompts, p)
	f.mu.Unlock()
	var ws []float64
	pos := 0
	for _, line := range strings.Split(p.Question, "\n") {
		label, name, ok := strings.Cut(line, ". ")
		if !ok || len(label) > 2 {
			continue
		}
		w := f.weight[name]
		if pos == 0 {
			w *= f.first
		}
		if label == "A" || label == "0" {
			w *= f.label
		}
		ws = append(ws, w)
		pos++
	}
	r := Reading{Model: model, Counted: true, InputTokens: 10, OutputTokens: 1}
	var total float64
	for _, w := range ws {
		total += w
	}
	// The values are read per label: Layout writes the labels in option order.
	for i := range p.Labels {
		r.Logprobs = append(r.Logprobs, math.Log(ws[i]/total))
		r.Found = append(r.Found, true)
	}
	return r, nil
}

func (f *positional) Models(context.Context) ([]string, error) { return []string{"m"}, nil }

func (f *positional) Labels(ctx context.Context, model string, c []string, want int) ([]string, error) {
	return c[:min(want, len(c))], nil
}

func (f *positional) Caps() Caps { return Caps{} }

func named(kind decision.Kind, names ...string) decision.Question {
	q := decision.Question{ID: "q", Kind: kind}
	for i, n := range names {
		key := n
		if kind == decision.Score {
			key = fmt.Sprint(i)
		}
		q.Options = append(q.Options, decision.Option{Key: key, Name: n})
	}
	return q
}

func byKey(q decision.Question, d decision.Distribution) map[string]float64 {
	m := map[string]float64{}
	for i, o := range q.Options {
		m[o.Key] = d[i]
	}
	return m
}

// A request whose options are a cyclic shift of another's gets the same
// distribution per option when every shift is asked, and not without.
func TestAskOrdersShiftInvariant(t *testing.T) {
	ctx := context.Background()
	e := &positional{weight: map[string]float64{"red": 1, "green": 2, "blue": 3, "grey": 0.5}, first: 4, label: 1}
	a := named(decision.Choice, "red", "green", "blue", "grey")
	b := named(decision.Choice, "blue", "grey", "red", "green")
	for _, tc := range []struct {
		orders int
		same   bool
	}{{1, false}, {2, false}, {4, true}, {9, true}} {
		oa, err := AskOrders(ctx, e, "m", []byte(`"s"`), a, tc.orders)
		if err != nil {
			t.Fatal(err)
		}
		ob, err := AskOrders(ctx, e, "m", []byte(`"s"`), b, tc.orders)
		if err != nil {
			t.Fatal(err)
		}
		pa, pb := byKey(a, oa.Dist), byKey(b, ob.Dist)
		worst := 0.0
		for k := range pa {
			worst = max(worst, math.Abs(pa[k]-pb[k]))
		}
		if tc.same && worst > 1e-12 {
			t.Errorf("orders %d: shifted requests differ by %v: %v vs %v", tc.orders, worst, pa, pb)
		}
		if !tc.same && worst < 0.01 {
			t.Errorf("orders %d: shifted requests agree (%v) though not every shift was asked", tc.orders, worst)
		}
		wantOrders := min(tc.orders, 4)
		if wantOrders == 1 {
			wantOrders = 0
		}
		if oa.Orders != wantOrders {
			t.Errorf("orders %d: outcome says %d orders, want %d", tc.orders, oa.Orders, wantOrders)
		}
	}
}

// The mean is in the caller's option space, the raw reading is the
// caller's order, and usage sums every order's call.
func TestAskOrdersMapsBack(t *testing.T) {
	e := &positional{weight: map[string]float64{"x": 1, "y": 1, "z": 1}, first: 7, label: 1}
	q := named(decision.Choice, "x", "y", "z")
	o, err := AskOrders(context.Background(), e, "m", []byte(`"s"`), q, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range o.Dist { // equal options: the first-position bias averages out exactly
		if math.Abs(p-1.0/3) > 1e-12 {
			t.Errorf("option %d: %v, want 1/3", i, p)
		}
	}
	if o.Raw[0] < 0.7 {
		t.Errorf("raw reading %v does not show the first-position bias", o.Raw)
	}
	if len(e.prompts) != 3 || o.Rounds != 3 || o.InputTokens != 30 || o.OutputTokens != 3 {
		t.Errorf("%d calls, rounds %d, tokens %d/%d; want 3 calls counted", len(e.prompts), o.Rounds, o.InputTokens, o.OutputTokens)
	}
	for _, p := range e.prompts[1:] {
		if p.StatePart != e.prompts[0].StatePart || p.System != e.prompts[0].System {
			t.Error("the orders do not share the state prefix")
		}
	}
}

// A score keeps its levels in order and shifts the labels.
func TestAskOrdersScoreShiftsLabels(t *testing.T) {
	e := &positional{weight: map[string]float64{"low": 1, "mid": 1, "high": 1}, first: 1, label: 5}
	q := named(decision.Score, "low", "mid", "high")
	o, err := AskOrders(context.Background(), e, "m", []byte(`"s"`), q, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range e.prompts {
		var names []string
		for _, line := range strings.Split(p.Question, "\n") {
			if _, name, ok := strings.Cut(line, ". "); ok {
				names = append(names, name)
			}
		}
		if strings.Join(names, ",") != "low,mid,high" {
			t.Errorf("order %d shows levels %v; want them in their order", i, names)
		}
		if want := rotate([]string{"0", "1", "2"}, i); strings.Join(p.Labels, "") != strings.Join(want, "") {
			t.Errorf("order %d labels %v, want %v", i, p.Labels, want)
		}
	}
	for i, p := range o.Dist { // the label bias visits every level once
		if math.Abs(p-1.0/3) > 1e-12 {
			t.Errorf("level %d: %v, want 1/3", i, p)
		}
	}
}
