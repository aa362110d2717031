package answer_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"system1/internal/answer"
	"system1/internal/config"
	"system1/internal/decisionlog"
	"system1/internal/fakeengine"
	"system1/internal/fleet"
)

// syncRecords is a Recorder the shadow's workers may call at once with
// the request path.
type syncRecords struct {
	mu  sync.Mutex
	got []decisionlog.Record
}

func (r *syncRecords) Record(rec decisionlog.Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, rec)
}

func (r *syncRecords) faces() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for _, rec := range r.got {
		out[rec.Face]++
	}
	return out
}

// shadowed is the answer path over two fake llama.cpp nodes, "m" serving
// model m and "c" serving model c as cand behaves, with every request for
// m shadowed to c through a queue of queue requests and one worker.
func shadowed(t testing.TB, cand fakeengine.Behavior, queue int, share float64, rec answer.Recorder) (*answer.Service, *answer.Shadow) {
	t.Helper()
	var nodes []*fleet.Node
	for _, n := range []struct {
		model string
		b     fakeengine.Behavior
	}{{"m", fakeengine.Behavior{}}, {"c", cand}} {
		f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{n.model}, Behavior: n.b})
		t.Cleanup(f.Close)
		node, err := fleet.NewNode(config.Node{Name: n.model, URL: f.URL, Dialect: "llamacpp", Models: []string{n.model}}, func(string) string { return "" }, http.DefaultClient)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, node)
	}
	var sh *answer.Shadow
	if share > 0 {
		sh = answer.NewShadow(answer.ShadowOptions{Rules: []answer.ShadowRule{{Model: "m", Candidate: "c", Share: share}}, Queue: queue, Workers: 1})
		t.Cleanup(sh.Close) // before the engines close: the cleanups run last first
	}
	return answer.New(answer.Options{Router: fleet.New(nodes, fleet.Options{}), Recorder: rec, Shadow: sh}), sh
}

// A candidate that never answers holds the one worker, and fills the
// one place in the queue; every request after that is answered as if no
// shadow were configured, its shadow dropped and counted, instead of the
// caller waiting for room. Closing the shadow cancels the candidate's
// request and drops what was queued, counted too.
func TestFullShadowQueueDropsAndCountsInsteadOfDelayingCallers(t *testing.T) {
	var rec syncRecords
	svc, sh := shadowed(t, fakeengine.Behavior{Fault: fakeengine.Hang}, 1, 1, &rec)
	ask := func() {
		t.Helper()
		done := make(chan error, 1)
		go func() {
			_, err := svc.Answer(t.Context(), twoQuestions("m"))
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second): // far beyond any answer; the candidate never answers at all
			t.Fatal("the caller waited on the shadow's candidate")
		}
	}
	ask()
	// The worker takes the first request and hangs on the candidate.
	for deadline := time.Now().Add(30 * time.Second); sh.Stats().Queued != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("the worker never took the first request: %+v", sh.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	const n = 20
	for range n - 1 {
		ask()
	}
	st := sh.Stats()
	if st.Sampled != n || st.Queued != 1 || st.Dropped != n-2 || st.Asked != 0 || st.Failed != 0 {
		t.Fatalf("with the queue full: %+v; want %d sampled, 1 queued, %d dropped", st, n, n-2)
	}
	if got := rec.faces(); got[decisionlog.FaceDecide] != 2*n || got[decisionlog.FaceShadow] != 0 {
		t.Fatalf("records by face: %v; want every served answer and no shadow one", got)
	}
	sh.Close()
	st = sh.Stats()
	if st.Sampled != n || st.Dropped != n || st.Failed != 0 || st.Asked != 0 || st.Queued != 0 {
		t.Fatalf("after Close: %+v; want the one in flight and the one queued dropped too", st)
	}
	svc.Answer(t.Context(), twoQuestions("m")) // a closed shadow drops too
	if st := sh.Stats(); st.Sampled != n+1 || st.Dropped != n+1 {
		t.Fatalf("offered after Close: %+v", st)
	}
}

