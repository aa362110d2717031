package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"system1/internal/config"
	"system1/internal/fakeengine"
	"system1/internal/fleet"
	"system1/internal/systemone"
)

// Decide's handling of each kind of refusal: what is retried (after the
// endpoint's Retry-After), what is the row's error, and what stops the
// run.
func TestRemoteDecideRefusals(t *testing.T) {
	for _, tc := range []struct {
		name    string
		script  []int // the statuses answered before a 200 (0: answer)
		retries int
		calls   int
		want    func(error) bool
	}{
		{"429 then an answer", []int{429, 429}, 4, 3, func(err error) bool { return err == nil }},
		{"503 then an answer", []int{503}, 4, 2, func(err error) bool { return err == nil }},
		{"503 past the retries", []int{503, 503, 503, 503}, 2, 3, func(err error) bool { return errors.Is(err, ErrUnavailable) }},
		{"500 past the retries is the row's", []int{500, 500, 500}, 1, 2, func(err error) bool {
			var se *systemone.StatusError
			return errors.As(err, &se) && se.Code == 500 && !errors.Is(err, ErrUnavailable)
		}},
		{"422 is the row's, not retried", []int{422}, 4, 1, func(err error) bool {
			var se *systemone.StatusError
			return errors.As(err, &se) && se.Code == 422 && se.Message == "state: too long" && !errors.Is(err, ErrUnavailable)
		}},
		{"401 stops the run", []int{401}, 4, 1, func(err error) bool { return errors.Is(err, ErrUnavailable) }},
		{"a malformed answer is the row's", []int{-1}, 4, 1, func(err error) bool {
			return errors.Is(err, systemone.ErrMalformed) && !errors.Is(err, ErrUnavailable)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int64
			s := &jevServer{reply: func(path string, body []byte) (int, string, bool) {
				n := int(calls.Add(1))
				if n > len(tc.script) {
					return 0, "", false
				}
				switch code := tc.script[n-1]; code {
				case -1:
					return 200, `{"model":"m","answers":{},"usage":{}}`, true
				case 422:
					return code, `{"detail":[{"loc":["body","state"],"msg":"too long","type":"too_long"}],"error":{"message":"state: too long"}}`, true
				default:
					return code, `{"error":{"message":"no"}}`, true
				}
			}}
			srv := newJevServer(t, s)
			d := &RemoteDecider{URL: srv.URL, Retries: tc.retries, MaxWait: 20 * time.Millisecond}
			req := testJob(t)
			req.State = []byte(`{"text":"row 1"}`)
			start := time.Now()
			res, err := d.Decide(context.Background(), req)
			if !tc.want(err) {
				t.Fatalf("err %v", err)
			}
			if int(calls.Load()) != tc.calls {
				t.Fatalf("%d calls, want %d", calls.Load(), tc.calls)
			}
			if err == nil {
				want, _ := answersFor(req, req.State)
				if res.Answers[1].Choice != want.Answers[1].Choice || res.Model != "fake-1" {
					t.Fatalf("result %+v", res)
				}
			}
			// Retry-After 0.01 was honoured: each retry waited for it.
			if retried := tc.calls - 1; tc.script[0] == 429 && time.Since(start) < time.Duration(retried)*10*time.Millisecond {
				t.Fatalf("%d retries in %s", retried, time.Since(start))
			}
		})
	}
}

// A run through an endpoint with a batch route goes in batches; one
// without (a 404) is asked row by row after the first refusal, and either
// way the answers are every row's, in order.
func TestRemoteBatches(t *testing.T) {
	for _, tc := range []struct {
		name  string
		batch bool
	}{{"with a batch route", true}, {"without", false}} {
		t.Run(tc.name, func(t *testing.T) {
			s := &jevServer{batch: tc.batch}
			srv := newJevServer(t, s)
			d := &RemoteDecider{URL: srv.URL + "/v1/systemone"}
			dir := t.TempDir()
			in, out := writeRows(t, dir, 150), filepath.Join(dir, "out.jsonl")
			if _, err := runJob(t, in, out, d); err != nil {
				t.Fatal(err)
			}
			checkAnswers(t, readOut(t, out), 150)
			// Batches shrink toward the end to spread the last rows over
			// the 4 units; at most one row each goes alone.
			if tc.batch && (s.batches.Load() == 0 || s.singles.Load() > 4) {
				t.Fatalf("%d batches, %d single calls", s.batches.Load(), s.singles.Load())
			}
			if !tc.batch && (s.singles.Load() != 150 || d.MaxBatch() != 1) {
				t.Fatalf("%d single calls, batch size now %d", s.singles.Load(), d.MaxBatch())
			}
		})
	}
}

