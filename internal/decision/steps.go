package decision

import (
	"fmt"
	"strconv"
)

// Step is one transformation of a question's distribution after the
// engine read it, in the order applied: its name (StepDebias, StepPrior,
// StepTemperature), its version (the method and its parameters, such as
// "permute/4"), and the distribution it left. A step is applied only by
// being named, so every face, and the decision log, can say what was done
// to the engine's reading.
type Step struct {
	Name    string       `json:"name"`
	Version string       `json:"version"`
	Dist    Distribution `json:"dist"`
}

// The steps' names, in the order they are applied.
const (
	// StepDebias: the options asked in several orders and the readings
	// averaged (DebiasVersion).
	StepDebias = "debias"
	// StepPrior: a label prior divided out (BatchVersion,
	// ContentFreeVersion).
	StepPrior = "prior"
	// StepTemperature: a fit's calibrator applied (CalibrationVersion):
	// a temperature, with a bias per position where the fit has them;
	// the distribution before it is what a refit fits on.
	StepTemperature = "temperature"
)

// DebiasVersion names a permutation over orders shifts: "permute/4".
func DebiasVersion(orders int) string { return DebiasPermute + "/" + strconv.Itoa(orders) }

// BatchVersion names a batch prior estimated over seen answers with its
// window: "batch/n=40/window=256".
func BatchVersion(seen, window int) string {
	return fmt.Sprintf("%s/n=%d/window=%d", PriorBatch, seen, window)
}

// ContentFreeVersion names a content-free prior: the reading over the
// empty state.
const ContentFreeVersion = PriorContentFree + "/empty_state"

// CalibrationVersion names the fit that calibrated a distribution: the
// fits file's format version and the calibrator as it writes itself
// ("T=1.5", a temperature with a bias per position
// "T=1.85/b=+0.31,-0.12,0", or "none" for a fit that chose none), the
// fit's date when it has one, and the fits' revision when they have one:
// "v1/T=1.5/2026-01-01@20260101T000000Z-ab12cd34".
func CalibrationVersion(fitsVersion int, calibrator, date, revision string) string {
	v := fmt.Sprintf("v%d/%s", fitsVersion, calibrator)
	if date != "" {
		v += "/" + date
	}
	if revision != "" {
		v += "@" + revision
	}
	return v
}

// Uncalibrated is the distribution before the first StepTemperature of
// steps applied to engine: what a temperature fit is made on, from the
// decision log or a bench run alike. It is engine when no step came
// before the calibrator.
func Uncalibrated(engine Distribution, steps []Step) Distribution {
	prev := engine
	for _, s := range steps {
		if s.Name == StepTemperature {
			return prev
		}
		prev = s.Dist
	}
	return prev
}

// StepNames writes steps as "name=version", in order.
func StepNames(steps []Step) []string {
	out := make([]string, len(steps))
	for i, st := range steps {
		out[i] = st.Name + "=" + st.Version
	}
	return out
}
