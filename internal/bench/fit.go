package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"system1/internal/calibration"
	"system1/internal/calibration/fitting"
	"system1/internal/decision"
)

// Load reads what a bench run saved: a JSON report (its cases), or a
// predictions file, JSON Lines of records (--save-predictions). It returns
// the records and, for a report, the report.
func Load(data []byte) ([]Record, *Report, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, nil, errors.New("empty: neither a bench report nor a predictions file")
	}
	var probe struct {
		Version *int            `json:"version"`
		Cases   json.RawMessage `json:"cases"`
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if err := dec.Decode(&probe); err == nil && probe.Cases != nil && !dec.More() {
		var r Report
		if err := json.Unmarshal(trimmed, &r); err != nil {
			return nil, nil, fmt.Errorf("bench report: %w", err)
		}
		if r.Version != ReportVersion {
			return nil, nil, fmt.Errorf("bench report version %d; only %d is known", r.Version, ReportVersion)
		}
		for i, c := range r.Cases {
			if err := c.check(); err != nil {
				return nil, nil, fmt.Errorf("bench report: case %d (%s): %w", i, c.ID, err)
			}
		}
		return r.Cases, &r, nil
	}
	var out []Record
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		d := json.NewDecoder(bytes.NewReader(b))
		d.DisallowUnknownFields()
		var r Record
		if err := d.Decode(&r); err != nil {
			return nil, nil, fmt.Errorf("predictions line %d: %w", line, err)
		}
		if err := r.check(); err != nil {
			return nil, nil, fmt.Errorf("predictions line %d (%s): %w", line, r.ID, err)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("predictions line %d: %w", line+1, err)
	}
	return out, nil, nil
}

// check is what a loaded record must be: an id, questions, and a
// distribution for each question of a request that did not fail.
func (r Record) check() error {
	if r.ID == "" {
		return errors.New("no id")
	}
	if len(r.Questions) == 0 {
		return errors.New("no questions")
	}
	for _, q := range r.Questions {
		if !r.Failed() && q.Dist == nil {
			return fmt.Errorf("question %s has no distribution and no error", q.ID)
		}
	}
	return nil
}

