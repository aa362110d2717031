package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"system1/internal/decision"
)

// full is a configuration with every section, the chain in the old
// providers: form (docs/configuration.md has the example with every key).
const full = `listen: 127.0.0.1:3000
tls: {listen: 127.0.0.1:3443, cert: cert.pem, key: key.pem}
keys: [k1, k2]
keys_env: SYSTEM1_KEYS
rate_limit: {per_second: 20, burst: 40, wrong_keys: {per_minute: 10, burst: 10}}
max_body_bytes: 4194304
timeouts: {read_header: 5s, read: 30s, write: 40s, idle: 120s, request: 30s, drain: 30s}
probe_every: 15s
rounding: 2
calibration: off
prior: content_free
prior_min_requests: 16
prior_window: 128
prior_signatures: 512
aliases:
  jev-latest: qwen2.5-0.5b-instruct
nodes:
  - name: local
    url: http://127.0.0.1:8080
    dialect: llamacpp
    models: [qwen2.5-0.5b-instruct]
    key_env: NODE_KEY
    timeout: 30s
    max_options: 255
    max_labels: 0
    max_inflight: 64
    queue: 512
    queue_timeout: 5s
    priority: 0
    pin_slots: false
  - name: vllm
    url: https://vllm.internal:8000/v1
    dialect: openai
    constrain: structured_outputs
    max_labels: 50
    fingerprint_tolerance: 0.05
  - name: jev
    url: https://api.typesafe.ai
    dialect: systemone
    key_env: TYPESAFE_API_KEY
    models: [jev-latest]
    priority: 1
gateway:
  threshold: 0.6
  timeout: 2s
  deadline: 6s
  fits: fits.json
providers:
  - {name: local, kind: engine, model: qwen2.5-0.5b-instruct}
  - {name: jev, kind: systemone, url: https://api.typesafe.ai, key_env: TYPESAFE_API_KEY, model: jev-latest, max_options: 255}
`

func TestParseReadsEveryField(t *testing.T) {
	c, err := Parse([]byte(full))
	if err != nil {
		t.Fatal(err)
	}
	if errs := c.Check(); len(errs) > 0 {
		t.Fatalf("the full configuration fails Check: %v", errs)
	}
	two, f := 2, false
	threshold := 0.6
	want := &Config{
		Listen:       "127.0.0.1:3000",
		TLS:          TLS{Listen: "127.0.0.1:3443", Cert: "cert.pem", Key: "key.pem"},
		Keys:         []Key{{Key: "k1", Line: 3}, {Key: "k2", Line: 3}},
		KeysEnv:      "SYSTEM1_KEYS",
		RateLimit:    RateLimit{PerSecond: 20, Burst: 40, WrongKeys: WrongKeys{PerMinute: 10, Burst: 10}},
		MaxBodyBytes: 4194304,
		Timeouts: Timeouts{
			ReadHeader: Duration(5 * time.Second), Read: Duration(30 * time.Second), Write: Duration(40 * time.Second),
			Idle: Duration(120 * time.Second), Request: Duration(30 * time.Second), Drain: Duration(30 * time.Second),
		},
		ProbeEvery:  Duration(15 * time.Second),
		Rounding:    &two,
		Calibration: Calibration{Mode: "off"},
		Prior:       "content_free", PriorMinRequests: 16, PriorWindow: 128, PriorSignatures: 512,
		Aliases: map[string]string{"jev-latest": "qwen2.5-0.5b-instruct"},
		Nodes: []Node{
			{Name: "local", URL: "http://127.0.0.1:8080", Dialect: "llamacpp", Models: []string{"qwen2.5-0.5b-instruct"},
				KeyEnv: "NODE_KEY", Timeout: Duration(30 * time.Second), MaxOptions: 255, MaxInFlight: 64, Queue: 512,
				QueueTimeout: Duration(5 * time.Second), PinSlots: &f},
			{Name: "vllm", URL: "https://vllm.internal:8000/v1", Dialect: "openai", Constrain: "structured_outputs", MaxLabels: 50, FingerprintTolerance: 0.05},
			{Name: "jev", URL: "https://api.typesafe.ai", Dialect: "systemone", KeyEnv: "TYPESAFE_API_KEY", Models: []string{"jev-latest"}, Priority: 1},
		},
		Gateway: Gateway{Threshold: &threshold, Timeout: Duration(2 * time.Second), Deadline: Duration(6 * time.Second), Fits: "fits.json"},
		Providers: []Provider{
			{Name: "local", Kind: "engine", Model: "qwen2.5-0.5b-instruct"},
			{Name: "jev", Kind: "systemone", URL: "https://api.typesafe.ai", KeyEnv: "TYPESAFE_API_KEY", Model: "jev-latest", MaxOptions: 255},
		},
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("parsed\n%+v\nwant\n%+v", c, want)
	}
}

