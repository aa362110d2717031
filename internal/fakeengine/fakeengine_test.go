package fakeengine_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	neturl "net/url"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"system1/internal/decision"
	"system1/internal/engine"
	"system1/internal/engine/llamacpp"
	"system1/internal/engine/ollama"
	"system1/internal/engine/openai"
	"system1/internal/fakeengine"
	"system1/internal/systemone"
)

var dialects = []fakeengine.Dialect{fakeengine.LlamaCpp, fakeengine.OpenAI, fakeengine.Ollama}

// client is system1's engine for a dialect, pointed at a fake.
func client(d fakeengine.Dialect, url string) engine.Engine {
	switch d {
	case fakeengine.LlamaCpp:
		return &llamacpp.Engine{BaseURL: url}
	case fakeengine.Ollama:
		return &ollama.Engine{BaseURL: url}
	}
	return &openai.Engine{BaseURL: url}
}

func question(t *testing.T) (json []byte, q decision.Question) {
	t.Helper()
	body := []byte(`{"model":"fake","state":"s","questions":{"q":{"type":"choice","criteria":{"a":null,"b":null,"c":null}}}}`)
	p := systemone.ParseRequest(body)
	if ps := p.Validate(decision.DefaultLimits()); len(ps) > 0 {
		t.Fatal(ps)
	}
	return p.State, p.Questions[0]
}

func start(t *testing.T, opt fakeengine.Options) *fakeengine.Fake {
	f := fakeengine.New(opt)
	t.Cleanup(f.Close)
	return f
}

// Each dialect's real client reads the fake's distribution exactly, lists
// its models, and the fake records what the client sent.
func TestDialectsReadTheDistribution(t *testing.T) {
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) {
			f := start(t, fakeengine.Options{Dialect: d, Models: []string{"fake", "other"}})
			e := client(d, f.URL)
			state, q := question(t)
			out, err := engine.Ask(context.Background(), e, "fake", state, q)
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range []float64{4. / 7, 2. / 7, 1. / 7} {
				if math.Abs(out.Dist[i]-want) > 1e-12 {
					t.Errorf("p = %v, want 4/7, 2/7, 1/7", out.Dist)
				}
			}
			if out.Estimated || out.OutputTokens != 1 || out.Model != "fake" {
				t.Errorf("outcome %+v", out)
			}
			reqs := f.Inferences()
			if len(reqs) != 1 {
				t.Fatalf("%d inference requests", len(reqs))
			}
			r := reqs[0]
			if !slices.Equal(r.Labels, []string{"A", "B", "C"}) || r.InputTokens != out.InputTokens || !strings.HasPrefix(r.User, "State:\ns\n\n") {
				t.Errorf("recorded %+v", r)
			}
			models, err := e.Models(context.Background())
			if err != nil || !slices.Contains(models, "other") {
				t.Errorf("models %v, %v", models, err)
			}
		})
	}
}

