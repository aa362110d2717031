package outcomes

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"system1/internal/calibration/fitting"
	"system1/internal/decision"
	"system1/internal/decisionlog"
)

// DefaultShadowWindow is how far back a shadow report reads the log.
const DefaultShadowWindow = 7 * 24 * time.Hour

// Signature names a question signature in reports: its kind, its option
// count and a hash of its option keys in order, short enough for a
// metric's label. Questions of one signature are the same question over
// different states, so their answers can be compared and pooled.
func Signature(kind decision.Kind, options []string) string {
	h := sha256.Sum256([]byte(strings.Join(options, "\x00")))
	return fmt.Sprintf("%s/%d/%s", kind, len(options), hex.EncodeToString(h[:6]))
}

// ShadowReport compares, per served model, candidate and question
// signature, the answers a candidate gave beside the served ones: by a
// shadow rollout (GET /v1/shadow, system1 shadow --report) or a replay
// of the log (system1 replay).
type ShadowReport struct {
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
	// Source is "shadow" (live traffic) or "replay".
	Source     string            `json:"source"`
	Signatures []ShadowSignature `json:"signatures"`
	// Failed and Refused are a replay's requests the candidate failed
	// and questions it refused with no reading, which the signatures
	// leave out: a candidate is not judged on its answers alone.
	Failed  int `json:"failed,omitempty"`
	Refused int `json:"refused,omitempty"`
}

// ShadowSignature is one model, candidate and signature's comparison
// (fitting.Compare), with its recommendation and evidence.
type ShadowSignature struct {
	Model     string        `json:"model"`
	Candidate string        `json:"candidate"`
	Signature string        `json:"signature"`
	Kind      decision.Kind `json:"kind"`
	Options   []string      `json:"options"`
	fitting.Comparison
}

// ShadowPair is a served answer, as the log holds it with its latest
// outcome, and a candidate's answer to the same question.
type ShadowPair struct {
	Served    decisionlog.Entry
	Candidate string
	Dist      []float64
}

// ShadowReportOf groups pairs by served model, candidate and signature and
// compares each group, in that order.
func ShadowReportOf(pairs []ShadowPair) []ShadowSignature {
	type key struct{ model, cand, sig string }
	groups := map[key]*ShadowSignature{}
	cases := map[key][]fitting.Pair{}
	for _, p := range pairs {
		e := p.Served
		k := key{e.Model, p.Candidate, Signature(e.Kind, e.Options)}
		if groups[k] == nil {
			groups[k] = &ShadowSignature{Model: e.Model, Candidate: p.Candidate, Signature: k.sig, Kind: e.Kind, Options: e.Options}
		}
		expected := -1
		if e.Outcome != nil {
			expected = slices.Index(e.Options, e.Outcome.Value)
		}
		cases[k] = append(cases[k], fitting.Pair{Kind: e.Kind, Options: len(e.Options), Primary: e.Answered(), Candidate: p.Dist, Expected: expected, Request: e.RequestID})
	}
	out := make([]ShadowSignature, 0, len(groups))
	for k, g := range groups {
		g.Comparison = fitting.Compare(cases[k])
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b ShadowSignature) int {
		return cmp.Or(cmp.Compare(a.Model, b.Model), cmp.Compare(a.Candidate, b.Candidate), cmp.Compare(a.Signature, b.Signature))
	})
	return out
}

// ReportShadow reports on the shadow answers the log holds from since to
// until, both included, each paired with the served answer of its request,
// question and cascade stage recorded before it (the latest, when a
// caller reused the id) and that answer's outcome. It reads the shadow answers and their
// requests' records, not the rest of the window.
func ReportShadow(ctx context.Context, log *decisionlog.Log, since, until time.Time) (ShadowReport, error) {
	rep := ShadowReport{Since: since.UTC(), Until: until.UTC(), Source: decisionlog.FaceShadow, Signatures: []ShadowSignature{}}
	if log == nil {
		return rep, fmt.Errorf("the decision log is off")
	}
	shadows, es, err := log.Shadows(ctx, since, until.Add(time.Nanosecond))
	if err != nil {
		return rep, err
	}
	type qid struct{ req, q string }
	served := map[qid][]decisionlog.Entry{} // in the order written
	for _, e := range es {
		k := qid{e.RequestID, e.QuestionID}
		served[k] = append(served[k], e)
	}
	var pairs []ShadowPair
	for _, e := range shadows {
		id, ok := strings.CutPrefix(e.RequestID, decisionlog.ShadowPrefix)
		if !ok {
			continue
		}
		var s *decisionlog.Entry
		for i, c := range served[qid{id, e.QuestionID}] {
			// A cascade records each stage's answer under the request;
			// the shadow carries the stage whose request it shadowed.
			if c.ID < e.ID && c.Cascade == e.Cascade && c.Stage == e.Stage {
				s = &served[qid{id, e.QuestionID}][i]
			}
		}
		if s == nil || !slices.Equal(s.Options, e.Options) {
			continue
		}
		pairs = append(pairs, ShadowPair{Served: *s, Candidate: e.Model, Dist: e.Answered()})
	}
	rep.Signatures = ShadowReportOf(pairs)
	return rep, nil
}
