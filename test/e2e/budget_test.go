package e2e

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"system1/internal/decision"
	"system1/internal/fakeengine"
	"system1/internal/testengine"
)

// budgetConfig is a configuration whose node charges 1 dollar a million
// tokens, so that one answer costs more than a budget of a micro-dollar,
// with a budgeted key per wire and one without a budget, over the SQLite
// log at path.
func budgetConfig(engineURL, path string) string {
	return fmt.Sprintf(`keys:
  - {name: jev-spender, key: sk-budget-systemone, scopes: [decide, read], budget: {usd: 0.000001, per: day}}
  - {name: openai-spender, key: sk-budget-decisions, scopes: [decide], budget: {usd: 0.000001, per: day}}
  - {name: decide-spender, key: sk-budget-decide, scopes: [decide], budget: {usd: 0.000001, per: month}}
  - {name: unlimited, key: sk-budget-none, scopes: [decide, read]}
nodes:
  - {name: n1, url: %s, dialect: llamacpp, models: [%s], price: {input_per_mtok: 1, output_per_mtok: 1}}
gateway:
  threshold: 0
  chain:
    - {name: local, model: %s}
decision_log:
  path: %s
  retention: 31d
`, engineURL, fakeengine.DefaultModel, fakeengine.DefaultModel, path)
}

// untilReset is how long from now until the next UTC day or month.
func untilReset(per string, now time.Time) time.Duration {
	now = now.UTC()
	start := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	next := start.AddDate(0, 0, 1)
	if per == "month" {
		start = time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
		next = start.AddDate(0, 1, 0)
	}
	return next.Sub(now)
}

