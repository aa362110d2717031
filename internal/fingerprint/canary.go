package fingerprint

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

	"system1/internal/decision"
)

// canaryState is the one state the canary's questions are asked over: a
// fixed, made-up support ticket, so that a probe carries no user data and
// its questions share one prompt prefix (an engine with a prompt cache
// prefills it once).
var canaryState = json.RawMessage(`{"ticket":"My parcel came two weeks late and the box was crushed. I want my money back.","customer":"since 2019, 14 orders","channel":"email"}`)

// canary is the fixed question set: twelve questions of every kind over
// one state, 35 values, so that a read holds enough values for the noise
// test (noise.go) to see a small move of many of them. Their
// distributions are what identifies a build's behaviour; the first three
// were checked to be non-degenerate on the tiny stories260K and on
// random-weight models (docs/fingerprints.md).
var canary = []decision.Question{
	noul("refund", "Does the customer ask for a refund?"),
	{
		ID:           "topic",
		Kind:         decision.Choice,
		Instructions: json.RawMessage(`"What is the ticket about?"`),
		Options: []decision.Option{
			{Key: "billing", Name: "billing", Text: json.RawMessage(`"payments, invoices, refunds"`)},
			{Key: "shipping", Name: "shipping", Text: json.RawMessage(`"delivery, delays, damage in transit"`)},
			{Key: "account", Name: "account", Text: json.RawMessage(`"login, password, profile"`)},
			{Key: "other", Name: "other", Text: nil},
		},
	},
	score("urgency", "How urgent is the ticket?", "low", "medium", "high"),
	noul("damaged", "Was the parcel damaged?"),
	noul("late", "Did the parcel arrive on time?"),
	noul("angry", "Is the customer angry?"),
	noul("escalate", "Should a manager handle the ticket?"),
	noul("loyal", "Has the customer ordered before?"),
	choice("offer", "What should we offer?", "refund", "replacement", "voucher", "apology"),
	choice("reply", "How should we reply?", "email", "phone", "letter"),
	score("mood", "How satisfied is the customer?", "very unhappy", "unhappy", "neutral", "happy"),
	noul("fraud", "Could the claim be fraudulent?"),
}

// question is a canary question of kind over options.
func question(id string, kind decision.Kind, text string, options []decision.Option) decision.Question {
	b, _ := json.Marshal(text)
	return decision.Question{ID: id, Kind: kind, Instructions: b, Options: options}
}

// noul is a yes/no canary question.
func noul(id, text string) decision.Question {
	return question(id, decision.Noul, text, decision.NoulOptions(nil, nil))
}

// choice is a choice canary question whose options are named by their
// keys.
func choice(id, text string, keys ...string) decision.Question {
	var options []decision.Option
	for _, k := range keys {
		options = append(options, decision.Option{Key: k, Name: k})
	}
	return question(id, decision.Choice, text, options)
}

// score is a score canary question whose levels, from 0, read as their
// legends.
func score(id, text string, legends ...string) decision.Question {
	var options []decision.Option
	for i, l := range legends {
		b, _ := json.Marshal(l)
		options = append(options, decision.Option{Key: strconv.Itoa(i), Text: b, Legend: b})
	}
	return question(id, decision.Score, text, options)
}

// Questions returns the canary's questions, in the order a Reading's
// distributions follow. The slice and its options are copies: a caller
// may keep or change them.
func Questions() []decision.Question {
	out := make([]decision.Question, len(canary))
	for i, q := range canary {
		q.Options = slices.Clone(q.Options)
		out[i] = q
	}
	return out
}

// State returns the canary's state, a copy.
func State() json.RawMessage { return slices.Clone(canaryState) }

// Request is the canary asked of model: its questions over its state, in
// the caller's order of options with no prior correction, so that a
// reading is one engine call per question and its values are the model's
// own.
func Request(model string) decision.Request {
	return decision.Request{
		Model:     model,
		State:     State(),
		Questions: Questions(),
		Debias:    decision.DebiasOff,
		Prior:     decision.PriorOff,
	}
}

