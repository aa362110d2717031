package fakeengine

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
)

// logprobs are the labels' log-probabilities for a request: Prompted's
// when set, else Logprobs', else Halving's, moved by Shift and Jitter.
func (b Behavior) logprobs(rec Request) []float64 {
	var lps []float64
	switch {
	case b.Prompted != nil:
		lps = b.Prompted(rec)
	case b.Logprobs != nil:
		lps = b.Logprobs(rec.Labels)
	default:
		lps = Halving(rec.Labels)
	}
	if b.Shift == 0 && b.Jitter == 0 {
		return lps
	}
	lps = slices.Clone(lps)
	for i := range lps {
		if i >= len(rec.Labels) || math.IsInf(lps[i], 0) {
			continue
		}
		if b.Shift != 0 {
			// SHA-256, not FNV: labels differing in their last byte
			// must get unrelated shifts, which FNV's top bits are not.
			h := sha256.Sum256(fmt.Appendf(nil, "%d\x00%s\x00%s\x00%s", b.ShiftSeed, rec.System, rec.User, rec.Labels[i]))
			lps[i] += b.Shift * (2*float64(binary.BigEndian.Uint64(h[:])>>11)/(1<<53) - 1)
		}
		if b.Jitter != 0 {
			lps[i] += b.Jitter * (2*rand.Float64() - 1)
		}
		lps[i] = min(lps[i], 0) // a log-probability, as an engine reports
	}
	return lps
}

// Prompt is a system1 prompt taken apart, as a test engine with a model
// of its own reads it.
type Prompt struct {
	// State is the text between "State:" and the question.
	State string
	// Instructions is the question's text.
	Instructions string
	// Options maps each label to its option line after "L. ": "name: text",
	// the name alone, or the text alone.
	Options map[string]string
	// Order is the labels in the order listed.
	Order []string
}

// optionLine is a labelled option line: its label, then its text.
var optionLine = regexp.MustCompile(`(?m)^([A-Za-z0-9]{1,2})\. (.*)$`)

// ParsePrompt takes apart the user turn system1 writes (internal/engine's
// Layout): "State:\n<state>\n\nQuestion: <instructions>\n<heading>:\n" and
// one "L. option" line per option. It reports false when the text is not
// of that shape.
func ParsePrompt(user string) (Prompt, bool) {
	rest, ok := strings.CutPrefix(user, "State:\n")
	if !ok {
		return Prompt{}, false
	}
	i := strings.LastIndex(rest, "\n\nQuestion: ")
	if i < 0 {
		return Prompt{}, false
	}
	p := Prompt{State: rest[:i], Options: map[string]string{}}
	q := rest[i+len("\n\nQuestion: "):]
	instr, list, ok := strings.Cut(q, "\n")
	if !ok {
		return Prompt{}, false
	}
	p.Instructions = instr
	if _, list, ok = strings.Cut(list, ":\n"); !ok { // "Options:" or "Levels, from lowest to highest:"
		return Prompt{}, false
	}
	for _, m := range optionLine.FindAllStringSubmatch(list, -1) {
		if _, dup := p.Options[m[1]]; !dup {
			p.Order = append(p.Order, m[1])
		}
		p.Options[m[1]] = m[2]
	}
	return p, len(p.Order) > 0
}

// Leaning answers as Behavior.Prompted, by the state ("about <option>"
// triples that option) and four times over for whichever option is
// listed first; over an empty state only the position counts, so a
// content-free reading is the position bias alone. It is a model with a
// known signal and a known position bias, for tests of debiasing and
// prior correction.
func Leaning(r Request) []float64 {
	p, _ := ParsePrompt(r.User)
	ws := make([]float64, len(r.Labels))
	for i, l := range r.Labels {
		ws[i] = 1
		if name := p.Options[l]; p.State != "" && strings.Contains(p.State, "about "+name) {
			ws[i] *= 3
		}
		if len(p.Order) > 0 && p.Order[0] == l {
			ws[i] *= 4
		}
	}
	return logShares(ws)
}

// FirstBiased answers as Behavior.Prompted, liking the options by name
// (alpha 1, beta 2, gamma 3, true and false 1 each) and, five times over,
// whichever is listed first: a model with a known position bias, the bias
// order debiasing spreads out.
func FirstBiased(r Request) []float64 {
	p, _ := ParsePrompt(r.User)
	weight := map[string]float64{"alpha": 1, "beta": 2, "gamma": 3, "true": 1, "false": 1}
	ws := make([]float64, len(r.Labels))
	for i, l := range r.Labels {
		ws[i] = weight[p.Options[l]]
		if len(p.Order) > 0 && p.Order[0] == l {
			ws[i] *= 5
		}
	}
	return logShares(ws)
}

// logShares turns weights, in place, into the log of each one's share.
func logShares(ws []float64) []float64 {
	var total float64
	for _, w := range ws {
		total += w
	}
	for i := range ws {
		ws[i] = math.Log(ws[i] / total)
	}
	return ws
}