// A shadow that keeps up asks the candidate every sampled request and
// records its answers under the face shadow and the request's shadow id,
// beside the served answers; a request for another model is not drawn.
func TestShadowRecordsTheCandidatesAnswers(t *testing.T) {
	var rec syncRecords
	svc, sh := shadowed(t, fakeengine.Behavior{}, 16, 1, &rec)
	for range 3 {
		if _, err := svc.Answer(t.Context(), twoQuestions("m")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := svc.Answer(t.Context(), twoQuestions("c")); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		st := sh.Stats()
		if st.Asked+st.Dropped+st.Failed == st.Sampled {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shadow did not finish: %+v", st)
		}
	}
	if st := sh.Stats(); st.Sampled != 3 || st.Asked != 3 || st.Failed != 0 {
		t.Fatalf("stats %+v", st)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var shadows int
	for _, r := range rec.got {
		if r.Face != decisionlog.FaceShadow {
			continue
		}
		shadows++
		if r.Model != "c" || r.RequestID != decisionlog.ShadowRequestID("req_1") || len(r.Final) != len(r.Options) {
			t.Fatalf("a shadow record: %+v", r)
		}
	}
	if want := 2 * 3; shadows != want {
		t.Fatalf("%d shadow records; want %d", shadows, want)
	}
}

// The caller's latency with and without shadowing, side by side in one
// run: the same answer path over the same engine, without a shadow, with
// one request in ten (share=0.1) or every one (share=1) asked of a
// candidate on its own engine, and with every one offered to a candidate
// that never answers (share=1,full), so that the queue stays full and
// the caller pays only the draw and the dropped offer. The fake engines
// run in this process, so a candidate that answers competes with the
// caller for the same CPUs, which a candidate on its own engine does
// only for system1's share of the work; run with
//
//	go test ./internal/answer -run '^$' -bench ShadowCallerLatency -count 5
func BenchmarkShadowCallerLatency(b *testing.B) {
	for _, c := range []struct {
		name  string
		share float64
		cand  fakeengine.Behavior
	}{{"off", 0, fakeengine.Behavior{}}, {"share=0.1", 0.1, fakeengine.Behavior{}}, {"share=1", 1, fakeengine.Behavior{}}, {"share=1,full", 1, fakeengine.Behavior{Fault: fakeengine.Hang}}} {
		b.Run(c.name, func(b *testing.B) {
			svc, sh := shadowed(b, c.cand, answer.DefaultShadowQueue, c.share, nil)
			req := twoQuestions("m")
			for b.Loop() {
				if _, err := svc.Answer(b.Context(), req); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if sh != nil {
				st := sh.Stats()
				b.ReportMetric(float64(st.Sampled)/float64(b.N), "shadowed/op")
				b.ReportMetric(float64(st.Dropped)/float64(b.N), "dropped/op")
			}
		})
	}
}

// The service serve builds is the answer path WithCache; its shadow
// still asks the candidate on the whole fleet, as does a link held to
// some nodes (Only).
func TestShadowSurvivesWithCacheAndOnly(t *testing.T) {
	var rec syncRecords
	svc, sh := shadowed(t, fakeengine.Behavior{}, 16, 1, &rec)
	for _, s := range []*answer.Service{svc.WithCache(nil), svc.Only([]string{"m"})} {
		if _, err := s.Answer(t.Context(), twoQuestions("m")); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		st := sh.Stats()
		if st.Asked+st.Dropped+st.Failed == st.Sampled {
			if st.Sampled != 2 || st.Asked != 2 {
				t.Fatalf("stats %+v; want both asked of the candidate", st)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shadow did not finish: %+v", st)
		}
	}
}

// A repeat answered from the decision cache is drawn like any answer, as
// it is recorded like any: the share of requests shadowed is the share
// configured, repeats among them, whether the cache is on or not.
func TestShadowDrawsCacheHits(t *testing.T) {
	var rec syncRecords
	plain, sh := shadowed(t, fakeengine.Behavior{}, 16, 1, &rec)
	svc := plain.WithCache(answer.NewCache(16, 0))
	for range 2 {
		if _, err := svc.Answer(t.Context(), twoQuestions("m")); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		st := sh.Stats()
		if st.Sampled > 0 && st.Asked+st.Dropped+st.Failed == st.Sampled {
			if st.Sampled != 2 || st.Asked != 2 {
				t.Fatalf("stats %+v; want the miss and the hit both asked of the candidate", st)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shadow did not finish: %+v", st)
		}
	}
}
