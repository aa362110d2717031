package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"system1/internal/answer"
	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/jsonx"
)

// SchemaVersion is the version of the decide contract: the request and
// response below. New optional fields may be added without a bump; a
// breaking change bumps it.
const SchemaVersion = "1"

// Request limits of the contract.
const (
	MaxQuestionChars = 8000
	MinOptions       = 2
	// MaxOptions is the one option cap of every face and the
	// configuration, as hosted Jev's.
	MaxOptions     = config.MaxOptions
	MaxOptionChars = 500
	// MaxContextBytes bounds the context object as JSON: the state limit
	// of every face.
	MaxContextBytes = decision.MaxStateBytes
)

// Request asks for one decision. Its JSON schema, with the constraints
// that Schema adds, is the published contract (schema/request.json).
type Request struct {
	Question      string          `json:"question" jsonschema:"The decision to make, as a question. Required, 1 to 8000 characters."`
	Options       []string        `json:"options,omitempty" jsonschema:"The answers to choose from: 2 to 255 unique non-empty strings of at most 500 characters. Leave out to get a yes or no answer."`
	Context       json.RawMessage `json:"context,omitempty" jsonschema:"Facts the decision depends on, as a JSON object (at most 256 KiB); passed to the model as the state."`
	MinConfidence *float64        `json:"min_confidence,omitempty" jsonschema:"Abstain unless the decision's probability is at least this, in [0,1]. Defaults to the configured threshold."`
	RequestID     string          `json:"request_id,omitempty" jsonschema:"Your id for this call, 1 to 128 characters, echoed back; one is generated when absent."`
	SchemaVersion string          `json:"schema_version,omitempty" jsonschema:"The contract version you expect: \"1\"."`
	MinLabelMass  *float64        `json:"min_label_mass,omitempty" jsonschema:"Abstain when the model put less than this probability on the options' labels at all (no option seemed to fit), in [0,1]; applies only where the engine can tell (see label_mass). Defaults to the configured gateway.min_label_mass, else none."`
	NoneOption    bool            `json:"none_option,omitempty" jsonschema:"Add an implicit option, none of these options fits, after yours (choices only): when it wins, the answer is an abstention, never one of your options."`
	Debias        string          `json:"debias,omitempty" jsonschema:"Order debiasing: permute asks the question over cyclic shifts of its options and averages the probabilities per option (more engine calls, less position bias); off asks the options in your order alone. Defaults to the configured debias."`
	Prior         string          `json:"prior,omitempty" jsonschema:"Prior correction, after debiasing: batch divides out each option position's mean probability over the recent answers to the same question (applied once 32 have been seen, by default; wrong when the answers are meant to be skewed); content_free divides out the model's answer to the same question over an empty context (one extra, cached, engine call); off divides out nothing. Defaults to the configured prior."`
	Coverage      *float64        `json:"coverage,omitempty" jsonschema:"Ask for a prediction set at this coverage, in [0.5,0.99]: the options that together hold the right answer at least this often, from the labelled outcomes of the answering model, question kind and option count (split conformal). The answer then carries prediction_set, set_coverage and set_outcomes, and is graded act only when the set holds the decision alone."`
}

// Statuses of a response.
const (
	Decided   = "decided"
	Abstained = "abstained"
	Failed    = "error"
)

// Error codes.
const (
	CodeInvalidRequest  = "invalid_request"
	CodeConfigError     = "config_error"
	CodeProviderTimeout = "provider_timeout"
	CodeProviderError   = "provider_error"
	CodeMalformed       = "malformed_response"
	// A request refused over HTTP before it was read: its key is
	// missing or wrong, or lacks the route's scope, or its caller is over
	// its rate, or its key past its budget.
	CodeUnauthorized = "unauthorized"
	CodeForbidden    = "forbidden"
	CodeRateLimited  = "rate_limited"
	CodeOverBudget   = "over_budget"
)

// Grades of an answer.
const (
	GradeAct      = "act"
	GradeAsk      = "ask"
	GradeEscalate = "escalate"
)

// Sources of the gate an answer was graded against.
const (
	GateFromFit       = "fit"       // the gate suggested with the calibration fit that applies
	GateFromThreshold = "threshold" // no fit with a gate applies: the call's threshold
)

// Grading bounds: an answer is "ask" when its confidence is under the
// gate by at most AskBand, or when the top two options are within
// AskMargin of each other.
const (
	AskBand   = 0.1
	AskMargin = 0.1
)

// Attempt outcomes.
const (
	OutcomeOK        = "ok"
	OutcomeAbstained = "abstained"
	OutcomeTimeout   = "timeout"
	OutcomeError     = "error"
	OutcomeMalformed = "malformed"
	// OutcomeSkipped marks a provider that was not asked: the question had
	// more options than it takes, or the overall deadline had passed.
	OutcomeSkipped = "skipped"
)