// An empty file, or one with only comments, is an empty configuration,
// which Check accepts: every setting has a default.
func TestParseEmptyIsEmptyConfig(t *testing.T) {
	for _, data := range []string{"", "\n", "# nothing configured yet\n", "---\n"} {
		c, err := Parse([]byte(data))
		if err != nil {
			t.Fatalf("%q: %v", data, err)
		}
		if c == nil || !reflect.DeepEqual(*c, Config{}) {
			t.Fatalf("%q: %+v, want an empty configuration", data, c)
		}
		if errs := c.Check(); len(errs) > 0 {
			t.Fatalf("%q: %v", data, errs)
		}
	}
}

// The noise test is on unless the configuration turns it off.
func TestNoiseTestOnByDefault(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want bool
	}{
		{"", true},
		{"fingerprint: {canary_every: 2s}", true},
		{"fingerprint: {noise_test: true}", true},
		{"fingerprint: {noise_test: false}", false},
	} {
		c, err := Parse([]byte(tc.yaml))
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if got := c.Fingerprint.NoiseTested(); got != tc.want {
			t.Errorf("%q: noise test %v, want %v", tc.yaml, got, tc.want)
		}
	}
}

// Unknown keys anywhere are errors, so that a typo does not silently fall
// back to a default; so are values of the wrong type.
func TestParseRejects(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown top-level key", "listne: :3000\n", "listne"},
		{"unknown node key", "nodes:\n  - name: a\n    url: http://x\n    dialect: ollama\n    max_option: 3\n", "max_option"},
		{"unknown provider key", "providers:\n  - {name: p, kind: engine, model: m, modle: n}\n", "modle"},
		{"unknown gateway key", "gateway:\n  treshold: 0.5\n", "treshold"},
		{"unknown timeouts key", "timeouts: {raed: 5s}\n", "raed"},
		{"unknown tls key", "tls: {certificate: c.pem}\n", "certificate"},
		{"unknown rate_limit key", "rate_limit: {rps: 3}\n", "rps"},
		{"not a mapping", "- a\n- b\n", "cannot unmarshal"},
		{"keys not a list", "keys: {a: b}\n", "cannot unmarshal"},
		{"rounding not a number", "rounding: two\n", "cannot unmarshal"},
		{"threshold not a number", "gateway: {threshold: high}\n", "cannot unmarshal"},
		{"max_options not a number", "nodes:\n  - {name: a, max_options: many}\n", "cannot unmarshal"},
		{"not YAML", "nodes: [\n", "yaml"},
		{"duration without a unit", "probe_every: 15\n", "not a duration"},
		{"duration as a word", "timeouts: {read: soon}\n", "not a duration"},
		{"duration as a mapping", "gateway: {timeout: {s: 1}}\n", "not a duration"},
		{"negative probe_every", "probe_every: -1s\n", "negative"},
		{"negative timeout", "timeouts: {drain: -30s}\n", "negative"},
		{"negative node timeout", "nodes:\n  - {name: a, timeout: -5s}\n", "negative"},
		{"negative queue_timeout", "nodes:\n  - {name: a, queue_timeout: -1ms}\n", "negative"},
		{"negative gateway deadline", "gateway: {deadline: -6s}\n", "negative"},
		{"negative provider timeout", "providers:\n  - {name: p, timeout: -2s}\n", "negative"},
		{"negative cache ttl", "cache: {entries: 10, ttl: -1m}\n", "cache.ttl: line 1: duration -1m is negative"},
		{"unknown cache key", "cache: {size: 10}\n", "cache.size"},
		{"cache entries not a number", "cache: {entries: lots}\n", "cannot unmarshal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.yaml))
			if err == nil {
				t.Fatalf("accepted %q as %+v", tc.yaml, c)
			}
			if c != nil {
				t.Errorf("an error with a configuration %+v", c)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

func TestDurations(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"30s", 30 * time.Second},
		{"1.5s", 1500 * time.Millisecond},
		{"250ms", 250 * time.Millisecond},
		{"1h2m", time.Hour + 2*time.Minute},
		{"0", 0},
		{"0s", 0},
	} {
		c, err := Parse([]byte("probe_every: " + tc.in + "\n"))
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if time.Duration(c.ProbeEvery) != tc.want {
			t.Errorf("%s read as %v, want %v", tc.in, time.Duration(c.ProbeEvery), tc.want)
		}
	}
	_, err := Parse([]byte("timeouts:\n  read: 5s\n  write: -3s\n"))
	if err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("error %v does not name the line", err)
	}
	if got := Duration(0).Or(time.Minute); got != time.Minute {
		t.Errorf("zero duration Or: %v", got)
	}
	if got := Duration(time.Second).Or(time.Minute); got != time.Second {
		t.Errorf("set duration Or: %v", got)
	}
	if v, err := Duration(1500 * time.Millisecond).MarshalYAML(); err != nil || v != "1.5s" {
		t.Errorf("MarshalYAML: %v, %v", v, err)
	}
}

