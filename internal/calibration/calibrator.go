package calibration

import (
	"fmt"
	"math"
	"slices"
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

// MaxTemperature bounds a fit's temperature: fifty times what a fit
// ever finds (fitting.MaxTemperature), but small enough that tempering
// keeps probabilities that differ distinct. Beyond some 1e15 the
// tempered log-probabilities of any two options round to the same
// number, the distribution is exactly uniform, and the answer moves to
// the first option, where Temper promises that the argmax does not move.
const MaxTemperature = 1000

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

// Apply calibrates d: for MethodTemperature, p_i proportional to
// p_i^(1/T) (Distribution.Temper); for MethodVector, p_i proportional to
// exp(ln p_i / T + b_i). A zero stays zero, as with a temperature: a
// label the engine did not report gets no probability from a bias. A
// calibrator that fails Check, or a d that is not a distribution over
// its own length, returns d unchanged, as fitting.Temper does with a
// temperature that is not positive and finite.
func (c Calibrator) Apply(d decision.Distribution) decision.Distribution {
	switch {
	case c.Check() != nil:
		return d
	case c.Map != nil:
		return c.Map.Apply(c.Kind, c.Base().Apply(d))
	case c.Method == MethodTemperature:
		return d.Temper(c.Temperature)
	case c.Method == MethodNone || d.Check(len(d)) != nil:
		return d
	case c.Method == MethodLevel:
		return applyLevel(d, c.Temperature)
	}
	z := make([]float64, len(d))
	for i, p := range d {
		z[i] = math.Log(p) / c.Temperature // -Inf where p is 0
		if i < len(c.Biases) {
			z[i] += c.Biases[i]
		}
	}
	if out := softmax(z); out != nil {
		return out
	}
	return d
}

// softmax is exp(z_i) normalised to sum to 1, 0 where z_i is -Inf; nil
// when every z_i is.
func softmax(z []float64) decision.Distribution {
	top := math.Inf(-1)
	for _, v := range z {
		top = math.Max(top, v)
	}
	if math.IsInf(top, -1) {
		return nil
	}
	out := make(decision.Distribution, len(z))
	var sum float64
	for i, v := range z {
		if !math.IsInf(v, -1) {
			out[i] = math.Exp(v - top)
			sum += out[i]
		}
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}

// Check reports what is wrong with c: an unknown method, a temperature
// that is not a positive number at most MaxTemperature (exactly 1 for
// MethodNone),
// biases on another method than MethodVector, none or more than 255 on
// it, one that is not finite or beyond MaxBias, or a map that fails
// ConfidenceMap.Check.
func (c Calibrator) Check() error {
	if c.Map != nil {
		if err := c.Map.Check(); err != nil {
			return fmt.Errorf("confidence map: %w", err)
		}
	}
	if !slices.Contains(Methods(), c.Method) {
		return fmt.Errorf("method %q is not %s, %s, %s or %s", c.Method, MethodNone, MethodTemperature, MethodLevel, MethodVector)
	}
	if !(c.Temperature > 0 && c.Temperature <= MaxTemperature) {
		return fmt.Errorf("temperature %v is not a positive finite number up to %d", c.Temperature, MaxTemperature)
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
