package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"system1/internal/calibration"
	"system1/internal/calibration/fitting"
)

// ReportVersion is the version of the report format this package writes.
const ReportVersion = 1

// Report is a bench run: what was asked of what, the summaries per set and
// overall, every failure, and every case's record.
type Report struct {
	Version int `json:"version"`
	// Created is when the run ended, RFC 3339.
	Created string `json:"created"`
	// Endpoint is the System One endpoint asked, or empty when a provider
	// was.
	Endpoint string `json:"endpoint,omitempty"`
	// Provider is the gateway provider asked, and Config the
	// configuration file it came from.
	Provider string `json:"provider,omitempty"`
	Config   string `json:"config,omitempty"`
	// Model is the model id sent; Models are the ids the replies named.
	Model  string   `json:"model"`
	Models []string `json:"models"`
	Files  []string `json:"files"`
	// Fits is the fits file the calibrated numbers come from, if any.
	Fits        string    `json:"fits,omitempty"`
	Concurrency int       `json:"concurrency"`
	WallS       float64   `json:"wall_s"`
	Sets        []Summary `json:"sets"`
	Overall     Summary   `json:"overall"`
	// Failures are the failed requests, in case order.
	Failures []Failure `json:"failures"`
	Cases    []Record  `json:"cases"`
}

// Failure is a failed request.
type Failure struct {
	ID    string `json:"id"`
	Set   string `json:"set"`
	Error string `json:"error"`
}

// Summary measures a set of records, or all of them ("overall").
type Summary struct {
	Name string `json:"name"`
	// Cases is the number of requests asked, Errors the number that
	// failed, and N the number of questions measured: those of the
	// requests that did not fail.
	Cases  int `json:"cases"`
	N      int `json:"n"`
	Errors int `json:"errors"`
	// Skipped counts answered questions whose distribution could not be
	// scored (calibration.Prediction.Check); it should be 0.
	Skipped int `json:"skipped,omitempty"`
	// Floor, Accuracy, MAE, ECE, Brier and NLL are fitting.Measure's,
	// over the N questions.
	Floor    float64  `json:"floor"`
	Accuracy float64  `json:"accuracy"`
	MAE      *float64 `json:"mae,omitempty"`
	ECE      float64  `json:"ece"`
	Brier    float64  `json:"brier"`
	NLL      float64  `json:"nll"`
	// Selective is keyed "0.7" and "0.9".
	Selective map[string]Selective `json:"selective"`
	// WrongSurviving counts the wrong answers whose confidence reaches a
	// gate, keyed "0.8", "0.9" and "gate" (the suggested Gate's; 0 when
	// there is none): what acting above that gate would have let through.
	WrongSurviving map[string]int `json:"wrong_surviving"`
	// Gate is the gate suggested on these answers at
	// fitting.DefaultTargetError: the lowest confidence above which
	// the error rate stays under it with 95% confidence.
	Gate fitting.Gate `json:"gate"`
	// LatencyMS are percentiles of the latency of the requests that did
	// not fail, ThroughputRPS how many of them were answered per second:
	// over the whole run overall, over the span from a set's first
	// request to its last answer for a set.
	LatencyMS     Latency `json:"latency_ms"`
	ThroughputRPS float64 `json:"throughput_rps"`
	// Bins are the reliability diagram's 15 confidence bins.
	Bins []fitting.Bin `json:"bins"`
	// Fitted is, in a calibrated summary, how many of the N questions a
	// fit was found for; the others are measured as they were.
	Fitted *int `json:"fitted,omitempty"`
	// Calibrated is the same measured after the fits, when fits were
	// given.
	Calibrated *Summary `json:"calibrated,omitempty"`
}

// Selective is how the questions whose confidence reached a threshold
// fared. Accuracy is null when none did.
type Selective struct {
	Accuracy *float64 `json:"accuracy"`
	Coverage float64  `json:"coverage"`
	N        int      `json:"n"`
}