// Response is the gateway's answer. Its JSON schema is the published
// contract (schema/response.json). Slices are never nil.
type Response struct {
	Status          string        `json:"status" jsonschema:"decided: decision holds the answer. abstained: no decision; the rationale says why and you should reason it through yourself. error: no decision; see error."`
	Decision        *string       `json:"decision" jsonschema:"Exactly one of the options (yes or no when no options were given), or null when abstained or on error."`
	Confidence      *float64      `json:"confidence,omitempty" jsonschema:"The probability of the decision (of the best option when abstained), after calibration when calibrated is true. Absent when no provider answered."`
	Probabilities   Probabilities `json:"probabilities,omitempty" jsonschema:"Probability per option, in option order (yes and no for a yes/no question), when the provider reported them. Absent when no provider answered."`
	Calibrated      bool          `json:"calibrated" jsonschema:"True when a calibrator learnt on the build that answered (a temperature, with biases or a confidence map where the fit has them) was applied to the provider's probabilities; false when none was, even where a fit gave the prediction set."`
	FitVersion      string        `json:"fit_version,omitempty" jsonschema:"The revision of the calibration fits applied to the probabilities; absent when no fit was applied. Outcomes reported through feedback refit them."`
	NoneProbability *float64      `json:"none_probability,omitempty" jsonschema:"With none_option: the probability of the implicit none-of-these option; probabilities then hold your options' own, which sum with it to 1."`
	Grade           string        `json:"grade,omitempty" jsonschema:"What to do with the answer: act (its calibrated confidence clears the gate and it is clearly ahead, and with coverage its prediction set holds it alone: act on it), ask (it is near the gate, or the top two options are close: ask the user), escalate (under the gate, or no option fit, or the provider declined: do not act on it; reason it through or hand it on). Absent when no provider answered."`
	Gate            *GradeGate    `json:"gate,omitempty" jsonschema:"The gate the grade was judged against, and where it came from. Absent when no provider answered, or the one that did gave no probabilities (it declined, or ranked none of the options): the grade is then escalate, whatever the gate."`
	LabelMass       *float64      `json:"label_mass" jsonschema:"The probability the model put on the options' labels at all, before the engine's constraint, to three significant digits: low means no option seemed to fit. Null where the engine cannot know (engines that report probabilities after their constraint, System One upstreams) or no provider answered."`
	PredictionSet   []string      `json:"prediction_set,omitzero" jsonschema:"With coverage: the options of the prediction set, in option order (yes and no for a yes/no question; the implicit none-of-these option by its name with none_option). An empty list is a set: no option is as likely as the right ones were at that coverage (set_note says so, and the grade is escalate). Absent when no set could be made; set_note says why."`
	SetCoverage     *float64      `json:"set_coverage,omitempty" jsonschema:"With coverage: the level the prediction set is built for, the least at or above the one asked that its outcomes support."`
	SetOutcomes     *int          `json:"set_outcomes,omitempty" jsonschema:"With coverage: how many labelled outcomes the prediction set rests on."`
	SetNote         string        `json:"set_note,omitempty" jsonschema:"With coverage and no prediction set: why there is none (too few labelled outcomes for the coverage, no calibration fit for the model, kind and option count, or no probabilities to make one of: the provider declined); with an empty one: what it means."`
	Calibration     *Steps        `json:"calibration,omitempty" jsonschema:"Every step applied to the model's probabilities before they were reported, in order, with its version; no step is applied without being named here. Absent when no provider answered."`
	Threshold       *float64      `json:"threshold,omitempty" jsonschema:"The minimum confidence this call required."`
	Rationale       string        `json:"rationale" jsonschema:"Plain words on what happened and what to do next."`
	Provider        *string       `json:"provider" jsonschema:"The provider that answered, or null."`
	Served          *Served       `json:"served,omitempty" jsonschema:"What served the answer: the node, the model and the fingerprint of the build it serves. Absent when no provider answered."`
	LatencyMS       int64         `json:"latency_ms" jsonschema:"Time this call took, in milliseconds."`
	Attempts        []Attempt     `json:"attempts" jsonschema:"Every provider tried, in order."`
	Error           *Error        `json:"error" jsonschema:"Null, or why the call failed."`
	SchemaVersion   string        `json:"schema_version" jsonschema:"The contract version: \"1\"."`
	RequestID       string        `json:"request_id" jsonschema:"The request's id, as sent or generated."`
	Cost            *string       `json:"cost" jsonschema:"What the answer cost, in US dollars, as a decimal string such as \"0.000123\": the tokens the answering node reported at its configured price, or its price a request for a hosted endpoint; \"0\" for a decision cache hit, which asked no engine. Null when it is not known (the node that answered has no price configured) or no provider answered."`
	Cache           string        `json:"cache,omitempty" jsonschema:"With the server's decision cache on: hit (an exact repeat of an earlier request to the same model with the same steps and fits, answered from the cache with that answer's probabilities; no engine was asked), miss (the provider was asked and the answer kept for repeats) or bypass (asked and not kept: the batch prior moves with every answer). Absent when the cache is off or no provider answered."`
}

