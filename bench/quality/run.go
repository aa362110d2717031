package main

import (
	"cmp"
	"context"
	"fmt"
	"log"
	"maps"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"system1/internal/calibration"
	"system1/internal/calibration/fitting"
	"system1/internal/decision"
	"system1/internal/decisionlog"
	"system1/internal/fakeengine"
	"system1/internal/outcomes"
	"system1/internal/simmodel"
)

// setResult is one set's results: its splits, one run per binary, and the
// bounds of what the simulated model allows on its later parts.
type setResult struct {
	Set     string        `json:"set"`
	File    string        `json:"file"`
	Kind    decision.Kind `json:"kind"`
	Options int           `json:"options"`
	Bucket  string        `json:"bucket"`
	Cases   int           `json:"cases"`
	Train   int           `json:"train"`
	// First and Later are each loop's part sizes, one per fold.
	First []int `json:"first"`
	Later []int `json:"later"`
	// TrainSeconds is how long the simulated model took to train.
	TrainSeconds float64 `json:"train_seconds"`
	Runs         []run   `json:"runs"`
	// Bounds are measured on the first binary's raw later parts.
	Bounds bounds `json:"bounds"`
	// Slack is the finite-sample slack of the pooled conformal coverage
	// at each of coverages (coverageSlack, poolSlack).
	Slack []float64 `json:"slack"`
}

// measured is the number of later answers, over every fold.
func (s setResult) measured() int {
	n := 0
	for _, l := range s.Later {
		n += l
	}
	return n
}

// run is one binary's loops over one set, one per fold, measured on
// their later parts together.
type run struct {
	Label string `json:"label"`
	Folds []loop `json:"folds"`
	// Raw and Calibrated measure the later parts.
	Raw        row `json:"raw"`
	Calibrated row `json:"calibrated"`
	// Uncalibrated counts the later answers the server did not say were
	// calibrated, Stray those its log says another fits revision than
	// the adopted one calibrated: both 0 on a clean run with a fit.
	Uncalibrated int `json:"uncalibrated"`
	Stray        int `json:"stray"`
	// ServerSets is how the server's own prediction sets did on the
	// later parts, asked at each of levels(o), nil when it sent none.
	ServerSets []serverSet `json:"server_sets,omitempty"`
	// Baseline is a threshold on the raw probabilities (LAC) with the
	// coverage of the server's sets at the -coverage level on the same
	// answers: its threshold is chosen on those answers, in sample, so
	// that it covers as many as the server's sets did.
	Baseline *calibration.SetCoverage `json:"raw_threshold_baseline,omitempty"`
}

// serverSet is how the server's sets asked at one level did on the later
// parts: Asked answers, Sets.N of which carried a set.
type serverSet struct {
	Level float64                 `json:"level"`
	Asked int                     `json:"asked"`
	Sets  calibration.SetCoverage `json:"sets"`
}

// loop is one fresh server's loop: what it adopted and when.
type loop struct {
	// Revision is the fits revision the server adopted, "" when it
	// refused (Refused says why); RefitSeconds how long after the last
	// outcome the new revision was reported.
	Revision     string  `json:"revision,omitempty"`
	Refused      string  `json:"refused,omitempty"`
	RefitSeconds float64 `json:"refit_seconds"`
	// Fit is the adopted fit as the fits file holds it.
	Fit *calibration.Fit `json:"fit,omitempty"`
	// ServerGate is the gate GET /v1/calibration suggested after the
	// refit, on the first part's outcomes; nil when it suggested none.
	ServerGate *float64 `json:"server_gate"`
	// Dir is the loop's folder when kept.
	Dir string `json:"dir,omitempty"`
	// ServedECE is the ECE of the later part as served; OutOfFoldECE
	// the adopted fit's out-of-fold ECE on the first part as the refit's
	// selection scored it (Fit.Holdout.ECEAfter), nil without one.
	// Offline is the most any served probability differs from the
	// adopted fit applied here to the same answer's raw distribution.
	ServedECE    float64  `json:"served_ece"`
	OutOfFoldECE *float64 `json:"out_of_fold_ece,omitempty"`
	Offline      float64  `json:"offline_max_diff"`

	first, later []answer
	// at is the later part asked at each of levels(o), in order; the
	// one at -coverage is later.
	at [][]answer
}

// levels are the coverages the later part is asked at: coverages, and
// -coverage where it is not one of them.
func levels(o options) []float64 {
	if slices.Contains(coverages, o.Coverage) {
		return coverages
	}
	return append(slices.Clone(coverages), o.Coverage)
}

