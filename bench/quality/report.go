package main

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"system1/internal/calibration"
	"system1/internal/calibration/fitting"
)

// report is the whole benchmark's results.
type report struct {
	Date     time.Time   `json:"date"`
	Load     string      `json:"load_average"`
	CPUs     int         `json:"cpus"`
	Wall     string      `json:"wall"`
	Command  string      `json:"command"`
	Options  options     `json:"options"`
	Binaries []binary    `json:"binaries"`
	Sets     []setResult `json:"sets"`
}

// verdict is how a run fares against the asks on the later part.
type verdict struct {
	// ECE is whether the calibrated ECE is at most ECETarget, and
	// Attainable whether an oracle fit on the later part itself reaches
	// it without costing accuracy (or a score's MAE), which the loop
	// must not spend: where none does, the model, not the loop, is the
	// limit. Costly says that an oracle reaches it only at that cost.
	ECE, Attainable, Costly bool
	// NotWorse is whether the calibrated ECE is at most the raw one.
	NotWorse bool
	// Sets is whether every calibrated prediction set rule covered at
	// least its level less the slack; Missed lists those that did not.
	Sets   bool
	Missed []string
}

func (s setResult) verdict(r run) verdict {
	v := verdict{
		ECE:      r.Calibrated.ECE <= ECETarget,
		NotWorse: r.Calibrated.ECE <= r.Raw.ECE,
		Sets:     true,
	}
	for _, o := range []fitting.Metrics{s.Bounds.OracleTRow, s.Bounds.OracleVecRow} {
		if o.N == 0 || o.ECE > ECETarget {
			continue
		}
		harmless := o.Accuracy >= r.Raw.Accuracy && (o.MAE == nil || r.Raw.MAE == nil || *o.MAE <= *r.Raw.MAE)
		v.Attainable = v.Attainable || harmless
		v.Costly = v.Costly || !harmless
	}
	for _, c := range r.Calibrated.Sets {
		if c.Err != "" || c.Later.Coverage < c.Coverage-s.slack(c.Coverage) {
			v.Sets = false
			v.Missed = append(v.Missed, fmt.Sprintf("%s %.2f", strings.ToUpper(c.Method), c.Coverage))
		}
	}
	return v
}

// slack is the set's slack at coverage c.
func (s setResult) slack(c float64) float64 {
	if i := slices.Index(coverages, c); i >= 0 && i < len(s.Slack) {
		return s.Slack[i]
	}
	return 0
}

// markdown writes the report: a summary, then a table per set.
func (r report) markdown() string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	o := r.Options
	p("Run %s UTC, load average %s on %d CPUs, %s in all.\n\n", r.Date.Format("2006-01-02 15:04"), r.Load, r.CPUs, r.Wall)
	p("    %s\n\n", r.Command)
	var bins []string
	wd, _ := os.Getwd()
	for _, x := range r.Binaries {
		path := x.Path
		if rel, err := filepath.Rel(wd, path); err == nil && !strings.HasPrefix(rel, "..") {
			path = rel
		}
		bins = append(bins, fmt.Sprintf("`%s` (%s)", x.Label, path))
	}
	split := fmt.Sprintf("dealt into %d folds (seed %d): each fold is the later part of one loop, on a fresh server, whose first part is the other folds", o.Folds, o.Seed)
	if o.Folds == 1 {
		split = fmt.Sprintf("split %g first, the rest later (seed %d), in one loop", o.First, o.Seed)
	}
	p("Binaries: %s. Simulated model served at temperature %g with %g nats toward the first option. Of each set's cases %g are traffic "+
		"(the rest trains the model), %s. Server: calibration apply, refit_every %s, min_outcomes %s, "+
		"holdout %s, target_error %g, rounding %d; the first part sent one request at a time, the later part %d at a time.\n\n",
		strings.Join(bins, ", "), o.Model.Temperature, o.Model.FirstBias, o.Traffic, split, o.RefitEvery,
		orDefault(o.MinOutcomes, "the first part's size"), orDefault(o.Holdout, "the default (0.2)"), o.TargetError, o.Rounding, o.Concurrency)
	if o.Limit > 0 {
		p("Only the first %d cases of each file were read (-limit).\n\n", o.Limit)
	}

	r.servedTable(&b)
	p("| set | binary | later n | accuracy raw → calibrated | raw ECE | calibrated ECE | oracle ECE (T / vector) | ECE floor of n (mean / p95) | ECE ≤ %.2f | ≤ raw | sets ≥ level − slack |\n", ECETarget)
	p("|---|---|--:|--:|--:|--:|--:|--:|:-:|:-:|:-:|\n")
	for _, s := range r.Sets {
		for _, run := range s.Runs {
			v := s.verdict(run)
			ece := yes(v.ECE)
			switch {
			case !v.ECE && !v.Attainable && v.Costly:
				ece = "no (model: only an oracle that costs accuracy or MAE reaches " + fmt.Sprintf("%.2f", ECETarget) + ")"
			case !v.ECE && !v.Attainable:
				ece = "no (model: oracle > " + fmt.Sprintf("%.2f", ECETarget) + ")"
			}
			sets := yes(v.Sets)
			if !v.Sets {
				sets = "no: " + strings.Join(v.Missed, ", ")
			}
			p("| %s | %s | %d | %.4f → %.4f | %.4f | %.4f | %.4f / %.4f | %.4f / %.4f | %s | %s | %s |\n", s.Set, run.Label, s.measured(),
				run.Raw.Accuracy, run.Calibrated.Accuracy, run.Raw.ECE, run.Calibrated.ECE,
				s.Bounds.OracleTRow.ECE, s.Bounds.OracleVecRow.ECE, s.Bounds.FloorMean, s.Bounds.FloorP95, ece, yes(v.NotWorse), sets)
		}
	}
	p("\n")
	for _, s := range r.Sets {
		s.markdown(&b, r)
	}
	return b.String()
}

