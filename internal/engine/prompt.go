package engine

import (
	"cmp"
	"encoding/json"
	"hash/fnv"
	"strings"

	"system1/internal/decision"
	"system1/internal/jsonx"
)

// Prompt is one question laid out for a chat model. Every prompt over the
// same state starts with the same System and StatePart, so an engine with
// a prompt cache prefills the state once and questions share it.
type Prompt struct {
	System    string
	StatePart string // the start of the user turn: the state, identical across questions
	Question  string // the rest of the user turn: the question and its labelled options
	Labels    []string
	// Ask holds the indices of the labels this call is held to and reads,
	// in order; nil asks for all of them.
	Ask []int
}

// Asked are the labels this call is held to and reads.
func (p Prompt) Asked() []string {
	if p.Ask == nil {
		return p.Labels
	}
	out := make([]string, len(p.Ask))
	for i, j := range p.Ask {
		out[i] = p.Labels[j]
	}
	return out
}

// User is the whole user turn.
func (p Prompt) User() string { return p.StatePart + p.Question }

// Prefix hashes what every question over the same state shares, the
// system message and the state, for engines that keep a prompt cache per
// slot: questions with one prefix can be sent to one slot.
func (p Prompt) Prefix() uint64 { return prefix(p.System, p.StatePart) }

// StatePrefix is the Prefix of every prompt Layout makes over state.
func StatePrefix(state json.RawMessage) uint64 { return prefix(system, statePart(state)) }

func prefix(system, statePart string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(system))
	h.Write([]byte(statePart))
	return h.Sum64()
}

func statePart(state json.RawMessage) string { return "State:\n" + jsonx.Text(state) + "\n\n" }

const system = "You are a fast, careful judge. You read a state and answer one question about it " +
	"by picking exactly one of the labelled options. Reply with the option's label alone."

// kinds are each kind's question when the caller gives no instructions,
// and the heading of its options.
var kinds = map[decision.Kind]struct{ ask, options string }{
	decision.Choice: {"Which option fits the state best?", "Options:"},
	decision.Noul:   {"Is this true of the state?", "Options:"},
	decision.Score:  {"Which level fits the state best?", "Levels, from lowest to highest:"},
}

// Layout lays question q out over state with the given labels, one per
// option in option order.
func Layout(state json.RawMessage, q decision.Question, labels []string) Prompt {
	var b strings.Builder
	if k, ok := kinds[q.Kind]; ok {
		b.WriteString("Question: " + cmp.Or(jsonx.Text(q.Instructions), k.ask) + "\n" + k.options + "\n")
	}
	for i, o := range q.Options {
		name, desc := o.Name, jsonx.Text(o.Text)
		b.WriteString(labels[i] + ". " + name)
		if name != "" && desc != "" {
			b.WriteString(": ")
		}
		b.WriteString(desc)
		b.WriteByte('\n')
	}
	return Prompt{
		System:    system,
		StatePart: statePart(state),
		Question:  b.String(),
		Labels:    labels,
	}
}
