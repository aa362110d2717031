package bench

import (
	"cmp"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"system1/internal/calibration"
	"system1/internal/calibration/fitting"
)

// BaselineVersion is the version of the baseline format this package
// writes.
const BaselineVersion = 1

// Baseline is a locked case set's answers kept to hold later runs
// against (system1 check, docs/check.md): every record, the builds that
// answered, and a prediction set rule fitted on its answers, whose
// coverage later answers are measured by.
type Baseline struct {
	Version int    `json:"version"`
	Created string `json:"created"`
	Model   string `json:"model"`
	// Builds are the fingerprints of the builds that answered, sorted;
	// empty when the fleet could not tell (fingerprints off).
	Builds []string `json:"builds"`
	// Sets is a conformal set rule (LAC) fitted on the answers; nil when
	// there were too few for its coverage.
	Sets  *calibration.Conformal `json:"sets,omitempty"`
	Cases []Record               `json:"cases"`
}

// DefaultSetCoverage is the coverage of the set rule a baseline fits.
const DefaultSetCoverage = 0.9

// NewBaseline makes the baseline of a run's records. A failed request
// is an error: a baseline is of every case.
func NewBaseline(model, created string, records []Record) (*Baseline, error) {
	if len(records) == 0 {
		return nil, errors.New("no cases")
	}
	seen := map[string]bool{}
	for _, r := range records {
		if r.Failed() {
			return nil, fmt.Errorf("case %s was not answered (%s): a baseline holds every case's answer", r.ID, oneLine(r.Error))
		}
		if seen[r.ID] {
			return nil, fmt.Errorf("case id %s twice: a baseline holds each case once, by id", r.ID)
		}
		seen[r.ID] = true
	}
	b := &Baseline{Version: BaselineVersion, Created: created, Model: model, Builds: builds(records), Cases: records}
	if c, err := fitting.FitConformal(predictions(records), calibration.ConformalLAC, DefaultSetCoverage); err == nil {
		b.Sets = &c
	}
	return b, nil
}

// LoadBaseline reads a baseline file's content.
func LoadBaseline(data []byte) (*Baseline, error) {
	var b Baseline
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("not a baseline: %w", err)
	}
	if b.Version != BaselineVersion {
		return nil, fmt.Errorf("baseline version %d; only %d is known", b.Version, BaselineVersion)
	}
	if len(b.Cases) == 0 {
		return nil, errors.New("the baseline has no cases")
	}
	seen := map[string]bool{}
	for i, c := range b.Cases {
		if err := c.check(); err != nil {
			return nil, fmt.Errorf("baseline case %d (%s): %w", i, c.ID, err)
		}
		if seen[c.ID] {
			return nil, fmt.Errorf("baseline case %d: id %s twice", i, c.ID)
		}
		seen[c.ID] = true
	}
	if b.Sets != nil {
		if err := b.Sets.Check(); err != nil {
			return nil, fmt.Errorf("baseline sets: %w", err)
		}
	}
	// Every case is answered, each answer a distribution over its
	// options: the metrics and the flips read them as such.
	for i, c := range b.Cases {
		if c.Failed() {
			return nil, fmt.Errorf("baseline case %d (%s) was not answered (%s): a baseline holds every case's answer", i, c.ID, oneLine(c.Error))
		}
		for _, q := range c.Questions {
			if err := q.prediction().Check(); err != nil {
				return nil, fmt.Errorf("baseline case %d (%s): question %s: %w", i, c.ID, q.ID, err)
			}
		}
	}
	return &b, nil
}

// Thresholds are how far a run may move from its baseline and still
// hold (system1 check's flags; docs/check.md gives the defaults' reasons).
type Thresholds struct {
	// AccuracyDrop and CoverageDrop are the most accuracy and prediction
	// set coverage may fall, ECERise the most ECE may rise, FlipRate the
	// largest share of cases whose top answer may change, in [0, 1].
	AccuracyDrop, ECERise, CoverageDrop, FlipRate float64
	// AllowBuild lets another build answer than the baseline's.
	AllowBuild bool
}

// DefaultThresholds are system1 check's defaults.
var DefaultThresholds = Thresholds{AccuracyDrop: 0.02, ECERise: 0.03, CoverageDrop: 0.05, FlipRate: 0.05}