func (s setResult) markdown(b *strings.Builder, r report) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("### %s\n\n", s.Set)
	p("`%s`: %s over %d options (bucket %s); %d cases: %d train the simulated model (%.1f s); loops of %s first and %s later answers, %d measured.\n\n",
		s.File, s.Kind, s.Options, s.Bucket, s.Cases, s.Train, s.TrainSeconds, ints(s.First), ints(s.Later), s.measured())
	p("| later part | accuracy | ECE | NLL | Brier | gate | sel. acc. @gate | cov. @gate |")
	for _, m := range []string{"LAC", "APS"} {
		for _, c := range coverages {
			p(" %s %.2f |", m, c)
		}
	}
	p("\n|---|--:|--:|--:|--:|--:|--:|--:|%s\n", strings.Repeat("--:|", 2*len(coverages)))
	many := len(s.Runs) > 1
	for _, run := range s.Runs {
		for _, x := range []struct {
			name string
			row  row
		}{{"raw", run.Raw}, {"calibrated", run.Calibrated}} {
			name := x.name
			if many {
				name += " · " + run.Label
			}
			p("| %s | %.4f | %.4f | %.4f | %.4f | %s | %s | %s |", name, x.row.Accuracy, x.row.ECE, x.row.NLL, x.row.Brier,
				gate(x.row), accuracy(x.row.Selective.Accuracy), coverageAt(x.row))
			for _, c := range x.row.Sets {
				p(" %s |", s.setCell(c))
			}
			p("\n")
		}
	}
	blank := strings.Repeat(" |", 3+2*len(coverages))
	bd := s.Bounds
	p("| oracle T=%.3f (later part, in-sample) | %.4f | %.4f | %.4f | %.4f |%s\n", bd.OracleT, bd.OracleTRow.Accuracy, bd.OracleTRow.ECE, bd.OracleTRow.NLL, bd.OracleTRow.Brier, blank)
	p("| oracle vector T=%.3f, %d biases (later part, in-sample) | %.4f | %.4f | %.4f | %.4f |%s\n\n", bd.OracleVector.Temperature, len(bd.OracleVector.Biases), bd.OracleVecRow.Accuracy, bd.OracleVecRow.ECE, bd.OracleVecRow.NLL, bd.OracleVecRow.Brier, blank)
	p("Set cells: coverage / mean size of split conformal sets fitted on each loop's first part and measured on its later part, pooled: "+
		"fitted here on the raw first part, except in the calibrated rows the server's own LAC rules from its fits file where it has them (marked ˢ), "+
		"applied as the server applies them (to the answer before the fit's calibrator, under the rule's own calibrator where it carries one); "+
		"✗ marks coverage under the level less the slack of a threshold on the whole first part (under it with probability at most %g for exchangeable answers; "+
		"a server rule that rests on fewer cases, n in its fits file, has a larger one), which here is",
		slackLevel)
	var slack []string
	for i, c := range coverages {
		slack = append(slack, fmt.Sprintf(" %.3f at %.2f", s.Slack[i], c))
	}
	p("%s.", strings.Join(slack, ","))
	p(" Best ECE any temperature reaches on the later part: %.4f (T=%.2f).\n\n", bd.BestECE, bd.BestECET)
	p("Gate columns: each loop's gate at target error %g (raw: fitting.SuggestGate on its raw first part; calibrated: GET /v1/calibration after the refit), "+
		"the later answers at or above it pooled; the gate cell lists the loops' gates.\n\n", r.Options.TargetError)
	for _, run := range s.Runs {
		for i, l := range run.Folds {
			p("- `%s` loop %d: %s\n", run.Label, i+1, l.note())
		}
		p("- `%s`: %s\n", run.Label, run.note(s, r))
	}
	p("\n")
}

