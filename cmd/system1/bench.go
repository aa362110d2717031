package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"system1/internal/atomicfile"
	"system1/internal/bench"
	"system1/internal/calibration"
	"system1/internal/cases"
	"system1/internal/gateway"
	"system1/internal/outcomes"
	"system1/internal/systemone"
)

// target is what a bench asks, as the command line says: an endpoint, or
// a provider of the configuration's chain.
type target struct {
	endpoint, model, keyEnv string
	config, provider        string
	concurrency             int
	timeout                 time.Duration
	limit                   int
}

// targetFlags registers the flags that choose what to ask and how.
func targetFlags(fs *flag.FlagSet) *target {
	t := &target{}
	fs.StringVar(&t.endpoint, "endpoint", "", "System One endpoint to ask: a base URL (/v1/systemone is added) or the full route")
	fs.StringVar(&t.model, "model", "", "model id to send (required with --endpoint; default the provider's model with --provider)")
	fs.StringVar(&t.keyEnv, "key-env", "", "environment variable holding the endpoint's bearer key (none sent without it)")
	fs.StringVar(&t.config, "config", "", "configuration file whose providers --provider names "+configDefault)
	fs.StringVar(&t.provider, "provider", "", "ask this provider of the configuration's chain; with --endpoint, label the cases as this provider's (fits are found and made by it)")
	fs.IntVar(&t.concurrency, "concurrency", 4, "requests in flight at once")
	fs.DurationVar(&t.timeout, "timeout", 30*time.Second, "bound on one request")
	fs.IntVar(&t.limit, "limit", 0, "use only the first N cases of each case file (0: all)")
	return t
}

// asker builds what the run asks and describes it for the report.
func (t *target) asker(ctx context.Context, e env, rep *bench.Report) (bench.Asker, string, error) {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: max(t.concurrency, 2)}}
	if t.endpoint != "" {
		if t.model == "" {
			return nil, "", errors.New("--model is required with --endpoint")
		}
		key, err := bearerKey(e, t.keyEnv, false)
		if err != nil {
			return nil, "", err
		}
		rep.Endpoint, rep.Model, rep.Provider = t.endpoint, t.model, t.provider
		return bench.Endpoint{Client: &systemone.Client{BaseURL: t.endpoint, Key: key, HTTP: hc}}, t.model, nil
	}
	cfg, path, err := measuredPath(ctx, t.config, e, nil)
	if err != nil {
		return nil, "", err
	}
	// The chain's links are built where every face builds them: by the
	// gateway, over the fleet of the configuration's nodes.
	g := gateway.New(gateway.Options{Config: cfg, ConfigPath: cfg.Path, Answer: path, Log: logger(e)})
	l, ok := g.Link(t.provider)
	if !ok {
		return nil, "", fmt.Errorf("no provider %q in %s (providers: %s)", t.provider, cfg.Path, strings.Join(g.Chain(), ", "))
	}
	model := cmp.Or(t.model, l.Model)
	rep.Provider, rep.Config, rep.Model, rep.Endpoint = l.Name, cfg.Path, model, l.Endpoint
	if len(l.Nodes) > 0 {
		path = path.Only(l.Nodes)
	}
	if _, err := path.Admit(ctx, model); err != nil {
		return nil, "", fmt.Errorf("provider %s: no node of %s serves model %q", l.Name, cfg.Path, model)
	}
	return bench.Fleet{Path: path}, model, nil
}

// check says what is wrong with the command line's choice of target.
func (t *target) check(files []string) error {
	switch {
	case t.endpoint == "" && t.provider == "":
		return errors.New("say what to ask: --endpoint URL --model ID, or --provider NAME of the configuration")
	case t.endpoint != "" && t.config != "":
		return errors.New("--endpoint and --config are alternatives")
	case t.endpoint != "" && checkBaseURL("--endpoint", t.endpoint) != nil:
		return checkBaseURL("--endpoint", t.endpoint)
	case t.concurrency < 1:
		return errors.New("--concurrency must be at least 1")
	case t.timeout <= 0:
		return fmt.Errorf("--timeout %v is not a bound: give a positive duration, such as 30s", t.timeout)
	case t.limit < 0:
		return errors.New("--limit must not be negative")
	case len(files) == 0:
		return errors.New("no case files given")
	}
	return nil
}