// A key's budget runs out on each wire, through the built binary: its
// first answer is served (and costs more than the budget), the next is a
// 429 in the wire's own envelope (System One's insufficient_quota type,
// OpenAI's insufficient_quota code, decide's over_budget) naming the
// budget, with Retry-After until the period resets; a key without a
// budget is served on the same wire. After a restart over the same
// SQLite log the spent keys are still refused, GET /v1/usage reports
// each key's spend as the answers' X-System1-Cost summed, and
// system1_key_spend_usd_total names the keys, never a key.
func TestBudgetRunsOutOnEachWire(t *testing.T) {
	f := fakeEngine(t, fakeengine.Behavior{Logprobs: fakeengine.Probs(0.7, 0.2, 0.1)})
	dir := t.TempDir()
	cfg := budgetConfig(f.URL, filepath.Join(dir, "decisions.db"))
	c := client()
	wires := []struct {
		name, path, key, per, body string
		// envelope reads the 429's kind and message.
		envelope func(body []byte) (kind, msg string)
		kind     string
	}{
		{"jev-spender", "/v1/systemone", "sk-budget-systemone", "day", choice(fakeengine.DefaultModel, "ticket 1"),
			func(b []byte) (string, string) { return errorMessage(b) }, "insufficient_quota"},
		{"openai-spender", "/v1/decisions", "sk-budget-decisions", "day",
			fmt.Sprintf(`{"model":%q,"input":"ticket 2","questions":[{"type":"choice","choices":[{"value":"a"},{"value":"b"},{"value":"c"}]}]}`, fakeengine.DefaultModel),
			func(b []byte) (string, string) {
				var e struct {
					Error struct{ Type, Code, Message string }
				}
				_ = json.Unmarshal(b, &e)
				if e.Error.Type != e.Error.Code {
					return "type " + e.Error.Type + " code " + e.Error.Code, e.Error.Message
				}
				return e.Error.Code, e.Error.Message
			}, "insufficient_quota"},
		{"decide-spender", "/v1/decide", "sk-budget-decide", "month", `{"question":"Which team?","options":["billing","technical","sales"]}`,
			func(b []byte) (string, string) {
				var e struct {
					Error struct{ Code, Message string }
				}
				_ = json.Unmarshal(b, &e)
				return e.Error.Code, e.Error.Message
			}, "over_budget"},
	}
	// refused asks w with its key and checks the budget's 429.
	refused := func(s *server, w int) {
		t.Helper()
		wr := wires[w]
		before := untilReset(wr.per, time.Now())
		r := do(t, c, http.MethodPost, s.URL+wr.path, wr.key, wr.body)
		after := untilReset(wr.per, time.Now())
		if r.Status != http.StatusTooManyRequests {
			t.Fatalf("%s past its budget: %d %s; want 429", wr.path, r.Status, r.Body)
		}
		kind, msg := wr.envelope(r.Body)
		if kind != wr.kind || !strings.Contains(msg, `"`+wr.name+`"`) || !strings.Contains(msg, "budget of $0.000001 a "+wr.per) {
			t.Errorf("%s: %s %q; want %s naming %s's budget of $0.000001 a %s", wr.path, kind, msg, wr.kind, wr.name, wr.per)
		}
		ra, err := strconv.Atoi(r.Header.Get("Retry-After"))
		if err != nil || time.Duration(ra)*time.Second < after || time.Duration(ra)*time.Second > before+time.Second {
			t.Errorf("%s: Retry-After %q; want the %v to %v until the %s resets, in whole seconds", wr.path, r.Header.Get("Retry-After"), after, before, wr.per)
		}
		if strings.Contains(string(r.Body), wr.key) {
			t.Errorf("%s: the 429 shows the key", wr.path)
		}
		if wr.path == "/v1/decisions" && r.Header.Get("X-Should-Retry") != "false" {
			t.Errorf("%s: x-should-retry %q; want false, or the Node SDK retries a spent budget", wr.path, r.Header.Get("X-Should-Retry"))
		}
	}

	s := startServe(t, cfg, serveOpts{})
	spent := map[string]decision.USD{}
	for w, wr := range wires {
		r := do(t, c, http.MethodPost, s.URL+wr.path, wr.key, wr.body)
		if r.Status != http.StatusOK {
			t.Fatalf("%s, the first answer: %d %s", wr.path, r.Status, r.Body)
		}
		cost := r.Header.Get("X-System1-Cost")
		if wr.path == "/v1/decide" {
			var res struct{ Cost *string }
			if err := json.Unmarshal(r.Body, &res); err != nil || res.Cost == nil {
				t.Fatalf("decide: no cost: %s", r.Body)
			}
			cost = *res.Cost
		}
		u, err := decision.ParseUSD(cost)
		if err != nil || u <= 1_000_000 { // a micro-dollar, in pico-dollars
			t.Fatalf("%s: cost %q (%v): want more than the budget", wr.path, cost, err)
		}
		spent[wr.name] = u
		refused(s, w)
		if r := do(t, c, http.MethodPost, s.URL+wr.path, "sk-budget-none", wr.body); r.Status != http.StatusOK {
			t.Errorf("%s with the key without a budget: %d %s", wr.path, r.Status, r.Body)
		}
	}

	// The batches are refused alike, in their routes' shapes.
	if r := do(t, c, http.MethodPost, s.URL+"/v1/systemone/batch", "sk-budget-systemone",
		fmt.Sprintf(`{"model":%q,"states":["a","b"],"questions":{"dept":{"type":"choice","criteria":{"billing":null,"technical":null}}}}`, fakeengine.DefaultModel)); r.Status != http.StatusTooManyRequests {
		t.Errorf("/v1/systemone/batch past the budget: %d %s", r.Status, r.Body)
	} else if typ, _ := errorMessage(r.Body); typ != "insufficient_quota" {
		t.Errorf("/v1/systemone/batch past the budget: %s", r.Body)
	}
	r := do(t, c, http.MethodPost, s.URL+"/v1/decide/batch", "sk-budget-decide", `{"question":"Which team?","options":["billing","technical"],"contexts":[{"t":"a"}]}`)
	var batch struct {
		Error struct{ Code string }
	}
	_ = json.Unmarshal(r.Body, &batch)
	if r.Status != http.StatusTooManyRequests || batch.Error.Code != "over_budget" || r.Header.Get("Retry-After") == "" {
		t.Errorf("/v1/decide/batch past the budget: %d %s", r.Status, r.Body)
	}

	m := string(do(t, c, http.MethodGet, s.URL+"/metrics", "", "").Body)
	for name, u := range spent {
		re := regexp.MustCompile(`(?m)^system1_key_spend_usd_total\{key="` + name + `"\} (\S+)$`)
		got := re.FindStringSubmatch(m)
		if got == nil {
			t.Errorf("no system1_key_spend_usd_total for %s", name)
			continue
		}
		if v, err := strconv.ParseFloat(got[1], 64); err != nil || math.Abs(v-u.Dollars()) > 1e-12 {
			t.Errorf("system1_key_spend_usd_total{key=%q} %s; want %s", name, got[1], u)
		}
	}
	if strings.Contains(m, "sk-budget-") {
		t.Error("the metrics show a key")
	}

	// A restart reads the spend back from the log.
	s.signal(t, os.Interrupt)
	if code := s.wait(t, time.Minute); code != 0 {
		t.Fatalf("serve exited %d", code)
	}
	s = startServe(t, cfg, serveOpts{})
	for w := range wires {
		refused(s, w)
	}
	// A key past its budget still reads (its read scope spends nothing).
	r = do(t, c, http.MethodGet, s.URL+"/v1/usage?group_by=key", "sk-budget-systemone", "")
	var rep struct {
		Groups []struct {
			Key       string
			USD       string
			Decisions int
		}
	}
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &rep) != nil {
		t.Fatalf("GET /v1/usage: %d %s", r.Status, r.Body)
	}
	got := map[string]string{}
	for _, g := range rep.Groups {
		got[g.Key] = g.USD
	}
	for name, u := range spent {
		if got[name] != u.String() {
			t.Errorf("GET /v1/usage: %s spent %q; want %s: %s", name, got[name], u, r.Body)
		}
	}
	if _, ok := got["unlimited"]; !ok {
		t.Errorf("GET /v1/usage names no spend of the key without a budget: %s", r.Body)
	}
}

