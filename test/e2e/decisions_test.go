package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"system1/internal/fakeengine"
	"system1/internal/testbin"
)

// OpenAI's official clients (test/js-decisions: openai 7.55.0's
// client.decisions.create and DecisionsToolRunner, ai 7.0.173's
// experimental_decide through @ai-sdk/openai 4.0.118) against the real
// binary's POST /v1/decisions, with nothing changed but the base URL and
// the key: every question type, typed values, unnamed questions, JSON and
// conversation inputs, each error class the SDK maps (a model only a down
// node serves, an engine's 501 asked once, a second server over its rate
// limit), the tool runner to its end, the AI SDK's validation, and the
// refusals X-System1-Min-Label-Mass asks for; and models.list,
// models.retrieve and the routes' own 404 and 405 (models.test.mjs). The engine is the real
// llama-server with the tiny model when it is here, else the fake.
func TestDecisionsJSClients(t *testing.T) {
	js := jsProject(t, "js-decisions", "openai")
	bin := testbin.Binary(t)
	model, url, _ := startEngine(t)
	no := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"not-served"},
		Behavior: fakeengine.Behavior{Fault: fakeengine.Status, Status: http.StatusNotImplemented}})
	t.Cleanup(no.Close)
	const key = "e2e-key"
	nodes := fmt.Sprintf(`keys: [%s]
nodes:
  - {name: engine, url: %s, dialect: llamacpp, models: [%s]}
  - {name: down, url: %s, dialect: llamacpp, models: [gone]}
  - {name: no-decisions, url: %s, dialect: llamacpp, models: [not-served]}
`, key, url, model, fakeengine.Down(t), no.URL)
	cfg := filepath.Join(t.TempDir(), "system1.yaml")
	writeFile(t, cfg, nodes)
	base := serve(t, bin, cfg)
	limitedCfg := filepath.Join(t.TempDir(), "limited.yaml")
	writeFile(t, limitedCfg, nodes+"rate_limit: {per_second: 0.001, burst: 1}\n")
	limited := serve(t, bin, limitedCfg)

	out, err := js.test(t, 3*time.Minute, append(env("SYSTEM1_", "OPENAI_"), "SYSTEM1_URL="+base, "SYSTEM1_MODEL="+model, "SYSTEM1_API_KEY="+key,
		"SYSTEM1_REFUSAL_HEADER=X-System1-Min-Label-Mass: 0.99", "SYSTEM1_DOWN_MODEL=gone", "SYSTEM1_NOT_SERVED_MODEL=not-served",
		"SYSTEM1_LIMITED_URL="+limited), "--test-concurrency=1", "decisions.test.mjs", "models.test.mjs")
	if err != nil {
		t.Fatalf("the Decisions clients' test failed: %v", err)
	}
	for _, want := range []string{"# pass 15", "# fail 0", "# skipped 0"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Fatalf("node --test did not report %q", want)
		}
	}
	// The 501 went back as a 400, which the SDK, retries on, asked once.
	if n := len(no.Inferences()); n != 1 {
		t.Errorf("the engine answering 501 was asked %d times; the SDK must not retry", n)
	}
}

// Jev 1.14's images through the official Jev JS SDK (test/js): a request
// with an assets map and a box question is the SDK's BadRequestError,
// and the engine is never called.
func TestJSClientImages(t *testing.T) {
	js := jsProject(t, "js", "@typesafe-ai/sdk")
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp})
	t.Cleanup(f.Close)
	const key = "e2e-key"
	cfg := filepath.Join(t.TempDir(), "system1.yaml")
	writeFile(t, cfg, fmt.Sprintf("keys: [%s]\naliases: {jev-latest: %s}\nnodes:\n  - {name: engine, url: %s, dialect: llamacpp, models: [%s]}\n",
		key, fakeengine.DefaultModel, f.URL, fakeengine.DefaultModel))
	base := serve(t, testbin.Binary(t), cfg)
	out, err := js.test(t, 2*time.Minute, append(env("TYPESAFE_"), "TYPESAFE_BASE_URL="+base, "TYPESAFE_API_KEY="+key), "--test-name-pattern=images", "sdk.test.mjs")
	if err != nil || !bytes.Contains(out, []byte("# pass 1")) || !bytes.Contains(out, []byte("# fail 0")) {
		t.Fatalf("the JS SDK's images test: %v", err)
	}
	if n := len(f.Inferences()); n != 0 {
		t.Errorf("the engine was called %d times for a request with images", n)
	}
}