// Every fault reaches system1's engine clients as the failure the router
// acts on.
func TestFaultsAsSystem1SeesThem(t *testing.T) {
	for _, tc := range []struct {
		b    fakeengine.Behavior
		want engine.FailureKind
		ok   bool // answered, with label A missing (llama.cpp: read from its wide read's grammar)
	}{
		{b: fakeengine.Behavior{Fault: fakeengine.Refuse}, want: engine.Unavailable},
		{b: fakeengine.Behavior{Fault: fakeengine.Hang}, want: engine.Timeout},
		{b: fakeengine.Behavior{Fault: fakeengine.Stall}, want: engine.Timeout},
		{b: fakeengine.Behavior{Fault: fakeengine.Status, Status: 500}, want: engine.Unavailable},
		{b: fakeengine.Behavior{Fault: fakeengine.Status, Status: 502}, want: engine.Unavailable},
		{b: fakeengine.Behavior{Fault: fakeengine.Status, Status: 503}, want: engine.Unavailable},
		{b: fakeengine.Behavior{Fault: fakeengine.Status, Status: 404}, want: engine.Unavailable},
		{b: fakeengine.Behavior{Fault: fakeengine.Status, Status: 429, RetryAfter: "2"}, want: engine.RateLimited},
		{b: fakeengine.Behavior{Fault: fakeengine.NotJSON}, want: engine.Malformed},
		{b: fakeengine.Behavior{Fault: fakeengine.NoLogprobs}, want: engine.Malformed},
		{b: fakeengine.Behavior{Fault: fakeengine.NullLogprobs}, want: engine.Malformed},
		{b: fakeengine.Behavior{Fault: fakeengine.EmptyChoices}, want: engine.Malformed},
		{b: fakeengine.Behavior{Fault: fakeengine.NullLogprob}, want: engine.Malformed},
		{b: fakeengine.Behavior{Fault: fakeengine.NaN}, want: engine.Malformed},
		{b: fakeengine.Behavior{Fault: fakeengine.PosInf}, want: engine.Malformed},
		{b: fakeengine.Behavior{Fault: fakeengine.NegInf}, want: engine.Malformed},
		{b: fakeengine.Behavior{Fault: fakeengine.Positive}, want: engine.Malformed},
		{b: fakeengine.Behavior{Fault: fakeengine.DuplicateLabel}, want: engine.Malformed},
		{b: fakeengine.Behavior{Fault: fakeengine.MissingLabel}, ok: true},
	} {
		for _, d := range dialects {
			name := string(tc.b.Fault)
			if tc.b.Status != 0 {
				name += "-" + http.StatusText(tc.b.Status)
			}
			t.Run(name+"/"+string(d), func(t *testing.T) {
				f := start(t, fakeengine.Options{Dialect: d, Behavior: tc.b})
				state, q := question(t)
				ctx := context.Background()
				if tc.b.Fault == fakeengine.Hang || tc.b.Fault == fakeengine.Stall {
					// The client gives up; the fake must let go then.
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
					defer cancel()
				}
				out, err := engine.Ask(ctx, client(d, f.URL), "fake", state, q)
				// Every handler has returned once the client is done, even
				// those that never answered.
				wait, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if err := f.WaitIdle(wait); err != nil {
					t.Fatalf("a handler is still running after the client gave up: %v", err)
				}
				if tc.ok && d == fakeengine.LlamaCpp {
					// The wide read's grammar makes llama-server generate the
					// likeliest label, a, and report its value though it is
					// out of the top: the Halving distribution whole.
					want := decision.Distribution{4.0 / 7, 2.0 / 7, 1.0 / 7}
					if err != nil || len(out.Missing) != 0 || len(out.Dist) != 3 || math.Abs(out.Mass-0.875) > 1e-12 {
						t.Fatalf("outcome %+v, %v; want label a read from the generated token, mass 0.875", out, err)
					}
					for i := range want {
						if math.Abs(out.Dist[i]-want[i]) > 1e-12 {
							t.Fatalf("distribution %v, want %v", out.Dist, want)
						}
					}
					return
				}
				if tc.ok {
					if err != nil || !slices.Equal(out.Missing, []string{"a"}) {
						t.Fatalf("outcome %+v, %v; want label a missing", out, err)
					}
					return
				}
				var fail *engine.Failure
				if !errors.As(err, &fail) && err != nil {
					fail = engine.Classify(err)
				}
				if fail == nil || fail.Kind != tc.want {
					t.Fatalf("got %v (%+v), want %s", err, out, tc.want)
				}
				if tc.b.Status == 429 && fail.RetryAfter != 2*time.Second {
					t.Errorf("retry after %v, want 2s", fail.RetryAfter)
				}
			})
		}
	}
}

