package calibration

import (
	"testing"

	"system1/internal/decision"
)

func TestPredictedAndConfidence(t *testing.T) {
	for _, tc := range []struct {
		name    string
		p       Prediction
		pred    int
		conf    float64
		correct bool
	}{
		{"choice is the argmax", Prediction{Kind: decision.Choice, Dist: decision.Distribution{.2, .5, .3}, Expected: 1, Options: 3}, 1, .5, true},
		{"choice tie goes to the first", Prediction{Kind: decision.Choice, Dist: decision.Distribution{.4, .4, .2}, Expected: 1, Options: 3}, 0, .4, false},
		{"noul true", Prediction{Kind: decision.Noul, Dist: decision.Distribution{.8, .2}, Expected: 0, Options: 2}, 0, .8, true},
		{"noul false", Prediction{Kind: decision.Noul, Dist: decision.Distribution{.3, .7}, Expected: 0, Options: 2}, 1, .7, false},
		{"noul even split is true", Prediction{Kind: decision.Noul, Dist: decision.Distribution{.5, .5}, Expected: 0, Options: 2}, 0, .5, true},
		// 0*.1 + 1*.2 + 2*.7 = 1.6, rounds to 2.
		{"score rounds the expected level", Prediction{Kind: decision.Score, Dist: decision.Distribution{.1, .2, .7}, Expected: 2, Options: 3}, 2, .7, true},
		// 1*.5 + 2*.5 = 1.5, rounds half up to 2; the confidence is p[2].
		{"score rounds half up", Prediction{Kind: decision.Score, Dist: decision.Distribution{0, .5, .5}, Expected: 1, Options: 3}, 2, .5, false},
		// 1*.25 + 2*.25 = 0.75, rounds to 1: the predicted level need not
		// be the mode, and its probability is the confidence.
		{"score confidence is of the predicted level", Prediction{Kind: decision.Score, Dist: decision.Distribution{.5, .25, .25}, Expected: 0, Options: 3}, 1, .25, false},
		// 1*.35 + 2*.05 + 3*.3 + 4*.15 = .35 + .1 + .9 + .6 = 1.95, rounds
		// to 2, whose probability .05 is the confidence.
		{"score on five levels", Prediction{Kind: decision.Score, Dist: decision.Distribution{.15, .35, .05, .3, .15}, Expected: 2, Options: 5}, 2, .05, true},
		// 0.5 exactly from two-decimal values: .5*1 = .5, rounds up to 1.
		{"score half from two levels", Prediction{Kind: decision.Score, Dist: decision.Distribution{.5, .5}, Expected: 1, Options: 2}, 1, .5, true},
		// 1*.15 + 2*.15 + 3*.2 + 4*.1 = .15 + .3 + .6 + .4 = 1.45 -> 1.
		{"score below half rounds down", Prediction{Kind: decision.Score, Dist: decision.Distribution{.4, .15, .15, .2, .1}, Expected: 1, Options: 5}, 1, .15, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.p.Check(); err != nil {
				t.Fatal(err)
			}
			if got := tc.p.Predicted(); got != tc.pred {
				t.Errorf("predicted %d, want %d", got, tc.pred)
			}
			if got := tc.p.Confidence(); !near(got, tc.conf, 1e-12) {
				t.Errorf("confidence %v, want %v", got, tc.conf)
			}
			if got := tc.p.Correct(); got != tc.correct {
				t.Errorf("correct %v, want %v", got, tc.correct)
			}
		})
	}
}

func TestPredictionCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Prediction
		ok   bool
	}{
		{"choice", Prediction{Kind: decision.Choice, Dist: decision.Distribution{.5, .5}, Expected: 1, Options: 2}, true},
		{"unknown kind", Prediction{Kind: "rank", Dist: decision.Distribution{.5, .5}, Expected: 1, Options: 2}, false},
		{"one option", Prediction{Kind: decision.Choice, Dist: decision.Distribution{1}, Expected: 0, Options: 1}, false},
		{"noul over three", Prediction{Kind: decision.Noul, Dist: decision.Distribution{.5, .25, .25}, Expected: 0, Options: 3}, false},
		{"length differs from options", Prediction{Kind: decision.Choice, Dist: decision.Distribution{.5, .5}, Expected: 0, Options: 3}, false},
		{"does not sum to 1", Prediction{Kind: decision.Score, Dist: decision.Distribution{.5, .4}, Expected: 0, Options: 2}, false},
		{"expected below range", Prediction{Kind: decision.Choice, Dist: decision.Distribution{.5, .5}, Expected: -1, Options: 2}, false},
		{"expected above range", Prediction{Kind: decision.Choice, Dist: decision.Distribution{.5, .5}, Expected: 2, Options: 2}, false},
	} {
		if err := tc.p.Check(); (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

func TestBucket(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{
		{-1, "2"}, {0, "2"}, {1, "2"}, {2, "2"},
		{3, "3-4"}, {4, "3-4"},
		{5, "5-10"}, {10, "5-10"},
		{11, "11-20"}, {20, "11-20"},
		{21, "21-50"}, {50, "21-50"},
		{51, "51-255"}, {255, "51-255"}, {256, "51-255"}, {1 << 20, "51-255"},
	} {
		if got := Bucket(tc.n); got != tc.want {
			t.Errorf("Bucket(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
	names := Buckets()
	for i, b := range names {
		if bucketIndex(b) != i {
			t.Errorf("bucket %q at %d", b, bucketIndex(b))
		}
	}
	if bucketIndex("2-4") != -1 || bucketIndex("") != -1 {
		t.Error("an unknown bucket has an index")
	}
	seen := map[string]bool{}
	for n := -2; n <= 300; n++ {
		seen[Bucket(n)] = true
	}
	if len(seen) != len(names) {
		t.Errorf("Bucket returns %d names, Buckets lists %d", len(seen), len(names))
	}
}

func near(a, b, tol float64) bool { return a-b <= tol && b-a <= tol }