// Check is one row of a check: a measure of the baseline and of the run,
// the limit it was held to, and whether it held.
type Check struct {
	Name     string
	Baseline string
	Now      string
	Limit    string
	Held     bool
	// Why says what moved, for a row that did not hold.
	Why string
}

// ErrCaseSet means a run's cases are not the baseline's.
var ErrCaseSet = errors.New("the cases are not the baseline's")

// Compare holds a run's records against the baseline: failed requests,
// accuracy, ECE, set coverage, flip rate and the answering builds. The
// run must be of the baseline's cases, by id (ErrCaseSet otherwise).
func (b *Baseline) Compare(records []Record, t Thresholds) ([]Check, error) {
	base := map[string]Record{}
	for _, r := range b.Cases {
		base[r.ID] = r
	}
	if len(records) != len(base) {
		return nil, fmt.Errorf("%w: %d cases, the baseline has %d", ErrCaseSet, len(records), len(base))
	}
	var answered []Record
	failed, flipped := 0, 0
	var firstFail string
	for _, r := range records {
		was, ok := base[r.ID]
		if !ok {
			return nil, fmt.Errorf("%w: case %s is not in the baseline", ErrCaseSet, r.ID)
		}
		if len(was.Questions) != len(r.Questions) {
			return nil, fmt.Errorf("%w: case %s has %d questions, %d in the baseline", ErrCaseSet, r.ID, len(r.Questions), len(was.Questions))
		}
		for i, q := range r.Questions {
			if w := was.Questions[i]; q.ID != w.ID || q.Kind != w.Kind || q.Options != w.Options || q.Expected != w.Expected {
				return nil, fmt.Errorf("%w: case %s's question %s is not the baseline's (%s of %d options expecting %d, the baseline %s %s of %d expecting %d)",
					ErrCaseSet, r.ID, q.ID, q.Kind, q.Options, q.Expected, w.ID, w.Kind, w.Options, w.Expected)
			}
		}
		if r.Failed() {
			failed++
			if firstFail == "" {
				firstFail = r.ID + ": " + oneLine(r.Error)
			}
			continue
		}
		answered = append(answered, r)
		// The answer as accuracy reads it: a score's is its expected
		// level rounded, not its most probable level.
		for i, q := range r.Questions {
			if q.prediction().Predicted() != was.Questions[i].prediction().Predicted() {
				flipped++
				break
			}
		}
	}
	was, now := fitting.Measure(predictions(b.Cases)), fitting.Measure(predictions(answered))
	out := []Check{{Name: "failed requests", Baseline: "0", Now: fmt.Sprint(failed), Limit: "0", Held: failed == 0}}
	if failed > 0 {
		out[0].Why = fmt.Sprintf("%d of %d cases were not answered; the first, %s", failed, len(records), firstFail)
	}
	drop := func(name string, a, b, limit float64, rising bool) Check {
		c := Check{Name: name, Baseline: fmt.Sprintf("%.3f", a), Now: fmt.Sprintf("%.3f", b)}
		move := a - b
		c.Limit = fmt.Sprintf("falls at most %.3f", limit)
		if rising {
			move, c.Limit = b-a, fmt.Sprintf("rises at most %.3f", limit)
		}
		c.Held = move <= limit+1e-12
		if !c.Held {
			c.Why = fmt.Sprintf("%s moved from %.3f to %.3f", name, a, b)
		}
		return c
	}
	out = append(out, drop("accuracy", was.Accuracy, now.Accuracy, t.AccuracyDrop, false),
		drop("ECE", was.ECE, now.ECE, t.ECERise, true))
	if b.Sets != nil {
		out = append(out, drop(fmt.Sprintf("set coverage (%.2f)", b.Sets.Coverage), b.Sets.Evaluate(predictions(b.Cases)).Coverage,
			b.Sets.Evaluate(predictions(answered)).Coverage, t.CoverageDrop, false))
	} else {
		out = append(out, Check{Name: "set coverage", Baseline: "–", Now: "–", Limit: "not measured", Held: true,
			Why: fmt.Sprintf("the baseline has too few cases for a set rule (%d needed)", calibration.ConformalMinCases(DefaultSetCoverage))})
	}
	flip, both := 0.0, len(answered)
	if both > 0 {
		flip = float64(flipped) / float64(both)
	}
	fc := Check{Name: "flip rate", Baseline: "0", Now: fmt.Sprintf("%.3f (%d/%d)", flip, flipped, both),
		Limit: fmt.Sprintf("at most %.3f", t.FlipRate), Held: flip <= t.FlipRate+1e-12}
	if !fc.Held {
		fc.Why = fmt.Sprintf("the top answer of %d of %d cases changed", flipped, both)
	}
	out = append(out, fc)
	out = append(out, b.compareBuilds(builds(answered), t.AllowBuild))
	return out, nil
}