// WritePredictions writes records as JSON Lines, one per case, the file
// calibrate --from reads as well as a report.
func WritePredictions(w io.Writer, records []Record) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for _, r := range records {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// FitOptions say how to fit.
type FitOptions struct {
	// Holdout is the share of each bucket's cases kept apart to score the
	// fit on.
	Holdout float64
	// MinCases is the fewest cases a bucket needs to fit on, after the
	// holdout.
	MinCases int
	// Seed picks the held-out cases (fitting.Split).
	Seed uint64
	// Model and Provider, when set, replace the model and provider the
	// records name: the fits are keyed by them instead.
	Model, Provider string
	// Date is the day the fits are dated, YYYY-MM-DD.
	Date string
	// TargetError is the error rate each fit's suggested gate keeps under
	// (fitting.SetGate); 0 is fitting.DefaultTargetError.
	TargetError float64
}

// BucketFit is one (provider, model, kind, option-count bucket): its fit,
// or why it was refused.
type BucketFit struct {
	Provider string        `json:"provider"`
	Model    string        `json:"model"`
	Kind     decision.Kind `json:"kind"`
	Bucket   string        `json:"bucket"`
	// Cases is the number of answered questions in the bucket, FitN of
	// them fitted on and HeldN held out.
	Cases int `json:"cases"`
	FitN  int `json:"fit_n"`
	HeldN int `json:"held_n"`
	// Fit is nil when the bucket was refused, and Refused says why.
	Fit     *calibration.Fit `json:"fit,omitempty"`
	Refused string           `json:"refused,omitempty"`
}

// FitResult is what fitting a run gave.
type FitResult struct {
	// Fits holds the fitted buckets; its Created is left to the caller.
	Fits    *calibration.Fits
	Buckets []BucketFit
	// Failed is the number of failed requests, which have nothing to fit;
	// Unusable the number of answered questions that could not be scored.
	Failed, Unusable int
	// Fitted and Held are, over the fitted buckets together, the
	// metrics of the fitted and the held-out cases before and after their
	// fits.
	FittedBefore, FittedAfter fitting.Metrics
	HeldBefore, HeldAfter     fitting.Metrics
}

// FitRecords fits one temperature per (provider or model, kind,
// option-count bucket) on the records' answered questions, with
// fitting.Split and fitting.NewFit: each bucket's cases are split
// into a fitting set and a held-out set, each fit gets the gate its
// calibrated cases suggest (fitting.SetGate) and prediction sets
// over all its cases (fitting.FitSets), and a bucket with fewer than
// o.MinCases to fit on is refused, as is one that neither a model nor a
// provider names (its fit could never be found).
func FitRecords(records []Record, o FitOptions) FitResult {
	res := FitResult{Fits: &calibration.Fits{Version: calibration.FitsVersion, Fits: []calibration.Fit{}}}
	type source struct{ provider, model string }
	var order []source
	bySource := map[source][]calibration.Prediction{}
	for _, r := range records {
		if r.Failed() {
			res.Failed++
			continue
		}
		src := source{cmp.Or(o.Provider, r.Provider), cmp.Or(o.Model, r.Model)}
		for _, q := range r.Questions {
			p := q.prediction()
			if p.Check() != nil {
				res.Unusable++
				continue
			}
			if _, ok := bySource[src]; !ok {
				order = append(order, src)
			}
			bySource[src] = append(bySource[src], p)
		}
	}
	var fitB, fitA, heldB, heldA []calibration.Prediction
	for _, src := range order {
		for _, g := range fitting.Groups(bySource[src]) {
			fit, held := fitting.Split(g.Preds, o.Holdout, o.Seed)
			b := BucketFit{Provider: src.provider, Model: src.model, Kind: g.Kind, Bucket: g.Bucket,
				Cases: len(g.Preds), FitN: len(fit), HeldN: len(held)}
			switch {
			case src.provider == "" && src.model == "":
				b.Refused = "no model or provider names these cases, so no one could look the fit up: pass --model"
			case len(fit) < o.MinCases:
				b.Refused = fmt.Sprintf("%d cases to fit on (%d in the bucket, %d held out); at least %d are needed (--min-cases)",
					len(fit), len(g.Preds), len(held), o.MinCases)
			default:
				f, err := fitting.NewFit(fit, held)
				if err != nil {
					b.Refused = err.Error()
					break
				}
				f.Provider, f.Model, f.Date = src.provider, src.model, o.Date
				fitting.SetGate(&f, fit, held, o.TargetError)
				// Prediction sets over every case of the bucket, before the
				// calibrator, as a refit writes them: without them decide
				// could give no set from a fit resting on enough outcomes.
				f.Sets = fitting.FitSets(g.Preds, calibration.ConformalLAC, fitting.SetCoverages())
				b.Fit = &f
				res.Fits.Fits = append(res.Fits.Fits, f)
				fitB = append(fitB, fit...)
				fitA = append(fitA, fitting.Temper(fit, f.Temperature)...)
				heldB = append(heldB, held...)
				heldA = append(heldA, fitting.Temper(held, f.Temperature)...)
			}
			res.Buckets = append(res.Buckets, b)
		}
	}
	res.FittedBefore, res.FittedAfter = fitting.Measure(fitB), fitting.Measure(fitA)
	res.HeldBefore, res.HeldAfter = fitting.Measure(heldB), fitting.Measure(heldA)
	return res
}

// WriteMarkdown writes the fit as a Markdown table: a row per bucket with
// its temperature and NLL and ECE before and after, on the fitted and the
// held-out cases, or why it was refused; then the totals.
func (res FitResult) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("| provider | model | kind | bucket | fitted | held out | T | NLL fitted | ECE fitted | NLL held out | ECE held out |\n")
	b.WriteString("|---|---|---|---|--:|--:|--:|---|---|---|---|\n")
	arrow := func(before, after float64) string { return fmt.Sprintf("%.3f → %.3f", before, after) }
	for _, bk := range res.Buckets {
		cells := []string{orDash(bk.Provider), orDash(bk.Model), string(bk.Kind), bk.Bucket, fmt.Sprint(bk.FitN), fmt.Sprint(bk.HeldN)}
		if bk.Fit == nil {
			cells = append(cells, "refused", escape(bk.Refused), "", "", "")
		} else {
			f := bk.Fit
			cells = append(cells, fmt.Sprintf("%.3f", f.Temperature), arrow(f.NLLBefore, f.NLLAfter), arrow(f.ECEBefore, f.ECEAfter))
			if h := f.Holdout; h != nil {
				cells = append(cells, arrow(h.NLLBefore, h.NLLAfter), arrow(h.ECEBefore, h.ECEAfter))
			} else {
				cells = append(cells, "–", "–")
			}
		}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	fmt.Fprintf(&b, "\nfitted buckets together: fitted cases (n=%d) NLL %s, ECE %s; held-out cases (n=%d) NLL %s, ECE %s\n",
		res.FittedBefore.N, arrow(res.FittedBefore.NLL, res.FittedAfter.NLL), arrow(res.FittedBefore.ECE, res.FittedAfter.ECE),
		res.HeldBefore.N, arrow(res.HeldBefore.NLL, res.HeldAfter.NLL), arrow(res.HeldBefore.ECE, res.HeldAfter.ECE))
	for _, bk := range res.Buckets {
		if bk.Fit == nil {
			continue
		}
		who := orDash(cmp.Or(bk.Model, bk.Provider))
		if g := bk.Fit.Gate; g != nil {
			fmt.Fprintf(&b, "gate for %s, %s, bucket %s: %.3f (target error %v; %d of %d %s cases at or above it, %d wrong, bound %.4f)\n",
				who, bk.Kind, bk.Bucket, g.Threshold, g.TargetError, g.Above, g.N, strings.ReplaceAll(g.On, "_", "-"), g.WrongAbove, g.UpperBound)
		} else {
			fmt.Fprintf(&b, "no gate for %s, %s, bucket %s: too few cases pass the bound; decide grades by its threshold\n", who, bk.Kind, bk.Bucket)
		}
	}
	if res.Failed > 0 || res.Unusable > 0 {
		fmt.Fprintf(&b, "not fitted on: %d failed request(s), %d answered question(s) that could not be scored\n", res.Failed, res.Unusable)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func orDash(s string) string { return escape(cmp.Or(s, "–")) }