// Each row breaks one rule of Check, on top of a configuration that passes,
// and Check names the field.
func TestCheck(t *testing.T) {
	node := func(extra string) string {
		return "nodes:\n  - name: a\n    url: http://127.0.0.1:8080\n    dialect: llamacpp\n" + extra
	}
	for _, tc := range []struct {
		name, yaml string
		want       []string // substrings, one per error, in order; none: valid
	}{
		{"minimal node", node(""), nil},
		{"every dialect", "nodes:\n  - {name: a, url: http://h, dialect: llamacpp}\n  - {name: b, url: http://h, dialect: ollama}\n" +
			"  - {name: c, url: https://h, dialect: openai}\n  - {name: d, url: https://h/v1/systemone, dialect: systemone}\n", nil},
		{"every constrain", "nodes:\n  - {name: a, url: http://h, dialect: openai, constrain: none}\n" +
			"  - {name: b, url: http://h, dialect: openai, constrain: structured_outputs}\n  - {name: c, url: http://h, dialect: openai, constrain: guided_choice}\n", nil},
		{"node without a name", "nodes:\n  - {url: http://h, dialect: ollama}\n", []string{"nodes[0]: name is required"}},
		{"node name twice", node("  - {name: a, url: http://h, dialect: ollama}\n"), []string{`nodes[1]: name "a" is used twice`}},
		{"node without a url", "nodes:\n  - {name: a, dialect: ollama}\n", []string{`nodes[0] (a): url "" is not an http(s) URL`}},
		{"node url without a scheme", "nodes:\n  - {name: a, url: 127.0.0.1:8080, dialect: ollama}\n", []string{"url"}},
		{"node url not http", "nodes:\n  - {name: a, url: 'ftp://h', dialect: ollama}\n", []string{"not an http(s) URL"}},
		{"node url without a host", "nodes:\n  - {name: a, url: 'http://', dialect: ollama}\n", []string{"not an http(s) URL"}},
		{"node url that does not parse", "nodes:\n  - {name: a, url: 'http://h:port', dialect: ollama}\n", []string{"not an http(s) URL"}},
		// Routes are added to a node's URL, so a query or fragment would
		// swallow them: http://h?x=1 asked POST /?x=1/v1/systemone.
		{"node url with a query", "nodes:\n  - {name: a, url: 'http://h/v1?key=1', dialect: systemone}\n", []string{`nodes[0] (a): url "http://h/v1?key=1" has a query`}},
		{"node url with an empty query", "nodes:\n  - {name: a, url: 'http://h?', dialect: ollama}\n", []string{"has a query"}},
		{"node url with a fragment", "nodes:\n  - {name: a, url: 'http://h#x', dialect: llamacpp}\n", []string{"has a fragment"}},
		{"node without a dialect", "nodes:\n  - {name: a, url: http://h}\n", []string{`dialect "" is not one of llamacpp, ollama, openai, systemone`}},
		{"unknown dialect", "nodes:\n  - {name: a, url: http://h, dialect: vllm}\n", []string{`dialect "vllm"`}},
		{"unknown constrain", node("    constrain: grammar\n"), []string{`constrain "grammar"`}},
		{"negative max_labels", node("    max_labels: -1\n"), []string{"must not be negative"}},
		{"negative max_options", node("    max_options: -1\n"), []string{"must not be negative"}},
		{"negative max_inflight", node("    max_inflight: -1\n"), []string{"must not be negative"}},
		{"negative queue", node("    queue: -1\n"), []string{"must not be negative"}},
		{"max_options at the cap", node("    max_options: 255\n"), nil},
		{"max_options over the cap", node("    max_options: 256\n"), []string{"max_options 256 is over 255"}},
		{"fingerprint tolerance", "fingerprint: {tolerance: 0.02}\n", nil},
		{"fingerprint tolerance 1", "fingerprint: {tolerance: 1}\n", []string{"fingerprint: tolerance: 1 is not 0 (the default) or a probability in (0, 1)"}},
		{"fingerprint tolerance NaN", "fingerprint: {tolerance: .nan}\n", []string{"fingerprint: tolerance: NaN"}},
		{"fingerprint check_every_answers negative", "fingerprint: {check_every_answers: -1}\n", []string{"fingerprint: check_every_answers: -1 is not 0 (never) or a count of answers"}},
		{"a node's fingerprint tolerance", node("    fingerprint_tolerance: 0.05\n"), nil},
		{"a node's fingerprint tolerance 0: the global one", node("    fingerprint_tolerance: 0\n"), nil},
		{"a node's fingerprint tolerance negative", node("    fingerprint_tolerance: -0.1\n"),
			[]string{"nodes[0].fingerprint_tolerance (a): -0.1 is not 0 (fingerprint.tolerance) or a probability in (0, 1)"}},
		{"a node's fingerprint tolerance 1", "nodes:\n  - {name: a, url: http://h, dialect: ollama}\n  - {name: b, url: http://h, dialect: ollama}\n" +
			"  - {name: c, url: https://h, dialect: openai, fingerprint_tolerance: 1}\n", []string{"nodes[2].fingerprint_tolerance (c): 1 is not"}},
		{"a node's fingerprint tolerance infinite", node("    fingerprint_tolerance: .inf\n"), []string{"nodes[0].fingerprint_tolerance (a): +Inf"}},
		{"a node's fingerprint tolerance NaN", node("    fingerprint_tolerance: .nan\n"), []string{"nodes[0].fingerprint_tolerance (a): NaN"}},
		{"calibration off", "calibration: off\n", nil},
		{"calibration apply", "calibration: apply\n", nil},
		{"calibration unknown", "calibration: on\n", []string{`calibration: "on" is not off or apply`}},
		{"prior off", "prior: off\n", nil},
		{"prior batch with its bounds", "prior: batch\nprior_min_requests: 8\nprior_window: 64\nprior_signatures: 10\n", nil},
		{"prior content_free", "prior: content_free\n", nil},
		{"prior unknown", "prior: always\n", []string{`prior: "always" is not off, batch or content_free`}},
		{"prior bounds negative", "prior_min_requests: -1\nprior_window: -2\nprior_signatures: -3\n",
			[]string{"prior_min_requests: -1", "prior_window: -2", "prior_signatures: -3"}},
		{"prior bounds too large", "prior_window: 1048577\nprior_signatures: 99999999\n",
			[]string{"prior_window: 1048577 is not 0 (the default) or 1..1048576", "prior_signatures: 99999999"}},
		{"cache off", "cache: {entries: 0}\n", nil},
		{"cache without a ttl", "cache: {entries: 100}\n", nil},
		{"cache with a ttl", "cache: {entries: 100, ttl: 10m}\n", nil},
		{"cache entries negative", "cache: {entries: -1}\n", []string{"cache.entries: -1 is not 0 (off) or 1..10000000"}},
		{"cache entries too many", "cache: {entries: 10000001}\n", []string{"cache.entries: 10000001"}},
		{"cache ttl without entries", "cache: {ttl: 1m}\n", []string{"cache.ttl: set, but cache.entries is 0"}},
		{"rounding full precision", "rounding: -1\n", nil},
		{"rounding 0", "rounding: 0\n", nil},
		{"rounding 12", "rounding: 12\n", nil},
		{"rounding below -1", "rounding: -2\n", []string{"rounding: -2"}},
		{"rounding above 12", "rounding: 13\n", []string{"rounding: 13"}},
		{"tls cert without key", "tls: {cert: c.pem}\n", []string{"tls: cert and key go together"}},
		{"tls key without cert", "tls: {key: k.pem}\n", []string{"tls: cert and key go together"}},
		{"tls pair", "tls: {listen: ':3443', cert: c.pem, key: k.pem}\n", nil},
		{"tls listen without a certificate", "tls: {listen: ':3443'}\n", []string{"tls.listen: set without cert and key"}},
		{"admin on its own address", "admin: {listen: '127.0.0.1:6060'}\n", nil},
		{"admin on the listen", "listen: ':3000'\nadmin: {listen: ':3000'}\n", []string{"admin.listen: :3000 is a public listener's address"}},
		{"admin on the default listen", "admin: {listen: '127.0.0.1:3000'}\n", []string{"admin.listen: 127.0.0.1:3000 is a public listener's address"}},
		{"admin on the default tls listen", "tls: {cert: c.pem, key: k.pem}\nadmin: {listen: '127.0.0.1:3443'}\n", []string{"admin.listen: 127.0.0.1:3443 is a public listener's address"}},
		{"admin on the tls default without tls", "admin: {listen: '127.0.0.1:3443'}\n", nil},
		{"threshold 0", "gateway: {threshold: 0}\n", nil},
		{"threshold 1", "gateway: {threshold: 1}\n", nil},
		{"threshold negative", "gateway: {threshold: -0.1}\n", []string{"gateway.threshold: -0.1 is not in [0,1]"}},
		{"threshold above 1", "gateway: {threshold: 1.5}\n", []string{"gateway.threshold: 1.5"}},
		{"threshold infinite", "gateway: {threshold: .inf}\n", []string{"gateway.threshold: +Inf"}},
		{"threshold NaN", "gateway: {threshold: .nan}\n", []string{"gateway.threshold: NaN"}},
		{"engine provider", "providers:\n  - {name: p, kind: engine, model: m}\n", nil},
		{"systemone provider", "providers:\n  - {name: p, kind: systemone, url: https://api.typesafe.ai, model: jev-latest}\n", nil},
		{"provider without a name", "providers:\n  - {kind: engine, model: m}\n", []string{"providers[0]: name is required"}},
		{"provider name twice", "providers:\n  - {name: p, kind: engine, model: m}\n  - {name: p, kind: engine, model: n}\n", []string{`providers[1]: name "p" is used twice`}},
		{"link name twice", "gateway:\n  chain:\n    - {name: l, model: m}\n    - {name: l, model: n}\n", []string{`gateway.chain[1]: name "l" is used twice`}},
		{"link without a name", "gateway:\n  chain:\n    - {model: m}\n", []string{"gateway.chain[0]: name is required"}},
		{"link max_options 1", "gateway:\n  chain:\n    - {name: l, model: m, max_options: 1}\n", []string{"gateway.chain[0] (l): max_options 1: a choice needs at least 2 options"}},
		{"link max_options 2", "gateway:\n  chain:\n    - {name: l, model: m, max_options: 2}\n", nil},
		{"engine provider without a model", "providers:\n  - {name: p, kind: engine}\n", []string{"an engine provider needs a model"}},
		// An engine provider is a model the nodes serve: a url (or key_env)
		// on it names no node, and every decide would find none.
		{"engine provider with a url", "providers:\n  - {name: p, kind: engine, url: 'http://h:8080', model: m}\n",
			[]string{"providers[0].url (p): an engine provider takes no url"}},
		{"engine provider with a key_env", "providers:\n  - {name: p, kind: engine, key_env: K, model: m}\n",
			[]string{"providers[0].key_env (p): an engine provider takes no key_env"}},
		{"systemone provider without a url", "providers:\n  - {name: p, kind: systemone, model: m}\n", []string{`providers[0] (p): url "" is not an http(s) URL`}},
		{"systemone provider url not http", "providers:\n  - {name: p, kind: systemone, url: 'ws://h', model: m}\n", []string{"not an http(s) URL"}},
		{"systemone provider url with a query", "providers:\n  - {name: p, kind: systemone, url: 'https://h?x=1', model: m}\n", []string{`providers[0] (p): url "https://h?x=1" has a query`}},
		{"systemone provider without a model", "providers:\n  - {name: p, kind: systemone, url: http://h}\n", []string{"a systemone provider needs the endpoint's model"}},
		{"provider without a kind", "providers:\n  - {name: p, model: m}\n", []string{`kind "" is not one of engine, systemone`}},
		{"provider of an unknown kind", "providers:\n  - {name: p, kind: openai, model: m}\n", []string{`kind "openai"`}},
		{"provider negative max_options", "providers:\n  - {name: p, kind: engine, model: m, max_options: -1}\n", []string{"providers[0] (p): max_options must not be negative"}},
		// num_ctx is taken on ollama nodes only (others fix their context
		// when they start), and neither it nor max_engine_calls may be
		// negative.
		{"num_ctx on ollama", "nodes:\n  - {name: a, url: http://h, dialect: ollama, num_ctx: 8192}\n", nil},
		{"max_engine_calls", "nodes:\n  - {name: a, url: http://h, dialect: openai, max_engine_calls: 1024}\n", nil},
		{"num_ctx on llamacpp", "nodes:\n  - {name: a, url: http://h, dialect: llamacpp, num_ctx: 256}\n",
			[]string{"nodes[0].num_ctx (a): only an ollama node takes its context size per request (this one is llamacpp); other engines fix it when they start (llama-server -c"}},
		{"num_ctx on openai", "nodes:\n  - {name: a, url: http://h, dialect: openai, num_ctx: 256}\n", []string{"(this one is openai)"}},
		{"negative num_ctx", "nodes:\n  - {name: a, url: http://h, dialect: ollama, num_ctx: -1}\n", []string{"nodes[0].num_ctx (a): -1 is negative"}},
		// prompts_per_call is llama.cpp's /completion list, whose prompts
		// the server gives slots: no pinning with it.
		{"prompts_per_call on llamacpp", "nodes:\n  - {name: a, url: http://h, dialect: llamacpp, prompts_per_call: 16}\n", nil},
		{"prompts_per_call unpinned", "nodes:\n  - {name: a, url: http://h, dialect: llamacpp, prompts_per_call: 16, pin_slots: false}\n", nil},
		{"prompts_per_call on openai", "nodes:\n  - {name: a, url: http://h, dialect: openai, prompts_per_call: 16}\n",
			[]string{"nodes[0].prompts_per_call (a): only a llamacpp node takes several prompts in one call (this one is openai)"}},
		{"prompts_per_call pinned", "nodes:\n  - {name: a, url: http://h, dialect: llamacpp, prompts_per_call: 16, pin_slots: true}\n",
			[]string{"nodes[0].prompts_per_call (a): the server gives the prompts of one call their slots"}},
		{"prompts_per_call spread", "nodes:\n  - {name: a, url: http://h, dialect: llamacpp, prompts_per_call: 2, spread_slots: true}\n",
			[]string{"nodes[0].prompts_per_call (a): the server gives the prompts of one call their slots"}},
		{"negative prompts_per_call", "nodes:\n  - {name: a, url: http://h, dialect: llamacpp, prompts_per_call: -1}\n", []string{"nodes[0].prompts_per_call (a): -1 is negative"}},
		{"negative max_engine_calls", "nodes:\n  - {name: a, url: http://h, dialect: ollama, max_engine_calls: -5}\n", []string{"nodes[0].max_engine_calls (a): -5 is negative"}},
		{"every error at once", "calibration: yes\nrounding: 20\ntls: {cert: c}\ngateway: {threshold: 2}\n" +
			"nodes:\n  - {url: x, dialect: y, constrain: z, queue: -1, max_options: 300}\n" +
			"providers:\n  - {kind: k, max_options: -2}\n",
			[]string{"name is required", "url", "dialect", "constrain", "must not be negative", "max_options 300",
				"calibration", "rounding", "tls", "gateway.threshold", "providers[0]: name is required", "kind", "max_options must not be negative"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			errs := c.Check()
			if len(errs) != len(tc.want) {
				t.Fatalf("errors %v; want %d like %q", errs, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(errs[i].Error(), w) {
					t.Errorf("error %d %q does not say %q", i, errs[i], w)
				}
			}
		})
	}
}

// plain are keys written as plain strings.
func plain(keys ...string) []Key {
	out := make([]Key, len(keys))
	for i, k := range keys {
		out[i] = Key{Key: k}
	}
	return out
}

func TestAPIKeys(t *testing.T) {
	env := map[string]string{"KEYS": " e1,e2,\te3 ", "EMPTY": "", "OPS": "o1"}
	getenv := func(k string) string { return env[k] }
	ops := Key{Name: "ops", KeyEnv: "OPS", Scopes: []string{"read"}, RateLimit: &KeyRateLimit{PerSecond: 1, Burst: 2}, mapping: true}
	for _, tc := range []struct {
		name string
		c    Config
		want []string // name=key:scopes
	}{
		{"none", Config{}, nil},
		{"file only", Config{Keys: plain("k1", "k2")}, []string{"keys[0]=k1:decide,feedback,read,admin", "keys[1]=k2:decide,feedback,read,admin"}},
		{"env only, trimmed", Config{KeysEnv: "KEYS"}, []string{"keys_env[0]=e1:decide,feedback,read,admin", "keys_env[1]=e2:decide,feedback,read,admin", "keys_env[2]=e3:decide,feedback,read,admin"}},
		{"file then env", Config{Keys: plain("k1"), KeysEnv: "KEYS"}, []string{"keys[0]=k1:decide,feedback,read,admin", "keys_env[0]=e1:decide,feedback,read,admin", "keys_env[1]=e2:decide,feedback,read,admin", "keys_env[2]=e3:decide,feedback,read,admin"}},
		{"env variable empty", Config{Keys: plain("k1"), KeysEnv: "EMPTY"}, []string{"keys[0]=k1:decide,feedback,read,admin"}},
		{"env variable unset", Config{KeysEnv: "UNSET"}, nil},
		{"a named key from its variable", Config{Keys: append(plain("k1"), ops)}, []string{"keys[0]=k1:decide,feedback,read,admin", "ops=o1:read"}},
	} {
		keys, err := tc.c.APIKeys(getenv)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		var got []string
		for _, k := range keys {
			got = append(got, k.Name+"="+k.Key+":"+strings.Join(k.Scopes, ","))
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	// The result is a copy: changing it leaves the configuration alone.
	c := Config{Keys: []Key{ops}}
	keys, _ := c.APIKeys(getenv)
	keys[0].Scopes[0] = "changed"
	if c.Keys[0].Key != "" || c.Keys[0].Scopes[0] != "read" {
		t.Errorf("APIKeys shares the configuration's entries: %+v", c.Keys)
	}
}

// A key no caller can present, or that a blank token would match, is
// refused, from the file (by Check and by APIKeys) and from the variable
// (by APIKeys), with an error naming keys: empty, blank (ASCII or Unicode
// spaces), white space at an end, control characters.
func TestBlankKeysRefused(t *testing.T) {
	bad := []string{"", " ", "   ", "\t", "\u00a0", "\u2003", " real", "real\t", "re\x00al", "re\nal"}
	for _, k := range bad {
		c := Config{Keys: plain("real", k)}
		errs := c.Check()
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), "keys[1]") {
			t.Errorf("Check on keys [real %q]: %v", k, errs)
		}
		if keys, err := c.APIKeys(func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "keys") {
			t.Errorf("APIKeys on keys [real %q]: %v, %v", k, keys, err)
		}
	}
	for _, v := range []string{"real,", ",real", "real,,other", "real, ,other", "real,\u00a0", "\u2003"} {
		c := Config{KeysEnv: "KEYS"}
		keys, err := c.APIKeys(func(string) string { return v })
		if err == nil || !strings.Contains(err.Error(), "keys_env") || !strings.Contains(err.Error(), "$KEYS") {
			t.Errorf("APIKeys with $KEYS=%q: %v, %v", v, keys, err)
		}
	}
}

func TestResolve(t *testing.T) {
	dir := filepath.Join("etc", "system1")
	c := &Config{Path: filepath.Join(dir, "config.yaml")}
	abs, err := filepath.Abs(filepath.Join("elsewhere", "fits.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, want string }{
		{"fits.json", filepath.Join(dir, "fits.json")},
		{filepath.Join("certs", "cert.pem"), filepath.Join(dir, "certs", "cert.pem")},
		{filepath.Join("..", "shared", "fits.json"), filepath.Join("etc", "shared", "fits.json")},
		{abs, abs},
		{"", ""},
	} {
		if got := c.Resolve(tc.name); got != tc.want {
			t.Errorf("Resolve(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := (&Config{}).Resolve("fits.json"); got != "fits.json" {
		t.Errorf("without a path, Resolve changed the name to %q", got)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte("gateway: {fits: fits.json}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Path != path || c.Resolve(c.Gateway.Fits) != filepath.Join(dir, "fits.json") {
		t.Errorf("path %q, fits resolve to %q", c.Path, c.Resolve(c.Gateway.Fits))
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); !os.IsNotExist(err) {
		t.Errorf("missing file: %v", err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("bogus: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("bad file: %v", err)
	}
}

func TestCheckLimits(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		ok   bool
	}{
		{"rate_limit: {per_second: 20, burst: 40}", true},
		{"rate_limit: {per_second: -1}", false},
		{"rate_limit: {per_second: .nan}", false},
		{"rate_limit: {per_second: .inf}", false},
		{"rate_limit: {burst: -1}", false},
		{"rate_limit: {wrong_keys: {per_minute: -1}}", false},
		{"rate_limit: {wrong_keys: {burst: -1}}", false},
		{"max_body_bytes: -1", false},
		{"max_body_bytes: 1024", true},
		{"max_questions: -1", false},
		{"max_questions: 5000", true},
		{"admin: {listen: 127.0.0.1:6060}", true},
		{"listen: 127.0.0.1:3000\nadmin: {listen: 127.0.0.1:3000}", false},
	} {
		c, err := Parse([]byte(tc.yaml))
		if err != nil {
			t.Fatalf("%s: %v", tc.yaml, err)
		}
		if errs := c.Check(); (len(errs) == 0) != tc.ok {
			t.Errorf("%s: %v", tc.yaml, errs)
		}
	}
}

// keys entries are read as strictly as the rest of the file: each
// error names the entry (its index, its name when it has one) and its
// line, never the key.
func TestKeyEntriesRefused(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"an unknown key", "keys:\n  - {name: a, key: sk-a, scopes: [read], quota: {usd: 1}}\n", "keys[0].quota: line 2: unknown key (known here: name, key, key_env, scopes, rate_limit, budget)"},
		{"an unknown key in a budget", "keys:\n  - {name: a, key: sk-a, scopes: [read], budget: {usd: 1, per: day, every: 2}}\n", "keys[0].budget.every: line 2: unknown key (known here: usd, per)"},
		{"a budget without usd", "keys:\n  - {name: a, key: sk-a, scopes: [read], budget: {per: day}}\n", "keys[0] (a): line 2: budget: usd is required"},
		{"a budget without per", "keys:\n  - {name: a, key: sk-a, scopes: [read], budget: {usd: 1}}\n", `keys[0] (a): line 2: budget: per "" is not one of day, month`},
		{"a budget per week", "keys:\n  - {name: a, key: sk-a, scopes: [read], budget: {usd: 1, per: week}}\n", `keys[0] (a): line 2: budget: per "week" is not one of day, month`},
		{"a negative budget", "keys:\n  - {name: a, key: sk-a, scopes: [read], budget: {usd: -1, per: day}}\n", "is negative"},
		{"a budget without the log", "decision_log: {off: true}\nkeys:\n  - {name: a, key: sk-a, scopes: [read], budget: {usd: 1, per: day}}\n", "keys[0] (a): line 3: budget: the decision log is off"},
		{"a monthly budget over the default retention", "keys:\n  - {name: a, key: sk-a, scopes: [read], budget: {usd: 1, per: month}}\n", "keys[0] (a): line 2: budget per month: decision_log.retention keeps 720h0m0s of records, less than a month (744h0m0s), so a period's spend would be pruned from the log: set retention to at least 31d"},
		{"a daily budget over a shorter retention", "decision_log: {retention: 12h}\nkeys:\n  - {name: a, key: sk-a, scopes: [read], budget: {usd: 1, per: day}}\n", "set retention to at least 1d"},
		{"a budget in words", "keys:\n  - {name: a, key: sk-a, scopes: [read], budget: {usd: lots, per: day}}\n", "is not a decimal number of US dollars"},
		{"a key given twice in an entry", "keys:\n  - {name: a, key: sk-a, key: sk-b, scopes: [read]}\n", "keys[0].key: line 2: the key appears twice"},
		{"no name", "keys:\n  - {key: sk-a, scopes: [read]}\n", "keys[0]: line 2: name is required"},
		{"no key", "keys:\n  - {name: a, scopes: [read]}\n", "keys[0] (a): line 2: key or key_env is required"},
		{"key and key_env", "keys:\n  - {name: a, key: sk-a, key_env: A, scopes: [read]}\n", "keys[0] (a): line 2: key and key_env go apart"},
		{"no scopes", "keys:\n  - {name: a, key: sk-a}\n", "keys[0] (a): line 2: scopes is required"},
		{"empty scopes", "keys:\n  - {name: a, key: sk-a, scopes: []}\n", "keys[0] (a): line 2: scopes is required"},
		{"an unknown scope", "keys:\n  - name: a\n    key: sk-a\n    scopes: [read, wirte]\n", `keys[0] (a): line 2: scope "wirte" is not one of decide, feedback, read, admin`},
		{"a name unfit for a label", "keys:\n  - {name: \"a b\", key: sk-a, scopes: [read]}\n", `keys[0] (a b): line 2: name "a b" is not 1 to 64 of`},
		{"a name given twice", "keys:\n  - {name: a, key: sk-a, scopes: [read]}\n  - {name: a, key: sk-b, scopes: [read]}\n", "keys[1] (a): line 3: the name is keys[0] (a): line 2's too"},
		{"a key given twice across entries", "keys:\n  - sk-secret-a\n  - {name: b, key: sk-secret-a, scopes: [read]}\n", "keys[1] (b): line 3: the same key as keys[0]: line 2"},
		{"a negative rate", "keys:\n  - {name: a, key: sk-a, scopes: [read], rate_limit: {per_second: -1}}\n", "keys[0] (a): line 2: rate_limit: per_second must be"},
		{"a blank plain key", "keys:\n  - real\n  - \" \"\n", "keys[1]: line 3: a key must not be blank"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.yaml))
			if err == nil {
				var errs []error
				errs, err = c.Check(), nil
				if len(errs) > 0 {
					err = errors.Join(errs...)
				}
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "sk-") {
				t.Errorf("the error shows a key: %v", err)
			}
		})
	}
}

// docs/http-api.md's example of keys is a configuration that passes
// every check, its keys named as it says.
func TestHTTPAPIPageKeysExample(t *testing.T) {
	c, err := Parse([]byte(yamlBlock(t, "../../docs/http-api.md", "## Keys")))
	if err != nil {
		t.Fatal(err)
	}
	if errs := c.Check(); len(errs) > 0 {
		t.Fatal(errs)
	}
	keys, err := c.APIKeys(func(string) string { return "" })
	if err != nil || len(keys) != 4 || keys[0].Name != "keys[0]" || keys[2].RateLimit == nil ||
		keys[3].Budget == nil || decision.USD(*keys[3].Budget.USD).String() != "5" || keys[3].Budget.Per != "day" {
		t.Fatalf("keys %+v, %v", keys, err)
	}
}

// A key given twice across the file and keys_env, or a named key whose
// variable is empty, stops APIKeys with an error naming the entries, not
// the key.
func TestAPIKeysRefusesRepeats(t *testing.T) {
	getenv := func(k string) string { return map[string]string{"KEYS": "sk-one,sk-two"}[k] }
	for _, tc := range []struct {
		name string
		c    Config
		want string
	}{
		{"the file's key in the variable", Config{Keys: plain("sk-two"), KeysEnv: "KEYS"}, "keys_env[1]: the same key as keys[0]"},
		{"a named key whose variable is empty", Config{Keys: []Key{{Key: "sk-one"}, {Name: "a", KeyEnv: "ONE", Scopes: []string{"read"}, mapping: true}}}, "keys[1] (a): key_env: $ONE: a key must not be empty"},
	} {
		_, err := tc.c.APIKeys(getenv)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "sk-") {
			t.Errorf("%s: %v; want %q, without the key", tc.name, err, tc.want)
		}
	}
}

