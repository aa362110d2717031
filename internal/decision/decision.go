// Package decision is system1's domain: typed questions over a shared state,
// the distributions a model gives over a question's options, and the answers
// derived from them (choice, noul, score), with their confidences, rounding
// and calibration. It does no I/O and holds no global state.
package decision

import (
	"encoding/json"
	"fmt"
	"slices"
)

// Kind is a question type of the System One wire format.
type Kind string

// The three question kinds.
const (
	Choice Kind = "choice" // one of the caller's criteria keys
	Noul   Kind = "noul"   // P(true)
	Score  Kind = "score"  // expected level on an ordered rubric
)

// Valid reports whether k is one of the three kinds.
func (k Kind) Valid() bool { return k == Choice || k == Noul || k == Score }

// Option is one answer a question allows, in the order the model sees it.
type Option struct {
	// Key identifies the option in the answer: the criteria key of a
	// choice, the level's position "0".."k-1" of a score, "true" or
	// "false" for a noul.
	Key string
	// Name is what the model reads as the option's name: the criteria key
	// of a choice, the level key of a score given as an object, the side of
	// a noul. Empty when the option is known only by its description.
	Name string
	// Text is the caller's description of the option, verbatim JSON (a
	// string, object or array), or nil when there is none.
	Text json.RawMessage
	// Legend is what a score answer's legend echoes for this level: the
	// level as sent. Nil for other kinds.
	Legend json.RawMessage
}

// Question is one typed question over the request's state.
type Question struct {
	ID           string // the caller's id, returned unchanged
	Kind         Kind
	Instructions json.RawMessage // verbatim JSON, nil when absent or null
	Options      []Option
}

// OptionIndex is the index of q's option keyed key, or -1.
func (q Question) OptionIndex(key string) int {
	return slices.IndexFunc(q.Options, func(o Option) bool { return o.Key == key })
}

// Request is a set of questions about one state.
type Request struct {
	Model     string
	State     json.RawMessage // verbatim JSON: a string, object or array
	Questions []Question      // in the order the caller sent them
	// Debias is how the caller asked the option order to be debiased:
	// DebiasPermute, DebiasOff, or empty for the server's setting.
	Debias string
	// Prior is how the caller asked a label prior to be divided out:
	// PriorBatch, PriorContentFree, PriorOff, or empty for the server's
	// setting.
	Prior string
}

// Debias modes: ask each question over cyclic shifts of its options and
// average (permute), or in the caller's order alone (off).
const (
	DebiasOff     = "off"
	DebiasPermute = "permute"
)

// DefaultDebiasOrders is how many cyclic shifts of a question's options
// permutation debiasing asks at most, unless configured otherwise.
const DefaultDebiasOrders = 4

// ValidDebias reports whether mode is a debias mode a caller may ask for
// (empty is the server's setting).
func ValidDebias(mode string) bool {
	return mode == "" || mode == DebiasOff || mode == DebiasPermute
}

// NoneOption is the implicit option a choice may add after the caller's
// (decide's none_option), as the model reads it: its win is no answer
// among the caller's options, so a caller's option may not be the same.
const NoneOption = "none of these options fits"

// Prior correction modes: divide out each label position's running mean
// probability over the requests of the same question (batch), or the
// reading of the question over an empty state (content_free), or neither
// (off).
const (
	PriorOff         = "off"
	PriorBatch       = "batch"
	PriorContentFree = "content_free"
)

// ValidPrior reports whether mode is a prior correction a caller may ask
// for (empty is the server's setting).
func ValidPrior(mode string) bool {
	return mode == "" || mode == PriorOff || mode == PriorBatch || mode == PriorContentFree
}

// NoulOptions returns the two sides of a noul question, true first, with
// the caller's descriptions when given.
func NoulOptions(trueText, falseText json.RawMessage) []Option {
	return []Option{
		{Key: "true", Name: "true", Text: trueText},
		{Key: "false", Name: "false", Text: falseText},
	}
}

// Limits bound what a request may ask. The zero value is not useful; start
// from DefaultLimits.
type Limits struct {
	MaxStateBytes       int // size of the state as JSON
	MaxInstructionBytes int // size of one question's instructions as JSON
	MaxOptionBytes      int // size of one option's name plus description
	MaxQuestions        int
	MinChoiceOptions    int
	MaxChoiceOptions    int // the engine's label capacity
	MinScoreLevels      int
	MaxScoreLevels      int
}

// DefaultMaxQuestions is how many questions one request may ask unless the
// configuration says otherwise (max_questions): hosted Jev answers 800 in
// one call.
const DefaultMaxQuestions = 1000

// MaxStateBytes is the largest state, as JSON, that any face accepts:
// the limit's one home (DefaultLimits, the decide contract's context).
const MaxStateBytes = 256 << 10

// DefaultLimits are the documented limits of POST /v1/systemone. The option
// cap is the label capacity of a typical engine; nodes may raise it.
func DefaultLimits() Limits {
	return Limits{
		MaxStateBytes:       MaxStateBytes,
		MaxInstructionBytes: 16 << 10,
		MaxOptionBytes:      4 << 10,
		MaxQuestions:        DefaultMaxQuestions,
		MinChoiceOptions:    2,
		MaxChoiceOptions:    20,
		MinScoreLevels:      2,
		MaxScoreLevels:      10,
	}
}