// runBench reads the case files and asks every case, with a progress bar
// on stderr when it is a terminal. The records are labelled with the
// provider, if any: the one asked, or with --endpoint the one the endpoint
// stands for.
func runBench(ctx context.Context, e env, t *target, files []string) (*bench.Report, error) {
	cs, err := cases.ReadFiles(t.limit, files...)
	if err != nil {
		return nil, err
	}
	rep := &bench.Report{Version: bench.ReportVersion, Files: files, Concurrency: t.concurrency}
	asker, model, err := t.asker(ctx, e, rep)
	if err != nil {
		return nil, err
	}
	run := bench.Run{Asker: asker, Model: model, Provider: rep.Provider, Concurrency: t.concurrency, Timeout: t.timeout}
	var bar *progressBar
	if isTerminal(e.stderr) {
		bar = &progressBar{w: e.stderr}
		run.Progress = bar.update
	}
	records, wall := run.Do(ctx, cs)
	if bar != nil {
		bar.finish()
	}
	rep.Cases = records
	rep.WallS = wall.Seconds()
	rep.Created = time.Now().UTC().Format(time.RFC3339)
	return rep, nil
}

func cmdBench(ctx context.Context, args []string, e env) error {
	fs := flags("bench", e, `usage: system1 bench --endpoint URL --model ID [--key-env VAR] [flags] CASEFILE...
       system1 bench --provider NAME [--config FILE] [flags] CASEFILE...

Asks every case of the case files (JSON Lines: id, set, state, questions,
expected) and reports per set and overall: accuracy, majority-class floor,
ECE, Brier, NLL, selective accuracy and coverage at confidence 0.7 and 0.9,
latency and throughput; a Markdown table on stdout. Failed requests are
counted and listed.

`)
	t := targetFlags(fs)
	fitsPath := fs.String("fits", "", "fits file: report calibrated numbers beside the raw ones")
	out := fs.String("out", "", "write the JSON report here (it keeps every case's distribution)")
	plot := fs.String("plot", "", "write a reliability diagram here (PNG)")
	preds := fs.String("save-predictions", "", "also write every case's distribution here, as JSON Lines")
	if err := parse(fs, args); err != nil {
		return err
	}
	if a := flagAmong(fs, fs.Args()); a != "" {
		return e.usageError("bench", a+": flags go before the case files: system1 bench [flags] CASEFILE...")
	}
	if err := t.check(fs.Args()); err != nil {
		return e.usageError("bench", err)
	}
	var fits *calibration.Fits
	if *fitsPath != "" {
		var err error
		if fits, err = outcomes.LoadFits(*fitsPath); err != nil {
			return err
		}
	}
	rep, err := runBench(ctx, e, t, fs.Args())
	if err != nil {
		return err
	}
	rep.Fits = *fitsPath
	rep.Assemble(fits)
	if err := writeBenchOutputs(e, rep, *out, *plot, *preds); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted (%w): the cases not sent are counted as failed requests", err)
	}
	if rep.Overall.Errors == rep.Overall.Cases {
		return fmt.Errorf("every one of the %d requests failed; the first: %s", rep.Overall.Cases, rep.Failures[0].Error)
	}
	return nil
}

