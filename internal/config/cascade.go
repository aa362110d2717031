package config

import (
	"fmt"
	"slices"
)

// Cascade is a model made of others (docs/cascades.md): each question
// is asked of the first stage, and of the next only when the stage's
// calibrated confidence does not clear the threshold certified for it at
// TargetError.
type Cascade struct {
	// Model is the name callers ask for; it names no served model or
	// alias.
	Model string `yaml:"model"`
	// Stages are the models asked in turn, cheapest first: models the
	// nodes serve, or aliases naming them; at least two, none repeated.
	Stages []string `yaml:"stages"`
	// TargetError is the error the answers each stage keeps stay under,
	// in (0, 1).
	TargetError float64 `yaml:"target_error"`
	// Uncertified is what a stage without a certified threshold does:
	// UncertifiedEscalate (the default) asks the next stage, UncertifiedKeep
	// keeps the stage's answer.
	Uncertified string `yaml:"uncertified"`
}

// What a stage without a certified threshold does.
const (
	UncertifiedEscalate = "escalate"
	UncertifiedKeep     = "keep"
)

// checkCascades checks each cascade on its own and against the names the
// configuration serves otherwise: a cascade's name is a model id, so it
// must not shadow an alias or a node's listed model, nor another cascade;
// a stage is never a cascade.
func (c *Config) checkCascades() []error {
	var errs []error
	seen := map[string]bool{}
	for _, cc := range c.Cascades {
		seen[cc.Model] = true
	}
	named := map[string]bool{}
	for i, cc := range c.Cascades {
		at := fmt.Sprintf("cascades[%d]", i)
		bad := func(format string, a ...any) {
			errs = append(errs, fmt.Errorf("%s (%s): "+format, append([]any{at, cc.Model}, a...)...))
		}
		if cc.Model == "" {
			errs = append(errs, fmt.Errorf("%s: model is required", at))
			continue
		}
		if named[cc.Model] {
			bad("model names another cascade already")
		}
		named[cc.Model] = true
		if _, ok := c.Aliases[cc.Model]; ok {
			bad("model is an alias's name already")
		}
		for _, n := range c.Nodes {
			if slices.Contains(n.Models, cc.Model) {
				bad("model is served by node %s already", n.Name)
			}
		}
		if len(cc.Stages) < 2 {
			bad("stages: a cascade needs at least two, such as `stages: [small, large]`")
		}
		// A stage is asked as the model it names: an alias's target.
		served := func(s string) string {
			if to, ok := c.Aliases[s]; ok {
				return to
			}
			return s
		}
		for j, s := range cc.Stages {
			k := slices.IndexFunc(cc.Stages[:j], func(p string) bool { return served(p) == served(s) })
			switch {
			case s == "":
				bad("stages[%d] is empty", j)
			case seen[s]:
				bad("stages[%d]: %s is a cascade; a stage is a served model", j, s)
			case seen[served(s)]:
				bad("stages[%d]: %s is a cascade (an alias of %s); a stage is a served model", j, s, served(s))
			case k >= 0 && cc.Stages[k] == s:
				bad("stages[%d]: %s is asked already", j, s)
			case k >= 0:
				bad("stages[%d]: %s is asked already (as %s)", j, s, cc.Stages[k])
			}
		}
		if !(cc.TargetError > 0 && cc.TargetError < 1) {
			bad("target_error: %v is not in (0, 1)", cc.TargetError)
		}
		if cc.Uncertified != "" && cc.Uncertified != UncertifiedEscalate && cc.Uncertified != UncertifiedKeep {
			bad("uncertified: %q is not %s or %s", cc.Uncertified, UncertifiedEscalate, UncertifiedKeep)
		}
	}
	return errs
}
