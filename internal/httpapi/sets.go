package httpapi

import (
	"math"
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
	// whole. A set whose keys do not fit in one of the other headers'
	// items, or one holding a key that would not read back (listable), is
	// never cut or listed: it is given by position instead, "q1=mask:c8"
	// (setMask), which any set of up to 255 options fits in. The value
	// is bounded as theirs: questions past it are counted ("; 3 more"),
	// never cut, and decide's prediction_set gives a set whole.
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
	if err != nil {
		c = math.NaN() // no number: refused as one out of range is
	}
	if err = answer.CheckCoverage(c); len(vs) > 1 || err != nil {
		msg := "the header " + CoverageHeader + " must be given once"
		if err != nil {
			msg = "the header " + CoverageHeader + " " + strings.TrimPrefix(err.Error(), "coverage ") + ", such as 0.9, given once"
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
		readable := true
		for j, o := range a.Set.Options {
			// A key whole (escaped, at most four bytes a byte), never cut
			// like a name: the set is read back by key, and one too long
			// for an item is given by position.
			k := qs[i].Options[o].Key
			keys[j] = headerText(k, 4*len(k))
			readable = readable && listable(keys[j])
		}
		items[i] = id + "=" + strings.Join(keys, ",")
		if len(items[i]) > maxHeaderItem || !readable {
			items[i] = id + "=mask:" + setMask(a.Set.Options, len(qs[i].Options))
		}
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

// listable reports whether an escaped option key reads back whole from
// a set listed by key: no separator of the list (",", ";") in it, no
// space at an end, which the list trims, and not the position form's
// start, which a reader takes "q1=mask:8" for.
func listable(key string) bool {
	return !strings.ContainsAny(key, ",;") && strings.TrimSpace(key) == key && !strings.HasPrefix(key, "mask:")
}

// setMask writes a set of option positions (0 to n-1) as hex digits, one
// per four options in order, the first option of each four its highest
// bit: options 0 and 4 of 6 are "88", 0 and 1 of 3 "c". At most 64
// digits for 255 options, so a set too long to list by key still fits
// whole in a header item.
func setMask(set []int, n int) string {
	digits := make([]byte, (n+3)/4)
	for _, i := range set {
		if i >= 0 && i < n {
			digits[i/4] |= 8 >> (i % 4)
		}
	}
	for j, d := range digits {
		digits[j] = "0123456789abcdef"[d]
	}
	return string(digits)
}
