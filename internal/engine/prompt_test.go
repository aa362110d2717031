package engine

import (
	"cmp"
	"encoding/json"
	"strings"
	"testing"

	"system1/internal/decision"
	"system1/internal/jsonx"
)

// layoutEachPiece is Layout as it was written before it wrote into one
// buffer: each piece a string of its own. Layout must say exactly this.
func layoutEachPiece(state json.RawMessage, q decision.Question, labels []string) Prompt {
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
	return Prompt{System: system, StatePart: "State:\n" + jsonx.Text(state) + "\n\n", Question: b.String(), Labels: labels}
}

// TestLayoutAsEachPiece holds Layout to the prompt it wrote before, over
// plain strings and every text that is not one: escapes, null, absent,
// empty, objects, invalid UTF-8, options without a name.
func TestLayoutAsEachPiece(t *testing.T) {
	texts := []string{``, `null`, `""`, `"plain"`, `"a \"quoted\" word\nand a line"`, `"caf\u00e9 \ud83d\ude00"`,
		"\"bad \xff byte\"", `{"b": [1, 2], "a": "x"}`, `"tab	inside"`, `42`, `"é ü 日本"`}
	for _, state := range texts {
		for _, instr := range texts {
			for _, kind := range []decision.Kind{decision.Choice, decision.Noul, decision.Score, decision.Kind("other")} {
				var opts []decision.Option
				for i, text := range texts {
					opts = append(opts, decision.Option{Key: string(rune('a' + i)), Name: []string{"", "billing", "x y"}[i%3], Text: json.RawMessage(text)})
				}
				labels := []string{"A", "B", "C", "D", "E", "F", "G", "H", "I", "J", "K"}
				q := decision.Question{Kind: kind, Instructions: json.RawMessage(instr), Options: opts}
				got, want := Layout(json.RawMessage(state), q, labels), layoutEachPiece(json.RawMessage(state), q, labels)
				if got.System != want.System || got.StatePart != want.StatePart || got.Question != want.Question || len(got.Labels) != len(want.Labels) || got.Ask != nil {
					t.Fatalf("Layout(%s, %s, %v):\n%q\n%q\nwant\n%q\n%q", state, instr, kind, got.StatePart, got.Question, want.StatePart, want.Question)
				}
				if StatePrefix(json.RawMessage(state)) != want.Prefix() {
					t.Fatalf("StatePrefix(%s) is not the prompt's Prefix", state)
				}
			}
		}
	}
}

// TestLayoutAllocations holds a question over a plain state to two
// allocations, its state part and its question; a choice of three made
// 10 with each piece in a string of its own.
func TestLayoutAllocations(t *testing.T) {
	state := json.RawMessage(`"Ticket 10001 from customer 707: I was charged twice for the March invoice."`)
	q := decision.Question{Kind: decision.Choice, Instructions: json.RawMessage(`"Which team should handle this ticket?"`), Options: []decision.Option{
		{Key: "billing", Name: "billing", Text: json.RawMessage(`"payments, refunds, invoices"`)},
		{Key: "engineering", Name: "engineering", Text: json.RawMessage(`"bugs, outages, errors"`)},
		{Key: "success", Name: "success", Text: json.RawMessage(`"accounts, renewals, onboarding"`)},
	}}
	labels := []string{"A", "B", "C"}
	if n := testing.AllocsPerRun(100, func() { _ = Layout(state, q, labels) }); n > 2 {
		t.Errorf("Layout made %v allocations, want 2 at most", n)
	}
}
