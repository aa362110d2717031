package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"system1/internal/answer"
	"system1/internal/calibration/fitting"
	"system1/internal/cases"
	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/decisionlog"
	"system1/internal/fakeengine"
	"system1/internal/fleet"
	"system1/internal/httpapi"
	"system1/internal/outcomes"
	"system1/internal/simmodel"
	"system1/internal/testengine"
)

// The command line's shadow report and replay on the simulated model
// against a deliberately worse candidate (served over-confident and
// biased): live traffic shadowed to it and logged with its states and
// questions, outcomes reported; then system1 shadow --report (from the
// log, and from a server's GET /v1/shadow) and system1 replay --from-log
// --candidate worse, which asks the logged questions again, each say to
// keep the served model because the candidate is worse.
func TestShadowReportAndReplayFromTheCommandLine(t *testing.T) {
	all, err := cases.ReadFiles(0, testengine.SharedData(t, "agnews-dev.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	train, traffic := simmodel.Split(all, 0.5)
	traffic = traffic[:200]
	good, err := simmodel.Train(train, simmodel.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	worse := *good
	worse.Temperature, worse.FirstBias = 0.2, 2.5
	dir := t.TempDir()
	db := filepath.Join(dir, "decisions.db")
	cfgText := fmt.Sprintf("decision_log:\n  path: %s\n  keep_states: true\nnodes:\n", db)
	sims := []*simmodel.Model{good, &worse}
	lines, nodes := fakeNodes(t, []string{"good", "worse"}, func(i int) fakeengine.Behavior { return sims[i].Behavior() })
	cfgText += lines
	// A candidate that ranks none of the labels refuses every question.
	blank := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"blank"}, Behavior: fakeengine.Behavior{Logprobs: fakeengine.Probs()}})
	t.Cleanup(blank.Close)
	cfgText += fmt.Sprintf("  - {name: blank, url: %q, dialect: llamacpp, models: [blank]}\n", blank.URL)
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}

	// Live traffic, every request shadowed, then the outcomes.
	l, err := decisionlog.Open(t.Context(), decisionlog.Options{Path: db, KeepStates: true})
	if err != nil {
		t.Fatal(err)
	}
	sh := answer.NewShadow(answer.ShadowOptions{Rules: []answer.ShadowRule{{Model: "good", Candidate: "worse", Share: 1}}, Queue: len(traffic)})
	svc := answer.New(answer.Options{Router: fleet.New(nodes, fleet.Options{}), Recorder: l, Shadow: sh})
	for i, c := range traffic {
		req := c.Request
		req.Model = "good"
		if _, err := svc.Answer(t.Context(), answer.Request{Request: req, Face: decisionlog.FaceSystemOne, RequestID: fmt.Sprint("r", i)}); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if st := sh.Stats(); st.Asked+st.Failed+st.Dropped == st.Sampled {
			if st.Asked != uint64(len(traffic)) {
				t.Fatalf("shadow: %+v", st)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shadow did not finish: %+v", sh.Stats())
		}
	}
	sh.Close()
	for i, c := range traffic {
		q := c.Request.Questions[0]
		if _, err := l.Outcome(t.Context(), fmt.Sprint("r", i), q.ID, q.Options[c.Expected[0]].Key); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(t.Context()); err != nil {
		t.Fatal(err)
	}

	check := func(how, stdout string, source string) {
		t.Helper()
		var rep outcomes.ShadowReport
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil || len(rep.Signatures) != 1 || rep.Source != source {
			t.Fatalf("%s: %v: %s", how, err, stdout)
		}
		s := rep.Signatures[0]
		t.Logf("%s: %s vs %s: %s: %s", how, s.Model, s.Candidate, s.Recommendation, s.Evidence)
		if s.Model != "good" || s.Candidate != "worse" || s.N != len(traffic) || s.Labelled != len(traffic) ||
			s.Recommendation != fitting.RecommendKeep || !strings.Contains(s.Evidence, "the candidate is worse") {
			t.Fatalf("%s: %+v", how, s)
		}
	}
	stdout, stderr, err := cli(t, "shadow", "--report", "--config", cfgPath)
	if err != nil {
		t.Fatalf("shadow --report: %v\n%s", err, stderr)
	}
	check("shadow --report --config", stdout, decisionlog.FaceShadow)

	stdout, stderr, err = cli(t, "replay", "--from-log", "--candidate", "worse", "--config", cfgPath)
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, stderr)
	}
	check("replay --from-log", stdout, "replay")
	// --limit asks that many questions of the latest requests, read from
	// the log a page of that many requests at a time.
	stdout, stderr, err = cli(t, "replay", "--from-log", "--candidate", "worse", "--config", cfgPath, "--limit", "7")
	var limited outcomes.ShadowReport
	if err != nil || json.Unmarshal([]byte(stdout), &limited) != nil || len(limited.Signatures) != 1 || limited.Signatures[0].N != 7 {
		t.Fatalf("replay --limit 7: %v\n%s%s", err, stdout, stderr)
	}
	// A candidate that gave no reading of any question has nothing to
	// compare: the replay says so.
	if stdout, stderr, err := cli(t, "replay", "--from-log", "--candidate", "blank", "--config", cfgPath); err == nil ||
		!strings.Contains(err.Error(), "the candidate refused all 200 questions replayed") || !strings.Contains(err.Error(), "ranked none of the labels") {
		t.Fatalf("replay of a candidate that ranks no label: %v\n%s%s", err, stdout, stderr)
	}

	// The same report from a server over the log.
	l, err = decisionlog.Open(t.Context(), decisionlog.Options{Path: db})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(t.Context()) })
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Answer: answer.New(answer.Options{Router: fleet.New(nodes, fleet.Options{})}), DecisionLog: l, Keys: []httpapi.Key{{Name: "shadow", Secret: "sk-shadow-test-key-0123456789"}}}))
	t.Cleanup(srv.Close)
	if _, _, err := cli(t, "shadow", "--report", "--url", srv.URL); err == nil {
		t.Fatal("shadow --report --url without the server's key succeeded")
	}
	stdout, stderr, err = cliEnv(t, map[string]string{"SHADOW_KEY": "sk-shadow-test-key-0123456789"}, "shadow", "--report", "--url", srv.URL, "--key-env", "SHADOW_KEY")
	if err != nil {
		t.Fatalf("shadow --report --url: %v\n%s", err, stderr)
	}
	check("shadow --report --url", stdout, decisionlog.FaceShadow)
	// Without --key-env the key is read from SYSTEM1_KEY, the name the
	// docs and run.sh give a key of this server.
	stdout, stderr, err = cliEnv(t, map[string]string{"SYSTEM1_KEY": "sk-shadow-test-key-0123456789"}, "shadow", "--report", "--url", srv.URL)
	if err != nil {
		t.Fatalf("shadow --report --url with SYSTEM1_KEY set: %v\n%s", err, stderr)
	}
	check("shadow --report --url (SYSTEM1_KEY)", stdout, decisionlog.FaceShadow)

	for _, bad := range [][]string{
		{"shadow"},
		{"shadow", "--report", "--url", srv.URL, "--config", cfgPath},
		{"replay", "--candidate", "worse"},
		{"replay", "--from-log"},
	} {
		if _, _, err := cli(t, bad...); err == nil {
			t.Errorf("%v succeeded", bad)
		}
	}
}