// writeBenchOutputs writes the Markdown table on stdout and the files the
// flags ask for.
func writeBenchOutputs(e env, rep *bench.Report, out, plot, preds string) error {
	what := rep.Endpoint
	if rep.Provider != "" {
		what = "provider " + rep.Provider
		if rep.Endpoint != "" {
			what += " (" + rep.Endpoint + ")"
		}
	}
	var sets []string
	for _, s := range rep.Sets {
		sets = append(sets, s.Name)
	}
	fmt.Fprintf(e.stdout, "bench: %d cases of %s against %s, model %s (replies name %s), concurrency %d, %.1f s\n\n",
		rep.Overall.Cases, strings.Join(sets, ", "), what, rep.Model, cmp.Or(strings.Join(rep.Models, ", "), "(none)"), rep.Concurrency, rep.WallS)
	if err := rep.WriteMarkdown(e.stdout); err != nil {
		return err
	}
	if out != "" {
		data, err := marshalReport(rep)
		if err != nil {
			return err
		}
		if err := writeData(out, data); err != nil {
			return err
		}
	}
	if preds != "" {
		if err := writeFile(preds, func(w io.Writer) error { return bench.WritePredictions(w, rep.Cases) }); err != nil {
			return err
		}
	}
	if plot != "" {
		p := bench.Plot{
			Title:  fmt.Sprintf("%s on %s: %d answers, accuracy %.1f%%", cmp.Or(strings.Join(rep.Models, ", "), "(none)"), strings.Join(sets, ", "), rep.Overall.N, 100*rep.Overall.Accuracy),
			Raw:    rep.Overall.Bins,
			RawECE: rep.Overall.ECE,
		}
		if c := rep.Overall.Calibrated; c != nil {
			p.Calibrated, p.CalibratedECE = c.Bins, c.ECE
			p.CalibratedNote = fmt.Sprintf("calibrated with %s: a fit was found for %d of %d answers", filepath.Base(rep.Fits), *c.Fitted, c.N)
		}
		if err := writeFile(plot, p.WritePNG); err != nil {
			return err
		}
	}
	return nil
}

// writeFile writes what write makes to the file at path, once it is whole.
func writeFile(path string, write func(io.Writer) error) error {
	var b bytes.Buffer
	if err := write(&b); err != nil {
		return err
	}
	return writeData(path, b.Bytes())
}

// writeData replaces the file at path with data at once: a reader (a
// serve reloading its fits, a CI job reading a baseline) sees the old file
// or the new, never a part, and a crash leaves the old one.
func writeData(path string, data []byte) error {
	return atomicfile.Write(path, "."+filepath.Base(path)+"-*", data, 0o644)
}

// marshalReport writes the report indented, with each case on one line,
// so that a report of a thousand cases stays readable and small.
func marshalReport(rep *bench.Report) ([]byte, error) {
	head := *rep
	head.Cases = nil
	b, err := json.MarshalIndent(head, "", "  ")
	if err != nil {
		return nil, err
	}
	const tail = "\"cases\": null\n}"
	if !bytes.HasSuffix(b, []byte(tail)) {
		return nil, errors.New("report: cases are not the last field")
	}
	b = append(b[:len(b)-len(tail)], "\"cases\": ["...)
	for i, c := range rep.Cases {
		line, err := json.Marshal(c)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, "\n    "...)
		b = append(b, line...)
	}
	if len(rep.Cases) > 0 {
		b = append(b, "\n  "...)
	}
	return append(b, "]\n}\n"...), nil
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progressBar draws a run's progress on one terminal line, at most ten
// times a second. The run calls update from one goroutine at a time, and
// finish once it has returned.
type progressBar struct {
	w    io.Writer
	last time.Time
	p    bench.Progress
}

func (b *progressBar) update(p bench.Progress) {
	b.p = p
	if p.Done < p.Total && time.Since(b.last) < 100*time.Millisecond {
		return
	}
	b.last = time.Now()
	b.draw()
}

func (b *progressBar) draw() {
	const width = 30
	p := b.p
	filled := 0
	if p.Total > 0 {
		filled = width * p.Done / p.Total
	}
	rate := 0.0
	if s := p.Elapsed.Seconds(); s > 0 {
		rate = float64(p.Done) / s
	}
	fmt.Fprintf(b.w, "\r[%s%s] %d/%d  errors %d  %.1f req/s ", strings.Repeat("#", filled), strings.Repeat(".", width-filled), p.Done, p.Total, p.Errors, rate)
}

func (b *progressBar) finish() {
	b.draw()
	fmt.Fprintln(b.w)
}
