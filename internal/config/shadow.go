package config

import (
	"fmt"
	"math"
	"strings"
)

// Shadow is one shadow rollout: a sampled Share of the live requests for
// Model are asked of Candidate too, off the request path, and both
// answers are logged and compared (GET /v1/shadow, system1 shadow
// --report).
type Shadow struct {
	// Model is the model callers ask (as they name it, or as the nodes
	// report it).
	Model string `yaml:"model"`
	// Candidate is the model tried beside it: another model the nodes
	// serve, or an alias naming one.
	Candidate string `yaml:"candidate"`
	// Share is the probability a request is shadowed, in (0, 1].
	Share float64 `yaml:"share"`
}

// Drift configures the label-free drift entry of the calibration report
// and its metric: per model and question signature, the answers of the
// last Window against those of the Reference window before it.
type Drift struct {
	// Window is the current window (default 1h); Reference the one
	// before it that the current is compared with (default 24h).
	Window    Duration `yaml:"window"`
	Reference Duration `yaml:"reference"`
	// Threshold is the population stability index, less what sampling
	// alone gives, at which a signature alarms (default 0.25).
	Threshold float64 `yaml:"threshold"`
}

func checkShadow(rules []Shadow, cascades []Cascade) []error {
	var errs []error
	seen := map[string]bool{}
	// A cascade is answered stage by stage, each stage's request shadowed
	// as its own model's; a shadow asks its candidate as one model.
	stages := map[string]string{}
	for _, c := range cascades {
		stages[c.Model] = strings.Join(c.Stages, ", ")
	}
	for i, r := range rules {
		at := fmt.Sprintf("shadow[%d]", i)
		_, modelCascade := stages[r.Model]
		_, candCascade := stages[r.Candidate]
		switch {
		case modelCascade:
			errs = append(errs, fmt.Errorf("%s (%s): model %s is a cascade, whose stages are shadowed as their own models: name a stage (%s)", at, r.Model, r.Model, stages[r.Model]))
		case candCascade:
			errs = append(errs, fmt.Errorf("%s (%s): candidate %s is a cascade, which a shadow cannot ask: name a model the nodes serve (its stages: %s)", at, r.Model, r.Candidate, stages[r.Candidate]))
		case r.Model == "":
			errs = append(errs, fmt.Errorf("%s: model is required", at))
		case r.Candidate == "":
			errs = append(errs, fmt.Errorf("%s (%s): candidate is required", at, r.Model))
		case r.Candidate == r.Model:
			errs = append(errs, fmt.Errorf("%s (%s): candidate is the model itself", at, r.Model))
		case !(r.Share > 0 && r.Share <= 1):
			errs = append(errs, fmt.Errorf("%s (%s): share %v is not in (0, 1]", at, r.Model, r.Share))
		case seen[r.Model]:
			errs = append(errs, fmt.Errorf("%s (%s): the model has a shadow already; one candidate at a time", at, r.Model))
		}
		seen[r.Model] = true
	}
	return errs
}

func (d Drift) check() []error {
	// The windows are durations, which parse only when not negative.
	if !(d.Threshold >= 0) || math.IsInf(d.Threshold, 0) {
		return []error{fmt.Errorf("drift.threshold: %v is not a finite number >= 0 (0 is the default, 0.25)", d.Threshold)}
	}
	return nil
}
