package calibration

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"system1/internal/decision"
)

// The calibration methods, from the simplest. A fit of the fits file
// names MethodTemperature, MethodLevel (level.go) or MethodVector (an
// empty method is a temperature, as in files written before methods);
// MethodNone is the distribution as it came, the candidate that changes
// nothing.
const (
	MethodNone        = "none"
	MethodTemperature = "temperature"
	MethodVector      = "vector"
)

// Methods lists the calibration methods, simplest first: the order
// cross-validation prefers them in when they do equally well.
func Methods() []string { return []string{MethodNone, MethodTemperature, MethodLevel, MethodVector} }

// MaxBias bounds a vector fit's biases, in nats: far beyond what a
// position bias needs (e^20 is a factor of 5e8), but finite, so that a
// file cannot push one option's probability to exactly 1.
const MaxBias = 20

// VectorL2 is the weight of the L2 penalty on a vector fit's biases:
// the fit minimises the sum over cases of the NLL plus VectorL2/2 times
// the sum of the squared biases, a standard normal prior on each bias in
// nats. Against hundreds of cases it barely moves a bias the data
// support, and it pins the biases the data cannot tell apart (adding one
// constant to every bias changes no distribution) to the smallest ones.
const VectorL2 = 1.0

// Calibrator is the part of a fit that is applied to a distribution:
// one of the methods with its parameters.
type Calibrator struct {
	// Method is MethodNone, MethodTemperature, MethodLevel or
	// MethodVector.
	Method string `json:"method"`
	// Temperature divides the log-probabilities (1 for MethodNone).
	Temperature float64 `json:"temperature"`
	// Biases, for MethodVector, are added to the tempered
	// log-probability of the option at each position: Biases[i] to
	// option i. A position past the end gets none.
	Biases []float64 `json:"biases,omitempty"`
	// Map, when set, is the confidence map composed after the method:
	// the predicted answer's probability becomes the map's probability
	// right (ConfidenceMap.Apply), so that one Apply serves the whole
	// fit. Kind is the question kind it maps (a score's answer is its
	// expected level, which the map keeps); Fit.Calibrator sets both.
	Map  *ConfidenceMap `json:"map,omitempty"`
	Kind decision.Kind  `json:"kind,omitempty"`
}

// Base is c without its confidence map: the method a selection fits
// candidates against, and a map is fitted on top of.
func (c Calibrator) Base() Calibrator {
	c.Map, c.Kind = nil, ""
	return c
}

// WithMap is c with m composed after it, for answers of kind.
func (c Calibrator) WithMap(m *ConfidenceMap, kind decision.Kind) Calibrator {
	c.Map, c.Kind = m, kind
	if m == nil {
		c.Kind = ""
	}
	return c
}

// Identity is the calibrator that changes nothing.
func Identity() Calibrator { return Calibrator{Method: MethodNone, Temperature: 1} }

// TemperatureCalibrator is the calibrator of one temperature t.
func TemperatureCalibrator(t float64) Calibrator {
	return Calibrator{Method: MethodTemperature, Temperature: t}
}

// Complexity ranks the methods: 0 for none, 1 for a temperature (plain
// or keeping the level), 2 for a temperature with biases, 3 for anything
// else.
func (c Calibrator) Complexity() int {
	switch c.Method {
	case MethodNone:
		return 0
	case MethodTemperature, MethodLevel:
		return 1
	case MethodVector:
		return 2
	}
	return 3
}

