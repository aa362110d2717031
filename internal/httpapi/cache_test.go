package httpapi_test

import (
	"encoding/json"
	"math"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"system1/internal/answer"
	"system1/internal/config"
	"system1/internal/decisionlog"
	"system1/internal/fakeengine"
	"system1/internal/fleet"
	"system1/internal/gateway"
	"system1/internal/httpapi"
	"system1/internal/metrics"
	"system1/internal/web"
)

// serveCached runs both faces as system1 serve wires them with cache:
// entries: one cache shared by /v1/systemone and /v1/decide, counted in
// the metrics.
func serveCached(t *testing.T, entries int, n node) *system1 {
	t.Helper()
	fn, err := fleet.NewNode(n.cfg, func(string) string { return "" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	router := fleet.New([]*fleet.Node{fn}, fleet.Options{Policy: testPolicy})
	cfg, err := config.Parse([]byte("providers:\n  - {name: local, kind: engine, model: fake}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cache := answer.NewCache(entries, time.Hour)
	m := metrics.New()
	if cache != nil {
		m.WatchCache(cache.Hits, cache.Misses, cache.Bypassed, cache.Coalesced)
	}
	api := httpapi.New(httpapi.Options{
		Answer:   answer.New(answer.Options{Router: router, Cache: cache}),
		Rounding: 2,
		Metrics:  m,
		Decide: gateway.New(gateway.Options{Config: cfg, Face: decisionlog.FaceDecide,
			Answer: answer.New(answer.Options{Router: router, Cache: cache})}),
	})
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return &system1{URL: srv.URL, client: srv.Client()}
}

// With cache.entries set, a repeat on /v1/systemone says X-System1-Cache:
// hit, with the same answers, usage 0 and no engine asked; on /v1/decide
// the answer says cache: hit; the metrics count both. The header is in
// the OpenAPI document. Off, neither the header nor the field is sent.
func TestCacheOnTheHTTPFaces(t *testing.T) {
	n := startNode(t, "a", fakeengine.LlamaCpp, fakeengine.Behavior{Prompted: fakeengine.Leaning})
	s := serveCached(t, 64, n)
	first := s.ask(t, aboutBeta)
	calls := len(n.fake.Inferences())
	again := s.ask(t, aboutBeta)
	if first.status != 200 || again.status != 200 {
		t.Fatalf("%v; %v", first, again)
	}
	if h := first.header.Get(httpapi.CacheHeader); h != "miss" {
		t.Errorf("first: %s %q", httpapi.CacheHeader, h)
	}
	if h := again.header.Get(httpapi.CacheHeader); h != "hit" {
		t.Errorf("repeat: %s %q", httpapi.CacheHeader, h)
	}
	if got := len(n.fake.Inferences()); got != calls {
		t.Errorf("the hit asked the engine: %d calls, %d before", got, calls)
	}
	var a, b struct {
		Answers json.RawMessage
		Usage   struct {
			InputTokens int `json:"input_tokens"`
		}
	}
	if json.Unmarshal(first.body, &a) != nil || json.Unmarshal(again.body, &b) != nil || string(a.Answers) != string(b.Answers) ||
		a.Usage.InputTokens == 0 || b.Usage.InputTokens != 0 {
		t.Errorf("answers %s, then %s", first.body, again.body)
	}

	const q = `{"question":"Which colour is the sky?","options":["blue","red"],"context":{"time":"noon"}}`
	var d1, d2 struct {
		Status, Cache, Rationale string
		Attempts                 []struct{ Detail string }
	}
	for _, d := range []any{&d1, &d2} {
		r := s.do(t, "POST", "/v1/decide", q)
		if err := json.Unmarshal(r.body, d); err != nil || r.status != 200 {
			t.Fatalf("decide: %v", r)
		}
	}
	if d1.Cache != "miss" || d2.Cache != "hit" || d2.Status != d1.Status || len(d2.Attempts) != 1 || !strings.Contains(d2.Attempts[0].Detail, "from the cache") {
		t.Errorf("decide: %+v, then %+v", d1, d2)
	}

	m := string(s.do(t, "GET", "/metrics", "").body)
	for _, want := range []string{"system1_cache_hits_total 2", "system1_cache_misses_total 2", "system1_cache_bypassed_total 0", "system1_cache_coalesced_total 0"} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if !strings.Contains(string(web.OpenAPI()), `"`+httpapi.CacheHeader+`"`) {
		t.Errorf("the OpenAPI document does not name %s", httpapi.CacheHeader)
	}

	off := serveCached(t, 0, n)
	r := off.ask(t, aboutBeta)
	d := off.do(t, "POST", "/v1/decide", q)
	if _, sent := r.header[httpapi.CacheHeader]; sent || strings.Contains(string(d.body), `"cache"`) {
		t.Errorf("cache off: header %q, decide %s", r.header.Get(httpapi.CacheHeader), d.body)
	}
}

// /v1/decisions shares the cache and says so; the refusal gate is part of
// the key, since its refusals are part of the answer kept: a repeat under
// another gate is a miss, refused as that gate says, and the ungated
// repeat is still a hit with every question answered.
func TestCacheOnTheDecisionsWireKeepsTheGate(t *testing.T) {
	n := startNode(t, "a", fakeengine.LlamaCpp, fakeengine.Behavior{})
	s := serveCached(t, 64, n)
	const gate = "X-System1-Min-Label-Mass: 0.99" // over the fake's label mass on every question
	for i, c := range []struct {
		headers []string
		cache   string
		refused bool
	}{
		{nil, "miss", false},
		{nil, "hit", false},
		{[]string{gate}, "miss", true},
		{[]string{gate}, "hit", true},
		{nil, "hit", false},
	} {
		r := s.do(t, "POST", "/v1/decisions", ticketDecisions, c.headers...)
		if h := r.header.Get(httpapi.CacheHeader); h != c.cache {
			t.Errorf("request %d: %s %q, want %q", i, httpapi.CacheHeader, h, c.cache)
		}
		for j, a := range decisionsReadings(t, r) {
			if a.Refused != c.refused {
				t.Errorf("request %d, question %d: refused %v, want %v: %s", i, j, a.Refused, c.refused, r.body)
			}
		}
	}
}

// A decide answer that abstains because the model ranked none of the
// options is a 200 like any, and says what the cache made of it: a miss,
// then the repeat a hit that asked no engine, whose attempt says it came
// from the cache.
func TestCacheOnDecideSaysSoOnAnAbstention(t *testing.T) {
	unranked := func([]string) []float64 { return []float64{math.Inf(-1), math.Inf(-1)} }
	n := startNode(t, "a", fakeengine.LlamaCpp, fakeengine.Behavior{Logprobs: unranked})
	s := serveCached(t, 64, n)
	const q = `{"question":"Which colour is the sky?","options":["blue","red"]}`
	var got, details []string
	for range 2 {
		r := s.do(t, "POST", "/v1/decide", q)
		var d struct {
			Status, Cache string
			Attempts      []struct{ Detail string }
		}
		if err := json.Unmarshal(r.body, &d); err != nil || r.status != 200 || d.Status != "abstained" || len(d.Attempts) != 1 {
			t.Fatalf("decide: %v", r)
		}
		got, details = append(got, d.Cache), append(details, d.Attempts[0].Detail)
	}
	if got[0] != "miss" || got[1] != "hit" {
		t.Errorf("cache %q, then %q; want miss, then hit", got[0], got[1])
	}
	if strings.Contains(details[0], "from the cache") || !strings.Contains(details[1], "from the cache") || !strings.Contains(details[1], "ranked none") {
		t.Errorf("attempts' details %q, then %q", details[0], details[1])
	}
}
