package fitting

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// MassGateDigits is the number of significant digits a suggested
// label-mass gate keeps.
const MassGateDigits = 3

// DefaultMaxInScopeLoss is the share of in-scope answers a suggested
// label-mass gate may lose, unless told otherwise.
const DefaultMaxInScopeLoss = 0.05

// MassGate is a suggested min_label_mass: abstain on answers whose label
// mass is under it, and the share of in-scope answers lost stays under
// the target with GateConfidence.
type MassGate struct {
	// MinLabelMass is the highest gate that passes the bound, floored to
	// MassGateDigits significant digits (0.000665, never 0.000: a gate
	// floored to decimals can fall to 0 and gate nothing); nil when none
	// does (too few in-scope outcomes).
	MinLabelMass *float64 `json:"min_label_mass"`
	// MaxInScopeLoss is the share of in-scope answers the bound is held
	// under.
	MaxInScopeLoss float64 `json:"max_in_scope_loss"`
	// InScope counts the answers whose outcome was one of their options,
	// and OutOfScope those whose outcome was that none fit.
	InScope    int `json:"in_scope"`
	OutOfScope int `json:"out_of_scope"`
	// InScopeLost is how many in-scope answers the gate would have
	// abstained on, and UpperBound the one-sided Clopper–Pearson bound on
	// their share.
	InScopeLost int     `json:"in_scope_lost"`
	UpperBound  float64 `json:"upper_bound"`
	// Flagged is the share of out-of-scope answers under the gate: what
	// it would have caught; nil without out-of-scope outcomes or a gate.
	Flagged *float64 `json:"flagged"`
}

// FloorSignificant rounds x toward zero to digits significant digits
// (at least 1): 0.000665123 to 0.000665 at three, 0.98765 to 0.987. The
// result is never above x for a positive x: it is x's shortest decimal
// form cut short, read back. Zero, a negative x, and what is not a
// finite number come back as they are.
func FloorSignificant(x float64, digits int) float64 {
	if !(x > 0) || math.IsInf(x, 0) {
		return x
	}
	digits = max(digits, 1)
	// "6.65123e-04": a mantissa of shortest digits that reads back as x.
	s := strconv.FormatFloat(x, 'e', -1, 64)
	mant, exp, _ := strings.Cut(s, "e")
	whole, frac, _ := strings.Cut(mant, ".")
	if len(frac) > digits-1 {
		frac = frac[:digits-1]
	}
	cut := whole
	if frac != "" {
		cut += "." + frac
	}
	f, err := strconv.ParseFloat(cut+"e"+exp, 64)
	if err != nil || f > x {
		return x // cannot happen: a cut decimal reads as no more than x
	}
	return f
}

// MassStats count how many in-scope and out-of-scope label masses fell
// at each value floored to MassGateDigits significant digits. The gate
// suggested on the masses (see SuggestMassGate) is one of those floors,
// and whether a mass lies under a floor depends only on its own floor,
// so the counts give the same gate, counts and bound as the masses
// themselves, in a few thousand numbers however many answers there
// were. The zero value is empty and ready.
type MassStats struct {
	in, out map[float64]int
	nIn     int
	nOut    int
}

// Add counts one answer's label mass, in scope (its outcome was one of
// its options) or not (none fit). A mass that is not in [0, 1] is left
// out.
func (m *MassStats) Add(mass float64, inScope bool) { m.add(mass, inScope, 1) }

// Remove takes back one answer Add counted (an outcome corrected, a
// record pruned); one that was not counted is ignored.
func (m *MassStats) Remove(mass float64, inScope bool) { m.add(mass, inScope, -1) }

func (m *MassStats) add(mass float64, inScope bool, d int) {
	if !(mass >= 0 && mass <= 1) {
		return
	}
	k := FloorSignificant(mass, MassGateDigits)
	hist, n := &m.out, &m.nOut
	if inScope {
		hist, n = &m.in, &m.nIn
	}
	if *hist == nil {
		*hist = map[float64]int{}
	}
	if d < 0 && (*hist)[k] == 0 {
		return
	}
	(*hist)[k] += d
	*n += d
	if (*hist)[k] == 0 {
		delete(*hist, k)
	}
}

// Merge adds o's counts to m.
func (m *MassStats) Merge(o MassStats) {
	for k, c := range o.in {
		m.add(k, true, c)
	}
	for k, c := range o.out {
		m.add(k, false, c)
	}
}

// InScope and OutOfScope are the masses counted of each.
func (m MassStats) InScope() int    { return m.nIn }
func (m MassStats) OutOfScope() int { return m.nOut }

// SuggestMassGate finds the highest label-mass gate g such that the
// one-sided 95% Clopper–Pearson upper bound on the share of in-scope answers
// with mass under g is under maxLoss. Candidates are the in-scope masses
// counted, floored to MassGateDigits significant digits
// (MassGate.MinLabelMass says why); a gate at one keeps it. A maxLoss not in
// (0, 1) is DefaultMaxInScopeLoss. With no mistake allowed the bound is
// 1-0.05^(1/n), so a gate at 5% needs at least 59 in-scope outcomes.
func (m MassStats) SuggestMassGate(maxLoss float64) MassGate {
	if !(maxLoss > 0 && maxLoss < 1) {
		maxLoss = DefaultMaxInScopeLoss
	}
	g := MassGate{MaxInScopeLoss: maxLoss, InScope: m.nIn, OutOfScope: m.nOut}
	keys := slices.Sorted(maps.Keys(m.in))
	// The first mass at a floor has every mass under the floor under it,
	// and no other: the candidates reduce to the floors, each with the
	// count of the floors below it.
	best, lost, under := -1, 0, 0
	for i, k := range keys {
		if !boundUnder(under, m.nIn, GateConfidence, maxLoss) {
			break
		}
		best, lost = i, under
		under += m.in[k]
	}
	if best < 0 {
		g.UpperBound = ClopperPearsonUpper(0, m.nIn, GateConfidence)
		return g
	}
	gate := keys[best]
	g.MinLabelMass = &gate
	g.InScopeLost = lost
	g.UpperBound = ClopperPearsonUpper(lost, m.nIn, GateConfidence)
	if m.nOut > 0 {
		flagged := 0
		for k, c := range m.out {
			if k < gate {
				flagged += c
			}
		}
		g.Flagged = new(float64(flagged) / float64(m.nOut))
	}
	return g
}