// cliEnv is cli with the variables env.
func cliEnv(t *testing.T, env map[string]string, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(t.Context(), args, func(k string) string { return env[k] }, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), err
}

// replayLog writes a configuration whose decision log keeps states and
// holds one request of two yes/no questions answered by good, and whose
// node serves good and cand alike; it returns the configuration's path.
func replayLog(t *testing.T) string {
	t.Helper()
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"good", "cand"}, Behavior: fakeengine.Behavior{Logprobs: fakeengine.Probs(0.7, 0.2)}})
	t.Cleanup(f.Close)
	return logRequests(t, f.URL, decision.Request{Model: "good", State: json.RawMessage(`"I was charged twice"`), Questions: []decision.Question{
		{ID: "urgent", Kind: decision.Noul, Options: decision.NoulOptions(nil, nil)},
		{ID: "refund", Kind: decision.Noul, Options: decision.NoulOptions(nil, nil)},
	}})
}

// logRequests writes a configuration whose decision log keeps states and
// holds reqs, answered in turn (request ids r1, r2...) by the node at
// nodeURL, which serves good and cand; it returns the configuration's path.
func logRequests(t *testing.T, nodeURL string, reqs ...decision.Request) string {
	t.Helper()
	dir := t.TempDir()
	db := filepath.Join(dir, "decisions.db")
	cfgPath := filepath.Join(dir, "config.yaml")
	cfgText := fmt.Sprintf("decision_log:\n  path: %s\n  keep_states: true\nnodes:\n  - {name: n, url: %q, dialect: llamacpp, models: [good, cand]}\n", db, nodeURL)
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := fleet.NewNode(config.Node{Name: "n", URL: nodeURL, Dialect: "llamacpp", Models: []string{"good", "cand"}}, func(string) string { return "" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := decisionlog.Open(t.Context(), decisionlog.Options{Path: db, KeepStates: true})
	if err != nil {
		t.Fatal(err)
	}
	svc := answer.New(answer.Options{Router: fleet.New([]*fleet.Node{n}, fleet.Options{}), Recorder: l})
	for i, req := range reqs {
		if _, err := svc.Answer(t.Context(), answer.Request{Request: req, Face: decisionlog.FaceSystemOne, RequestID: fmt.Sprintf("r%d", i+1)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	return cfgPath
}

// A replay whose --limit is under the questions of every logged request
// asks none of them, and says that --limit is why, not keep_states, which
// is on; a --limit that holds a request replays it.
func TestReplayLimitUnderEveryRequestSaysSo(t *testing.T) {
	cfgPath := replayLog(t)
	stdout, stderr, err := cli(t, "replay", "--from-log", "--candidate", "cand", "--config", cfgPath, "--limit", "1")
	if err == nil || !strings.Contains(err.Error(), "--limit 1") || strings.Contains(err.Error(), "keep_states") {
		t.Errorf("replay --limit 1 of a request of 2 questions: %v, want an error naming --limit and not keep_states\n%s%s", err, stdout, stderr)
	}
	if stdout, stderr, err := cli(t, "replay", "--from-log", "--candidate", "cand", "--config", cfgPath, "--limit", "2"); err != nil {
		t.Errorf("replay --limit 2: %v\n%s%s", err, stdout, stderr)
	}
}

// With no calibration section, serve answers through the fits its
// default loop keeps in fits.json in the state folder; replay asks the
// candidate through the same answer path, under the same fits: the
// candidate's temperature 4 moves its answers off the served ones, which
// the same engine gave.
func TestReplayAppliesTheLoopsFits(t *testing.T) {
	cfgPath := replayLog(t)
	state := t.TempDir()
	fits := `{"version":1,"fits":[{"model":"cand","kind":"noul","bucket":"2","temperature":4}]}`
	if err := os.WriteFile(filepath.Join(state, "fits.json"), []byte(fits), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := cli(t, "replay", "--from-log", "--candidate", "cand", "--config", cfgPath, "--state-dir", state)
	var rep outcomes.ShadowReport
	if err != nil || json.Unmarshal([]byte(stdout), &rep) != nil || len(rep.Signatures) != 1 {
		t.Fatalf("replay: %v\n%s%s", err, stdout, stderr)
	}
	// 0.78 and 0.22 at temperature 4: 0.58 and 0.42.
	if s := rep.Signatures[0]; s.N != 2 || s.MeanAbsChange < 0.1 {
		t.Errorf("the candidate's answers moved %.3f from the served ones, want about 0.2: the loop's fits for cand not applied: %s", s.MeanAbsChange, stdout)
	}
}

// A shadow rule on a cascade's first stage shadows that stage's
// requests; with every question escalated to the second stage (no fits:
// uncertified stages escalate), system1 shadow --report compares the
// candidate with the first stage's answers, the model the rule names,
// not with the second stage's recorded before the shadow's.
func TestShadowReportOfACascadeStageNamesTheStageShadowed(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "decisions.db")
	cfgText := fmt.Sprintf("decision_log:\n  path: %s\nnodes:\n", db)
	probs := [][]float64{{0.7, 0.3}, {0.2, 0.8}, {0.7, 0.3}}
	lines, nodes := fakeNodes(t, []string{"small", "large", "cand"}, func(i int) fakeengine.Behavior {
		return fakeengine.Behavior{Logprobs: fakeengine.Probs(probs[i]...)}
	})
	cfgText += lines
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := decisionlog.Open(t.Context(), decisionlog.Options{Path: db})
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	sh := answer.NewShadow(answer.ShadowOptions{Rules: []answer.ShadowRule{{Model: "small", Candidate: "cand", Share: 1}}, Queue: n})
	svc := answer.New(answer.Options{Router: fleet.New(nodes, fleet.Options{}), Recorder: l, Shadow: sh,
		Cascades: []answer.Cascade{{Model: "casc", Stages: []string{"small", "large"}, TargetError: 0.05}}})
	for i := range n {
		req := decision.Request{Model: "casc", State: json.RawMessage(fmt.Sprintf(`"ticket %d"`, i)), Questions: []decision.Question{
			{ID: "urgent", Kind: decision.Noul, Options: decision.NoulOptions(nil, nil)}}}
		a, err := svc.Answer(t.Context(), answer.Request{Request: req, Face: decisionlog.FaceSystemOne, RequestID: fmt.Sprint("r", i)})
		if err != nil {
			t.Fatal(err)
		}
		if a.Questions[0].Stage != "large" {
			t.Fatalf("the question was kept by %s; the test wants it escalated", a.Questions[0].Stage)
		}
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if st := sh.Stats(); st.Asked+st.Failed+st.Dropped == st.Sampled {
			if st.Asked != n {
				t.Fatalf("shadow: %+v", st)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shadow did not finish: %+v", sh.Stats())
		}
	}
	sh.Close()
	if err := l.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := cli(t, "shadow", "--report", "--config", cfgPath)
	var rep outcomes.ShadowReport
	if err != nil || json.Unmarshal([]byte(stdout), &rep) != nil || len(rep.Signatures) != 1 {
		t.Fatalf("shadow --report: %v\n%s%s", err, stdout, stderr)
	}
	if s := rep.Signatures[0]; s.Model != "small" || s.Candidate != "cand" || s.N != n || s.Agreement != 1 {
		t.Errorf("the report compares %s with %s on %d pairs agreeing on %.2f; want small (the stage the rule shadows) with cand on %d agreeing on 1:\n%s", s.Model, s.Candidate, s.N, s.Agreement, n, stdout)
	}
}

// With decision_log.off, shadow --report and replay say the log is off
// and where, where they said to see a log line above that a command run
// at a terminal never prints (its log shows warnings and errors only).
func TestShadowAndReplaySayTheLogIsOff(t *testing.T) {
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfgPath, []byte("decision_log: {off: true}\nnodes:\n  - {name: n, url: \"http://127.0.0.1:9\", dialect: llamacpp, models: [m]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"shadow", "--report", "--config", cfgPath},
		{"replay", "--from-log", "--candidate", "m", "--config", cfgPath},
	} {
		stdout, stderr, err := cli(t, args...)
		if err == nil || !strings.Contains(err.Error(), "decision_log.off") || !strings.Contains(err.Error(), cfgPath) || strings.Contains(err.Error(), "see the log above") {
			t.Errorf("%s with the decision log off: %v, want an error naming decision_log.off in %s\nstdout: %s\nstderr: %s", args[0], err, cfgPath, stdout, stderr)
		}
	}
}

// A replay that finds no question in its window of a log that keeps
// states says the window held none of another model than the candidate,
// naming --window, where it said replay needs decision_log.keep_states,
// which was on.
func TestReplayOfAnEmptyWindowSaysSo(t *testing.T) {
	cfgPath := replayLog(t)
	for _, args := range [][]string{
		{"--candidate", "cand", "--window", "1ns"}, // the request is older
		{"--candidate", "good"},                    // the request's own model
	} {
		stdout, stderr, err := cli(t, append([]string{"replay", "--from-log", "--config", cfgPath}, args...)...)
		if err == nil || strings.Contains(err.Error(), "keep_states") || !strings.Contains(err.Error(), "--window") {
			t.Errorf("replay %v of a log keeping states: %v, want an error naming --window and not keep_states\n%s%s", args, err, stdout, stderr)
		}
	}
}

// A replay counts the requests the candidate failed and the questions it
// refused, which its signatures leave out, where a candidate that failed
// half the requests was reported on the other half alone.
func TestReplayCountsWhatTheCandidateFailed(t *testing.T) {
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"good", "cand"}, Behavior: fakeengine.Behavior{Logprobs: fakeengine.Probs(0.7, 0.2)}})
	t.Cleanup(f.Close)
	target, err := url.Parse(f.URL)
	if err != nil {
		t.Fatal(err)
	}
	// The engine refuses, as the request's fault, any prompt naming the
	// broken ticket, once the log is written: the candidate fails it.
	var refuse atomic.Bool
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if refuse.Load() && bytes.Contains(body, []byte("broken ticket")) {
			http.Error(w, `{"error":{"code":400,"message":"refused","type":"invalid_request_error"}}`, http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	urgent := []decision.Question{{ID: "urgent", Kind: decision.Noul, Options: decision.NoulOptions(nil, nil)}}
	cfgPath := logRequests(t, front.URL,
		decision.Request{Model: "good", State: json.RawMessage(`"a broken ticket"`), Questions: urgent},
		decision.Request{Model: "good", State: json.RawMessage(`"I was charged twice"`), Questions: urgent})
	refuse.Store(true)
	stdout, stderr, err := cli(t, "replay", "--from-log", "--candidate", "cand", "--config", cfgPath)
	var rep outcomes.ShadowReport
	if err != nil || json.Unmarshal([]byte(stdout), &rep) != nil {
		t.Fatalf("replay: %v\n%s%s", err, stdout, stderr)
	}
	if len(rep.Signatures) != 1 || rep.Signatures[0].N != 1 || rep.Failed != 1 {
		t.Errorf("replay of 2 requests, the candidate failing one: %d signatures, failed %d; want the one answered compared and 1 failed\n%s", len(rep.Signatures), rep.Failed, stdout)
	}
}

// fakeNodes starts a fake llama.cpp engine serving each of models, the
// i-th behaving as behave(i), and returns them as a configuration's node
// lines and as the fleet's nodes, each named for its model.
func fakeNodes(t *testing.T, models []string, behave func(i int) fakeengine.Behavior) (lines string, nodes []*fleet.Node) {
	t.Helper()
	for i, m := range models {
		f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{m}, Behavior: behave(i)})
		t.Cleanup(f.Close)
		cn := config.Node{Name: m, URL: f.URL, Dialect: "llamacpp", Models: []string{m}}
		lines += fmt.Sprintf("  - {name: %s, url: %q, dialect: llamacpp, models: [%s]}\n", cn.Name, cn.URL, m)
		n, err := fleet.NewNode(cn, func(string) string { return "" }, nil)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	return lines, nodes
}
