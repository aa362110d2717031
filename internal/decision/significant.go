package decision

import (
	"math"
	"strconv"
)

// LabelMassDigits is the number of significant digits a label mass is
// reported to. A mass is a probability that can be tiny (0.000665 when
// no option seemed to fit), so a fixed number of decimals would report
// it as 0.000 and say nothing: significant digits keep what it says.
const LabelMassDigits = 3

// RoundSignificant rounds x to digits significant digits (at least 1),
// to nearest: 0.000665123 to 0.000665, 0.98765 to 0.988 at three. Zero
// and what is not a finite number come back as they are.
func RoundSignificant(x float64, digits int) float64 {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	f, err := strconv.ParseFloat(strconv.FormatFloat(x, 'e', max(digits, 1)-1, 64), 64)
	if err != nil {
		return x // cannot happen: FormatFloat writes a number
	}
	return f
}

// FormatLabelMass writes a label mass to LabelMassDigits significant
// digits, in decimals without an exponent: "0.93", "0.000665", "1".
func FormatLabelMass(m float64) string {
	return strconv.FormatFloat(RoundSignificant(m, LabelMassDigits), 'f', -1, 64)
}
