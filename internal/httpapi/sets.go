package httpapi

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"system1/internal/answer"
	"system1/internal/decision"
)

// Headers of prediction sets on /v1/systemone, whose body keeps Jev's
// shape: a request asks with CoverageHeader, and the reply gives every
// question's set in SetsHeader and the level they are built for in
// SetCoverageHeader.
const (
	// CoverageHeader asks for prediction sets at a coverage in [0.5,
	// 0.99] (answer.CheckCoverage): "X-System1-Coverage: 0.9".
	CoverageHeader = "X-System1-Coverage"
	// SetsHeader gives, per question, the option keys of its set,
	// "q1=billing,refund; q2=; q3 unavailable": an empty set after "=",
	// and "unavailable" where there is no set (too few labelled outcomes
	// for the coverage, or no fit; the request's log line says which).
	// Ids are escaped and cut like the other headers' names, keys escaped
	// whole; a question's item longer than the other headers' items is
	// cut, ending in "...", and the value is bounded as theirs ("; 3
	// more"): decide's prediction_set gives a set whole.
	SetsHeader = "X-System1-Sets"
	// SetCoverageHeader gives the level the sets are built for: the least
	// at or above the coverage asked that the fits hold ("0.9"), per
	// question ("q1=0.9; q2=0.91") where they differ; absent when no
	// question has a set.
	SetCoverageHeader = "X-System1-Set-Coverage"
)

// coverageHeader reads CoverageHeader: 0 when absent.
func coverageHeader(r *http.Request) (float64, *decision.Problem) {
	vs := r.Header.Values(CoverageHeader)
	if len(vs) == 0 {
		return 0, nil
	}
	c, err := strconv.ParseFloat(strings.TrimSpace(vs[0]), 64)
	if err == nil {
		err = answer.CheckCoverage(c)
	}
	if len(vs) > 1 || err != nil {
		msg := "the header " + CoverageHeader + " must be given once"
		if err != nil {
			msg = "the header " + CoverageHeader + ": " + strings.TrimPrefix(err.Error(), "coverage ") + ", such as 0.9, given once"
		}
		return 0, &decision.Problem{Path: []string{CoverageHeader}, Type: "value_error", Msg: msg}
	}
	return c, nil
}

// setHeaders sets SetsHeader and SetCoverageHeader from the answers'
// sets, and returns why each question without one has none, for the
// request's log line.
func setHeaders(h http.Header, qs []decision.Question, as []answer.Question) []string {
	items := make([]string, len(as))
	var levels, values, why []string
	for i, a := range as {
		id := headerName(qs[i].ID)
		if a.Set == nil || a.Set.Options == nil {
			items[i] = id + " unavailable"
			if a.Set != nil {
				why = append(why, strconv.Quote(qs[i].ID)+": "+a.Set.Note)
			}
			continue
		}
		keys := make([]string, len(a.Set.Options))
		for j, o := range a.Set.Options {
			// A key whole (escaped), not cut like a name: the set is
			// read back by key; only a set too long for one item is cut.
			keys[j] = headerText(qs[i].Options[o].Key, maxHeaderItem)
		}
		items[i] = id + "=" + strings.Join(keys, ",")
		lv := strconv.FormatFloat(a.Set.Coverage, 'g', -1, 64)
		levels, values = append(levels, id+"="+lv), append(values, lv)
	}
	h.Set(SetsHeader, headerList(items))
	switch {
	case len(values) == 0:
	case len(slices.Compact(slices.Clone(values))) == 1:
		h.Set(SetCoverageHeader, values[0])
	default:
		h.Set(SetCoverageHeader, headerList(levels))
	}
	return why
}