// Apply calibrates d: for MethodTemperature, p_i proportional to
// p_i^(1/T) (Distribution.Temper); for MethodVector, p_i proportional to
// exp(ln p_i / T + b_i). A zero stays zero, as with a temperature: a
// label the engine did not report gets no probability from a bias. A
// calibrator that fails Check, or a d that is not a distribution over
// its own length, returns d unchanged, as Temper does with a temperature
// that is not positive and finite.
func (c Calibrator) Apply(d decision.Distribution) decision.Distribution {
	if c.Check() != nil {
		return d
	}
	if c.Map != nil {
		return c.Map.Apply(c.Kind, c.Base().Apply(d))
	}
	switch c.Method {
	case MethodTemperature:
		return d.Temper(c.Temperature)
	case MethodLevel:
		if d.Check(len(d)) != nil {
			return d
		}
		return applyLevel(d, c.Temperature)
	case MethodVector:
		if d.Check(len(d)) != nil {
			return d
		}
		z := make([]float64, len(d))
		top := math.Inf(-1)
		for i, p := range d {
			if p > 0 {
				z[i] = math.Log(p)/c.Temperature + c.bias(i)
				top = math.Max(top, z[i])
			}
		}
		if math.IsInf(top, -1) {
			return d
		}
		out := make(decision.Distribution, len(d))
		var sum float64
		for i, p := range d {
			if p > 0 {
				out[i] = math.Exp(z[i] - top)
				sum += out[i]
			}
		}
		for i := range out {
			out[i] /= sum
		}
		return out
	}
	return d
}

// bias is the bias of position i, 0 past the end.
func (c Calibrator) bias(i int) float64 {
	if i < len(c.Biases) {
		return c.Biases[i]
	}
	return 0
}

// Check reports what is wrong with c: an unknown method, a temperature
// that is not a positive finite number (exactly 1 for MethodNone),
// biases on another method than MethodVector, none or more than 255 on
// it, one that is not finite or beyond MaxBias, or a map that fails
// ConfidenceMap.Check.
func (c Calibrator) Check() error {
	if c.Map != nil {
		if err := c.Map.Check(); err != nil {
			return fmt.Errorf("confidence map: %w", err)
		}
	}
	switch c.Method {
	case MethodNone, MethodTemperature, MethodLevel, MethodVector:
	default:
		return fmt.Errorf("method %q is not %s, %s, %s or %s", c.Method, MethodNone, MethodTemperature, MethodLevel, MethodVector)
	}
	if !(c.Temperature > 0) || math.IsInf(c.Temperature, 1) {
		return fmt.Errorf("temperature %v is not a positive finite number", c.Temperature)
	}
	if c.Method == MethodNone && c.Temperature != 1 {
		return fmt.Errorf("method %s has temperature %v, not 1", MethodNone, c.Temperature)
	}
	if c.Method != MethodVector {
		if len(c.Biases) > 0 {
			return fmt.Errorf("method %s has biases", c.Method)
		}
		return nil
	}
	if len(c.Biases) == 0 || len(c.Biases) > 255 {
		return fmt.Errorf("method %s has %d biases, not 1 to 255", MethodVector, len(c.Biases))
	}
	for i, b := range c.Biases {
		if !(math.Abs(b) <= MaxBias) {
			return fmt.Errorf("bias %d is %v, not within ±%d", i, b, MaxBias)
		}
	}
	return nil
}

// String names c in a step's version: "none", "T=1.85", "T=1.85/level"
// or "T=1.85/b=+0.31,-0.12,0", each number to four significant digits,
// and "/map=" with the start of a hash of its knots after any of them
// when a confidence map is composed ("none/map=1f2e3d4c").
func (c Calibrator) String() string {
	if c.Map != nil {
		return c.Base().String() + "/map=" + c.Map.key()
	}
	num := func(x float64) string { return strconv.FormatFloat(x, 'g', 4, 64) }
	switch c.Method {
	case MethodNone:
		return MethodNone
	case MethodVector:
		bs := make([]string, len(c.Biases))
		for i, b := range c.Biases {
			bs[i] = num(b)
			if b > 0 {
				bs[i] = "+" + bs[i]
			}
		}
		return "T=" + num(c.Temperature) + "/b=" + strings.Join(bs, ",")
	case MethodLevel:
		return "T=" + num(c.Temperature) + "/" + MethodLevel
	}
	return "T=" + num(c.Temperature)
}

// Calibrate returns a copy of preds with every distribution calibrated
// by c (Calibrator.Apply); the distributions c leaves as they are stay
// shared with preds.
func Calibrate(preds []Prediction, c Calibrator) []Prediction {
	out := make([]Prediction, len(preds))
	for i, p := range preds {
		p.Dist = c.Apply(p.Dist)
		out[i] = p
	}
	return out
}