// A key's budget may be larger than any one price (a team's month of
// answers), up to a million dollars; past that, or at 0 or below (which
// would refuse every request), it is refused in a budget's words, not a
// price's.
func TestBudgetAmounts(t *testing.T) {
	for _, tc := range []struct{ usd, want string }{
		{"25", ""},
		{"10000", ""},
		{"50000", ""},
		{"1000000", ""},
		{"1000000.5", "1000000.5 is over 1000000 US dollars, the most a budget may be"},
		{"2e6", "2e6 is over 1000000 US dollars, the most a budget may be"},
		{"9999999", "9999999 is over 1000000 US dollars, the most a budget may be"},
		{"-1", "-1 is negative: a budget is more than 0"},
		{"0", "0 lets the key spend nothing"},
		{"0.000", "0.000 lets the key spend nothing"},
		{"lots", `"lots" is not a decimal number of US dollars`},
		{"[1]", "a budget is a number of US dollars"},
	} {
		t.Run(tc.usd, func(t *testing.T) {
			c, err := Parse([]byte("decision_log: {retention: 31d}\nkeys:\n  - {name: a, key: sk-a, scopes: [decide], budget: {usd: " + tc.usd + ", per: month}}\n"))
			if err == nil {
				err = errors.Join(c.Check()...)
			}
			if tc.want == "" {
				if err != nil {
					t.Fatalf("a budget of $%s: %v", tc.usd, err)
				}
				if b := c.Keys[0].Budget; b == nil || b.USD == nil || decision.USD(*b.USD).String() != tc.usd {
					t.Errorf("a budget of $%s read as %+v", tc.usd, b)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "keys[0].budget.usd: line 3") {
				t.Errorf("a budget of $%s: %v; want keys[0].budget.usd: line 3: %s", tc.usd, err, tc.want)
			}
		})
	}
}