// ints writes n as "a, b and c" ("a" alone for one).
func ints(n []int) string {
	s := make([]string, len(n))
	for i, x := range n {
		s[i] = fmt.Sprint(x)
	}
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// note says what a loop's server adopted.
func (l loop) note() string {
	var b strings.Builder
	if l.Fit == nil {
		fmt.Fprintf(&b, "no fit adopted (%s, after %.1f s); its calibrated answers are raw.", l.Refused, l.RefitSeconds)
	} else {
		f := l.Fit
		if f.Calibrator().Method == calibration.MethodNone {
			fmt.Fprintf(&b, "adopted no calibrator (none did better than the raw answers out of fold) over %d outcomes, fits revision %s, reported %.1f s after the last outcome",
				f.N, l.Revision, l.RefitSeconds)
		} else {
			fmt.Fprintf(&b, "adopted %s %s fitted on %d outcomes, fits revision %s, reported %.1f s after the last outcome",
				cmp.Or(f.Method, calibration.MethodTemperature), f.Calibrator(), f.N, l.Revision, l.RefitSeconds)
		}
		if h := f.Holdout; h != nil {
			fmt.Fprintf(&b, "; held-out NLL %.4f → %.4f over %d", h.NLLBefore, h.NLLAfter, h.N)
		}
		if f.ConfidenceMap != nil {
			b.WriteString("; with a confidence map")
		}
		if len(f.Sets) > 0 {
			fmt.Fprintf(&b, "; with %d prediction set rules", len(f.Sets))
		}
		b.WriteString(".")
	}
	if l.Dir != "" {
		fmt.Fprintf(&b, " Kept in %s.", l.Dir)
	}
	return b.String()
}

// note says how the later answers were served.
func (run run) note(s setResult, r report) string {
	var b strings.Builder
	if run.Uncalibrated > 0 || run.Stray > 0 {
		fmt.Fprintf(&b, "of %d later answers, %d were not marked calibrated and %d were calibrated by another fits revision than their loop's.", s.measured(), run.Uncalibrated, run.Stray)
	} else {
		b.WriteString("every later answer was calibrated by its loop's adopted fits revision.")
	}
	if run.ServerSets != nil {
		var at []string
		for _, ss := range run.ServerSets {
			at = append(at, fmt.Sprintf(" at %.2f coverage %.3f, mean size %.2f over %d of %d answers", ss.Level, ss.Sets.Coverage, ss.Sets.MeanSize, ss.Sets.N, ss.Asked))
		}
		fmt.Fprintf(&b, " Server-side sets (%s), the later part asked at each level:%s.", SetsHeader, strings.Join(at, ";"))
		if bl := run.Baseline; bl != nil {
			fmt.Fprintf(&b, " A raw-probability threshold covering as many of the answers with a set at %.2f: coverage %.3f, mean size %.2f.", r.Options.Coverage, bl.Coverage, bl.MeanSize)
		}
	} else {
		fmt.Fprintf(&b, " No server-side sets (%s absent, asked with %s: %g): the set columns are computed here.", SetsHeader, CoverageHeader, r.Options.Coverage)
	}
	return b.String()
}

// setCell is a prediction set rule's coverage and mean size, ✗ when it
// covered less than its level less the slack.
func (s setResult) setCell(c conformal) string {
	if c.Err != "" {
		return "–"
	}
	mark := ""
	if c.Later.Coverage < c.Coverage-s.slack(c.Coverage) {
		mark = " ✗"
	}
	if c.Server > 0 {
		mark = "ˢ" + mark
	}
	return fmt.Sprintf("%.3f / %.2f%s", c.Later.Coverage, c.Later.MeanSize, mark)
}

func gate(r row) string {
	s := make([]string, len(r.Gates))
	for i, g := range r.Gates {
		s[i] = "–"
		if g != nil {
			s[i] = fmt.Sprintf("%.3f", *g)
		}
	}
	return strings.Join(s, ", ")
}

func accuracy(a *float64) string {
	if a == nil {
		return "–"
	}
	return fmt.Sprintf("%.4f", *a)
}

func coverageAt(r row) string {
	if !slices.ContainsFunc(r.Gates, func(g *float64) bool { return g != nil }) {
		return "–"
	}
	return fmt.Sprintf("%.4f", r.Selective.Coverage)
}

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}

