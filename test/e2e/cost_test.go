package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"testing"

	"system1/internal/decision"
	"system1/internal/fakeengine"
	"system1/internal/gateway"
)

// usdPrice is a price as the configuration below writes it.
func usdPrice(t *testing.T, inPerMTok, outPerMTok, perRequest string) decision.Price {
	t.Helper()
	var p decision.Price
	for _, f := range []struct {
		s     string
		to    *decision.USD
		perMT bool
	}{{inPerMTok, &p.InputPerToken, true}, {outPerMTok, &p.OutputPerToken, true}, {perRequest, &p.PerRequest, false}} {
		u, err := decision.ParseUSD(f.s)
		if err == nil && f.perMT {
			u, err = decision.PerToken(u)
		}
		if err != nil {
			t.Fatal(err)
		}
		*f.to = u
	}
	return p
}

// replyUsage is the usage object both wires' replies carry.
type replyUsage struct {
	Usage struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
}

// What an answer cost, through the built binary: X-System1-Cost on
// /v1/systemone, its batch and /v1/decisions is the tokens each reply
// reports at the node's price per million; decide's cost is the hosted
// endpoint's request and tokens at its price; a decision cache hit costs
// 0; a node with no price leaves the header out (unknown, not 0); and
// system1_cost_usd_total counts each node's answers.
func TestCostThroughTheBinary(t *testing.T) {
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Behavior: fakeengine.Behavior{Logprobs: fakeengine.Probs(0.7, 0.2, 0.1)}})
	t.Cleanup(f.Close)
	g := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Behavior: fakeengine.Behavior{Logprobs: fakeengine.Probs(0.7, 0.2, 0.1)}})
	t.Cleanup(g.Close)
	up := fakeengine.StartSystemOne(t, fakeengine.Reply{})
	cfg := fmt.Sprintf(`fingerprint: {off: true}
nodes:
  - {name: n1, url: %s, dialect: llamacpp, models: [%s], price: {input_per_mtok: 0.15, output_per_mtok: 0.6}}
  - {name: up, url: %s, dialect: systemone, models: [jev-latest], price: {per_request: 0.0005, input_per_mtok: 1, output_per_mtok: 2}}
  - {name: n3, url: %s, dialect: llamacpp, models: [unpriced-model]}
gateway:
  threshold: 0
  chain:
    - {name: hosted, model: jev-latest}
cache: {entries: 100}
`, f.URL, fakeengine.DefaultModel, up.URL, g.URL)
	engine, hosted := usdPrice(t, "0.15", "0.6", "0"), usdPrice(t, "1", "2", "0.0005")
	c := client()
	s := startServe(t, cfg, serveOpts{})

	var spent decision.USD // on n1
	// costs checks a reply's X-System1-Cost against its usage at n1's price.
	costs := func(what string, r reply) {
		t.Helper()
		if r.Status != http.StatusOK {
			t.Fatalf("%s: %d %s", what, r.Status, r.Body)
		}
		var u replyUsage
		if err := json.Unmarshal(r.Body, &u); err != nil || u.Usage.InputTokens == 0 {
			t.Fatalf("%s: usage %+v, %v: %s", what, u, err, r.Body)
		}
		want, _ := engine.Cost(u.Usage.InputTokens, u.Usage.OutputTokens, 0)
		if got := r.Header.Get("X-System1-Cost"); got != want.String() {
			t.Errorf("%s: X-System1-Cost %q; want %s (%d in, %d out at 0.15 and 0.6 a million)", what, got, want, u.Usage.InputTokens, u.Usage.OutputTokens)
		}
		spent += want
	}
	ask := choice(fakeengine.DefaultModel, "ticket 1")
	costs("/v1/systemone", do(t, c, http.MethodPost, s.URL+"/v1/systemone", "", ask))
	if r := do(t, c, http.MethodPost, s.URL+"/v1/systemone", "", ask); r.Header.Get("X-System1-Cache") != "hit" || r.Header.Get("X-System1-Cost") != "0" {
		t.Errorf("the repeat: cache %q, cost %q; want a hit costing 0", r.Header.Get("X-System1-Cache"), r.Header.Get("X-System1-Cost"))
	}
	costs("/v1/systemone/batch", do(t, c, http.MethodPost, s.URL+"/v1/systemone/batch", "",
		fmt.Sprintf(`{"model":%q,"states":["ticket 2","ticket 3"],"questions":{"dept":{"type":"choice","criteria":{"billing":null,"technical":null,"sales":null}}}}`, fakeengine.DefaultModel)))
	costs("/v1/decisions", do(t, c, http.MethodPost, s.URL+"/v1/decisions", "",
		fmt.Sprintf(`{"model":%q,"input":"ticket 4","questions":[{"type":"choice","choices":[{"value":"a"},{"value":"b"},{"value":"c"}]}]}`, fakeengine.DefaultModel)))

	r := do(t, c, http.MethodPost, s.URL+"/v1/decide", "", `{"question":"Which team?","options":["billing","technical","sales"]}`)
	var res gateway.Response
	if err := json.Unmarshal(r.Body, &res); err != nil || res.Status != gateway.Decided {
		t.Fatalf("decide: %d %s", r.Status, r.Body)
	}
	decided, _ := hosted.Cost(fakeengine.SystemOneInputTokens, fakeengine.SystemOneOutputTokens, 1)
	if res.Cost == nil || *res.Cost != decided.String() {
		t.Errorf("decide's cost %v; want %s (one request and its tokens at the hosted endpoint's price)", res.Cost, decided)
	}

	r = do(t, c, http.MethodPost, s.URL+"/v1/decide/batch", "", `{"question":"Which team?","options":["billing","technical","sales"],"contexts":[{"t":"a"},{"t":"b"}]}`)
	var batch gateway.BatchResponse
	if err := json.Unmarshal(r.Body, &batch); err != nil || len(batch.Results) != 2 {
		t.Fatalf("decide batch: %d %s", r.Status, r.Body)
	}
	for i, res := range batch.Results {
		if res.Cost == nil || *res.Cost != decided.String() {
			t.Errorf("decide batch, context %d: cost %v; want %s", i, res.Cost, decided)
		}
	}

	if r := do(t, c, http.MethodPost, s.URL+"/v1/systemone", "", choice("unpriced-model", "ticket 5")); r.Status != http.StatusOK || r.Header.Values("X-System1-Cost") != nil {
		t.Errorf("over a node with no price: %d, X-System1-Cost %q; want it left out", r.Status, r.Header.Values("X-System1-Cost"))
	}

	m := string(do(t, c, http.MethodGet, s.URL+"/metrics", "", "").Body)
	for _, want := range []struct {
		model, node string
		usd         decision.USD
	}{{fakeengine.DefaultModel, "n1", spent}, {"jev-latest", "up", 3 * decided}} {
		re := regexp.MustCompile(`(?m)^system1_cost_usd_total\{model="` + regexp.QuoteMeta(want.model) + `",node="` + want.node + `"\} (\S+)$`)
		got := re.FindStringSubmatch(m)
		if got == nil {
			t.Errorf("no system1_cost_usd_total for %s on %s", want.model, want.node)
			continue
		}
		v, err := strconv.ParseFloat(got[1], 64)
		if err != nil || math.Abs(v-want.usd.Dollars()) > 1e-12 {
			t.Errorf("system1_cost_usd_total for %s on %s: %s; want %s", want.model, want.node, got[1], want.usd)
		}
	}
	if regexp.MustCompile(`system1_cost_usd_total\{[^}]*node="n3"`).MatchString(m) {
		t.Error("system1_cost_usd_total counts the node with no price")
	}
}
