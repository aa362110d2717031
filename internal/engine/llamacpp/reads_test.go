package llamacpp

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"testing"

	"system1/internal/decision"
	"system1/internal/engine"
	"system1/internal/fakeengine"
)

// A read asks for the top 64; a second call for the top of the vocabulary
// only when a missing label could matter, and a model whose labels are
// often missing is asked for it from the start. Only such a wide read
// carries a grammar over the labels.
func TestReadsWidenOnlyWhenLabelsGoMissing(t *testing.T) {
	q := decision.Question{ID: "q", Kind: decision.Choice, Options: []decision.Option{{Key: "a", Name: "a"}, {Key: "b", Name: "b"}, {Key: "c", Name: "c"}}}
	topLogprobs := func(f *fakeengine.Fake) []int {
		var out []int
		for _, r := range f.Inferences() {
			out = append(out, r.TopLogprobs)
			grammar := bytes.Contains(r.Body, []byte(`"grammar":"root ::= \"A\" | \"B\" | \"C\""`))
			if wide := r.TopLogprobs > 64; grammar != wide {
				t.Errorf("a call for the top %d sent a grammar: %v; want %v", r.TopLogprobs, grammar, wide)
			}
		}
		f.Reset()
		return out
	}
	for _, tc := range []struct {
		name  string
		fault fakeengine.Fault
		want  [][]int // top_logprobs of each Ask's calls
	}{
		{"labels present", fakeengine.None, [][]int{{64}, {64}, {64}}},
		{"a label missing", fakeengine.MissingLabel, [][]int{{64, 512}, {512}, {512}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Behavior: fakeengine.Behavior{Fault: tc.fault, Label: 1}})
			defer f.Close()
			e := &Engine{BaseURL: f.URL}
			for i, want := range tc.want {
				o, err := engine.Ask(context.Background(), e, fakeengine.DefaultModel, []byte(`"s"`), q)
				if err != nil {
					t.Fatal(err)
				}
				if got := topLogprobs(f); !slices.Equal(got, want) {
					t.Fatalf("ask %d: calls asked for %v alternatives, want %v", i+1, got, want)
				}
				if tc.fault == fakeengine.MissingLabel && (len(o.Missing) != 1 || o.Dist[1] != 0) {
					t.Fatalf("ask %d: outcome %+v", i+1, o)
				}
			}
		})
	}
}

// A model whose labels stay out of its top 64 is asked for the wide top
// once per read, not again for the top 64 every few reads to find out; once
// its labels are back among its top 64, it is asked for those again.
func TestWideReadsStayWideWhileLabelsStayOut(t *testing.T) {
	q := decision.Question{ID: "q", Kind: decision.Choice, Options: []decision.Option{{Key: "a", Name: "a"}, {Key: "b", Name: "b"}, {Key: "c", Name: "c"}}}
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Behavior: fakeengine.Behavior{Fault: fakeengine.MissingLabel, Label: 1}})
	defer f.Close()
	e := &Engine{BaseURL: f.URL}
	ask := func() []int {
		t.Helper()
		if _, err := engine.Ask(context.Background(), e, fakeengine.DefaultModel, []byte(`"s"`), q); err != nil {
			t.Fatal(err)
		}
		var got []int
		for _, r := range f.Inferences() {
			got = append(got, r.TopLogprobs)
		}
		f.Reset()
		return got
	}
	if got := ask(); !slices.Equal(got, []int{64, 512}) {
		t.Fatalf("first read: calls asked for %v alternatives, want [64 512]", got)
	}
	for i := 2; i <= 300; i++ {
		if got := ask(); !slices.Equal(got, []int{512}) {
			t.Fatalf("read %d: calls asked for %v alternatives, want [512]", i, got)
		}
	}
	f.Set(fakeengine.Behavior{})
	for i := 1; ; i++ {
		got := ask()
		if slices.Equal(got, []int{64}) {
			t.Logf("asked for the top 64 again at the %d-th read after the labels came back", i)
			return
		}
		if !slices.Equal(got, []int{512}) || i == 300 {
			t.Fatalf("read %d after the labels came back: calls asked for %v alternatives", i, got)
		}
	}
}

// Prime readies the slots the other k-1 questions go to, one pinned task
// each, at most one per other slot; with no other question it sends
// nothing, whatever k.
func TestPrimePinsTheOtherSlots(t *testing.T) {
	for _, tc := range []struct{ k, want int }{{-1, 0}, {0, 0}, {1, 0}, {2, 1}, {4, 3}, {9, 3}} {
		f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Slots: 4})
		e := &Engine{BaseURL: f.URL, PinSlots: true, SpreadSlots: true}
		if err := e.Prime(t.Context(), json.RawMessage(`"a state"`), tc.k); err != nil {
			t.Fatalf("k %d: %v", tc.k, err)
		}
		slots := map[int]bool{}
		for _, r := range f.Requests() {
			if r.Path != "/completion" {
				continue
			}
			var body struct {
				IDSlot *int `json:"id_slot"`
			}
			if err := json.Unmarshal(r.Body, &body); err != nil || body.IDSlot == nil {
				t.Fatalf("k %d: a priming task not pinned: %s", tc.k, r.Body)
			}
			slots[*body.IDSlot] = true
		}
		if len(slots) != tc.want {
			t.Errorf("k %d: %d slots primed, want %d", tc.k, len(slots), tc.want)
		}
		f.Close()
	}
}
