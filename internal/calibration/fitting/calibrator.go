package fitting

import (
	"fmt"
	"math"

	"system1/internal/calibration"
)

// VectorL2 is the weight of the L2 penalty on a vector fit's biases:
// the fit minimises the sum over cases of the NLL plus VectorL2/2 times
// the sum of the squared biases, a standard normal prior on each bias in
// nats. Against hundreds of cases it barely moves a bias the data
// support, and it pins the biases the data cannot tell apart (adding one
// constant to every bias changes no distribution) to the smallest ones.
const VectorL2 = 1.0

// FitMethod fits a calibrator of the given method on preds: Identity for
// MethodNone, FitTemperature's for MethodTemperature, FitLevel's for
// MethodLevel and FitVector's for MethodVector.
func FitMethod(method string, preds []calibration.Prediction) (calibration.Calibrator, error) {
	switch method {
	case calibration.MethodNone:
		if len(preds) == 0 {
			return calibration.Calibrator{}, ErrNoCases
		}
		return calibration.Identity(), nil
	case calibration.MethodTemperature:
		t, err := FitTemperature(preds)
		if err != nil {
			return calibration.Calibrator{}, err
		}
		return calibration.TemperatureCalibrator(t), nil
	case calibration.MethodLevel:
		return FitLevel(preds)
	case calibration.MethodVector:
		return FitVector(preds)
	}
	return calibration.Calibrator{}, fmt.Errorf("method %q is not %s, %s, %s or %s", method, calibration.MethodNone, calibration.MethodTemperature, calibration.MethodLevel, calibration.MethodVector)
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
func FitVector(preds []calibration.Prediction) (calibration.Calibrator, error) {
	t, err := FitTemperature(preds) // checks every case
	if err != nil {
		return calibration.Calibrator{}, err
	}
	return fitVectorFrom(preds, t), nil
}

// fitVectorFrom is FitVector from t, FitTemperature's fit on preds, which
// have passed Check.
func fitVectorFrom(preds []calibration.Prediction, t float64) calibration.Calibrator {
	cases, k := logCases(preds)
	x := make([]float64, k+1) // x[0] = ln beta, x[1:] the biases
	x[0] = -math.Log(t)
	lo, hi := -math.Log(MaxTemperature), -math.Log(MinTemperature)
	project := func(x []float64) {
		x[0] = min(max(x[0], lo), hi)
		for i := 1; i < len(x); i++ {
			x[i] = min(max(x[i], -calibration.MaxBias), calibration.MaxBias)
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
		s, y := diff(xn, x), diff(gn, g)
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
	return calibration.Calibrator{Method: calibration.MethodVector, Temperature: math.Exp(-x[0]), Biases: x[1:]}
}

// vectorLoss is the penalised loss of FitVector at x = (ln beta, b), its
// gradient written to grad. A case whose calibrated expected probability
// is under the floor costs -ln ProbFloor and adds nothing to the
// gradient: the loss is flat there.
func vectorLoss(cases []logCase, x, grad []float64) float64 {
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
