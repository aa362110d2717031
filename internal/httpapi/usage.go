package httpapi

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"system1/internal/decisionlog"
	"system1/internal/outcomes"
	"system1/internal/systemone"
)

// defaultUsageWindow is how far back GET /v1/usage reads without since.
const defaultUsageWindow = 30 * 24 * time.Hour

// usageParams are the query parameters GET /v1/usage takes; any other
// is a 422 naming it.
var usageParams = []string{"since", "until", "group_by"}

// handleUsage serves GET /v1/usage: spend, decisions and tokens from the
// decision log. Query: since and until (RFC 3339 times or UTC dates
// such as 2026-12-01; default the last 30 days to now) and group_by (a
// comma-separated list of key, model, day; default none).
func (s *Server) handleUsage(w http.ResponseWriter, r *http.Request) {
	q, ok := knownParams(w, r, "/v1/usage", usageParams...)
	if !ok {
		return
	}
	now := time.Now().UTC()
	until, ok := now, true
	if v := q.Get("until"); v != "" {
		if until, ok = parseInstant(v); !ok {
			badQuery(w, "until", "until must be an RFC 3339 time such as 2026-12-01T00:00:00Z or a UTC date such as 2026-12-01")
			return
		}
	}
	since := until.Add(-defaultUsageWindow)
	if v := q.Get("since"); v != "" {
		if since, ok = parseInstant(v); !ok {
			badQuery(w, "since", "since must be an RFC 3339 time such as 2026-12-01T00:00:00Z or a UTC date such as 2026-12-01")
			return
		}
	}
	switch {
	case since.Before(until):
	case q.Get("until") == "": // until is now: the since given is past it
		badQuery(w, "since", fmt.Sprintf("since must be before until (now, %s, when until is not given)", until.Format(time.RFC3339)))
		return
	default:
		badQuery(w, "until", "until must be after since")
		return
	}
	by := []string{}
	if v := q.Get("group_by"); v != "" {
		for g := range strings.SplitSeq(v, ",") {
			switch {
			case !slices.Contains(decisionlog.UsageGroups, g):
				badQuery(w, "group_by", fmt.Sprintf("group_by %q is not one of %s (comma-separated)", g, strings.Join(decisionlog.UsageGroups, ", ")))
				return
			case slices.Contains(by, g):
				badQuery(w, "group_by", fmt.Sprintf("group_by names %s twice", g))
				return
			}
			by = append(by, g)
		}
	}
	if s.opt.DecisionLog == nil {
		writeError(w, http.StatusServiceUnavailable, systemone.Unavailable, "the decision log is off (decision_log in the configuration), so no usage is kept")
		return
	}
	rep, err := outcomes.ReportUsage(r.Context(), s.opt.DecisionLog, since, until, by)
	writeReport(w, r, rep, err)
}

// parseInstant reads an RFC 3339 time or a date, which is its UTC
// midnight.
func parseInstant(v string) (time.Time, bool) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t.UTC(), true
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, true
	}
	return time.Time{}, false
}
