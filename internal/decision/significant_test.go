package decision

import (
	"math"
	"testing"
)

// A label mass keeps three significant digits however small it is: a
// mass of 0.000665 is reported as such, never as 0.000 or 0.001.
func TestRoundSignificant(t *testing.T) {
	for _, c := range []struct {
		x    float64
		want float64
		text string
	}{
		{0.000665123, 0.000665, "0.000665"},
		{0.00066549, 0.000665, "0.000665"},
		{0.98765, 0.988, "0.988"},
		{0.93, 0.93, "0.93"},
		{0.3, 0.3, "0.3"},
		{1, 1, "1"},
		{0.99996, 1, "1"},
		{1.23e-9, 1.23e-9, "0.00000000123"},
		{0, 0, "0"},
	} {
		if got := RoundSignificant(c.x, LabelMassDigits); got != c.want {
			t.Errorf("RoundSignificant(%v) = %v, want %v", c.x, got, c.want)
		}
		if got := FormatLabelMass(c.x); got != c.text {
			t.Errorf("FormatLabelMass(%v) = %q, want %q", c.x, got, c.text)
		}
	}
	if got := RoundSignificant(math.NaN(), 3); !math.IsNaN(got) {
		t.Errorf("NaN came back as %v", got)
	}
	if got := RoundSignificant(0.12345, 0); got != 0.1 {
		t.Errorf("digits 0 is one digit: %v", got)
	}
}