// compareBuilds holds the builds that answered against the baseline's.
func (b *Baseline) compareBuilds(now []string, allow bool) Check {
	c := Check{Name: "build", Baseline: orUnknown(b.Builds), Now: orUnknown(now), Limit: "the baseline's", Held: true}
	if allow {
		c.Limit = "any (--allow-build-change)"
	}
	if len(b.Builds) == 0 {
		c.Limit = "not compared: a build is not known"
		return c
	}
	// A gate that cannot read this run's build must not vouch for it: the
	// baseline pinned one, and fingerprints off or failed would hide a swap.
	if len(now) == 0 {
		c.Held = allow
		if !allow {
			c.Why = fmt.Sprintf("no build was read in this run (fingerprint off, or every read failed), so it cannot be held to the baseline's %s", strings.Join(b.Builds, ", "))
		}
		return c
	}
	var other []string
	for _, id := range now {
		if !slices.Contains(b.Builds, id) {
			other = append(other, id)
		}
	}
	if len(other) > 0 && !allow {
		c.Held = false
		c.Why = fmt.Sprintf("build %s answered, not the baseline's %s", strings.Join(other, ", "), strings.Join(b.Builds, ", "))
	}
	return c
}

func orUnknown(ids []string) string { return cmp.Or(strings.Join(ids, ", "), "unknown") }

// Held reports whether every check held.
func Held(checks []Check) bool {
	return !slices.ContainsFunc(checks, func(c Check) bool { return !c.Held })
}

// WriteChecks writes the checks as a Markdown table, then why each that
// did not hold failed.
func WriteChecks(w io.Writer, checks []Check) error {
	var sb strings.Builder
	sb.WriteString("| check | baseline | now | limit | held |\n| --- | --: | --: | --- | --- |\n")
	for _, c := range checks {
		held := "yes"
		if !c.Held {
			held = "**no**"
		}
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s |\n", escape(c.Name), escape(c.Baseline), escape(c.Now), escape(c.Limit), held)
	}
	for _, c := range checks {
		if !c.Held {
			fmt.Fprintf(&sb, "\ndrifted: %s", c.Why)
		}
	}
	sb.WriteString("\n")
	_, err := io.WriteString(w, sb.String())
	return err
}

// junitSuite is JUnit XML's testsuite, as CI systems read it.
type junitSuite struct {
	XMLName  xml.Name    `xml:"testsuite"`
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	ClassName string        `xml:"classname,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Out       string        `xml:"system-out,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes the checks as JUnit XML, one test case per check,
// a check that did not hold a failure, for a CI system's test report.
func WriteJUnit(w io.Writer, suite string, checks []Check) error {
	s := junitSuite{Name: suite, Tests: len(checks)}
	for _, c := range checks {
		jc := junitCase{Name: c.Name, ClassName: suite, Out: fmt.Sprintf("baseline %s, now %s, limit %s", c.Baseline, c.Now, c.Limit)}
		if !c.Held {
			s.Failures++
			jc.Failure = &junitFailure{Message: c.Why, Text: jc.Out}
		}
		s.Cases = append(s.Cases, jc)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(s); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// predictions are the answered questions of records, for the metrics.
func predictions(records []Record) []calibration.Prediction {
	var out []calibration.Prediction
	for _, r := range records {
		if r.Failed() {
			continue
		}
		for _, q := range r.Questions {
			out = append(out, q.prediction())
		}
	}
	return out
}

// builds are the distinct known builds that answered records, sorted.
func builds(records []Record) []string {
	set := map[string]bool{}
	for _, r := range records {
		for _, q := range r.Questions {
			if q.Build != "" {
				set[q.Build] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}
