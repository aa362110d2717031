package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"system1/internal/decision"
)

// Candidate labels, in order of preference: capital letters first, then
// two capital letters, lower case, digits and two lower-case letters, for
// choices with many options. An engine keeps those that are single tokens
// of its model's vocabulary. Score levels are digits, which read as the
// levels they are.
var (
	choiceCandidates = candidates()
	digits           = []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}
)

func candidates() []string {
	upper, lower := "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz"
	out := strings.Split(upper, "")
	pairs := func(set string) {
		for _, a := range set {
			for _, b := range set {
				out = append(out, string(a)+string(b))
			}
		}
	}
	pairs(upper)
	out = append(out, strings.Split(lower+"0123456789", "")...)
	pairs(lower)
	return out
}

// Candidates returns the labels to try for a question, in order: letters
// for the options of a choice and the two sides of a noul (neutral labels,
// not the words yes and no), digits for score levels.
func Candidates(q decision.Question) []string {
	if q.Kind == decision.Score {
		return digits
	}
	return choiceCandidates
}

// Outcome is one question answered by one engine.
type Outcome struct {
	Dist decision.Distribution
	// Mass is the raw probability the engine gave the labels, on pre-mask
	// engines when every label was read from one prompt (in one call or in
	// rounds that share it); NaN otherwise.
	Mass float64
	// Missing are the keys of options whose label the engine did not
	// report; they were given probability 0, which is only a bound.
	Missing []string
	// ConstraintFailed is set when an engine that was to hold the first
	// token to the labels generated another (see Reading).
	ConstraintFailed bool
	// Rounds is the number of engine calls; more than one when the options
	// outnumber what one call can read (see Ask).
	Rounds int
	// Shared is set when rounds shared one prompt, which makes the stitched
	// distribution exact; rounds over separate prompts are an
	// approximation (see Ask).
	Shared bool
	// Orders is how many orders of the options were asked and averaged
	// (AskOrders); 0 or 1 is the caller's order alone, and then Raw is
	// nil.
	Orders int
	// Raw is the reading in the caller's order when several orders were
	// averaged into Dist.
	Raw   decision.Distribution
	Model string
	// Usage as the engine counted it, or estimated (4 characters a token)
	// when it reported none.
	InputTokens, OutputTokens int
	Estimated                 bool
}

// Ask answers question q about state on engine e, serving model.
//
// When one call can read every option's label, one call it is. Otherwise
// the options go in rounds of at most the labels one call can read, and
// the rounds are stitched into one distribution through an anchor: the
// first round's most likely option appears in every later round, and each
// option's weight is its probability over the anchor's in its own round.
//
//   - Where the engine can hold a call to some of the prompt's labels and
//     the model has a label for every option, every round shares one
//     prompt listing all options. Then the anchor ratio is exact: on a
//     pre-mask engine all rounds read one softmax, so the values share one
//     normalisation; on a post-mask engine each round renormalises over its
//     labels, which scales every value in the round alike and leaves the
//     ratio to the anchor unchanged.
//   - Otherwise each round lists only its own options. The ratio to the
//     anchor then assumes it does not depend on which other options are
//     shown (Luce's choice axiom), an approximation; the outcome says so.
func Ask(ctx context.Context, e Engine, model string, state json.RawMessage, q decision.Question) (Outcome, error) {
	return ask(ctx, e, model, state, q, 0)
}

// ask is Ask with the labels of a score shifted by shift places (level i
// gets the label of level i+shift, cyclically), for AskOrders.
func ask(ctx context.Context, e Engine, model string, state json.RawMessage, q decision.Question, shift int) (Outcome, error) {
	n := len(q.Options)
	labels, err := e.Labels(ctx, model, Candidates(q), n)
	if err != nil {
		return Outcome{}, err
	}
	if shift != 0 && len(labels) >= n {
		labels = rotate(labels[:n], shift)
	}
	caps := e.Caps()
	per := len(labels)
	if caps.PerCall > 0 {
		per = min(per, caps.PerCall)
	}
	if per < 2 || (per < n && q.Kind != decision.Choice) {
		return Outcome{}, &Failure{Kind: Rejected, Err: fmt.Errorf("model %s has %d usable single-token labels for %d options", model, per, n)}
	}
	if n <= per {
		p := Layout(state, q, labels[:n])
		all := Indices(0, n)
		r, err := read(ctx, e, model, p, optionKeys(q, all))
		if err != nil {
			return Outcome{}, err
		}
		out := Outcome{Dist: r.dist, Mass: math.NaN(), Rounds: 1}
		if r.PreMask {
			out.Mass = decision.Mass(r.Logprobs, r.Found)
		}
		out.add(q, r, all, p)
		return out, nil
	}
	return rounds(ctx, e, model, state, q, labels, per, caps.Subsets && len(labels) >= n)
}

// reading is a checked engine reading with its distribution over the
// labels it asked for.
type reading struct {
	Reading
	dist decision.Distribution
}

// read asks e for one reading of prompt p, whose asked labels stand for
// the options keys, in order.
func read(ctx context.Context, e Engine, model string, p Prompt, keys []string) (reading, error) {
	r, err := e.Read(ctx, model, p)
	if err != nil {
		return reading{}, err
	}
	asked := len(p.Asked())
	if len(r.Logprobs) != asked || len(r.Found) != asked {
		return reading{}, &Failure{Kind: Malformed, Err: fmt.Errorf("reading has %d values for %d labels", len(r.Logprobs), asked)}
	}
	d, err := decision.FromLogprobs(r.Logprobs, r.Found)
	if errors.Is(err, decision.ErrNoMass) && !slices.Contains(r.Found, true) {
		return reading{}, unranked(p.Asked(), keys)
	}
	if err != nil {
		return reading{}, &Failure{Kind: Malformed, Err: err}
	}
	return reading{Reading: r, dist: d}, nil
}