// One system1 behind another as a decisions node: the front's nodes are
// a Decisions endpoint that is down, then the back system1's
// /v1/decisions; a Jev request and a Decisions request to the front both
// fail over to the back and come back with its numbers, and a question
// the fake Decisions endpoint refuses comes back a refusal through the
// front.
func TestSystem1AsDecisionsNode(t *testing.T) {
	bin := testbin.Binary(t)
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp})
	t.Cleanup(f.Close)
	backCfg := filepath.Join(t.TempDir(), "back.yaml")
	writeFile(t, backCfg, fmt.Sprintf("keys: [back-key]\nnodes:\n  - {name: engine, url: %s, dialect: llamacpp, models: [%s]}\n", f.URL, fakeengine.DefaultModel))
	back := serve(t, bin, backCfg)
	refusing := fakeengine.StartDecisions(t, fakeengine.Reply{Model: "refuser", Refuse: []string{"urgent"}})

	frontCfg := filepath.Join(t.TempDir(), "front.yaml")
	writeFile(t, frontCfg, fmt.Sprintf(`nodes:
  - {name: gone, url: %s, dialect: decisions, models: [%s]}
  - {name: back, url: %s, dialect: decisions, key_env: BACK_KEY, models: [%s], priority: 1}
  - {name: refuser, url: %s, dialect: decisions, models: [refuser]}
`, fakeengine.Down(t), fakeengine.DefaultModel, back, fakeengine.DefaultModel, refusing.URL))
	t.Setenv("BACK_KEY", "back-key")
	front := serve(t, bin, frontCfg)

	jev := post(t, front+"/v1/systemone", `{"model":"fake","state":"s","questions":{"dept":{"type":"choice","criteria":{"a":null,"b":null,"c":null}},"urgent":{"type":"noul"}}}`)
	// The fake engine's halving over three labels and two: 4/7, 2/7, 1/7
	// and 2/3, read by the back and passed on at its two decimals.
	if !strings.Contains(jev, `"probabilities":{"a":0.57,"b":0.29,"c":0.14}`) || !strings.Contains(jev, `"noul":0.67`) {
		t.Errorf("a Jev request through a system1 decisions node: %s", jev)
	}
	dec := post(t, front+"/v1/decisions", `{"model":"fake","input":"s","questions":[{"type":"predicate","name":"urgent","instructions":"?"},{"type":"choice","choices":[{"value":"a"},{"value":"b"},{"value":"c"}]}]}`)
	if !strings.Contains(dec, `{"type":"predicate","name":"urgent","probability":0.67}`) || !strings.Contains(dec, `"name":null,"choice":"a"`) {
		t.Errorf("a Decisions request through a system1 decisions node: %s", dec)
	}
	refused := post(t, front+"/v1/decisions", `{"model":"refuser","input":"s","questions":[{"type":"predicate","name":"urgent","instructions":"?"},{"type":"predicate","name":"other","instructions":"?"}]}`)
	if !strings.Contains(refused, `{"type":"refusal","name":"urgent"}`) || !strings.Contains(refused, `{"type":"predicate","name":"other","probability":`) {
		t.Errorf("a refusal through the front: %s", refused)
	}
}

// post sends a JSON body and returns the 200's body, failing otherwise.
func post(t *testing.T, url, body string) string {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %d %s", url, resp.StatusCode, b)
	}
	return string(b)
}