// Python servers write non-finite floats as bare literals; the fake does
// too, and a null variant, on the label asked for.
func TestNonFiniteLiterals(t *testing.T) {
	for _, tc := range []struct {
		fault fakeengine.Fault
		want  string
	}{
		{fakeengine.NaN, `"token":"B","logprob":NaN`},
		{fakeengine.PosInf, `"token":"B","logprob":Infinity`},
		{fakeengine.NegInf, `"token":"B","logprob":-Infinity`},
		{fakeengine.NullLogprob, `"token":"B","logprob":null`},
	} {
		t.Run(string(tc.fault), func(t *testing.T) {
			f := start(t, fakeengine.Options{Dialect: fakeengine.OpenAI, Behavior: fakeengine.Behavior{Fault: tc.fault, Label: 1}})
			resp, err := http.Post(f.URL+"/v1/chat/completions", "application/json", strings.NewReader(
				`{"model":"fake","messages":[{"role":"user","content":"Question: which?\nOptions:\nA. one\nB. two\n"}],"logprobs":true,"top_logprobs":5}`))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if !strings.Contains(string(body), tc.want) {
				t.Fatalf("%s does not contain %s", body, tc.want)
			}
		})
	}
}

// Set changes the behaviour between requests, and Latency delays the
// answer until the client gives up.
func TestSetAndLatency(t *testing.T) {
	f := start(t, fakeengine.Options{Dialect: fakeengine.Ollama})
	e := client(fakeengine.Ollama, f.URL)
	state, q := question(t)
	f.Set(fakeengine.Behavior{Latency: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := engine.Ask(ctx, e, "fake", state, q); engine.Classify(err).Kind != engine.Timeout {
		t.Fatalf("slow engine: %v", err)
	}
	f.Set(fakeengine.Behavior{Logprobs: fakeengine.Probs(.1, .9), NoUsage: true})
	out, err := engine.Ask(context.Background(), e, "fake", state, q)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(out.Dist[1]-.9) > 1e-12 || !slices.Equal(out.Missing, []string{"c"}) || !out.Estimated {
		t.Fatalf("outcome %+v", out)
	}
	if n := len(f.Inferences()); n != 2 {
		t.Fatalf("%d inference requests recorded, want 2", n)
	}
}

// Under vLLM's constraint the fake holds the first token to the labels
// (values after the mask, a label generated) unless told to ignore it;
// then it answers as if no constraint were sent: values from before the
// mask, and the likeliest token generated, here no label, which the
// OpenAI client reads as a constraint that did not hold.
func TestConstraintHeldOrIgnored(t *testing.T) {
	p := engine.Prompt{System: "s", StatePart: "state\n", Question: "Question: which?\nA. a\nB. b\n", Labels: []string{"A", "B"}}
	lp := fakeengine.ByLabel(map[string]float64{"A": 0.1, "B": 0.05}) // the rest, 0.85, is no label
	for _, tc := range []struct {
		constrain string
		ignore    bool
		failed    bool
		mass      float64
	}{
		{"structured_outputs", false, false, 1},
		{"guided_choice", false, false, 1},
		{"structured_outputs", true, true, 0.15},
		{"guided_choice", true, true, 0.15},
		{"", true, false, 0.15}, // nothing to ignore: read as before any mask
	} {
		t.Run(fmt.Sprintf("%s/ignore=%v", tc.constrain, tc.ignore), func(t *testing.T) {
			f := start(t, fakeengine.Options{Dialect: fakeengine.OpenAI, Behavior: fakeengine.Behavior{Logprobs: lp, IgnoreConstraint: tc.ignore}})
			r, err := (&openai.Engine{BaseURL: f.URL, Constrain: tc.constrain}).Read(context.Background(), "fake", p)
			if err != nil {
				t.Fatal(err)
			}
			mass := math.Exp(r.Logprobs[0]) + math.Exp(r.Logprobs[1])
			if r.ConstraintFailed != tc.failed || math.Abs(mass-tc.mass) > 1e-9 {
				t.Errorf("constraint failed %v, label mass %v; want %v, %v", r.ConstraintFailed, mass, tc.failed, tc.mass)
			}
			if got := f.Inferences()[0].Constrained; got != (tc.constrain != "") {
				t.Errorf("the fake saw a constraint: %v", got)
			}
		})
	}
}

// The fake runs at most Parallel tasks at once and counts the tasks in
// flight, waiting or running (PeakTasks): six tasks sent together over
// two at a time, each taking a latency, take at least three latencies,
// and six that never end are all counted while they wait.
func TestParallelAndPeakTasks(t *testing.T) {
	const tasks, parallel, latency = 6, 2, 40 * time.Millisecond
	state, q := question(t)
	ask := func(ctx context.Context, e engine.Engine) chan error {
		errs := make(chan error, tasks)
		for range tasks {
			go func() { _, err := engine.Ask(ctx, e, "fake", state, q); errs <- err }()
		}
		return errs
	}

	f := start(t, fakeengine.Options{Dialect: fakeengine.OpenAI, Parallel: parallel, Behavior: fakeengine.Behavior{Latency: latency}})
	began := time.Now()
	errs := ask(context.Background(), client(fakeengine.OpenAI, f.URL))
	for range tasks {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if took, least := time.Since(began), tasks/parallel*latency; took < least {
		t.Errorf("%d tasks over %d at a time took %s, under %s", tasks, parallel, took, least)
	}

	f = start(t, fakeengine.Options{Dialect: fakeengine.OpenAI, Parallel: parallel, Behavior: fakeengine.Behavior{Latency: time.Hour}})
	ctx, cancel := context.WithCancel(context.Background())
	errs = ask(ctx, client(fakeengine.OpenAI, f.URL))
	for deadline := time.Now().Add(10 * time.Second); f.PeakTasks() < tasks; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("peak tasks %d with %d in flight", f.PeakTasks(), tasks)
		}
	}
	cancel()
	for range tasks {
		<-errs
	}
	if got := f.PeakTasks(); got != tasks {
		t.Errorf("peak tasks %d, want the %d sent", got, tasks)
	}
}

// A refusing fake, of each kind, and Down refuse connections and keep
// their ports until the test ends: a server started meanwhile, as tests
// in parallel start many, cannot take the port and answer in their place.
func TestRefusedPortsAreHeld(t *testing.T) {
	for name, url := range map[string]func(t *testing.T) string{
		"engine, refusing from the start": func(t *testing.T) string {
			return start(t, fakeengine.Options{Behavior: fakeengine.Behavior{Fault: fakeengine.Refuse}}).URL
		},
		"engine, refusing once set after an answer": func(t *testing.T) string {
			f := start(t, fakeengine.Options{Dialect: fakeengine.Ollama})
			// A connection it served lingers in TIME_WAIT on its port.
			if _, err := (&ollama.Engine{BaseURL: f.URL}).Models(context.Background()); err != nil {
				t.Fatal(err)
			}
			f.Set(fakeengine.Behavior{Fault: fakeengine.Refuse})
			return f.URL
		},
		"System One endpoint": func(t *testing.T) string {
			return fakeengine.StartSystemOne(t, fakeengine.Reply{Fault: fakeengine.Refuse}).URL
		},
		"Down": func(t *testing.T) string { return fakeengine.Down(t) },
	} {
		t.Run(name, func(t *testing.T) {
			u, err := neturl.Parse(url(t))
			if err != nil {
				t.Fatal(err)
			}
			if c, err := net.Dial("tcp", u.Host); !errors.Is(err, syscall.ECONNREFUSED) {
				if c != nil {
					c.Close()
				}
				t.Errorf("dialling %s: %v, want connection refused", u.Host, err)
			}
			if ln, err := net.Listen("tcp", u.Host); err == nil {
				ln.Close()
				t.Errorf("another server could listen on %s", u.Host)
			}
		})
	}
}