// runSet trains the simulated model on a set, serves it, and runs each
// binary's loops over the same parts.
func runSet(name string, o options, bins []binary) (setResult, error) {
	all, path, err := readSet(o, name)
	if err != nil {
		return setResult{}, err
	}
	train, traffic := simmodel.Split(all, o.Traffic)
	ps := parts(traffic, o.Folds, o.First, o.Seed)
	q := all[0].Request.Questions[0]
	res := setResult{Set: name, File: filepath.Base(path), Kind: q.Kind, Options: len(q.Options), Bucket: calibration.Bucket(len(q.Options)),
		Cases: len(all), Train: len(train)}
	for _, p := range ps {
		if len(p.First) < 2 || len(p.Later) < 2 {
			return res, fmt.Errorf("%d cases leave %d first and %d later: too few", len(all), len(p.First), len(p.Later))
		}
		res.First, res.Later = append(res.First, len(p.First)), append(res.Later, len(p.Later))
	}
	for _, c := range all {
		if cq := c.Request.Questions[0]; cq.Kind != q.Kind || calibration.Bucket(len(cq.Options)) != res.Bucket {
			return res, fmt.Errorf("case %s is %s over %d options, not %s in bucket %s like the set's first", c.ID, cq.Kind, len(cq.Options), q.Kind, res.Bucket)
		}
	}
	start := time.Now()
	m, err := simmodel.Train(train, simmodel.Options{Temperature: o.Model.Temperature, FirstBias: o.Model.FirstBias})
	if err != nil {
		return res, err
	}
	res.TrainSeconds = time.Since(start).Seconds()
	// Two capital letters are one token, so that banking77's 77 options are
	// asked in one prompt (A..Z, AA..AY), as the model was trained on them.
	fake := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Behavior: m.Behavior(), PairTokens: true})
	defer fake.Close()
	for _, b := range bins {
		r := run{Label: b.Label}
		for f, p := range ps {
			log.Printf("%s: %s: fold %d of %d: %d first, %d later", name, b.Label, f+1, len(ps), len(p.First), len(p.Later))
			l, err := runLoop(name, b, fake.URL, p, o)
			if err != nil {
				return res, fmt.Errorf("%s: fold %d: %w", b.Label, f+1, err)
			}
			r.Folds = append(r.Folds, l)
		}
		r.measure(o)
		res.Runs = append(res.Runs, r)
	}
	res.Bounds = measureBounds(res.Runs[0], o.Seed)
	for _, c := range coverages {
		res.Slack = append(res.Slack, setSlack(res.First, res.Later, o.Folds, c, o.Seed))
	}
	return res, nil
}

// measure pools r's loops: each later answer raw and as served, each at
// its loop's gate, each loop's prediction sets fitted on its first part.
func (r *run) measure(o options) {
	var rawFolds, calFolds []fold
	for i := range r.Folds {
		l := &r.Folds[i]
		for _, a := range l.later {
			if !a.Calibrated {
				r.Uncalibrated++
			}
			if l.Revision != "" && !strings.HasSuffix(a.Version, "@"+l.Revision) {
				r.Stray++
			}
		}
		// Raw is as the server would have answered without a fit, at
		// its rounding.
		raw := fold{first: onTheWire(predictions(l.first, rawDist), o.Rounding), later: onTheWire(predictions(l.later, rawDist), o.Rounding)}
		raw.gate = fitting.SuggestGate(raw.first, o.TargetError).Threshold
		// Prediction sets are of the answers before the calibrator, as
		// the server makes them: the first part raw, the later raw.
		served := predictions(l.later, servedDist)
		cal := fold{first: raw.first, later: served, gate: l.ServerGate, fit: l.Fit, raw: raw.later}
		if l.Revision == "" { // no fit: the server's answers are raw
			cal.gate = raw.gate
		}
		rawFolds, calFolds = append(rawFolds, raw), append(calFolds, cal)
		l.ServedECE = fitting.Measure(served).ECE
		if l.Fit == nil {
			continue
		}
		if h := l.Fit.Holdout; h != nil {
			l.OutOfFoldECE = &h.ECEAfter
		}
		for j, p := range calibration.Calibrate(predictions(l.later, rawDist), l.Fit.Calibrator()) {
			for k := range p.Dist {
				l.Offline = max(l.Offline, math.Abs(p.Dist[k]-served[j].Dist[k]))
			}
		}
	}
	r.Raw, r.Calibrated = measureRow(rawFolds, "first part"), measureRow(calFolds, "server")
	sent := false
	for i, c := range levels(o) {
		var asked []answer
		for _, l := range r.Folds {
			asked = append(asked, l.at[i]...)
		}
		s := serverSet{Level: c, Asked: len(asked), Sets: serverSets(asked)}
		sent = sent || s.Sets.N > 0
		r.ServerSets = append(r.ServerSets, s)
		if c == o.Coverage && s.Sets.N > 0 {
			var raw []calibration.Prediction
			for _, a := range asked {
				if a.HasSet {
					raw = append(raw, a.prediction(a.Raw))
				}
			}
			b := rawThreshold(raw, s.Sets.Covered)
			r.Baseline = &b
		}
	}
	if !sent {
		r.ServerSets = nil
	}
}