// budgetLag bounds how long a replica may take to see what another
// spent. docs/http-api.md#budgets states about 1.1 s (a read of the log
// a second, the writer's 100 ms linger) and the run logs the lag it saw;
// the bound here is that with room for a machine so busy (the race
// detector, the rest of the suite) that a read of the log is late by
// seconds, so that the test fails on a replica that never reads another's
// spend, not on a slow one.
const budgetLag = 10 * time.Second

// Two replicas over one PostgreSQL log hold one key to one budget:
// workers on both spend it until each replica refuses them. The
// answers are put in the order they completed; once their sum passed the
// budget, no request sent more than budgetLag later was answered, so the
// overspend is at most what the replicas answered within the lag (the
// requests in flight at the crossing included). The overspend, the lag
// seen and the rate are logged.
func TestReplicasShareABudget(t *testing.T) {
	pg := testengine.PostgresSchema(t, "e2e_")
	// Each answer takes 20 ms, so that the budget lasts some of the
	// replicas' reads of the log rather than less than the first.
	f := fakeEngine(t, fakeengine.Behavior{Latency: 20 * time.Millisecond})
	const budget = "0.05"
	cfg := fmt.Sprintf(`keys:
  - {name: shared, key: sk-budget-shared, scopes: [decide, read], budget: {usd: %s, per: day}}
nodes:
  - {name: n1, url: %s, dialect: llamacpp, models: [%s], price: {input_per_mtok: 1, output_per_mtok: 1}}
decision_log:
  url: %q
`, budget, f.URL, fakeengine.DefaultModel, pg)
	var a, b *server
	var wg sync.WaitGroup
	wg.Go(func() { a = startServe(t, cfg, serveOpts{}) })
	wg.Go(func() { b = startServe(t, cfg, serveOpts{}) })
	wg.Wait()
	limit, _ := decision.ParseUSD(budget)

	type answer struct {
		sent, done time.Time
		cost       decision.USD
		replica    int
	}
	var mu sync.Mutex
	var answers []answer
	c := client()
	const workers = 3 // per replica
	start := time.Now()
	for r, s := range []*server{a, b} {
		for w := range workers {
			wg.Go(func() {
				for i := 0; ; i++ {
					sent := time.Now()
					rep, err := try(c, http.MethodPost, s.URL+"/v1/systemone", "sk-budget-shared", choice(fakeengine.DefaultModel, fmt.Sprintf("r%d w%d ticket %d", r, w, i)))
					if err != nil {
						t.Errorf("replica %d: %v", r, err)
						return
					}
					if rep.Status == http.StatusTooManyRequests {
						return
					}
					cost, err := decision.ParseUSD(rep.Header.Get("X-System1-Cost"))
					if rep.Status != http.StatusOK || err != nil {
						t.Errorf("replica %d: %d %s (cost %v)", r, rep.Status, rep.Body, err)
						return
					}
					mu.Lock()
					answers = append(answers, answer{sent, time.Now(), cost, r})
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	end := time.Now()
	slices.SortFunc(answers, func(x, y answer) int { return x.done.Compare(y.done) })
	var sum, atCrossing decision.USD
	var crossed time.Time
	var late []answer
	perReplica := [2]int{}
	for _, an := range answers {
		sum += an.cost
		perReplica[an.replica]++
		if crossed.IsZero() && sum >= limit {
			crossed, atCrossing = an.done, sum
		}
		if !crossed.IsZero() && an.sent.After(crossed.Add(budgetLag)) {
			late = append(late, an)
		}
	}
	if crossed.IsZero() {
		t.Fatalf("the replicas refused after $%s of a $%s budget", sum, limit)
	}
	if perReplica[0] == 0 || perReplica[1] == 0 {
		t.Errorf("answers per replica %v: want both to spend", perReplica)
	}
	for _, an := range late {
		t.Errorf("replica %d answered a request sent %v after the budget was spent; want none past %v", an.replica, an.sent.Sub(crossed), budgetLag)
	}
	seen := time.Duration(0)
	for _, an := range answers {
		if an.done.After(crossed) {
			seen = max(seen, an.sent.Sub(crossed))
		}
	}
	over := sum - limit
	rate := sum.Dollars() / end.Sub(start).Seconds()
	t.Logf("budget $%s: spent $%s by %d answers (%v per replica) in %v, $%.6f/s; overspend $%s (%.1f answers' worth; $%s at the crossing); the last answer was sent %v after the crossing (bound %v: at most $%.6f at this rate)",
		limit, sum, len(answers), perReplica, end.Sub(start).Round(time.Millisecond), rate, over, over.Dollars()/(sum.Dollars()/float64(len(answers))),
		atCrossing-limit, seen.Round(time.Millisecond), budgetLag, budgetLag.Seconds()*rate)

	// Stopped, the replicas have written every answer: the log holds
	// them under the key.
	for _, s := range []*server{a, b} {
		s.signal(t, os.Interrupt)
		if code := s.wait(t, time.Minute); code != 0 {
			t.Fatalf("serve exited %d", code)
		}
	}
	db, err := sql.Open("pgx", pg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var logged int64
	if err := db.QueryRow("SELECT CAST(SUM(cost_picousd) AS BIGINT) FROM decisions WHERE key_name = 'shared'").Scan(&logged); err != nil {
		t.Fatal(err)
	}
	if decision.USD(logged) != sum {
		t.Errorf("the log counts $%s spent; the answers' X-System1-Cost sum to $%s", decision.USD(logged), sum)
	}
}
