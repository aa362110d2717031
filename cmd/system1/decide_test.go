package main

import (
	"os/exec"
	"strings"
	"testing"

	"system1/internal/gateway"
)

// shellQuote's words read back as they were in a POSIX shell, so that
// the feedback command decide prints runs as copied whatever the path.
func TestShellQuote(t *testing.T) {
	for _, s := range []string{"/tmp/config.yaml", "/tmp/my dir/c.yaml", "it's", `a"b`, "$HOME", "req_0123", "", "a\\b", "x;rm -rf y", "~/c.yaml"} {
		out, err := exec.Command("sh", "-c", "printf %s "+shellQuote(s)).Output()
		if err != nil || string(out) != s {
			t.Errorf("shellQuote(%q) = %s: the shell read %q (%v)", s, shellQuote(s), out, err)
		}
	}
}

// decide's summary says why it abstained: what the gateway's rationale
// says, where the reason is neither a pause nor the threshold, never
// that the provider declined when the answer was refused for another
// reason (the label mass, the implicit none option).
func TestDecideSummaryAbstentions(t *testing.T) {
	p := func(f float64) *float64 { return &f }
	local := "local"
	ok := []gateway.Attempt{{Provider: local, Outcome: gateway.OutcomeOK}}
	for _, c := range []struct {
		name      string
		res       gateway.Response
		want, not string
	}{
		{"paused", gateway.Response{Status: gateway.Abstained}, "System 1 is paused", ""},
		{"under the threshold", gateway.Response{Status: gateway.Abstained, Confidence: p(0.5), Threshold: p(0.6), Provider: &local, Attempts: ok,
			Rationale: "System 1 is not confident enough to decide"}, "under the threshold 0.6", "declined"},
		{"declined", gateway.Response{Status: gateway.Abstained, Confidence: p(0.9), Threshold: p(0.6), Provider: &local,
			Attempts:  []gateway.Attempt{{Provider: local, Outcome: gateway.OutcomeAbstained}},
			Rationale: `System 1 abstained: provider "local" declined to decide (the engine refused).`}, "declined to decide", ""},
		{"label mass", gateway.Response{Status: gateway.Abstained, Confidence: p(0.9), Threshold: p(0.6), Provider: &local, Attempts: ok,
			Rationale: "System 1 abstained: no option seemed to fit. The model put only 0.1 of its probability on the options at all (under min_label_mass 0.5)"},
			"min_label_mass 0.5", "declined"},
		{"none of these", gateway.Response{Status: gateway.Abstained, Confidence: p(0.7), Threshold: p(0.6), Provider: &local, Attempts: ok,
			Rationale: `System 1 abstained: no option seemed to fit. The implicit option "none" won`}, "no option seemed to fit", "declined"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := summary(&c.res)
			if !strings.Contains(got, c.want) || c.not != "" && strings.Contains(got, c.not) {
				t.Errorf("summary:\n%s\nwant %q, not %q", got, c.want, c.not)
			}
		})
	}
}
