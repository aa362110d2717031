package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"system1/internal/answer"
	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/decisionlog"
	"system1/internal/fakeengine"
	"system1/internal/fleet"
	"system1/internal/outcomes"
	"system1/internal/pause"
)

// The committed schema files are what go generate writes from the Go
// types; a change to the types without regenerating fails here.
func TestSchemaFilesAreCurrent(t *testing.T) {
	for name, want := range SchemaFiles() {
		got, err := os.ReadFile(filepath.Join("..", "..", "schema", name))
		if err != nil {
			t.Fatalf("%v (run go generate ./internal/gateway)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("schema/%s is stale: run go generate ./internal/gateway", name)
		}
	}
}

// Every schema the gateway publishes uses plain "array" types, never a
// union with null, and resolves as JSON Schema 2020-12.
func TestSchemasArePlainAndResolve(t *testing.T) {
	for name, s := range map[string]*jsonschema.Schema{
		"request": RequestSchema(), "response": ResponseSchema(), "health": HealthSchema(), "capabilities": CapabilitiesSchema(),
	} {
		var walk func(path string, v any)
		walk = func(path string, v any) {
			switch v := v.(type) {
			case map[string]any:
				if ts, ok := v["type"].([]any); ok && slices.Contains(ts, any("array")) {
					t.Errorf("%s%s: type %v is a union with array", name, path, ts)
				}
				for k, x := range v {
					walk(path+"/"+k, x)
				}
			case []any:
				for i, x := range v {
					walk(fmt.Sprintf("%s/%d", path, i), x)
				}
			}
		}
		var generic any
		if err := json.Unmarshal(MarshalSchema(s), &generic); err != nil {
			t.Fatal(err)
		}
		walk("", generic)
		if _, err := s.Resolve(nil); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Every contract rule of the request is checked, and all problems of one
// request are reported together.
func TestParseRequest(t *testing.T) {
	long := strings.Repeat("é", MaxQuestionChars+1)
	many := make([]string, MaxOptions+1)
	for i := range many {
		many[i] = fmt.Sprint("o", i)
	}
	manyJSON, _ := json.Marshal(many)
	cases := []struct {
		body string
		want []string // substrings, one per problem, in order
	}{
		{`{"question":"Ship it?"}`, nil},
		{`{"question":"Which?","options":["a","b"],"context":{"k":1},"min_confidence":0.7,"request_id":"r1","schema_version":"1"}`, nil},
		{`{"question":"Which?","options":null,"context":null}`, nil},
		{``, []string{"empty"}},
		{`[1]`, []string{"JSON object"}},
		{`{}`, []string{"question is required"}},
		{`{"question":"  "}`, []string{"question is required"}},
		{`{"question":7}`, []string{"question must be a string"}},
		{`{"question":"` + long + `"}`, []string{"8001 characters"}},
		{`{"question":"q","bogus":1,"also":2}`, []string{`unknown field(s) "also", "bogus"`}},
		{`{"question":"q","options":["a"]}`, []string{"1 item(s)"}},
		{`{"question":"q","options":[]}`, []string{"0 item(s)"}},
		{`{"question":"q","options":` + string(manyJSON) + `}`, []string{fmt.Sprintf("%d item(s)", MaxOptions+1)}},
		{`{"question":"q","options":["a","a",""]}`, []string{"repeats options[0]", "options[2] is empty"}},
		{`{"question":"q","options":["a","` + strings.Repeat("x", MaxOptionChars+1) + `"]}`, []string{"options[1] is 501 characters"}},
		{`{"question":"q","options":"a,b"}`, []string{"options must be an array"}},
		// none_option's problems depend on options, which has its own.
		{`{"question":"q","options":"a,b","none_option":true}`, []string{"options must be an array"}},
		{`{"question":"q","options":["a",2]}`, []string{"options[1] must be a string"}},
		{`{"question":"q","context":"text"}`, []string{"context must be a JSON object"}},
		{`{"question":"q","min_confidence":1.5}`, []string{"min_confidence is 1.5"}},
		{`{"question":"q","min_confidence":"high"}`, []string{"min_confidence must be a number"}},
		{`{"question":"q","request_id":""}`, []string{"request_id must not be empty"}},
		{`{"question":"q","request_id":"` + strings.Repeat("r", 129) + `"}`, []string{"129 characters"}},
		{`{"question":"q","schema_version":"2"}`, []string{`schema_version "2" is not supported`}},
		{`{"question":"q","schema_version":""}`, []string{`schema_version must be the string "1"`}},
		{`{"question":"q","question":"r"}`, []string{`the request has the key "question" twice`}},
		{`{"question":"q","options":["a","b"],"options":["c","d"]}`, []string{`the request has the key "options" twice`}},
		{"{\"question\":\"q\xff\"}", []string{"question is not valid UTF-8"}},
		{"{\"question\":\"q\",\"options\":[\"a\",\"b\xc3\"]}", []string{"options[1] is not valid UTF-8"}},
		{`{"question":"q","options":["a","b\udc00"]}`, []string{"options[1] is not valid UTF-8"}},
		{"{\"question\":\"q\",\"context\":{\"k\xff\":1}}", []string{"context has a key that is not valid UTF-8"}},
		{`{"question":"q","request_id":"r\ud800"}`, []string{"request_id is not valid UTF-8"}},
		{`{"bogus":true,"options":["a"],"min_confidence":-1}`, []string{"unknown field", "1 item(s)", "question is required", "min_confidence is -1"}},
	}
	for _, c := range cases {
		_, ps := ParseRequest([]byte(c.body))
		if len(ps) != len(c.want) {
			t.Errorf("%.80s: problems %q; want %d like %q", c.body, ps, len(c.want), c.want)
			continue
		}
		for _, w := range c.want {
			found := false
			for _, p := range ps {
				found = found || strings.Contains(p, w)
			}
			if !found {
				t.Errorf("%.80s: problems %q lack %q", c.body, ps, w)
			}
		}
	}
}

// Probabilities are written in option order, whatever the options sort
// to, and read back in that order.
func TestProbabilitiesKeepOptionOrder(t *testing.T) {
	ps := Probabilities{{"zebra", 0.5}, {"apple", 0.3}, {"mango", 0.2}}
	b, err := json.Marshal(ps)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"zebra":0.5,"apple":0.3,"mango":0.2}` {
		t.Fatalf("marshaled %s", b)
	}
	var back Probabilities
	if err := json.Unmarshal(b, &back); err != nil || !slices.Equal(back, ps) {
		t.Fatalf("read back %v, %v", back, err)
	}
}

// gatewayFor builds a gateway from YAML, in a folder of its own.
func gatewayFor(t *testing.T, yaml string) *Gateway {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return build(t, Options{Config: cfg, ConfigPath: path, StatePath: filepath.Join(dir, pause.FileName), Version: "test"}, nil)
}

// build gives o the answer path over its configuration's nodes, with the
// fits of gateway.fits and rec, as system1's faces build it, and builds
// the gateway.
func build(t *testing.T, o Options, rec answer.Recorder) *Gateway {
	t.Helper()
	router, err := fleet.FromConfig(o.Config, fleet.Options{Getenv: func(k string) string { return map[string]string{"FAKE_KEY": "k"}[k] }})
	if err != nil {
		t.Fatal(err)
	}
	ao := answer.Options{Router: router, Recorder: rec, Local: true}
	if f := o.Config.Gateway.Fits; f != "" {
		file, err := outcomes.OpenFitsFile(o.Config.Resolve(f), nil)
		if err != nil {
			t.Fatal(err)
		}
		ao.Fits = file.Current
	}
	o.Answer = answer.New(ao)
	return New(o)
}

func decide(t *testing.T, g *Gateway, body string) *Response {
	t.Helper()
	res := g.Decide(context.Background(), []byte(body), "")
	checkInvariants(t, res)
	return res
}

// checkInvariants holds for every response: a decision only when
// decided, and then one of the answers, with confidence its probability;
// no probabilities without a provider; slices never nil; the response
// validates against the published schema.
func checkInvariants(t *testing.T, res *Response) {
	t.Helper()
	if res.Attempts == nil {
		t.Error("attempts is nil")
	}
	if (res.Status == Decided) != (res.Decision != nil) {
		t.Errorf("status %s with decision %v", res.Status, res.Decision)
	}
	if res.Decision != nil {
		p, ok := res.Probabilities.Get(*res.Decision)
		if !ok || res.Confidence == nil || p != *res.Confidence {
			t.Errorf("decision %q: probability %v (%v), confidence %v", *res.Decision, p, ok, res.Confidence)
		}
	}
	if res.Status == Failed && (res.Error == nil || res.Probabilities != nil || res.Confidence != nil) {
		t.Errorf("error response %+v carries numbers or no error", res)
	}
	if res.Status != Failed && res.Error != nil {
		t.Errorf("status %s with error %+v", res.Status, res.Error)
	}
	resolved, err := ResponseSchema().Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res)
	var generic any
	_ = json.Unmarshal(b, &generic)
	if err := resolved.Validate(generic); err != nil {
		t.Errorf("response fails its schema: %v\n%s", err, b)
	}
}

// The fitted temperature for the provider, kind and bucket is applied as
// p_i proportional to p_i^(1/T), and calibrated says so; another bucket
// has no fit and is reported as given.
func TestCalibrationApplied(t *testing.T) {
	ep := fakeengine.StartSystemOne(t, fakeengine.Reply{Probs: []float64{0.7, 0.2, 0.1}})
	dir := t.TempDir()
	fits := `{"version":1,"created":"2026-01-01T00:00:00Z","fits":[{"provider":"jev","model":"","kind":"choice","bucket":"3-4","temperature":2,"n":100,"nll_before":1,"nll_after":0.9,"ece_before":0.2,"ece_after":0.05,"date":"2026-01-01"}]}`
	if err := os.WriteFile(filepath.Join(dir, "fits.json"), []byte(fits), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "config.yaml")
	yaml := fmt.Sprintf("gateway:\n  fits: fits.json\n  threshold: 0.3\nproviders:\n  - {name: jev, kind: systemone, url: %s, model: jev-latest}\n", ep.URL)
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	g := build(t, Options{Config: cfg, ConfigPath: path}, nil)
	if errs := g.ConfigErrors(); len(errs) > 0 {
		t.Fatal(errs)
	}
	res := decide(t, g, `{"question":"Which?","options":["a","b","c"]}`)
	want := decision.Round(decision.Distribution{0.7, 0.2, 0.1}.Temper(2), decimals)
	if !res.Calibrated || res.Status != Decided || *res.Decision != "a" {
		t.Fatalf("response %+v", res)
	}
	for i, p := range res.Probabilities {
		if p.P != want[i] {
			t.Errorf("p(%s) = %v; tempered %v", p.Option, p.P, want[i])
		}
	}
	if *res.Confidence >= 0.7 {
		t.Errorf("T=2 should flatten 0.7; got %v", *res.Confidence)
	}
	if st := res.Calibration.Steps; len(st) != 1 || res.FitVersion == "" || st[0] != (CalibrationStep{Name: "temperature", Version: "v1/T=2/2026-01-01@" + res.FitVersion}) {
		t.Errorf("steps %+v; want the temperature named with its fit", st)
	}
	res = decide(t, g, `{"question":"Which?","options":["a","b"]}`)
	if res.Calibrated || len(res.Calibration.Steps) != 0 {
		t.Errorf("bucket 2 has no fit but calibrated is true or a step is named: %+v", res)
	}
	caps := g.Capabilities(context.Background())
	if len(caps.Calibration.Fits) != 1 || caps.Calibration.Fits[0].Temperature != 2 {
		t.Errorf("capabilities' fits: %+v", caps.Calibration)
	}
}

// engineGateway is a gateway whose one provider is an engine provider
// over a fake llama.cpp node serving "tiny".
func engineGateway(t *testing.T, b fakeengine.Behavior, maxOptions int) *Gateway {
	t.Helper()
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"tiny"}, Behavior: b})
	t.Cleanup(f.Close)
	return gatewayFor(t, fmt.Sprintf("gateway:\n  timeout: 2s\nnodes:\n  - {name: n1, url: %s, dialect: llamacpp, models: [tiny], max_options: %d}\n"+
		"providers:\n  - {name: local, kind: engine, model: tiny}\n", f.URL, maxOptions))
}

// The engine provider maps a decision to a choice question (options) or a
// noul (yes/no) over the fleet, and the answer is the engine's own
// distribution.
func TestEngineProvider(t *testing.T) {
	probs := fakeengine.Probs(0.8, 0.15, 0.05)
	g := engineGateway(t, fakeengine.Behavior{Logprobs: probs}, 20)
	res := decide(t, g, `{"question":"Which animal?","options":["dog","cat","bird"],"context":{"story":"a dog"}}`)
	if res.Status != Decided || *res.Decision != "dog" || *res.Confidence < 0.6 || *res.Provider != "local" {
		t.Fatalf("choice: %+v", res)
	}
	res = decide(t, g, `{"question":"Is it a dog?"}`)
	if res.Status != Decided || *res.Decision != "yes" {
		t.Fatalf("yes/no: %+v", res)
	}
	// max_options is the option cap of the serving nodes.
	caps := g.Capabilities(context.Background())
	if caps.Providers[0].Capabilities.MaxOptions != 20 {
		t.Errorf("engine max_options %d; want the nodes' cap 20", caps.Providers[0].Capabilities.MaxOptions)
	}
	g = engineGateway(t, fakeengine.Behavior{Logprobs: probs}, 2)
	res = decide(t, g, `{"question":"Which?","options":["dog","cat","bird"]}`)
	if res.Error == nil || res.Error.Code != CodeInvalidRequest || !strings.Contains(res.Error.Message, "local takes at most 2") {
		t.Errorf("over the label cap: %+v", res)
	}
	// The implicit option counts against the cap, and the refusal says
	// so: the caller sent two options, not three.
	res = decide(t, g, `{"question":"Which?","options":["dog","cat"],"none_option":true}`)
	if want := "3 options (2 and the implicit none option) are more than any provider takes: local takes at most 2"; res.Error == nil || res.Error.Code != CodeInvalidRequest || res.Error.Message != want ||
		len(res.Attempts) != 1 || res.Attempts[0].Detail != "not asked: 3 options (2 and the implicit none option) exceed its limit of 2" {
		t.Errorf("over the label cap with none_option: %+v, attempts %+v; want %q", res.Error, res.Attempts, want)
	}
}

// Engine failures map to the gateway's outcomes: a 422 is the caller's
// error, a 503 an error, a hang a timeout, a NaN log-probability
// malformed.
func TestEngineProviderFailures(t *testing.T) {
	cases := []struct {
		b       fakeengine.Behavior
		code    string
		outcome string
	}{
		{fakeengine.Behavior{Fault: fakeengine.Status, Status: 422}, CodeInvalidRequest, OutcomeError},
		{fakeengine.Behavior{Fault: fakeengine.Status, Status: 503}, CodeProviderError, OutcomeError},
		{fakeengine.Behavior{Fault: fakeengine.Hang}, CodeProviderTimeout, OutcomeTimeout},
		{fakeengine.Behavior{Fault: fakeengine.NaN}, CodeMalformed, OutcomeMalformed},
	}
	for _, c := range cases {
		res := decide(t, engineGateway(t, c.b, 20), `{"question":"Which?","options":["a","b"]}`)
		if res.Error == nil || res.Error.Code != c.code || len(res.Attempts) != 1 || res.Attempts[0].Outcome != c.outcome {
			t.Errorf("%+v: response %+v", c.b, res)
		}
	}
}

// A key variable that is named but empty makes that provider fail without
// being asked (the chain goes on), and health says why.
func TestMissingKeyFailsOnlyThatProvider(t *testing.T) {
	jev := fakeengine.StartSystemOne(t, fakeengine.Reply{})
	local := fakeengine.StartSystemOne(t, fakeengine.Reply{})
	g := gatewayFor(t, fmt.Sprintf("providers:\n  - {name: jev, kind: systemone, url: %s, model: m, key_env: UNSET_KEY}\n  - {name: laya, kind: systemone, url: %s, model: m, key_env: FAKE_KEY}\n", jev.URL, local.URL))
	res := decide(t, g, `{"question":"q"}`)
	if res.Status != Decided || *res.Provider != "laya" || !strings.Contains(res.Attempts[0].Detail, "UNSET_KEY is not set") || jev.Calls.Load() != 0 {
		t.Fatalf("response %+v", res)
	}
	h := g.Health(context.Background())
	if h.Status != HealthDegraded || h.Providers[0].OK || !strings.Contains(h.Providers[0].Detail, "UNSET_KEY") {
		t.Fatalf("health %+v", h)
	}
}

// The published request schema refuses the values ParseRequest refuses
// where a schema can say so: a client that validates against it (or a
// model that reads the tool's input schema) is not refused for a value the
// schema allowed.
func TestRequestSchemaRefusesWhatParseRefuses(t *testing.T) {
	resolved, err := RequestSchema().Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{
		`{"question":"q","min_label_mass":1.5}`,
		`{"question":"q","min_label_mass":-0.1}`,
		`{"question":"q","debias":"shuffle"}`,
		`{"question":"q","debias":""}`,
		`{"question":"q","prior":"global"}`,
		`{"question":"q","prior":""}`,
		`{"question":"   "}`,
		`{"question":"q","options":["a"," "]}`,
	} {
		if _, ps := ParseRequest([]byte(body)); len(ps) == 0 {
			t.Fatalf("%s: ParseRequest accepts it", body)
		}
		var generic any
		if err := json.Unmarshal([]byte(body), &generic); err != nil {
			t.Fatal(err)
		}
		if err := resolved.Validate(generic); err == nil {
			t.Errorf("%s: refused by decide, but valid against schema/request.json", body)
		}
	}
	for _, body := range []string{
		`{"question":"q","min_label_mass":0,"debias":"permute","prior":"batch"}`,
		`{"question":"q","min_label_mass":1,"debias":"off","prior":"content_free"}`,
		`{"question":"q","prior":"off"}`,
	} {
		var generic any
		if err := json.Unmarshal([]byte(body), &generic); err != nil {
			t.Fatal(err)
		}
		if _, ps := ParseRequest([]byte(body)); len(ps) > 0 {
			t.Fatalf("%s: %q", body, ps)
		}
		if err := resolved.Validate(generic); err != nil {
			t.Errorf("%s: accepted by decide, but refused by schema/request.json: %v", body, err)
		}
	}
}

// A caller that gave up while a link was asked leaves the links after it
// not asked because it gave up, not because the overall deadline passed,
// as the attempt asked says of itself.
func TestCallerGoneSkipsTheRestSayingSo(t *testing.T) {
	slow := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"slow"}, Behavior: fakeengine.Behavior{Fault: fakeengine.Hang}})
	t.Cleanup(slow.Close)
	fast := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"fast"}})
	t.Cleanup(fast.Close)
	g := gatewayFor(t, fmt.Sprintf("gateway:\n  deadline: 60s\nnodes:\n  - {name: n1, url: %s, dialect: llamacpp, models: [slow]}\n  - {name: n2, url: %s, dialect: llamacpp, models: [fast]}\nproviders:\n  - {name: first, kind: engine, model: slow, timeout: 50s}\n  - {name: second, kind: engine, model: fast}\n", slow.URL, fast.URL))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { // the caller gives up once the first link is being asked
		for len(slow.Inferences()) == 0 && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	res := g.Decide(ctx, []byte(`{"question":"Which?","options":["a","b"]}`), "")
	if len(res.Attempts) != 2 || res.Attempts[1].Provider != "second" || res.Attempts[1].Detail != "not asked: the caller gave up" {
		t.Fatalf("attempts %+v", res.Attempts)
	}
}

// The request_id echoed is the one sent under that exact key, even when
// the request is refused: a key that differs only in case (refused as
// unknown) is not read as it.
func TestRequestIDEchoedAsSent(t *testing.T) {
	g := gatewayFor(t, "")
	for _, c := range []struct{ body, want string }{
		{`{"question":"q","request_id":"mine","REQUEST_ID":"other"}`, "mine"},
		{`{"question":"q","Request_Id":"other","request_id":"mine"}`, "mine"},
		{`{"question":"q","request_id":"mine","Request_id":7}`, "mine"},
		{`{"question":"q","request_id":"mine","bogus":1}`, "mine"},
	} {
		if res := decide(t, g, c.body); res.RequestID != c.want || res.Error == nil || res.Error.Code != CodeInvalidRequest {
			t.Errorf("%s: request_id %q (error %+v); want %q", c.body, res.RequestID, res.Error, c.want)
		}
	}
}

// A refusal's rationale ends each sentence with one period, whether the
// message it quotes ends with one (the System One wire's 401 text) or not.
func TestRefusedRationaleEndsEachSentenceOnce(t *testing.T) {
	for _, msg := range []string{
		"Cannot authenticate with the server. Please check your API key and try again.",
		"the body is over 4 MiB",
	} {
		r := Refused("req_1", CodeUnauthorized, msg).Rationale
		if strings.Contains(r, "..") || !strings.HasSuffix(r, ". Nothing was asked.") {
			t.Errorf("rationale %q: a doubled period, or not ending with the one sentence", r)
		}
	}
}

// A hand-written temperature so large that tempering ties every option
// is refused when the fits are opened, naming it; taken, it served a
// at 0.334 and b, the engine's answer at 0.7, at 0.333.
func TestCalibrationRefusesATemperatureThatTies(t *testing.T) {
	ep := fakeengine.StartSystemOne(t, fakeengine.Reply{Probs: []float64{0.2, 0.7, 0.1}})
	dir := t.TempDir()
	fits := `{"version":1,"created":"2026-01-01T00:00:00Z","fits":[{"provider":"jev","model":"","kind":"choice","bucket":"3-4","temperature":1e17,"n":100,"nll_before":1,"nll_after":0.9,"ece_before":0.2,"ece_after":0.05,"date":"2026-01-01"}]}`
	if err := os.WriteFile(filepath.Join(dir, "fits.json"), []byte(fits), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "config.yaml")
	yaml := fmt.Sprintf("gateway:\n  fits: fits.json\nproviders:\n  - {name: jev, kind: systemone, url: %s, model: jev-latest}\n", ep.URL)
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = outcomes.OpenFitsFile(cfg.Resolve(cfg.Gateway.Fits), nil)
	if err != nil && strings.Contains(err.Error(), "fit 0: temperature 1e+17 is not") {
		return
	}
	res := decide(t, build(t, Options{Config: cfg, ConfigPath: path}, nil), `{"question":"Which?","options":["a","b","c"]}`)
	t.Errorf("fits opened (%v); %s at %v, where the engine answered b at 0.7", err, res.Status, res.Probabilities)
}

// system1_feedback's input schema takes the outcomes ParseOutcome takes
// and no level it refuses, the largest level on each side of the line.
func TestFeedbackSchemaTakesWhatParseOutcomeTakes(t *testing.T) {
	resolved, err := FeedbackInputSchema().Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, outcome := range []string{`"billing"`, `true`, `0`, `999999999`, `1000000000`, `-1`, `1.5`} {
		_, parseErr := decisionlog.ParseOutcome(json.RawMessage(outcome))
		var generic any
		if err := json.Unmarshal([]byte(`{"request_id":"r","outcome":`+outcome+`}`), &generic); err != nil {
			t.Fatal(err)
		}
		schemaErr := resolved.Validate(generic)
		if (parseErr == nil) != (schemaErr == nil) {
			t.Errorf("outcome %s: ParseOutcome says %v, the schema %v", outcome, parseErr, schemaErr)
		}
	}
}

// A call stopped for a cause of its own (serve's drain passing, a signal
// to the command line) says that cause, on the link asked and the links
// not asked, not that the overall deadline passed, which it had not.
func TestStoppedCallSaysWhy(t *testing.T) {
	slow := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"slow"}, Behavior: fakeengine.Behavior{Fault: fakeengine.Hang}})
	t.Cleanup(slow.Close)
	fast := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"fast"}})
	t.Cleanup(fast.Close)
	g := gatewayFor(t, fmt.Sprintf("gateway:\n  deadline: 60s\nnodes:\n  - {name: n1, url: %s, dialect: llamacpp, models: [slow]}\n  - {name: n2, url: %s, dialect: llamacpp, models: [fast]}\nproviders:\n  - {name: first, kind: engine, model: slow, timeout: 50s}\n  - {name: second, kind: engine, model: fast}\n", slow.URL, fast.URL))
	cause := errors.New("shutting down: the drain timeout passed")
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	go func() { // stopped once the first link is being asked
		for len(slow.Inferences()) == 0 && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		cancel(cause)
	}()
	res := g.Decide(ctx, []byte(`{"question":"Which?","options":["a","b"]}`), "")
	if len(res.Attempts) != 2 {
		t.Fatalf("attempts %+v", res.Attempts)
	}
	for _, a := range res.Attempts {
		if strings.Contains(a.Detail, "deadline of") || !strings.Contains(a.Detail, cause.Error()) {
			t.Errorf("%s: %q; want the cause, %q", a.Provider, a.Detail, cause)
		}
	}
}
