package decision

import (
	"encoding/json"
	"math"
	"testing"
)

func options(keys ...string) []Option {
	out := make([]Option, len(keys))
	for i, k := range keys {
		out[i] = Option{Key: k, Name: k}
	}
	return out
}

func TestNewAnswer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		q      Question
		d      Distribution
		places int
		want   Answer
	}{
		{
			name: "choice reports rounded values and their argmax",
			q:    Question{ID: "dept", Kind: Choice, Options: options("billing", "technical", "sales")},
			d:    Distribution{.8812, .1188, 0}, places: 2,
			want: Answer{Kind: Choice, Choice: "billing", Confidence: .82, Probabilities: []float64{.88, .12, 0}},
		},
		{
			name: "choice ties on printed values go to the larger unrounded one",
			q:    Question{ID: "t", Kind: Choice, Options: options("a", "b", "c")},
			d:    Distribution{.3402, .3398, .32}, places: 2,
			want: Answer{Kind: Choice, Choice: "a", Confidence: .01, Probabilities: []float64{.34, .34, .32}},
		},
		{
			name: "score is the expected level, computed before rounding",
			q:    Question{ID: "f", Kind: Score, Options: options("0", "1", "2")},
			d:    Distribution{0, .95, .05}, places: 2,
			want: Answer{Kind: Score, Score: 1.05, Confidence: .93, Probabilities: []float64{0, .95, .05}},
		},
		{
			name: "noul is P(true) whichever way it went",
			q:    Question{ID: "u", Kind: Noul, Options: NoulOptions(nil, nil)},
			d:    Distribution{.0449, .9551}, places: 2,
			want: Answer{Kind: Noul, Noul: .04},
		},
		{
			name: "full precision",
			q:    Question{ID: "s", Kind: Score, Options: options("0", "1", "2", "3", "4")},
			d:    Distribution{.005, .005, .04, .25, .70}, places: -1,
			want: Answer{Kind: Score, Score: 3.635, Confidence: 0.6958333333333333, Probabilities: []float64{.005, .005, .04, .25, .70}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NewAnswer(tc.q, tc.d, tc.places)
			if err != nil {
				t.Fatal(err)
			}
			if got.Kind != tc.want.Kind || got.Choice != tc.want.Choice ||
				!near(got.Noul, tc.want.Noul) || !near(got.Score, tc.want.Score) || !near(got.Confidence, tc.want.Confidence) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
			if len(got.Probabilities) != len(tc.want.Probabilities) {
				t.Fatalf("probabilities %v, want %v", got.Probabilities, tc.want.Probabilities)
			}
			for i := range got.Probabilities {
				if !near(got.Probabilities[i], tc.want.Probabilities[i]) {
					t.Fatalf("probabilities %v, want %v", got.Probabilities, tc.want.Probabilities)
				}
			}
		})
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestRoundKeepsTheSum(t *testing.T) {
	for _, d := range []Distribution{
		{1. / 3, 1. / 3, 1. / 3},
		{.125, .125, .125, .125, .125, .125, .125, .125},
		{.995, .005},
		{.004, .004, .004, .988},
		{1, 0, 0},
	} {
		r := Round(d, 2)
		var sum float64
		for _, p := range r {
			sum += p
			if p < 0 || p > 1 || math.Abs(p*100-math.Round(p*100)) > 1e-9 {
				t.Errorf("%v: reported %v", d, r)
			}
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Errorf("%v rounds to %v, which sums to %v", d, r, sum)
		}
	}
}

// The reported numbers are what the wire prints: check that an answer
// encodes to finite JSON numbers in every case the fuzzer finds.
func FuzzNewAnswer(f *testing.F) {
	f.Add(0.5, 0.3, 0.2, -1.0, 2, uint8(0))
	f.Add(1.0, 0.0, 0.0, 0.0, 0, uint8(1))
	f.Add(0.33, 0.33, 0.33, 0.01, 4, uint8(2))
	f.Fuzz(func(t *testing.T, a, b, c, e float64, places int, kind uint8) {
		lp := []float64{a, b, c, e}
		found := []bool{true, true, true, true}
		for i := range lp {
			lp[i] = -math.Abs(lp[i]) // any non-positive log-probability
		}
		d, err := FromLogprobs(lp, found)
		if err != nil {
			return
		}
		if err := d.Check(4); err != nil {
			t.Fatalf("FromLogprobs(%v) made an invalid distribution: %v", lp, err)
		}
		places = places%7 - 1
		q := Question{ID: "q", Kind: Choice, Options: options("w", "x", "y", "z")}
		switch kind % 3 {
		case 1:
			q.Kind = Score
		case 2:
			q.Kind, q.Options, d = Noul, NoulOptions(nil, nil), Distribution{d[0], 1 - d[0]}
			d[1] = clamp(d[1], 1)
		}
		ans, err := NewAnswer(q, d, places)
		if err != nil {
			if q.Kind == Noul {
				return // 1 - p may not sum back to 1 exactly
			}
			t.Fatal(err)
		}
		if _, err := json.Marshal(ans); err != nil {
			t.Fatalf("answer %+v does not encode: %v", ans, err)
		}
		if q.Kind == Noul {
			return
		}
		var sum float64
		top := 0.0
		for _, p := range ans.Probabilities {
			sum += p
			top = math.Max(top, p)
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Fatalf("%v reported as %v sums to %v", d, ans.Probabilities, sum)
		}
		if q.Kind == Choice {
			i := indexOf(q.Options, ans.Choice)
			if ans.Probabilities[i] != top {
				t.Fatalf("choice %s has %v, below the max %v", ans.Choice, ans.Probabilities[i], top)
			}
		}
		if ans.Confidence < 0 || ans.Confidence > 1 || ans.Score < 0 || ans.Score > 3 {
			t.Fatalf("out of range: %+v", ans)
		}
	})
}

func indexOf(opts []Option, key string) int {
	for i, o := range opts {
		if o.Key == key {
			return i
		}
	}
	return -1
}