// A batch refused as a whole (a 422 for one bad state) is asked again row
// by row, so that the bad row alone gets the error.
func TestRemoteBatchRefusalFallsBackToRows(t *testing.T) {
	s := &jevServer{batch: true}
	srv := newJevServer(t, s)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	var b bytes.Buffer
	for i := range 10 {
		state := `{"text":"ok"}`
		if i == 6 {
			state = `"` + strings.Repeat("x", 300<<10) + `"` // over the state limit
		}
		b.WriteString(`{"id":` + string(rune('0'+i)) + `,"state":` + state + "}\n")
	}
	if err := os.WriteFile(in, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.jsonl")
	sum, err := runJob(t, in, out, &RemoteDecider{URL: srv.URL}, func(o *Options) { o.Concurrency = 1 })
	if err != nil {
		t.Fatal(err)
	}
	lines := readOut(t, out)
	for i, l := range lines {
		if (l.Error != nil) != (i == 6) {
			t.Fatalf("line %d: %+v", i+1, l)
		}
	}
	if e := lines[6].Error; e.Type != ErrorRejected || e.Status != http.StatusUnprocessableEntity || !strings.Contains(e.Message, "state") {
		t.Fatalf("line 7: %+v", e)
	}
	if s.batches.Load() != 1 || s.singles.Load() != 10 || sum.Errors != 1 {
		t.Fatalf("%d batches, %d singles, %d errors", s.batches.Load(), s.singles.Load(), sum.Errors)
	}
}

func TestCapacity(t *testing.T) {
	node := func(slots, inFlight, queued int, healthy bool, models ...string) nodeLoad {
		return nodeLoad{Healthy: healthy, Models: models, InFlight: inFlight, Queued: queued, Slots: slots}
	}
	for _, tc := range []struct {
		name  string
		nodes []nodeLoad
		k     int
		mine  int
		want  int
	}{
		{"no nodes", nil, 2, 0, 0},
		{"slots not reported", []nodeLoad{node(0, 0, 0, true, "m1")}, 2, 0, 0},
		{"one question a row: a row a slot", []nodeLoad{node(8, 0, 0, true, "m1")}, 1, 0, 8},
		{"two questions a row", []nodeLoad{node(8, 0, 0, true, "m1")}, 2, 0, 4},
		{"many questions: half the slots a row", []nodeLoad{node(8, 0, 0, true, "m1")}, 10, 0, 2},
		{"two nodes", []nodeLoad{node(8, 0, 0, true, "m1"), node(4, 0, 0, true, "m1")}, 2, 0, 6},
		{"a node cooling down is left out", []nodeLoad{node(8, 0, 0, true, "m1"), node(4, 0, 0, false, "m1")}, 2, 0, 4},
		{"a node without the model is left out", []nodeLoad{node(8, 0, 0, true, "m1"), node(4, 0, 0, true, "other")}, 2, 0, 4},
		{"others' calls take their rows", []nodeLoad{node(8, 3, 1, true, "m1")}, 2, 0, 2},
		{"this caller's own calls are not others'", []nodeLoad{node(8, 6, 2, true, "m1")}, 2, 4, 4},
		{"a full fleet still gets a row", []nodeLoad{node(8, 8, 40, true, "m1")}, 2, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := capacity(tc.nodes, "m1", tc.k, tc.mine, false); got != tc.want {
				t.Fatalf("%d, want %d", got, tc.want)
			}
		})
	}
}

// Capacity reads the fields of /health that the fleet writes, by the
// names the fleet gives them: a rename there fails here.
func TestHealthFieldsMatchFleetState(t *testing.T) {
	b, err := json.Marshal(fleet.State{Name: "n", Dialect: "llamacpp", Models: []string{"m1"}, Healthy: true, InFlight: 3, Queued: 2, Slots: 8})
	if err != nil {
		t.Fatal(err)
	}
	var got nodeLoad
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if !got.Healthy || got.InFlight != 3 || got.Queued != 2 || len(got.Models) != 1 || got.Models[0] != "m1" || got.Slots != 8 || got.Dialect != "llamacpp" {
		t.Fatalf("%s read as %+v", b, got)
	}
	// Where the fleet reports slots, they are read by that name.
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(b, &fields)
	for k := range fields {
		if strings.Contains(k, "slot") || strings.Contains(k, "inflight") && k != "in_flight" {
			if k != "slots" {
				t.Fatalf("the fleet reports its slots as %q; Capacity reads \"slots\"", k)
			}
		}
	}
}

