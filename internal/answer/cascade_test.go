package answer

import (
	"testing"

	"system1/internal/calibration"
	"system1/internal/decision"
)

// A stage keeps an answer only when it stands behind it and its
// confidence reaches the threshold certified for the build that served
// it; otherwise what an uncertified stage does is the cascade's choice.
func TestCascadeKeeps(t *testing.T) {
	fits := &calibration.Fits{Fits: []calibration.Fit{{Model: "small", Fingerprint: "fp1", Kind: decision.Choice, Bucket: "2", Temperature: 1,
		Escalations: []calibration.Escalation{
			{TargetError: 0.05, Delta: 0.05, Threshold: 0.9, Certified: true},
			{TargetError: 0.01, Delta: 0.05},
		}}}}
	q := func(fp string, top float64) Question {
		return Question{Model: "small", Fingerprint: fp, Dist: decision.Distribution{top, 1 - top}}
	}
	refused := q("fp1", 0.99)
	refused.Refusal = &Refusal{Reason: RefusedLabelMass}
	tests := []struct {
		name  string
		c     Cascade
		q     Question
		fits  *calibration.Fits
		keeps bool
	}{
		{"over the threshold", Cascade{TargetError: 0.05}, q("fp1", 0.95), fits, true},
		{"at the threshold", Cascade{TargetError: 0.05}, q("fp1", 0.9), fits, true},
		{"under it", Cascade{TargetError: 0.05}, q("fp1", 0.85), fits, false},
		{"refused", Cascade{TargetError: 0.05}, refused, fits, false},
		{"declined, no reading", Cascade{TargetError: 0.05, Keep: true}, Question{Model: "small", Fingerprint: "fp1"}, fits, false},
		{"another build", Cascade{TargetError: 0.05}, q("fp2", 0.99), fits, false},
		{"a build not probed yet", Cascade{TargetError: 0.05}, q("", 0.99), fits, false},
		{"another build, keep", Cascade{TargetError: 0.05, Keep: true}, q("fp2", 0.5), fits, true},
		{"not certified at the target", Cascade{TargetError: 0.01}, q("fp1", 0.99), fits, false},
		{"not certified, keep", Cascade{TargetError: 0.01, Keep: true}, q("fp1", 0.6), fits, true},
		{"no threshold at the target", Cascade{TargetError: 0.1}, q("fp1", 0.99), fits, false},
		{"no fits", Cascade{TargetError: 0.05}, q("fp1", 0.99), nil, false},
	}
	for _, tt := range tests {
		if got := tt.c.keeps(tt.q, decision.Choice, tt.fits, ""); got != tt.keeps {
			t.Errorf("%s: keeps %v, want %v", tt.name, got, tt.keeps)
		}
	}

	// A score's confidence is its predicted level's probability, the one
	// its escalations are certified on, not the largest: split between
	// the ends, the answer is the middle level, which it gives nothing.
	scores := &calibration.Fits{Fits: []calibration.Fit{{Model: "small", Fingerprint: "fp1", Kind: decision.Score, Bucket: "3-4", Temperature: 1,
		Escalations: []calibration.Escalation{{TargetError: 0.05, Delta: 0.05, Threshold: 0.5, Certified: true}}}}}
	for _, tt := range []struct {
		name  string
		dist  decision.Distribution
		keeps bool
	}{
		{"split between the ends", decision.Distribution{0.5, 0, 0.5}, false},
		{"the middle level", decision.Distribution{0.2, 0.6, 0.2}, true},
	} {
		got := Cascade{TargetError: 0.05}.keeps(Question{Model: "small", Fingerprint: "fp1", Dist: tt.dist}, decision.Score, scores, "")
		if got != tt.keeps {
			t.Errorf("score %s: keeps %v, want %v", tt.name, got, tt.keeps)
		}
	}
}
