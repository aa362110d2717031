// Package decisionlog records every answered question, so that outcomes
// reported later can be matched to what was decided and calibration can be
// measured and refitted from real traffic.
//
// A Log writes off the request path: Record puts an entry on a bounded
// queue and returns at once; a background writer commits batches in
// transactions. When the queue is full the entry is dropped and counted,
// so a decision is never slowed or failed by the log. Storage is an
// embedded SQLite file (pure Go, no cgo) in WAL mode, or PostgreSQL when a
// URL is given, so that several replicas share one log.
//
// The log never holds a key, only its name (Record.Key), and the state
// is kept only as its SHA-256 unless KeepStates is set.
package decisionlog

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"system1/internal/calibration"
	"system1/internal/decision"
)

// The faces a record may come from.
const (
	FaceSystemOne = "systemone" // POST /v1/systemone
	FaceDecisions = "decisions" // POST /v1/decisions
	FaceDecide    = "decide"    // POST /v1/decide, system1 decide
	FaceMCP       = "mcp"       // the system1_decide tool
	FaceRun       = "run"       // system1 run --config
	// FaceShadow is a candidate's answer to a request a shadow rollout
	// sampled, recorded under ShadowRequestID of the served one.
	FaceShadow = "shadow"
)

// ShadowPrefix begins the request id of a shadow's answer.
const ShadowPrefix = "shadow:"

// ShadowRequestID is the request id a shadow's answer to request id is
// recorded under: apart from the served answer's, so that feedback,
// refits and reports on the served model never read the candidate's
// answer as the one given; the shadow report pairs the two by it.
func ShadowRequestID(id string) string { return ShadowPrefix + id }

// Step is one transformation applied to the engine's distribution, as
// the answer named it: the domain's step, stored as JSON {name, version,
// dist}. The distribution before the first decision.StepTemperature is
// what a refit fits on.
type Step = decision.Step

// Record is one answered question as the log keeps it.
type Record struct {
	// RequestID is the request's id (x-typesafe-request-id, or the decide
	// request_id); QuestionID the question's id within it ("" is stored as
	// DecideQuestion for a decide request's single question).
	RequestID  string
	QuestionID string
	// Time is when the question was answered; zero is the time Record
	// was called.
	Time time.Time
	// Face is one of FaceSystemOne, FaceDecisions, FaceDecide, FaceMCP,
	// FaceRun, FaceShadow.
	Face string
	// Model is the model that answered and Node the node it ran on.
	Model string
	Node  string
	// Fingerprint is the build of Model that Node served the answer from
	// (docs/fingerprints.md); "" where it was not known.
	Fingerprint string
	Kind        decision.Kind
	// Options are the question's option keys in order: criteria keys,
	// "true"/"false" for a noul, level keys "0".."k-1" for a score.
	Options []string
	// EngineDist is the distribution as the engine reported it, over
	// Options.
	EngineDist []float64
	// Steps are the transformations applied after it, in order.
	Steps []Step
	// Final is the distribution answered; nil means EngineDist, or the
	// last step's when there are steps.
	Final []float64
	// LabelMass is the probability the engine put on the labels at all,
	// nil where the engine cannot tell (after its constraint).
	LabelMass *float64
	// Latency is how long the answer took.
	Latency time.Duration
	// StateHash is the hex SHA-256 of the state's JSON; when empty the
	// writer computes it from State.
	StateHash string
	// State is the state's JSON. It is hashed, and stored only when the
	// log keeps states. The log keeps a reference: do not modify it.
	State json.RawMessage
	// Cost is what the answer cost, in US dollars (answer.Question's),
	// stored in pico-dollars in cost_picousd; nil, NULL, when the node
	// that answered has no price.
	Cost *decision.USD
	// Key is the name of the key that asked (config keys[].name), never
	// the key; "" where none did (auth off, the MCP and CLI faces, a
	// shadow's answer). A key's budget is counted from its records.
	Key string
	// InputTokens and OutputTokens are what the node reported answering
	// the question used.
	InputTokens, OutputTokens int
	// Question is the question asked, stored (as JSON, in a table of its
	// own) only when the log keeps states, so that system1 replay can ask
	// it again. The log keeps a reference: do not modify it.
	Question *decision.Question
	// Cascade names the cascade that asked the question of Model as its
	// Stage (its index in the cascade's stages); "" and 0 for a question
	// asked of Model itself. Every stage a cascade asked is recorded
	// under the request, so an outcome trains each.
	Cascade string
	Stage   int

	// spent is set on a record whose cost Record counted against its
	// key's budget (Spend), so that its write is counted as the same.
	spent bool
}

// DecideQuestion is the question id under which a decide request's
// single question is stored.
const DecideQuestion = "decision"

// Answered is the distribution answered: Final, or the last step's, or
// EngineDist.
func (r *Record) Answered() []float64 {
	switch {
	case r.Final != nil:
		return r.Final
	case len(r.Steps) > 0:
		return r.Steps[len(r.Steps)-1].Dist
	}
	return r.EngineDist
}

