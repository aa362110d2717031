package httpapi

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"system1/internal/decision"
	"system1/internal/outcomes"
	"system1/internal/systemone"
)

// maxReportWindow bounds how far back GET /v1/calibration reads.
const maxReportWindow = 366 * 24 * time.Hour

// handleCalibration serves GET /v1/calibration: per model, kind and
// option bucket, how calibrated the answers recorded over a recent window
// were on their outcomes, with a suggested gate and a reliability
// diagram, and per model a suggested min_label_mass. Query: window (a
// duration such as 24h, or days such as 7d; default 7d), target_error
// (in (0, 1); default the configuration's) and max_in_scope_loss (in
// (0, 1); default 0.05).
func (s *Server) handleCalibration(w http.ResponseWriter, r *http.Request) {
	q, ok := knownParams(w, r, "/v1/calibration", "window", "target_error", "max_in_scope_loss")
	if !ok {
		return
	}
	window, ok := queryWindow(w, q, outcomes.DefaultReportWindow)
	if !ok {
		return
	}
	target := s.opt.TargetError
	if v := q.Get("target_error"); v != "" {
		t, err := strconv.ParseFloat(v, 64)
		if err != nil || !(t > 0 && t < 1) {
			badQuery(w, "target_error", "target_error must be a number in (0, 1), such as 0.02")
			return
		}
		target = t
	}
	maxLoss := 0.0
	if v := q.Get("max_in_scope_loss"); v != "" {
		l, err := strconv.ParseFloat(v, 64)
		if err != nil || !(l > 0 && l < 1) {
			badQuery(w, "max_in_scope_loss", "max_in_scope_loss must be a number in (0, 1), such as 0.05")
			return
		}
		maxLoss = l
	}
	if s.opt.DecisionLog == nil {
		writeError(w, http.StatusServiceUnavailable, systemone.Unavailable, "the decision log is off (decision_log in the configuration), so there are no outcomes to report on")
		return
	}
	now := time.Now()
	rep, err := s.opt.Tracker.Report(r.Context(), s.opt.Answer.Fits(), outcomes.ReportOptions{
		Since: now.Add(-window), Until: now, TargetError: target, MaxInScopeLoss: maxLoss, Drift: s.opt.Drift, Loop: s.opt.Loop})
	if err == nil {
		rep.Cascades, err = outcomes.ReportCascades(r.Context(), s.opt.DecisionLog, s.opt.Answer.Fits(), s.opt.Answer.Cascades(), s.opt.Answer.Resolve, now.Add(-window), now)
	}
	writeReport(w, r, rep, err)
}

// badQuery answers a 422 naming the query parameter at fault.
func badQuery(w http.ResponseWriter, param, msg string) {
	writeInvalid(w, systemone.InQuery, decision.Problem{Path: []string{param}, Msg: msg, Type: "value_error"})
}

// knownParams reads r's query, refusing with a 422 naming it a query
// parameter that does not decode (a bad percent escape, or a semicolon,
// which url.ParseQuery drops), one the route does not take (a misspelt
// one would otherwise leave its default in silence) or one given twice
// (which of its values would win is nowhere written), the first by name;
// ok reports whether the query passed.
func knownParams(w http.ResponseWriter, r *http.Request, route string, names ...string) (q url.Values, ok bool) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		for pair := range strings.SplitSeq(r.URL.RawQuery, "&") {
			if _, err := url.ParseQuery(pair); err != nil {
				name, _, _ := strings.Cut(pair, "=")
				name, _, _ = strings.Cut(name, ";")
				if n, err := url.QueryUnescape(name); err == nil {
					name = n
				}
				badQuery(w, name, fmt.Sprintf("the query parameter %q does not decode: names and values are percent-encoded, with & between them", pair))
				return nil, false
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(q)) {
		if !slices.Contains(names, name) {
			badQuery(w, name, fmt.Sprintf("%s is not a parameter of %s, which takes %s", name, route, strings.Join(names, ", ")))
			return nil, false
		}
		if len(q[name]) > 1 {
			badQuery(w, name, name+" is given twice; send it once")
			return nil, false
		}
	}
	return q, true
}

// queryWindow reads a report's window query parameter, which knownParams
// has passed: def when absent, else a duration such as 24h or days such
// as 7d, at most maxReportWindow. Out of bounds, it answers the 422 and
// ok is false.
func queryWindow(w http.ResponseWriter, q url.Values, def time.Duration) (window time.Duration, ok bool) {
	v := q.Get("window")
	if v == "" {
		return def, true
	}
	d, err := parseWindow(v)
	if err != nil || d <= 0 || d > maxReportWindow {
		badQuery(w, "window", "window must be a positive duration such as 24h or 7d, at most 366d")
		return 0, false
	}
	return d, true
}

// parseWindow reads "Nd" or a Go duration.
func parseWindow(v string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.ParseFloat(days, 64)
		if err != nil || !(n > 0 && n <= 366) {
			return 0, fmt.Errorf("bad window %q", v)
		}
		return time.Duration(n * float64(24*time.Hour)), nil
	}
	return time.ParseDuration(v)
}
