package jobs

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"system1/internal/calibration"
	"system1/internal/calibration/fitting"
	"system1/internal/decision"
	"system1/internal/systemone"
)

// Summary is what a run did: the job's output as a whole (rows written by
// earlier runs included) and this run's throughput.
type Summary struct {
	// Total is the number of rows in the input.
	Total int `json:"total"`
	// Rows is the number of rows in the output, errors included.
	Rows int `json:"rows"`
	// Resumed is the number of rows the output held when the run began.
	Resumed int `json:"resumed"`
	// Errors is the number of error rows, and ErrorTypes their number by
	// type (invalid_row, rejected, malformed_reply, failed).
	Errors     int            `json:"errors"`
	ErrorTypes map[string]int `json:"error_types,omitempty"`
	// InputTokens and OutputTokens sum the answered rows' usage;
	// Estimated is set when some decider estimated its counts.
	InputTokens  int  `json:"input_tokens"`
	OutputTokens int  `json:"output_tokens"`
	Estimated    bool `json:"estimated,omitempty"`
	// Wall is this run's duration, and RowsPerSecond the rows it wrote
	// over it.
	Wall          time.Duration `json:"wall_ns"`
	RowsPerSecond float64       `json:"rows_per_second"`
	// Questions measure, per question whose outcome some row gives, the
	// answers against those outcomes.
	Questions []QuestionMetrics `json:"questions,omitempty"`
	// FeedbackOn says that outcomes are fed back (Options.Feedback);
	// Feedback counts those this run recorded, and FeedbackError says
	// why it stopped recording them.
	FeedbackOn    bool   `json:"-"`
	Feedback      int    `json:"feedback"`
	FeedbackError string `json:"feedback_error,omitempty"`
}

// QuestionMetrics are one question's accuracy and calibration over the
// answered rows that give its expected outcome.
type QuestionMetrics struct {
	ID string `json:"id"`
	fitting.Metrics
}

// WriteText writes the summary for a person to read.
func (s Summary) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "rows        %d of %d", s.Rows, s.Total)
	if s.Resumed > 0 {
		fmt.Fprintf(&b, " (%d written by earlier runs)", s.Resumed)
	}
	fmt.Fprintf(&b, "\nerrors      %d", s.Errors)
	if len(s.ErrorTypes) > 0 {
		var parts []string
		for _, t := range slices.Sorted(maps.Keys(s.ErrorTypes)) {
			parts = append(parts, fmt.Sprintf("%s %d", t, s.ErrorTypes[t]))
		}
		fmt.Fprintf(&b, " (%s)", strings.Join(parts, ", "))
	}
	est := ""
	if s.Estimated {
		est = " (some estimated)"
	}
	fmt.Fprintf(&b, "\ntokens      %d in, %d out%s\n", s.InputTokens, s.OutputTokens, est)
	fmt.Fprintf(&b, "throughput  %.1f rows/s over %s\n", s.RowsPerSecond, s.Wall.Round(time.Millisecond))
	if len(s.Questions) > 0 {
		fmt.Fprintf(&b, "\n%-20s %7s %9s %7s %7s %7s\n", "question", "n", "accuracy", "ECE", "NLL", "Brier")
		for _, q := range s.Questions {
			fmt.Fprintf(&b, "%-20s %7d %9.3f %7.3f %7.3f %7.3f\n", q.ID, q.N, q.Accuracy, q.ECE, q.NLL, q.Brier)
		}
	}
	switch {
	case s.FeedbackError != "":
		fmt.Fprintf(&b, "\nfeedback    %d outcomes recorded, then no more: %s\n", s.Feedback, s.FeedbackError)
	case s.FeedbackOn && len(s.Questions) > 0:
		fmt.Fprintf(&b, "\nfeedback    %d outcomes recorded in the decision log by this run\n", s.Feedback)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// tally adds up the output's rows for the summary.
type tally struct {
	job     decision.Request
	rows    int
	errors  int
	types   map[string]int
	in, out int
	est     bool
	// preds holds, per question, the answered rows that give its outcome.
	preds [][]calibration.Prediction
}

func newTally(job decision.Request) *tally {
	return &tally{job: job, types: map[string]int{}, preds: make([][]calibration.Prediction, len(job.Questions))}
}

// answered counts a row's answers.
func (t *tally) answered(row inputRow, answers []decision.Answer, u systemone.Usage) {
	t.rows++
	t.in += u.InputTokens
	t.out += u.OutputTokens
	t.est = t.est || u.Estimated
	for i, e := range row.Expected {
		if e < 0 || i >= len(answers) {
			continue
		}
		q := t.job.Questions[i]
		t.preds[i] = append(t.preds[i], calibration.Prediction{
			Kind: q.Kind, Dist: dist(q, answers[i]), Expected: e, Options: len(q.Options),
		})
	}
}

// failed counts an error row.
func (t *tally) failed(typ string) {
	t.rows++
	t.errors++
	t.types[typ]++
}

// dist is the distribution an answer reports: its probabilities,
// normalised (they were rounded), or a noul's [P(true), P(false)].
func dist(q decision.Question, a decision.Answer) decision.Distribution {
	if q.Kind == decision.Noul {
		return decision.Distribution{a.Noul, 1 - a.Noul}
	}
	d := make(decision.Distribution, len(a.Probabilities))
	var sum float64
	for _, p := range a.Probabilities {
		sum += p
	}
	for i, p := range a.Probabilities {
		if sum > 0 {
			d[i] = p / sum
		}
	}
	return d
}

// summary measures the tally.
func (t *tally) summary() Summary {
	s := Summary{Rows: t.rows, Errors: t.errors, InputTokens: t.in, OutputTokens: t.out, Estimated: t.est}
	if len(t.types) > 0 {
		s.ErrorTypes = maps.Clone(t.types)
	}
	for i, ps := range t.preds {
		if len(ps) > 0 {
			s.Questions = append(s.Questions, QuestionMetrics{ID: t.job.Questions[i].ID, Metrics: fitting.Measure(ps)})
		}
	}
	return s
}