// FitMethod fits a calibrator of the given method on preds: Identity for
// MethodNone, FitTemperature's for MethodTemperature, FitLevel's for
// MethodLevel and FitVector's for MethodVector.
func FitMethod(method string, preds []Prediction) (Calibrator, error) {
	switch method {
	case MethodNone:
		if len(preds) == 0 {
			return Calibrator{}, ErrNoCases
		}
		return Identity(), nil
	case MethodTemperature:
		t, err := FitTemperature(preds)
		if err != nil {
			return Calibrator{}, err
		}
		return TemperatureCalibrator(t), nil
	case MethodLevel:
		return FitLevel(preds)
	case MethodVector:
		return FitVector(preds)
	}
	return Calibrator{}, fmt.Errorf("method %q is not %s, %s, %s or %s", method, MethodNone, MethodTemperature, MethodLevel, MethodVector)
}

// The limits of FitVector's optimiser.
const (
	vectorMaxIter = 300
	vectorMemory  = 8
	vectorGradTol = 1e-7
)

// FitVector fits a temperature and a bias per position (vector scaling
// with one shared temperature): the calibrated distribution is
// p'_i proportional to exp(beta ln p_i + b_i), beta = 1/T, over the
// non-zero p_i, and (beta, b) minimise the sum over cases of
// -ln max(p'_expected, ProbFloor) plus VectorL2/2 * sum b_i^2. There is
// one bias per position up to the most options any case has. A bias can
// remove what a temperature cannot: a pull toward one position (the
// first label, say) that moves which option wins.
//
// Without the floor the loss is convex in (beta, b): the log-softmax of
// logits linear in the parameters. It starts where FitTemperature ends,
// with no bias, and descends by L-BFGS (8 pairs of memory) with a
// backtracking line search that accepts only a step that lowers the
// penalised loss itself, floor included, so the result never does worse
// on preds than the temperature alone, whatever the data. It stops when
// the gradient is under 1e-7, no step lowers the loss, or after 300
// iterations. beta is searched as ln beta and kept so that T stays in
// [MinTemperature, MaxTemperature]; a bias is clamped to ±MaxBias.
//
// An empty set is ErrNoCases, and a case that fails Prediction.Check is
// an error naming its index.
func FitVector(preds []Prediction) (Calibrator, error) {
	t, err := FitTemperature(preds) // checks every case
	if err != nil {
		return Calibrator{}, err
	}
	return fitVectorFrom(preds, t), nil
}

// fitVectorFrom is FitVector from t, FitTemperature's fit on preds, which
// have passed Check.
func fitVectorFrom(preds []Prediction, t float64) Calibrator {
	k := 0
	cases := make([]vecCase, len(preds))
	for i, p := range preds {
		k = max(k, len(p.Dist))
		cases[i] = newVecCase(p)
	}
	x := make([]float64, k+1) // x[0] = ln beta, x[1:] the biases
	x[0] = -math.Log(t)
	lo, hi := -math.Log(MaxTemperature), -math.Log(MinTemperature)
	project := func(x []float64) {
		x[0] = min(max(x[0], lo), hi)
		for i := 1; i < len(x); i++ {
			x[i] = min(max(x[i], -MaxBias), MaxBias)
		}
	}
	n := float64(len(cases))
	f := func(x, grad []float64) float64 {
		l := vectorLoss(cases, x, grad)
		scale(1/n, grad)
		return l / n
	}

	g := make([]float64, k+1)
	fx := f(x, g)
	type pair struct{ s, y []float64 }
	var mem []pair
	d := make([]float64, k+1)
	xn, gn := make([]float64, k+1), make([]float64, k+1)
	for range vectorMaxIter {
		if norm(g) < vectorGradTol {
			break
		}
		// The L-BFGS two-loop recursion: d = -H g.
		copy(d, g)
		alpha := make([]float64, len(mem))
		for i := len(mem) - 1; i >= 0; i-- {
			rho := 1 / dot(mem[i].y, mem[i].s)
			alpha[i] = rho * dot(mem[i].s, d)
			axpy(-alpha[i], mem[i].y, d)
		}
		if m := len(mem); m > 0 {
			scale(dot(mem[m-1].s, mem[m-1].y)/dot(mem[m-1].y, mem[m-1].y), d)
		} else {
			scale(1/max(norm(g), 1), d)
		}
		for i := range mem {
			rho := 1 / dot(mem[i].y, mem[i].s)
			b := rho * dot(mem[i].y, d)
			axpy(alpha[i]-b, mem[i].s, d)
		}
		scale(-1, d)
		if dot(d, g) >= 0 { // not a descent direction: start over
			mem = mem[:0]
			copy(d, g)
			scale(-1/max(norm(g), 1), d)
		}
		// Backtracking (Armijo) on the projected step.
		step, moved := 1.0, false
		var fn float64
		for range 40 {
			copy(xn, x)
			axpy(step, d, xn)
			project(xn)
			fn = f(xn, gn)
			if fn <= fx+1e-4*step*dot(d, g) && fn < fx {
				moved = true
				break
			}
			step /= 2
		}
		if !moved {
			break
		}
		s, y := make([]float64, k+1), make([]float64, k+1)
		for i := range s {
			s[i], y[i] = xn[i]-x[i], gn[i]-g[i]
		}
		if dot(s, y) > 1e-12 {
			if len(mem) == vectorMemory {
				mem = append(mem[:0], mem[1:]...)
			}
			mem = append(mem, pair{s, y})
		}
		copy(x, xn)
		copy(g, gn)
		improved := fx - fn
		fx = fn
		if improved < 1e-15*max(1, math.Abs(fx)) {
			break
		}
	}
	return Calibrator{Method: MethodVector, Temperature: math.Exp(-x[0]), Biases: x[1:]}
}