// Capacity over HTTP: the endpoint's /health, with the key, in rows, or
// in batches while batches are on.
func TestRemoteCapacity(t *testing.T) {
	const slots = `{"status":"ok","nodes":[{"name":"a","healthy":true,"models":["m1"],"in_flight":0,"queued":0,"slots":24}]}`
	const llamaSlots = `{"status":"ok","nodes":[{"name":"a","dialect":"llamacpp","healthy":true,"models":["m1"],"in_flight":0,"queued":0,"slots":24}]}`
	for _, tc := range []struct {
		health   string
		batchMax int
		want     int
	}{
		{slots, 1, 12},
		{slots, 5, 4}, // 12 rows of two questions (the node is not llama.cpp), in batches of 5, and one more
		{slots, 0, 2}, // batches of 64, and one more
		{llamaSlots, 1, 12},
		{llamaSlots, 0, 2}, // a llama.cpp node holds a slot a row: 24 rows, one batch, and one more
		{llamaSlots, 8, 4}, // 24 rows in batches of 8, and one more
		{`{"status":"ok","nodes":[{"name":"a","healthy":true,"models":["m1"],"in_flight":0,"queued":0}]}`, 1, 0},
		{`{"status":"ok","loaded":["english"]}`, 0, 0},
		{`not json`, 1, 0},
	} {
		s := &jevServer{health: tc.health}
		srv := newJevServer(t, s)
		d := &RemoteDecider{URL: srv.URL + "/v1/systemone/", Key: "k", BatchMax: tc.batchMax}
		if got := d.Capacity(context.Background(), testJob(t)); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.health, got, tc.want)
		}
		if auth, _ := s.healthAuth.Load().(string); auth != "Bearer k" {
			t.Errorf("/health was asked with Authorization %q", auth)
		}
	}
}

// The rows capacity counts from /health are the rows the fleet itself
// runs: over a fleet of a llama.cpp node and an OpenAI-compatible one,
// capacity over the fleet's states with batches on is Router.Capacity
// (row-wise work, as the batch route asks), and with batches off each
// node is full with the rows of fleet.RowSlots.
func TestCapacityIsTheFleets(t *testing.T) {
	llama := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Slots: 6})
	defer llama.Close()
	oai := fakeengine.New(fakeengine.Options{Dialect: fakeengine.OpenAI})
	defer oai.Close()
	var nodes []*fleet.Node
	for _, c := range []config.Node{
		{Name: "llama", URL: llama.URL, Dialect: "llamacpp", Models: []string{fakeengine.DefaultModel}},
		{Name: "vllm", URL: oai.URL, Dialect: "openai", Models: []string{fakeengine.DefaultModel}, MaxInFlight: 10},
	} {
		n, err := fleet.NewNode(c, func(string) string { return "" }, http.DefaultClient)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	r := fleet.New(nodes, fleet.Options{})
	for k := 1; k <= 6; k++ {
		want := r.Capacity(t.Context(), fakeengine.DefaultModel, k) // reads llama.cpp's slots
		b, _ := json.Marshal(r.States())
		var loads []nodeLoad
		if err := json.Unmarshal(b, &loads); err != nil {
			t.Fatal(err)
		}
		if loads[0].Slots != 6 || loads[1].Slots != 10 {
			t.Fatalf("/health's slots %d and %d, want 6 and 10", loads[0].Slots, loads[1].Slots)
		}
		if got := capacity(loads, fakeengine.DefaultModel, k, 0, true); got != want {
			t.Errorf("%d questions, in batches: %d rows, the fleet runs %d", k, got, want)
		}
		for _, l := range loads {
			per := fleet.RowSlots(l.Slots, k)
			if got := capacity([]nodeLoad{l}, fakeengine.DefaultModel, k, 0, false); got != (l.Slots+per-1)/per {
				t.Errorf("%d questions, row by row on %s: %d rows, the fleet's share makes %d", k, l.Dialect, got, (l.Slots+per-1)/per)
			}
		}
	}
}

// A 429 or 503 asking to be tried again later than the run waits (a key
// whose budget is spent until the period resets) stops the run at once,
// saying when: each retry would be refused again, after up to 2 minutes
// of waiting.
func TestRemoteDecideStopsOnARetryAfterPastItsWait(t *testing.T) {
	for _, code := range []int{429, 503} {
		var calls atomic.Int64
		srv := newJevServer(t, &jevServer{retryAfter: "3600", reply: func(string, []byte) (int, string, bool) {
			calls.Add(1)
			return code, `{"error":{"type":"insufficient_quota","message":"the key has spent its budget"}}`, true
		}})
		d := &RemoteDecider{URL: srv.URL, Retries: 4, MaxWait: 100 * time.Millisecond}
		req := testJob(t)
		req.State = []byte(`{"text":"row 1"}`)
		_, err := d.Decide(context.Background(), req)
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "1h0m0s") || calls.Load() != 1 {
			t.Errorf("%d with Retry-After 3600: err %v after %d calls; want the run stopped at once, saying 1h0m0s", code, err, calls.Load())
		}
	}
}
