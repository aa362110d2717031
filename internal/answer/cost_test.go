package answer_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"system1/internal/answer"
	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/fakeengine"
	"system1/internal/fleet"
)

type spent struct {
	mu  sync.Mutex
	usd map[string]float64 // by node
}

func (s *spent) Refused(model, reason string) {}

func (s *spent) Spent(node, model string, usd float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.usd == nil {
		s.usd = map[string]float64{}
	}
	s.usd[node+" "+model] += usd
}

func dollars(t *testing.T, s string) *config.Dollars {
	t.Helper()
	u, err := decision.ParseUSD(s)
	if err != nil {
		t.Fatal(err)
	}
	d := config.Dollars(u)
	return &d
}

func pricedNode(t *testing.T, c config.Node) *fleet.Node {
	t.Helper()
	c.Timeout = config.Duration(5 * time.Second)
	n, err := fleet.NewNode(c, func(string) string { return "" }, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A question that fails over is priced by the node that answered it
// alone (the failed attempt reported no usage); each question's cost is
// recorded and told to the spender; the answer's is their sum.
func TestCostOfAFailover(t *testing.T) {
	bad := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"m"}, Behavior: fakeengine.Behavior{Fault: fakeengine.Status, Status: http.StatusInternalServerError}})
	t.Cleanup(bad.Close)
	good := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"m"}})
	t.Cleanup(good.Close)
	price := &config.Price{InputPerMTok: dollars(t, "0.15"), OutputPerMTok: dollars(t, "0.6")}
	nodes := []*fleet.Node{
		pricedNode(t, config.Node{Name: "bad", URL: bad.URL, Dialect: "llamacpp", Models: []string{"m"}, Price: &config.Price{InputPerMTok: dollars(t, "100"), OutputPerMTok: dollars(t, "100")}}),
		pricedNode(t, config.Node{Name: "good", URL: good.URL, Dialect: "llamacpp", Models: []string{"m"}, Price: price, Priority: 1}),
	}
	var rec records
	var sp spent
	svc := answer.New(answer.Options{Router: fleet.New(nodes, fleet.Options{}), Recorder: &rec, Meter: &sp})
	a, err := svc.Answer(t.Context(), twoQuestions("m"))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := price.Decision().Cost(a.Usage.InputTokens, a.Usage.OutputTokens, 0)
	if a.Cost == nil || *a.Cost != want || want == 0 {
		t.Fatalf("cost %v; want %s, the usage %+v at good's price", a.Cost, want, a.Usage)
	}
	var sum decision.USD
	failed := false
	for i, q := range a.Questions {
		if q.Node != "good" || q.Cost == nil || rec.got[i].Cost == nil || *rec.got[i].Cost != *q.Cost {
			t.Fatalf("question %d: node %s, cost %v, recorded %v", i, q.Node, q.Cost, rec.got[i].Cost)
		}
		failed = failed || q.Attempts[0].Node == "bad"
		sum += *q.Cost
	}
	if !failed {
		t.Fatal("no question was tried on bad first")
	}
	if sum != want || sp.usd["good m"] != want.Dollars() || sp.usd["bad m"] != 0 {
		t.Errorf("questions' costs sum to %s, spender told %v; want %s on good", sum, sp.usd, want)
	}
}

// A hosted endpoint priced per request charges a forwarded request once,
// on its first question, whatever its questions; with no price the cost
// is unknown (nil), not 0.
func TestCostOfAForwardedRequest(t *testing.T) {
	up := fakeengine.StartSystemOne(t, fakeengine.Reply{})
	price := &config.Price{PerRequest: dollars(t, "0.0005"), InputPerMTok: dollars(t, "1"), OutputPerMTok: dollars(t, "2")}
	for _, tc := range []struct {
		name  string
		price *config.Price
	}{{"priced", price}, {"unpriced", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			n := pricedNode(t, config.Node{Name: "up", URL: up.URL, Dialect: "systemone", Models: []string{"m"}, Price: tc.price})
			svc := answer.New(answer.Options{Router: fleet.New([]*fleet.Node{n}, fleet.Options{})})
			a, err := svc.Answer(t.Context(), twoQuestions("m"))
			if err != nil {
				t.Fatal(err)
			}
			if tc.price == nil {
				if a.Cost != nil || a.Questions[0].Cost != nil {
					t.Errorf("no price: cost %v, first question's %v; want unknown", a.Cost, a.Questions[0].Cost)
				}
				return
			}
			want, _ := tc.price.Decision().Cost(fakeengine.SystemOneInputTokens, fakeengine.SystemOneOutputTokens, 1)
			if a.Cost == nil || *a.Cost != want || *a.Questions[0].Cost != want || *a.Questions[1].Cost != 0 {
				t.Errorf("cost %v (questions %v, %v); want %s, all on the first", a.Cost, a.Questions[0].Cost, a.Questions[1].Cost, want)
			}
		})
	}
}
