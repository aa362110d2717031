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
	return Pick(p.Labels, p.Ask)
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

func statePart(state json.RawMessage) string {
	if body, ok := jsonx.Plain(state); ok { // most states: one allocation
		return "State:\n" + string(body) + "\n\n"
	}
	return "State:\n" + jsonx.Text(state) + "\n\n"
}

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
	// The question is written in one buffer sized for it, a plain JSON
	// string's text straight from its bytes: every question of every row
	// is laid out, and each piece in a string of its own cost ten
	// allocations a question.
	k, known := kinds[q.Kind]
	size := len(q.Instructions) + len(k.ask) + len(k.options) + 12
	for i, o := range q.Options {
		size += len(labels[i]) + len(o.Name) + len(o.Text) + 5
	}
	var b strings.Builder
	b.Grow(size)
	if known {
		b.WriteString("Question: ")
		if body, ok := jsonx.Plain(q.Instructions); ok && len(body) > 0 {
			b.Write(body)
		} else {
			b.WriteString(cmp.Or(jsonx.Text(q.Instructions), k.ask))
		}
		b.WriteString("\n")
		b.WriteString(k.options)
		b.WriteString("\n")
	}
	for i, o := range q.Options {
		b.WriteString(labels[i])
		b.WriteString(". ")
		b.WriteString(o.Name)
		if body, ok := jsonx.Plain(o.Text); ok {
			if o.Name != "" && len(body) > 0 {
				b.WriteString(": ")
			}
			b.Write(body)
		} else if desc := jsonx.Text(o.Text); desc != "" {
			if o.Name != "" {
				b.WriteString(": ")
			}
			b.WriteString(desc)
		}
		b.WriteByte('\n')
	}
	return Prompt{
		System:    system,
		StatePart: statePart(state),
		Question:  b.String(),
		Labels:    labels,
	}
}