// rawThreshold is the baseline the server's sets are held to: a set of
// every option whose raw probability reaches one threshold, chosen on
// preds themselves so that covered of them are covered (more only on a
// tie): the covered-th largest probability of a right option.
func rawThreshold(preds []calibration.Prediction, covered int) calibration.SetCoverage {
	right := make([]float64, 0, len(preds))
	for _, p := range preds {
		right = append(right, p.Dist[p.Expected])
	}
	slices.Sort(right)
	slices.Reverse(right)
	t := math.Inf(1) // covers none
	if covered > 0 {
		t = right[min(covered, len(right))-1]
	}
	// The rule's coverage and n only pass its Check: its threshold is
	// chosen here, not by rank.
	rule := calibration.Conformal{Method: calibration.ConformalLAC, Coverage: calibration.MinCoverage, N: len(preds), Threshold: min(max(1-t, 0), 1)}
	return rule.Evaluate(preds)
}

// onTheWire is preds as /v1/systemone reports them at places decimals
// (negative: full precision), so that prediction sets fitted on them
// meet the later answers as they were served.
func onTheWire(preds []calibration.Prediction, places int) []calibration.Prediction {
	if places < 0 {
		return preds
	}
	out := make([]calibration.Prediction, len(preds))
	for i, p := range preds {
		if p.Kind == decision.Noul {
			scale := math.Pow(10, float64(places))
			t := math.Round(p.Dist[0]*scale) / scale
			p.Dist = decision.Distribution{t, 1 - t}
		} else {
			p.Dist = decision.Round(p.Dist, places)
		}
		out[i] = p
	}
	return out
}

// runLoop runs one binary's loop over one part on a fresh server with an
// empty fits file, and returns what it adopted and its answers with
// their raw distributions.
func runLoop(set string, b binary, engineURL string, p part, o options) (l loop, err error) {
	dir, err := os.MkdirTemp("", "system1-quality-"+set+"-")
	if err != nil {
		return l, err
	}
	if o.Keep {
		l.Dir = dir
		log.Printf("%s: %s: keeping %s", set, b.Label, dir)
	} else {
		defer os.RemoveAll(dir)
	}
	minOutcomes := o.MinOutcomes
	if minOutcomes == 0 {
		minOutcomes = len(p.First)
	}
	fitsPath, dbPath := filepath.Join(dir, "fits.json"), filepath.Join(dir, "decisions.db")
	empty, err := (&calibration.Fits{Version: calibration.FitsVersion, Created: time.Now().UTC().Format(time.RFC3339), Fits: []calibration.Fit{}}).Encode()
	if err != nil {
		return l, err
	}
	if err := os.WriteFile(fitsPath, empty, 0o600); err != nil {
		return l, err
	}
	cfg := fmt.Sprintf(`nodes:
  - {name: sim, url: %s, dialect: llamacpp, models: [%s]}
rounding: %d
gateway:
  fits: %s
  threshold: 0
  chain:
    - {name: sim, model: %s}
calibration:
  mode: apply
  refit_every: %s
  min_outcomes: %d
  holdout: %s
  target_error: %s
decision_log:
  path: %s
`, engineURL, fakeengine.DefaultModel, o.Rounding, fitsPath, fakeengine.DefaultModel, o.RefitEvery, minOutcomes,
		strconv.FormatFloat(o.Holdout, 'g', -1, 64), strconv.FormatFloat(o.TargetError, 'g', -1, 64), dbPath)
	cfgPath := filepath.Join(dir, "system1.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return l, err
	}
	srv, err := startServe(b.Path, cfgPath, dir, o.Concurrency)
	if err != nil {
		return l, err
	}
	stop := sync.OnceValue(srv.stop) // at the latest on return
	defer stop()
	ctx := context.Background()
	if err := srv.waitBuild(ctx, fakeengine.DefaultModel, 30*time.Second); err != nil {
		return l, err
	}
	before, err := srv.calibrationReport(ctx, o.TargetError)
	if err != nil {
		return l, err
	}

	// One at a time, in file order: the decision log then holds the
	// first part in the same order on every run, so that a refit that
	// splits the log by position (as before cross-validation) fits the
	// same cases every time.
	if l.first, err = srv.ask(ctx, p.First, 1, nil); err != nil {
		return l, fmt.Errorf("first part: %w", err)
	}
	if n := countCalibrated(l.first); n > 0 {
		return l, fmt.Errorf("%d first-part answers were calibrated before any fit: the fits file was not empty", n)
	}
	if err := srv.feedback(ctx, l.first); err != nil {
		return l, err
	}
	sent := time.Now()
	l.Revision, l.Refused, err = srv.waitRefit(ctx, before.FitVersion, len(p.First), o.TargetError, o.Wait)
	if err != nil {
		// The refit counts outcomes per build: say which builds the
		// first part's records name (seen once in about 40 runs, not
		// explained; one build with every outcome would clear that).
		_ = stop()
		return l, fmt.Errorf("%w\nThe first part's records by build: %s", err, builds(dbPath, l.first))
	}
	l.RefitSeconds = time.Since(sent).Seconds()
	if l.Revision != "" {
		fits, err := outcomes.LoadFits(fitsPath)
		if err != nil {
			return l, err
		}
		q := p.First[0].Request.Questions[0]
		f, ok := fits.Lookup("", fakeengine.DefaultModel, q.Kind, len(q.Options))
		if !ok || fits.Revision != l.Revision {
			return l, fmt.Errorf("the fits file (revision %q) holds no fit for model %s, %s over %d options after the server reported revision %s",
				fits.Revision, fakeengine.DefaultModel, q.Kind, len(q.Options), l.Revision)
		}
		l.Fit = &f
		rep, err := srv.calibrationReport(ctx, o.TargetError)
		if err != nil {
			return l, err
		}
		for _, bk := range rep.Buckets {
			if bk.Model == fakeengine.DefaultModel && bk.Kind == q.Kind && bk.Bucket == calibration.Bucket(len(q.Options)) {
				l.ServerGate = bk.Gate.Threshold
			}
		}
	}

	// The later part once per level: a request asks its sets at one.
	for _, c := range levels(o) {
		header := http.Header{CoverageHeader: {strconv.FormatFloat(c, 'g', -1, 64)}}
		as, err := srv.ask(ctx, p.Later, o.Concurrency, header)
		if err != nil {
			return l, fmt.Errorf("later part at coverage %g: %w", c, err)
		}
		l.at = append(l.at, as)
		if c == o.Coverage {
			l.later = as
		}
	}
	if err := stop(); err != nil {
		return l, err
	}
	return l, readRaw(dbPath, append([][]answer{l.first}, l.at...)...)
}