// Reading is what one build answered to the canary.
type Reading struct {
	// Dists are aligned with Questions(): each question's distribution
	// over its options, a noul's [P(true), P(false)]. A nil entry is a
	// question the model gave no reading for because it ranked none of the
	// labels (engine.Failure's Uninformative): a property of the build,
	// compared like a distribution. A Reading with no Dists at all was not
	// read (the probe failed), and compares with nothing.
	Dists []decision.Distribution `json:"dists"`
	// Model is the model id the answers carried; "" when the backend
	// reported none.
	Model string `json:"model,omitempty"`
	// Step is the rounding of the values: 0.01 for an upstream that
	// reports two decimals as Jev does, 0 for an engine's unrounded
	// values. Set by NewReading.
	Step float64 `json:"step,omitempty"`
}

// ErrReading marks distributions that are not a reading of the canary.
var ErrReading = errors.New("not a canary reading")

// NewReading checks that dists are a reading of the canary's questions
// (one per question, each a distribution over its options, or nil for an
// uninformative one) and returns it with the model id the answers
// carried, its rounding step inferred from the values. A reading in which
// every question was uninformative is a reading: on Ollama, which reports
// the top 20 tokens alone, a random-weight model ranks none of the labels
// there, always.
func NewReading(dists []decision.Distribution, model string) (Reading, error) {
	if len(dists) != len(canary) {
		return Reading{}, fmt.Errorf("%w: %d distributions for %d questions", ErrReading, len(dists), len(canary))
	}
	out := Reading{Model: model, Dists: make([]decision.Distribution, len(dists))}
	for i, d := range dists {
		if d == nil {
			continue
		}
		if err := d.Check(len(canary[i].Options)); err != nil {
			return Reading{}, fmt.Errorf("%w: question %s: %v", ErrReading, canary[i].ID, err)
		}
		out.Dists[i] = slices.Clone(d)
	}
	out.Step = step(out.Dists)
	return out, nil
}

// Read reports whether r holds a reading.
func (r Reading) Read() bool { return len(r.Dists) > 0 }

// steps are the roundings NewReading recognises, coarsest first.
var steps = []float64{0.01, 0.001}

// step is the coarsest of steps that every value is a multiple of, or 0
// (also when there are no values). Unrounded values of a dozen
// probabilities are all multiples of 0.001 with a chance of about 10^-30.
func step(dists []decision.Distribution) float64 {
	if !slices.ContainsFunc(dists, func(d decision.Distribution) bool { return len(d) > 0 }) {
		return 0
	}
	for _, s := range steps {
		all := true
		for _, d := range dists {
			for _, p := range d {
				if math.Abs(p/s-math.Round(p/s)) > 1e-6 {
					all = false
				}
			}
		}
		if all {
			return s
		}
	}
	return 0
}

// Delta is how far two readings of the canary are apart: the largest
// absolute difference between the probabilities they give one option of
// one question (the sup norm), 1 where a question was answered in one and
// uninformative in the other, 0 where it was uninformative in both. NaN
// when either was not read.
//
// The sup norm is in the units every decision is made and calibrated in,
// a probability, so a tolerance reads directly as "how far an answer may
// move"; it weighs a shift near 0 as it weighs one near 1/2, where a
// divergence (Jensen-Shannon, KL) would magnify the float noise of tiny
// probabilities and shrink a real shift between two near-uniform
// distributions.
func Delta(a, b Reading) float64 {
	if !a.Read() || !b.Read() || len(a.Dists) != len(b.Dists) {
		return math.NaN()
	}
	var worst float64
	for i := range a.Dists {
		da, db := a.Dists[i], b.Dists[i]
		switch {
		case da == nil && db == nil:
		case da == nil || db == nil || len(da) != len(db):
			worst = 1
		default:
			for j := range da {
				worst = math.Max(worst, math.Abs(da[j]-db[j]))
			}
		}
	}
	return worst
}
