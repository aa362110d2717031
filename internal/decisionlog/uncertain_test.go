package decisionlog

import (
	"testing"
	"time"
)

// An answer is uncertain inside a window of its node and model (or
// stamped with either of the window's builds, under another name), or
// after the latest window before it while still stamped with the build
// that window found replaced; not before, not of another node or model,
// and not once a later window (a swap back) ended before it.
func TestInUncertain(t *testing.T) {
	at := func(m int) time.Time { return time.Unix(0, 0).Add(time.Duration(m) * time.Minute) }
	ws := []Uncertain{
		{Node: "n", Model: "m", From: at(10), To: at(20), Was: "a", Now: "b"},
		{Node: "n", Model: "m", From: at(50), To: at(60), Was: "b", Now: "a"},
	}
	for _, c := range []struct {
		name, node, model, fp string
		at                    int
		want                  bool
	}{
		{"before any window", "n", "m", "a", 5, false},
		{"inside, old build", "n", "m", "a", 15, true},
		{"inside, new build", "n", "m", "b", 15, true},
		{"on the window's edges", "n", "m", "a", 10, true},
		{"after, still the old build", "n", "m", "a", 30, true},
		{"after, the new build", "n", "m", "b", 30, false},
		{"another node", "x", "m", "a", 15, false},
		{"another model", "n", "x", "c", 15, false},
		{"another model, after", "n", "x", "c", 30, false},
		{"the model under another name, either build", "n", "m:latest", "b", 15, true},
		{"the model under another name, after, the old build", "n", "m:latest", "a", 30, true},
		{"after the swap back, the old build again", "n", "m", "a", 70, false},
		{"after the swap back, the build it replaced", "n", "m", "b", 70, true},
	} {
		if got := InUncertain(ws, c.node, c.model, c.fp, at(c.at).UnixNano()); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// The windows recorded read back, by their end, on every store.
func TestUncertainWindowsReadBack(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			l := b.open(t, Options{})
			ctx := ctxT(t)
			t0 := time.Unix(1e9, 0)
			if err := l.RecordUncertain(ctx, "n", "m", t0.Add(time.Hour), t0.Add(2*time.Hour), "b", "a"); err != nil {
				t.Fatal(err)
			}
			if err := l.RecordUncertain(ctx, "n", "m", t0, t0.Add(time.Minute), "a", "b"); err != nil {
				t.Fatal(err)
			}
			ws, err := l.Uncertain(ctx)
			if err != nil || len(ws) != 2 || ws[0].Was != "a" || !ws[0].From.Equal(t0) || !ws[1].To.Equal(t0.Add(2*time.Hour)) || ws[1].Node != "n" || ws[1].Model != "m" || ws[1].Now != "a" {
				t.Fatalf("%+v %v", ws, err)
			}
		})
	}
}