// countCalibrated counts the answers the server said it calibrated.
func countCalibrated(as []answer) int {
	n := 0
	for _, a := range as {
		if a.Calibrated {
			n++
		}
	}
	return n
}

// readRaw fills each answer's raw distribution and calibration version
// from the decision log at path, after the server stopped: the engine's
// distribution before any calibration step, full precision, as the
// server's refits read it.
func readRaw(path string, parts ...[]answer) error {
	ctx := context.Background()
	dlog, err := decisionlog.Open(ctx, decisionlog.Options{Path: path})
	if err != nil {
		return err
	}
	defer func() { _ = dlog.Close(ctx) }()
	for _, as := range parts {
		for i := range as {
			es, err := dlog.Lookup(ctx, as[i].RequestID)
			if err != nil {
				return err
			}
			if len(es) != 1 {
				return fmt.Errorf("the decision log holds %d records for request %s, not 1", len(es), as[i].RequestID)
			}
			as[i].Raw, as[i].Build = es[0].Uncalibrated(), es[0].Fingerprint
			for _, st := range es[0].Steps {
				if st.Name == decision.StepTemperature {
					as[i].Version = st.Version
				}
			}
		}
	}
	return nil
}

// builds counts the answers' records in the decision log at path by the
// build (fingerprint) they name, or says why it could not.
func builds(path string, as []answer) string {
	if err := readRaw(path, as); err != nil {
		return err.Error()
	}
	n := map[string]int{}
	for _, a := range as {
		n[cmp.Or(a.Build, "none")]++
	}
	var out []string
	for _, b := range slices.Sorted(maps.Keys(n)) {
		out = append(out, fmt.Sprintf("%s %d", b, n[b]))
	}
	return strings.Join(out, ", ")
}

func rawDist(a answer) decision.Distribution    { return a.Raw }
func servedDist(a answer) decision.Distribution { return a.Served }

// predictions are the answers as labelled cases over dist.
func predictions(as []answer, dist func(answer) decision.Distribution) []calibration.Prediction {
	out := make([]calibration.Prediction, len(as))
	for i, a := range as {
		out[i] = a.prediction(dist(a))
	}
	return out
}

// serverSets measures the server's own prediction sets on the answers
// that carry one.
func serverSets(as []answer) calibration.SetCoverage {
	var s calibration.SetCount
	for _, a := range as {
		if a.HasSet {
			s.Add(a.Set, a.Case.Expected[0], 1)
		}
	}
	return s.Coverage()
}
