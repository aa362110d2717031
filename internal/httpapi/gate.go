package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"system1/internal/answer"
	"system1/internal/decision"
)

// The request headers both answering wires (/v1/systemone and
// /v1/decisions) read besides DebiasHeader and PriorHeader: the gate a
// question's answer must clear for system1 to stand behind it. A question
// that does not is refused (answer.Refusal): a refusal answer on the
// Decisions wire, a 422 naming it on the System One wire, which has no
// refusal.
const (
	// MinLabelMassHeader refuses each question whose engine put less than
	// this probability, a number in [0,1], on the options' labels at all:
	// no option seemed to fit. Where the engine cannot tell (an engine
	// that reports after its constraint, a System One or Decisions
	// upstream) it refuses nothing. Absent refuses none.
	MinLabelMassHeader = "X-System1-Min-Label-Mass"
	// NoneOptionHeader, "true", adds the implicit option "none of these
	// options fits" (decision.NoneOption) after each choice question's
	// options: a question where it wins is refused; any other is answered
	// over the caller's options alone, renormalised (given that one of
	// them fits, as OpenAI's Decisions API reports probabilities given no
	// refusal). "false" or absent adds none.
	NoneOptionHeader = "X-System1-None-Option"
	// RefusedHeader, on a /v1/decisions reply, says in short why each
	// refused question was refused ("q1: label mass 0.31 < 0.5; q2: none
	// of these won at 0.62"); the body's refusal has no field for it, and
	// the request's log line has it in full.
	RefusedHeader = "X-System1-Refused"
)

// answerHeaders reads the headers a request to either answering wire may
// carry: the order debiasing and prior correction into req, and the gate,
// adding the none option to req's choice questions when it is asked for.
// A header given twice or holding anything else is the caller's error,
// named by the header, as is a none option that takes a choice over lim's
// option cap: the caller sent one option fewer.
func answerHeaders(r *http.Request, req *decision.Request, lim decision.Limits) (answer.Gate, *decision.Problem) {
	var g answer.Gate
	debias, bad := choiceHeader(r, DebiasHeader, decision.ValidDebias, "permute or off")
	if bad != nil {
		return g, bad
	}
	prior, bad := choiceHeader(r, PriorHeader, decision.ValidPrior, "off, batch or content_free")
	if bad != nil {
		return g, bad
	}
	req.Debias, req.Prior = debias, prior
	if vs := r.Header.Values(MinLabelMassHeader); len(vs) > 0 {
		m, err := strconv.ParseFloat(strings.TrimSpace(vs[0]), 64)
		if len(vs) > 1 || err != nil || !(m >= 0 && m <= 1) {
			return g, &decision.Problem{Path: []string{MinLabelMassHeader}, Msg: "the header " + MinLabelMassHeader + " must be a number in [0,1], once", Type: "value_error"}
		}
		g.MinLabelMass = m
	}
	none, bad := choiceHeader(r, NoneOptionHeader, func(v string) bool { return v == "true" || v == "false" }, "true or false")
	if bad != nil {
		return g, bad
	}
	if g.None = none == "true"; !g.None {
		return g, nil
	}
	qs := make([]decision.Question, len(req.Questions))
	for i, q := range req.Questions {
		qs[i] = q
		if q.Kind != decision.Choice {
			continue
		}
		if q.OptionIndex(decision.NoneOption) >= 0 {
			return g, &decision.Problem{Path: []string{NoneOptionHeader}, Type: "value_error",
				Msg: "question " + strconv.Quote(q.ID) + " already has the option " + strconv.Quote(decision.NoneOption) + ", which the header " + NoneOptionHeader + " adds; leave it out or drop the header"}
		}
		if n := len(q.Options); lim.MaxChoiceOptions > 0 && n >= lim.MaxChoiceOptions {
			return g, &decision.Problem{Path: []string{NoneOptionHeader}, Type: "value_error",
				Msg: fmt.Sprintf("question %s has %d options; with the none option the header %s adds, %d are more than the %d a node of the model takes: send at most %d, or drop the header",
					strconv.Quote(q.ID), n, NoneOptionHeader, n+1, lim.MaxChoiceOptions, lim.MaxChoiceOptions-1)}
		}
		qs[i].Options = append(append([]decision.Option(nil), q.Options...), decision.Option{Key: decision.NoneOption, Name: decision.NoneOption})
	}
	req.Questions = qs
	return g, nil
}

// overOptions is the distribution a question asked with the gate g is
// reported with, over the options the caller gave: without the none
// option, renormalised, where g added it (a question it won is refused,
// so the rest carries some probability); else d as it is.
func overOptions(g answer.Gate, q decision.Question, d decision.Distribution) decision.Distribution {
	if !g.None || q.Kind != decision.Choice || len(d) < 2 {
		return d
	}
	rest := append(decision.Distribution(nil), d[:len(d)-1]...)
	var sum float64
	for _, p := range rest {
		sum += p
	}
	if sum <= 0 {
		return d
	}
	for i := range rest {
		rest[i] /= sum
	}
	return rest
}

// refusedHeader writes why each refused question was refused, for
// RefusedHeader; "" when none was.
func refusedHeader(qs []decision.Question, as []answer.Question) string {
	var items []string
	for i, a := range as {
		if a.Refusal != nil {
			items = append(items, headerName(qs[i].ID)+": "+headerText(a.Refusal.Short(), maxHeaderItem))
		}
	}
	return headerList(items)
}
