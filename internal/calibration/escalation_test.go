package calibration

import (
	"bytes"
	"strings"
	"testing"
)

// A fit's escalations are written and read back, and a bad one is
// refused naming its place.
func TestFitEscalationsRoundTrip(t *testing.T) {
	f := &Fits{Version: FitsVersion, Fits: []Fit{{Model: "m", Kind: "choice", Bucket: "2", Temperature: 1, N: 1,
		Escalations: []Escalation{{TargetError: 0.05, Delta: 0.05, Threshold: 0.9, Certified: true, N: 100, Kept: 80, WrongKept: 1, UpperBound: 0.04}}}}}
	data, err := f.Encode()
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.Join(bytes.Fields(data), nil) // one line, so that the edits below find their text
	back, err := ParseFits(data)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := back.Fits[0].EscalationFor(0.05); !ok || e.Threshold != 0.9 || !e.Certified {
		t.Fatalf("escalation read back as %+v %v", e, ok)
	}
	for _, bad := range []struct{ from, to, want string }{
		{`"wrong_kept":1`, `"wrong_kept":1,"extra":2`, "extra"},
		{`"delta":0.05`, `"delta":2`, "escalation 0: delta"},
	} {
		if _, err := ParseFits([]byte(strings.Replace(string(data), bad.from, bad.to, 1))); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: error %v, want one naming %q", bad.to, err, bad.want)
		}
	}
}