// CacheStates are the values of Response.Cache: the answer path's.
var CacheStates = []string{answer.CacheHit, answer.CacheMiss, answer.CacheBypass}

// Served is what served an answer.
type Served struct {
	Node        string   `json:"node" jsonschema:"The node that answered."`
	Model       string   `json:"model" jsonschema:"The model that answered, as the node reports it."`
	Fingerprint string   `json:"fingerprint" jsonschema:"The fingerprint of the build of the model the node served it from: a hash of what the backend reports of the build and of its answers to a fixed canary. A calibration fit learnt on another build is not applied. Empty when it is not known (fingerprints are off, or the model was not probed on the node yet)."`
	Stage       string   `json:"stage,omitempty" jsonschema:"For a cascade (a model made of others, asked in turn): the stage that answered, as the cascade names it. Absent for a model that is not a cascade."`
	Stages      []string `json:"stages,omitempty" jsonschema:"For a cascade: every stage asked the question, in order, the one that answered last; more than one means the question was escalated. Absent for a model that is not a cascade."`
}

// GradeGate is the gate an answer was graded against: the one suggested
// with the calibration fit for the answering model, kind and option
// count where that fit has one, else the call's threshold.
type GradeGate struct {
	Value       float64 `json:"value" jsonschema:"The confidence (the decision's probability, as confidence reports it) at or above which the answer is graded act."`
	Source      string  `json:"source" jsonschema:"fit (suggested with the calibration fit that applies: the lowest calibrated confidence whose answers stayed under its target error, by a 95% bound, on the fit's held-out cases) or threshold (no fit with a gate applies: the call's threshold)."`
	TargetError float64 `json:"target_error,omitempty" jsonschema:"With source fit: the error rate the gate was chosen to keep under."`
}

// Steps names the steps applied to a reading: the decide answer's calibration object.
type Steps struct {
	Steps []CalibrationStep `json:"steps" jsonschema:"The steps in the order applied; empty when the probabilities are the model's own."`
}

// CalibrationStep is one step applied to a reading.
type CalibrationStep struct {
	Name    string `json:"name" jsonschema:"debias (the options asked in several orders and averaged), prior (a label prior divided out) or temperature (a fit's calibrator: a temperature, with a bias per option position or a confidence map where the fit has them)."`
	Version string `json:"version" jsonschema:"The step's method and parameters, such as permute/4 (4 orders), batch/n=40/window=256 (a running mean of 40 earlier answers divided out), content_free/empty_state (the answer over an empty context divided out) v1/T=1.5 (a fits file's temperature), v1/T=1.85/b=+0.31,-0.12,0 (a temperature with a bias per option position) or v1/T=1.2/map=1f2e3d4c (a temperature, then a confidence map, named by a hash of its knots, that serves the decision at its probability right)."`
}

// Attempt is one provider tried.
type Attempt struct {
	Provider  string `json:"provider" jsonschema:"The provider's name in the chain."`
	Outcome   string `json:"outcome" jsonschema:"ok, abstained, timeout, error, malformed, or skipped (not asked)."`
	LatencyMS int64  `json:"latency_ms" jsonschema:"Time this attempt took, in milliseconds."`
	Detail    string `json:"detail" jsonschema:"What happened, in plain words."`
}

// Error says why a call failed.
type Error struct {
	Code    string `json:"code" jsonschema:"invalid_request, config_error, provider_timeout, provider_error or malformed_response; over HTTP also unauthorized (a key missing or wrong), forbidden (a key without the route's scope) rate_limited (over the rate: Retry-After says when to come back) and over_budget (the key has spent its budget: Retry-After says when its period resets)."`
	Message string `json:"message" jsonschema:"What went wrong."`
}

// Probability is one option's probability.
type Probability struct {
	Option string
	P      float64
}

// Probabilities are per option, in option order; they are written as a
// JSON object whose key order is the option order.
type Probabilities []Probability

// MarshalJSON writes {"option": p, ...} in option order.
func (ps Probabilities) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(p.Option)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(p.P)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads the object back, keeping its key order.
func (ps *Probabilities) UnmarshalJSON(data []byte) error {
	ms, err := jsonx.Members(data)
	if errors.Is(err, jsonx.ErrNotObject) {
		return fmt.Errorf("probabilities: an object is required")
	} else if err != nil {
		return fmt.Errorf("probabilities: %w", err)
	}
	out := make(Probabilities, len(ms))
	for i, m := range ms {
		out[i].Option = m.Key
		if err := json.Unmarshal(m.Value, &out[i].P); err != nil {
			return err
		}
	}
	*ps = out
	return nil
}

// Get returns the probability of option, and whether it is there.
func (ps Probabilities) Get(option string) (float64, bool) {
	for _, p := range ps {
		if p.Option == option {
			return p.P, true
		}
	}
	return 0, false
}