// Entry is a stored record with its outcomes.
type Entry struct {
	Record
	// ID is the row's id, increasing in the order records were written.
	ID int64
	// Outcome is the latest outcome reported for the question, nil when
	// none was; Outcomes counts every one reported.
	Outcome  *Outcome
	Outcomes int
}

// Outcome is what turned out right for a question, as reported.
type Outcome struct {
	// Value is one of the question's option keys, or NoneFit.
	Value string
	Time  time.Time
}

// NoneFit is the outcome of a choice none of whose options turned out
// right: the state was out of scope. A choice that has an option "none"
// takes the word as that option. Such an outcome calibrates no
// confidence (no option was right) but tells a label-mass gate what it
// should have flagged.
const NoneFit = "none"

// NoOptionFit reports whether the latest outcome says that none of the
// options was right.
func (e Entry) NoOptionFit() bool {
	return e.Outcome != nil && e.Outcome.Value == NoneFit && !slices.Contains(e.Options, NoneFit)
}

// Uncalibrated is the distribution before the first temperature step
// (decision.Uncalibrated): what a temperature fit is made on.
func (e Entry) Uncalibrated() []float64 { return decision.Uncalibrated(e.EngineDist, e.Steps) }

// Prediction is the entry as a labelled case for package calibration,
// over dist (Final, Uncalibrated or EngineDist), with the latest outcome
// as the expected option. It reports false when there is no outcome, or
// the outcome is no longer one of the options.
func (e Entry) Prediction(dist []float64) (calibration.Prediction, bool) {
	if e.Outcome == nil {
		return calibration.Prediction{}, false
	}
	i := slices.Index(e.Options, e.Outcome.Value)
	if i < 0 {
		return calibration.Prediction{}, false
	}
	return calibration.Prediction{Kind: e.Kind, Dist: decision.Distribution(dist), Expected: i, Options: len(e.Options)}, true
}

// Group is the labelled entries of one model, kind and option-count
// bucket (calibration.Bucket), the unit refits and reports are made for.
type Group struct {
	Model string
	// Fingerprint is the build of the model the entries were answered by;
	// "" for answers recorded without one.
	Fingerprint string
	Kind        decision.Kind
	Bucket      string
	// Entries have an outcome, in the order they were written.
	Entries []Entry
}

// Predictions are the group's entries as labelled cases over the
// distribution dist picks from each.
func (g Group) Predictions(dist func(Entry) []float64) []calibration.Prediction {
	out := make([]calibration.Prediction, 0, len(g.Entries))
	for _, e := range g.Entries {
		if p, ok := e.Prediction(dist(e)); ok {
			out = append(out, p)
		}
	}
	return out
}

// Groups sorts the entries that have a usable outcome by model, the build
// that answered (its fingerprint), kind and bucket: models by name, then
// kinds and buckets in calibration.CompareGroups' order, a model's builds
// in the order they first answered.
func Groups(entries []Entry) []Group {
	type key struct {
		model, fingerprint string
		kind               decision.Kind
		bucket             string
	}
	at := map[key]int{}
	var out []Group
	for _, e := range entries {
		if _, ok := e.Prediction(e.Answered()); !ok {
			continue
		}
		k := key{e.Model, e.Fingerprint, e.Kind, calibration.Bucket(len(e.Options))}
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, Group{Model: k.model, Fingerprint: k.fingerprint, Kind: k.kind, Bucket: k.bucket})
		}
		out[i].Entries = append(out[i].Entries, e)
	}
	slices.SortStableFunc(out, func(a, b Group) int {
		return cmp.Or(strings.Compare(a.Model, b.Model), calibration.CompareGroups(a.Kind, a.Bucket, b.Kind, b.Bucket))
	})
	return out
}

// MaxOutcomeLevel is the largest level an outcome may name.
const MaxOutcomeLevel = 999_999_999

// ParseOutcome reads an outcome as a face receives it, as JSON, into the
// option key Outcome takes: a string as itself (a criteria key, a decide
// option, a level key, NoneFit), true and false as "true" and "false" (a noul),
// and a whole number as its decimal digits (a score level given as a
// number). Anything else is an error; the caller names the field.
func ParseOutcome(raw json.RawMessage) (string, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		if json.Valid(raw) {
			// Only a number beyond a float64 is valid JSON yet not decoded.
			return "", errors.New("a number out of range is not a level (a whole number from 0)")
		}
		return "", fmt.Errorf("not JSON: %w", err)
	}
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case float64:
		if x == math.Trunc(x) && x >= 0 && x <= MaxOutcomeLevel {
			return strconv.FormatInt(int64(x), 10), nil
		}
		return "", fmt.Errorf("%v is not a level (a whole number from 0)", x)
	}
	return "", errors.New("must be an option key (string), true or false, or a level number")
}