// Latency percentiles, in milliseconds.
type Latency struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
}

// Percentile is the nearest-rank percentile p (0 < p <= 100) of sorted:
// the smallest value with at least p% of the values at or below it. It is
// 0 for no values.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// Assemble fills the report's summaries and failures from its cases: one
// summary per set, in the order the sets first appear, and one overall.
// With fits, each summary carries the calibrated numbers: every answered
// distribution tempered by the fit calibration.Fits.Apply finds for its
// record's provider and model, the question's kind and option count.
func (r *Report) Assemble(fits *calibration.Fits) {
	var names []string
	bySet := map[string][]Record{}
	r.Failures = []Failure{}
	r.Models = []string{}
	for _, c := range r.Cases {
		if _, ok := bySet[c.Set]; !ok {
			names = append(names, c.Set)
		}
		bySet[c.Set] = append(bySet[c.Set], c)
		if c.Failed() {
			r.Failures = append(r.Failures, Failure{ID: c.ID, Set: c.Set, Error: c.Error})
		} else if c.Model != "" && !slices.Contains(r.Models, c.Model) {
			r.Models = append(r.Models, c.Model)
		}
	}
	r.Sets = make([]Summary, len(names))
	for i, name := range names {
		r.Sets[i] = Summarize(name, bySet[name], 0, fits)
	}
	r.Overall = Summarize("overall", r.Cases, r.WallS, fits)
}

// Summarize measures records. Throughput is over wallS seconds, or, when
// wallS is 0, over the span from the first request sent to the last
// answer received.
func Summarize(name string, records []Record, wallS float64, fits *calibration.Fits) Summary {
	s := Summary{Name: name, Cases: len(records)}
	var lat []float64
	first, last := math.Inf(1), math.Inf(-1)
	var preds, tempered []calibration.Prediction
	fitted := 0
	for _, rec := range records {
		if rec.Failed() {
			s.Errors++
			continue
		}
		lat = append(lat, rec.LatencyMS)
		first = math.Min(first, rec.StartMS)
		last = math.Max(last, rec.StartMS+rec.LatencyMS)
		for _, q := range rec.Questions {
			p := q.prediction()
			preds = append(preds, p)
			if fits != nil {
				// The fit the server serves the build that answered (one
				// learnt on another build is not applied).
				if ft, ok, _ := fits.LookupServed(rec.Provider, rec.Model, q.Build, q.Kind, len(q.Dist)); ok {
					p.Dist = ft.Apply(q.Dist)
					fitted++
				}
				tempered = append(tempered, p)
			}
		}
	}
	slices.Sort(lat)
	s.LatencyMS = Latency{P50: Percentile(lat, 50), P95: Percentile(lat, 95), P99: Percentile(lat, 99)}
	span := wallS
	if span <= 0 && len(lat) > 0 {
		span = (last - first) / 1000
	}
	if span > 0 {
		s.ThroughputRPS = float64(len(lat)) / span
	}
	s.measure(preds)
	if fits != nil {
		c := s
		c.Calibrated = nil
		c.measure(tempered)
		c.Fitted = &fitted
		s.Calibrated = &c
	}
	return s
}

// measure fills s's metrics of preds: fitting.Measure's, the wrong
// answers surviving the fixed gates and the suggested one, and the
// suggested gate.
func (s *Summary) measure(preds []calibration.Prediction) {
	m := fitting.Measure(preds)
	s.N, s.Skipped = m.N, m.Skipped
	s.Floor, s.Accuracy, s.MAE = m.Floor, m.Accuracy, m.MAE
	s.ECE, s.Brier, s.NLL = m.ECE, m.Brier, m.NLL
	s.Bins = m.Bins
	s.Selective = map[string]Selective{}
	for k, v := range m.Selective {
		s.Selective[k] = Selective{Accuracy: v.Accuracy, Coverage: v.Coverage, N: v.N}
	}
	s.WrongSurviving = map[string]int{}
	for _, t := range []float64{0.8, 0.9} {
		s.WrongSurviving[fmt.Sprint(t)] = fitting.WrongAbove(preds, t)
	}
	s.Gate = fitting.SuggestGate(preds, fitting.DefaultTargetError)
	s.WrongSurviving["gate"] = s.Gate.WrongAbove
}