func orDefault[T int | float64](x T, def string) string {
	if x == 0 {
		return def
	}
	return fmt.Sprint(x)
}

// The tolerances of issue 30's table: a set's served ECE within ECEMatch
// of the adopted calibrator's out-of-fold ECE, and the server's sets'
// coverage within CoverageTolerance of each level (absolute).
const (
	ECEMatch          = 0.005
	CoverageTolerance = 0.02
)

// servedTable writes issue 30's table ("served as fitted"): per set and
// binary, each loop's served ECE against its adopted fit's out-of-fold
// ECE, whether the served answers are the fit applied offline, accuracy
// served against raw, the server's sets at -coverage against a raw
// threshold at the same coverage, and the server's sets' coverage at
// each level, each with its mark.
func (r report) servedTable(b *strings.Builder) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	c := r.Options.Coverage
	var lv []string
	for _, x := range levels(r.Options) {
		lv = append(lv, fmt.Sprintf("%.2f", x))
	}
	p("| set | binary | served ECE (loops) | out-of-fold ECE (loops) | ± %.3f | served = fit offline | accuracy raw → served | ≥ raw | sets at %.2f: size (coverage) | raw threshold at that coverage: size (coverage) | ≤ raw | set coverage at %s | ± %.2f |\n",
		ECEMatch, c, strings.Join(lv, " / "), CoverageTolerance)
	p("|---|---|--:|--:|:-:|:-:|--:|:-:|--:|--:|:-:|--:|:-:|\n")
	for _, s := range r.Sets {
		for _, run := range s.Runs {
			var served, oof []string
			match, offline := true, 0.0
			for _, l := range run.Folds {
				served = append(served, fmt.Sprintf("%.4f", l.ServedECE))
				offline = max(offline, l.Offline)
				if l.OutOfFoldECE == nil {
					oof, match = append(oof, "–"), false
					continue
				}
				oof = append(oof, fmt.Sprintf("%.4f", *l.OutOfFoldECE))
				match = match && math.Abs(l.ServedECE-*l.OutOfFoldECE) <= ECEMatch
			}
			same := "–"
			if slices.ContainsFunc(run.Folds, func(l loop) bool { return l.Fit != nil }) {
				same = fmt.Sprintf("%s (%.0e)", yes(offline <= 1e-9), offline)
			}
			setCell, baseCell, smaller, covCell, covered := "–", "–", "–", "–", "–"
			if run.ServerSets != nil {
				var covs []string
				ok := true
				for _, ss := range run.ServerSets {
					covs = append(covs, fmt.Sprintf("%.3f", ss.Sets.Coverage))
					ok = ok && ss.Sets.N == ss.Asked && math.Abs(ss.Sets.Coverage-ss.Level) <= CoverageTolerance
					if ss.Level == c {
						setCell = fmt.Sprintf("%.3f (%.3f)", ss.Sets.MeanSize, ss.Sets.Coverage)
						if ss.Sets.N < ss.Asked {
							setCell += fmt.Sprintf(", %d of %d", ss.Sets.N, ss.Asked)
						}
						if bl := run.Baseline; bl != nil {
							baseCell = fmt.Sprintf("%.3f (%.3f)", bl.MeanSize, bl.Coverage)
							smaller = yes(ss.Sets.MeanSize <= bl.MeanSize)
						}
					}
				}
				covCell, covered = strings.Join(covs, " / "), yes(ok)
			}
			p("| %s | %s | %s | %s | %s | %s | %.4f → %.4f | %s | %s | %s | %s | %s | %s |\n", s.Set, run.Label, strings.Join(served, ", "), strings.Join(oof, ", "), yes(match), same,
				run.Raw.Accuracy, run.Calibrated.Accuracy, yes(run.Calibrated.Accuracy >= run.Raw.Accuracy), setCell, baseCell, smaller, covCell, covered)
		}
	}
	p("\nServed ECE: each loop's later part as the server answered it; out-of-fold ECE: the fit each loop adopted, as its refit's selection scored it on the first part "+
		"(each answer calibrated by the method fitted on the other folds; the fits file's holdout.ece_after); ± %.3f: every loop's two within it. Served = fit offline: the adopted fit "+
		"applied here to each later answer's raw distribution gives what the server answered (the largest difference in brackets). Sets: the later part asked once per level "+
		"(%s), read from %s (keys or mask); a raw threshold is one threshold on the raw probabilities of those answers, chosen on them (in sample) to cover as many as the server's sets did "+
		"at %.2f. ± %.2f: every level's coverage within it, and every answer given a set.\n\n", ECEMatch, CoverageHeader, SetsHeader, c, CoverageTolerance)
}
