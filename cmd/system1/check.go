package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"system1/internal/bench"
	"system1/internal/cases"
)

// cmdCheck asks a locked case set of the configuration's nodes and holds
// the answers against a baseline: a drift gate for CI (docs/check.md).
func cmdCheck(ctx context.Context, args []string, e env) error {
	set := flags("check", e, `usage: system1 check --config FILE --model ID --cases FILE --baseline FILE [--write-baseline] [--junit FILE] [flags]

Asks every case of the case files of the configuration's nodes and holds
the answers against the baseline: failed requests, accuracy, ECE, the
coverage of prediction sets fitted on the baseline, the flip rate (the
share of cases whose top answer changed) and the build that answered
(its fingerprint) against the baseline's. Prints a table on stdout.
With --write-baseline it writes the baseline instead.

exit status: 0 held (or baseline written), 1 drifted or failed, 2 usage.

`)
	cfgPath := set.String("config", "", "configuration file whose nodes are asked "+configDefault)
	model := set.String("model", "", "model to ask (required)")
	var files []string
	set.Func("cases", "case file (JSON Lines, bench's format); may be given more than once (required)", func(v string) error {
		files = append(files, v)
		return nil
	})
	baseline := set.String("baseline", "", "baseline file to hold the answers against, or to write with --write-baseline (required)")
	write := set.Bool("write-baseline", false, "write this run's answers as the baseline instead of comparing")
	junit := set.String("junit", "", "also write the checks here as JUnit XML")
	d := bench.DefaultThresholds
	t := d
	set.Float64Var(&t.AccuracyDrop, "max-accuracy-drop", d.AccuracyDrop, "the most accuracy may fall below the baseline's")
	set.Float64Var(&t.ECERise, "max-ece-rise", d.ECERise, "the most ECE may rise above the baseline's")
	set.Float64Var(&t.CoverageDrop, "max-coverage-drop", d.CoverageDrop, "the most the baseline's prediction sets' coverage may fall")
	set.Float64Var(&t.FlipRate, "max-flip-rate", d.FlipRate, "the largest share of cases whose top answer may differ from the baseline's")
	set.BoolVar(&t.AllowBuild, "allow-build-change", false, "hold even when another build than the baseline's answered")
	concurrency := set.Int("concurrency", 4, "requests in flight at once")
	timeout := set.Duration("timeout", 30*time.Second, "bound on one request")
	if err := parse(set, args); err != nil {
		return err
	}
	switch {
	case set.NArg() > 0:
		return e.usageError("check", fmt.Sprintf("unexpected argument %q: case files go after --cases", set.Arg(0)))
	case *model == "":
		return e.usageError("check", "--model is required")
	case len(files) == 0:
		return e.usageError("check", "--cases is required")
	case *baseline == "":
		return e.usageError("check", "--baseline is required")
	case *concurrency < 1:
		return e.usageError("check", "--concurrency must be at least 1")
	case *timeout <= 0:
		return e.usageError("check", fmt.Sprintf("--timeout %v is not a bound: give a positive duration, such as 30s", *timeout))
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"--max-accuracy-drop", t.AccuracyDrop}, {"--max-ece-rise", t.ECERise}, {"--max-coverage-drop", t.CoverageDrop}, {"--max-flip-rate", t.FlipRate}} {
		if !(f.v >= 0 && f.v <= 1) {
			return e.usageError("check", fmt.Sprintf("%s %v is not in [0, 1]", f.name, f.v))
		}
	}
	var base *bench.Baseline
	if !*write {
		data, err := os.ReadFile(*baseline)
		if errors.Is(err, fs.ErrNotExist) {
			return e.usageError("check", fmt.Sprintf("no baseline at %s: write one first with --write-baseline", *baseline))
		}
		if err != nil {
			return err
		}
		if base, err = bench.LoadBaseline(data); err != nil {
			return fmt.Errorf("baseline %s: %w", *baseline, err)
		}
		// Another model's answers are not this one's past: held against
		// them, every difference would read as drift.
		if base.Model != "" && base.Model != *model {
			return e.usageError("check", fmt.Sprintf("the baseline is of model %s, not %s (baseline %s): write one for %s with --write-baseline", base.Model, *model, *baseline, *model))
		}
	}
	cs, err := cases.ReadFiles(0, files...)
	if err != nil {
		return err
	}
	cfg, path, err := measuredPath(ctx, *cfgPath, e, logger(e))
	if err != nil {
		return err
	}
	if _, err := path.Admit(ctx, *model); err != nil {
		return fmt.Errorf("no node of %s serves model %q", cfg.Path, *model)
	}
	run := bench.Run{Asker: bench.Fleet{Path: path}, Model: *model, Concurrency: *concurrency, Timeout: *timeout}
	records, wall := run.Do(ctx, cs)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted (%w)", err)
	}
	now := time.Now().UTC().Format(time.RFC3339)
	if *write {
		b, err := bench.NewBaseline(*model, now, records)
		if err != nil {
			return err
		}
		data, err := json.MarshalIndent(b, "", "  ")
		if err != nil {
			return err
		}
		if err := writeData(*baseline, append(data, '\n')); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "check: wrote the baseline of %d cases of model %s (build %s) to %s in %.1f s\n",
			len(records), *model, cmp.Or(strings.Join(b.Builds, ", "), "(none)"), *baseline, wall.Seconds())
		return nil
	}
	checks, err := base.Compare(records, t)
	if errors.Is(err, bench.ErrCaseSet) {
		return e.usageError("check", fmt.Sprintf("%v (baseline %s)", err, *baseline))
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "check: %d cases of model %s against the baseline of %s (%s)\n\n", len(records), *model, base.Created, *baseline)
	if err := bench.WriteChecks(e.stdout, checks); err != nil {
		return err
	}
	if *junit != "" {
		if err := writeFile(*junit, func(w io.Writer) error { return bench.WriteJUnit(w, "system1 check "+*model, checks) }); err != nil {
			return err
		}
	}
	if !bench.Held(checks) {
		fmt.Fprintln(e.stderr, "system1 check: drifted from the baseline")
		return errReported
	}
	return nil
}