// WriteMarkdown writes the summaries as a Markdown table, one row per set
// (and one overall when there are several sets), with a calibrated row
// under each when fits were given, then the failed requests, every one.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	calibrated := r.Overall.Calibrated != nil
	head := []string{"set"}
	if calibrated {
		head = append(head, "numbers")
	}
	head = append(head, "n", "errors", "floor", "accuracy", "MAE", "ECE",
		"wrong@0.8", "wrong@0.9", "wrong@gate (gate, cov)", "Brier", "NLL",
		"acc@0.7 (cov)", "acc@0.9 (cov)", "p50 ms", "p95 ms", "p99 ms", "req/s")
	row := func(cells []string) {
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	row(head)
	sep := slices.Repeat([]string{"--:"}, len(head))
	sep[0] = "---"
	if calibrated {
		sep[1] = "---"
	}
	row(sep)
	sums := r.Sets
	if len(r.Sets) != 1 {
		sums = append(slices.Clip(r.Sets), r.Overall)
	}
	for _, s := range sums {
		cells := []string{escape(s.Name)}
		if calibrated {
			cells = append(cells, "raw")
		}
		row(append(cells, s.cells(true)...))
		if c := s.Calibrated; c != nil {
			row(append([]string{escape(s.Name), fmt.Sprintf("calibrated (%d/%d fitted)", *c.Fitted, c.N)}, c.cells(false)...))
		}
	}
	if len(r.Failures) > 0 {
		fmt.Fprintf(&b, "\n%d failed request(s):\n\n", len(r.Failures))
		for _, f := range r.Failures {
			fmt.Fprintf(&b, "- %s (%s): %s\n", escape(f.ID), escape(f.Set), escape(oneLine(f.Error)))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// cells are a summary's table cells after its name; timing only once.
func (s Summary) cells(timing bool) []string {
	mae := "–"
	if s.MAE != nil {
		mae = fmt.Sprintf("%.3f", *s.MAE)
	}
	out := []string{
		fmt.Sprint(s.N), fmt.Sprint(s.Errors), pct(s.Floor), pct(s.Accuracy), mae,
		fmt.Sprintf("%.3f", s.ECE),
		fmt.Sprint(s.WrongSurviving["0.8"]), fmt.Sprint(s.WrongSurviving["0.9"]), s.gateCell(),
		fmt.Sprintf("%.3f", s.Brier), fmt.Sprintf("%.3f", s.NLL),
		s.Selective["0.7"].cell(), s.Selective["0.9"].cell(),
	}
	if !timing {
		return append(out, "", "", "", "")
	}
	return append(out, fmt.Sprintf("%.1f", s.LatencyMS.P50), fmt.Sprintf("%.1f", s.LatencyMS.P95),
		fmt.Sprintf("%.1f", s.LatencyMS.P99), fmt.Sprintf("%.1f", s.ThroughputRPS))
}

// gateCell is the wrong answers above the suggested gate, the gate and
// its coverage, or "– (none)" when too few answers support one.
func (s Summary) gateCell() string {
	if s.Gate.Threshold == nil {
		return "– (none)"
	}
	return fmt.Sprintf("%d (%.3f, %s)", s.Gate.WrongAbove, *s.Gate.Threshold, pct(s.Gate.Coverage))
}

func (s Selective) cell() string {
	acc := "–"
	if s.Accuracy != nil {
		acc = pct(*s.Accuracy)
	}
	return fmt.Sprintf("%s (%s)", acc, pct(s.Coverage))
}

func pct(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

// escape keeps a cell from breaking the table.
func escape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// oneLine folds an error message onto one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
