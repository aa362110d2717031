package metrics

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// braces expands a name written as docs/*.md write several at once,
// system1_cache_{hits,misses}_total, into each name.
var braces = regexp.MustCompile(`system1_([a-z_]*_)\{([a-z_]+(?:,[a-z_]+)+)\}(_[a-z_]+)`)

// documented is what the docs name: each metric with the labels it is
// written with (nil where they name it bare).
func documented(t *testing.T) map[string][]string {
	t.Helper()
	files, _ := filepath.Glob("../../docs/*.md")
	files = append(files, "../../README.md")
	var text strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text.Write(b)
	}
	s := braces.ReplaceAllStringFunc(text.String(), func(m string) string {
		p := braces.FindStringSubmatch(m)
		var out []string
		for _, mid := range strings.Split(p[2], ",") {
			out = append(out, "system1_"+p[1]+mid+p[3])
		}
		return strings.Join(out, "` `")
	})
	docs := map[string][]string{}
	for _, m := range regexp.MustCompile("`(system1_[a-z_]+)(?:\\{([a-z_,]+)\\})?").FindAllStringSubmatch(s, -1) {
		if m[2] != "" {
			docs[m[1]] = strings.Split(m[2], ",")
		} else if _, ok := docs[m[1]]; !ok {
			docs[m[1]] = nil
		}
	}
	return docs
}

// Every metric /metrics serves is named in the docs, with the labels it
// has where the docs give them; and every metric the docs name is served.
func TestEveryMetricIsDocumented(t *testing.T) {
	m := New()
	m.Request("POST /v1/systemone", "200", "", time.Millisecond)
	m.Attempt("n", "m", "ok", time.Millisecond)
	m.Failover("m")
	m.Cooldown("n")
	m.ModelChanged("n", "m")
	m.Canary("n", "m", "ok", 1)
	m.Spent("n", "m", 1)
	m.Refused("m", "upstream")
	m.KeySpent("k", 1)
	m.WatchNodes(func() []Node { return []Node{{Name: "n", Constraint: "holds", Listed: true}} })
	zero := func() uint64 { return 0 }
	m.WatchDecisionLog(zero, zero, zero)
	m.WatchCache(zero, zero, zero, zero)
	m.WatchShadow(func() ShadowCounts { return ShadowCounts{} })
	m.SetECE([]ECE{{Model: "m", Kind: "choice", Bucket: "2", ECE: 0.1}})
	m.SetDrift([]Drift{{Model: "m", Signature: "s", PSI: 0.1}})
	families, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	docs := documented(t)
	served := map[string]bool{}
	for _, f := range families {
		name := f.GetName()
		if !strings.HasPrefix(name, "system1_") {
			continue
		}
		served[name] = true
		labels, ok := docs[name]
		if !ok {
			t.Errorf("%s is served and named in no page of docs/", name)
			continue
		}
		var have []string
		for _, l := range f.GetMetric()[0].GetLabel() {
			have = append(have, l.GetName())
		}
		if labels != nil && !slices.Equal(slices.Sorted(slices.Values(labels)), have) {
			t.Errorf("%s: the docs give the labels %v, it has %v", name, labels, have)
		}
	}
	metric := regexp.MustCompile(`_(total|seconds|depth|flight|up|constraint|ece|psi|alarm)$`)
	for name := range docs {
		if metric.MatchString(name) && !served[name] {
			t.Errorf("the docs name %s, which is not served", name)
		}
	}
}