// add folds one reading's usage and missing labels into the outcome; opts
// maps the reading's labels to the question's options.
func (o *Outcome) add(q decision.Question, r reading, opts []int, p Prompt) {
	for i, ok := range r.Found {
		if !ok {
			o.Missing = append(o.Missing, q.Options[opts[i]].Key)
		}
	}
	if o.Model == "" {
		o.Model = r.Model
	}
	o.ConstraintFailed = o.ConstraintFailed || r.ConstraintFailed
	if r.Counted {
		o.InputTokens += r.InputTokens
		o.OutputTokens += r.OutputTokens
	} else {
		o.InputTokens += (len(p.System) + len(p.User()) + 3) / 4
		o.OutputTokens++
		o.Estimated = true
	}
}

// rounds asks the options in groups and stitches them through an anchor;
// Ask's comment says how and when that is exact.
func rounds(ctx context.Context, e Engine, model string, state json.RawMessage, q decision.Question, labels []string, per int, shared bool) (Outcome, error) {
	n := len(q.Options)
	groups := [][]int{Indices(0, per)}
	for i := per; i < n; i += per - 1 {
		groups = append(groups, Indices(i, min(i+per-1, n)))
	}
	var shown Prompt // the one prompt, when shared
	if shared {
		shown = Layout(state, q, labels[:n])
	}
	prompt := func(g []int) Prompt {
		if shared {
			p := shown
			p.Ask = g
			return p
		}
		sub := q
		sub.Options = Pick(q.Options, g)
		return Layout(state, sub, labels[:len(g)])
	}

	results := make([]reading, len(groups))
	prompts := make([]Prompt, len(groups))
	prompts[0] = prompt(groups[0])
	var err error
	if results[0], err = read(ctx, e, model, prompts[0], optionKeys(q, groups[0])); err != nil {
		return Outcome{}, err
	}
	first := results[0].dist.Argmax()
	anchor := groups[0][first]
	for i := 1; i < len(groups); i++ {
		groups[i] = append([]int{anchor}, groups[i]...)
		prompts[i] = prompt(groups[i])
	}

	// The later rounds go together; each read is one engine call, which
	// under a gate (WithGate) waits for a slot of its own.
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	for i := 1; i < len(groups); i++ {
		wg.Go(func() { results[i], errs[i] = read(ctx, e, model, prompts[i], optionKeys(q, groups[i])) })
	}
	wg.Wait()

	out := Outcome{Mass: math.NaN(), Rounds: len(groups), Shared: shared}
	weight := make([]float64, n)
	// Over one prompt, values from before the mask are one softmax's, so
	// each option's raw value, read once, sums to the mass on the labels.
	premask := shared
	var lps []float64
	var found []bool
	for i, g := range groups {
		if errs[i] != nil {
			return Outcome{}, errs[i]
		}
		premask = premask && results[i].PreMask
		for j := range g {
			if i == 0 || j > 0 { // a later round's first is the anchor, read in the first
				lps, found = append(lps, results[i].Logprobs[j]), append(found, results[i].Found[j])
			}
		}
		d := results[i].dist
		a := 0 // the anchor is first in every later round
		if i == 0 {
			a = first
		}
		if !(d[a] > 0) {
			return Outcome{}, &Failure{Kind: Malformed, Uninformative: true, Err: fmt.Errorf("round %d gave the anchor option %q no probability; the rounds cannot be stitched", i+1, q.Options[anchor].Key)}
		}
		for j, opt := range g {
			weight[opt] = d[j] / d[a]
		}
		out.add(q, results[i], g, prompts[i])
	}
	var sum float64
	for _, w := range weight {
		sum += w
	}
	out.Dist = make(decision.Distribution, n)
	for i, w := range weight {
		out.Dist[i] = w / sum
	}
	if err := out.Dist.Check(n); err != nil {
		return Outcome{}, &Failure{Kind: Malformed, Err: fmt.Errorf("stitching %d rounds: %w", len(groups), err)}
	}
	if premask {
		out.Mass = decision.Mass(lps, found)
	}
	return out, nil
}

// Indices are the integers from from up to to, to left out: the indices
// of a slice's elements in that range.
func Indices(from, to int) []int {
	out := make([]int, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// Pick is the elements of s at idx, in idx's order.
func Pick[T any](s []T, idx []int) []T {
	out := make([]T, len(idx))
	for i, j := range idx {
		out[i] = s[j]
	}
	return out
}

// optionKeys are the keys of q's options at idx, in order.
func optionKeys(q decision.Question, idx []int) []string {
	keys := make([]string, len(idx))
	for i, j := range idx {
		keys[i] = q.Options[j].Key
	}
	return keys
}

// unranked is the failure of a reading in which the model ranked none of
// the labels among the alternatives the engine reported: no number can be
// given without making one up, and the node did nothing wrong. The error
// names each label with its option.
func unranked(labels, keys []string) *Failure {
	named := make([]string, len(labels))
	for i, l := range labels {
		named[i] = strconv.Quote(l)
		if i < len(keys) {
			named[i] += " (" + strconv.Quote(clip(keys[i], 40)) + ")"
		}
	}
	return &Failure{Kind: Malformed, Uninformative: true, Err: fmt.Errorf(
		"%w: the model ranked none of the labels %s among the top log-probabilities the engine reported",
		decision.ErrNoMass, strings.Join(named, ", "))}
}

// clip shortens s to at most n bytes on a character boundary, marking the
// cut, so that an error stays short whatever the option keys are.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