// vecCase is a case reduced to what the vector loss needs: the positions
// and logs of its non-zero probabilities, and which of them is the
// expected option (-1 when that one is zero and costs the floor
// whatever the parameters).
type vecCase struct {
	pos      []int
	logs     []float64
	expected int
}

func newVecCase(p Prediction) vecCase {
	c := vecCase{expected: -1}
	for i, q := range p.Dist {
		if q > 0 {
			if i == p.Expected {
				c.expected = len(c.pos)
			}
			c.pos = append(c.pos, i)
			c.logs = append(c.logs, math.Log(q))
		}
	}
	return c
}

// vectorLoss is the penalised loss of FitVector at x = (ln beta, b), its
// gradient written to grad. A case whose calibrated expected probability
// is under the floor costs -ln ProbFloor and adds nothing to the
// gradient: the loss is flat there.
func vectorLoss(cases []vecCase, x, grad []float64) float64 {
	clear(grad)
	beta := math.Exp(x[0])
	floor := -math.Log(ProbFloor)
	var loss float64
	var z, p []float64
	for _, c := range cases {
		if c.expected < 0 {
			loss += floor
			continue
		}
		z, p = z[:0], p[:0]
		top := math.Inf(-1)
		for j, l := range c.logs {
			v := beta*l + x[1+c.pos[j]]
			z = append(z, v)
			top = math.Max(top, v)
		}
		var s float64
		for _, v := range z {
			e := math.Exp(v - top)
			p = append(p, e)
			s += e
		}
		nll := -(z[c.expected] - top - math.Log(s))
		if nll >= floor {
			loss += floor
			continue
		}
		loss += nll
		// d nll / d z_j = p_j - [j = expected]; z_j = beta l_j + b_pos(j).
		var dBeta float64
		for j := range p {
			q := p[j] / s
			if j == c.expected {
				q--
			}
			dBeta += q * c.logs[j]
			grad[1+c.pos[j]] += q
		}
		grad[0] += dBeta * beta // the chain rule through beta = e^x0
	}
	for i := 1; i < len(x); i++ {
		loss += VectorL2 / 2 * x[i] * x[i]
		grad[i] += VectorL2 * x[i]
	}
	return loss
}

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func norm(a []float64) float64 { return math.Sqrt(dot(a, a)) }

// axpy adds a*x to y.
func axpy(a float64, x, y []float64) {
	for i := range x {
		y[i] += a * x[i]
	}
}

func scale(a float64, x []float64) {
	for i := range x {
		x[i] *= a
	}
}