// Intersect returns the limits of a request that meets both l and o: each
// bound the stricter of the two.
func (l Limits) Intersect(o Limits) Limits {
	return Limits{
		MaxStateBytes:       min(l.MaxStateBytes, o.MaxStateBytes),
		MaxInstructionBytes: min(l.MaxInstructionBytes, o.MaxInstructionBytes),
		MaxOptionBytes:      min(l.MaxOptionBytes, o.MaxOptionBytes),
		MaxQuestions:        min(l.MaxQuestions, o.MaxQuestions),
		MinChoiceOptions:    max(l.MinChoiceOptions, o.MinChoiceOptions),
		MaxChoiceOptions:    min(l.MaxChoiceOptions, o.MaxChoiceOptions),
		MinScoreLevels:      max(l.MinScoreLevels, o.MinScoreLevels),
		MaxScoreLevels:      min(l.MaxScoreLevels, o.MaxScoreLevels),
	}
}

// Problem is one thing wrong with a request. Path locates it from the
// request body's root, for example ["questions", "q1", "criteria"]; Type is
// a machine-readable class in the style of pydantic ("missing",
// "too_long", ...).
type Problem struct {
	Path []string
	Msg  string
	Type string
}

func (p Problem) Error() string { return fmt.Sprintf("%v: %s", p.Path, p.Msg) }

// Validate checks a parsed request against the limits and returns every
// problem found, in request order; none means the request can be asked.
func Validate(r Request, lim Limits) []Problem {
	var ps []Problem
	add := func(msg, typ string, path ...string) {
		ps = append(ps, Problem{Path: path, Msg: msg, Type: typ})
	}
	if r.Model == "" {
		add("Field required", "missing", "model")
	}
	ps = append(ps, ValidateState(r.State, lim)...)
	if len(r.Questions) == 0 {
		add("at least one question is required", "too_short", "questions")
	}
	if len(r.Questions) > lim.MaxQuestions {
		add(fmt.Sprintf("%d questions; at most %d are accepted", len(r.Questions), lim.MaxQuestions), "too_long", "questions")
	}
	for _, q := range r.Questions {
		at := func(field string) []string { return []string{"questions", q.ID, field} }
		if len(q.Instructions) > lim.MaxInstructionBytes {
			ps = append(ps, Problem{at("instructions"), fmt.Sprintf("instructions are %d bytes as JSON; at most %d are accepted", len(q.Instructions), lim.MaxInstructionBytes), "too_long"})
		}
		for _, o := range q.Options {
			if n := len(o.Name) + len(o.Text); n > lim.MaxOptionBytes {
				ps = append(ps, Problem{append(at("criteria"), o.Key), fmt.Sprintf("option is %d bytes, its name and its description as JSON; at most %d are accepted", n, lim.MaxOptionBytes), "too_long"})
			}
		}
		n := len(q.Options)
		switch q.Kind {
		case Choice:
			if n < lim.MinChoiceOptions {
				ps = append(ps, Problem{at("criteria"), fmt.Sprintf("a choice needs at least %d options; got %d", lim.MinChoiceOptions, n), "too_short"})
			}
			if n > lim.MaxChoiceOptions {
				ps = append(ps, Problem{at("criteria"), fmt.Sprintf("%d options exceed the label capacity of %d for model %q", n, lim.MaxChoiceOptions, r.Model), "too_long"})
			}
		case Score:
			if n < lim.MinScoreLevels {
				ps = append(ps, Problem{at("criteria"), fmt.Sprintf("a score needs at least %d levels; got %d", lim.MinScoreLevels, n), "too_short"})
			}
			if n > lim.MaxScoreLevels {
				ps = append(ps, Problem{at("criteria"), fmt.Sprintf("a score takes at most %d levels; got %d", lim.MaxScoreLevels, n), "too_long"})
			}
		case Noul:
			if n != 2 || q.Options[0].Key != "true" || q.Options[1].Key != "false" {
				ps = append(ps, Problem{at("criteria"), "a noul has exactly the sides true and false", "value_error"})
			}
		default:
			ps = append(ps, Problem{at("type"), fmt.Sprintf("unknown question type %q; expected choice, noul or score", q.Kind), "union_tag_invalid"})
		}
	}
	return ps
}

// ValidateState returns the problems of a request's state against lim
// (none, or one at the path "state"): Validate's, for a face that reads
// several states over one set of questions.
func ValidateState(state json.RawMessage, lim Limits) []Problem {
	switch {
	case len(state) == 0:
		return []Problem{{Path: []string{"state"}, Msg: "Field required", Type: "missing"}}
	case len(state) > lim.MaxStateBytes:
		return []Problem{{Path: []string{"state"}, Msg: fmt.Sprintf("state is %d bytes; at most %d are accepted", len(state), lim.MaxStateBytes), Type: "too_long"}}
	}
	return nil
}
