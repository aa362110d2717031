package helm

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"system1/internal/config"
)

// withPostgres names a decision log URL Secret, so that a case with
// several replicas fails for its own reason, not for the SQLite log.
const withPostgres = "postgres: {urlSecret: {name: pg, key: url}}\n"

// A combination of values that cannot work fails helm template (and so
// helm install) with a message naming the values to change, instead of
// rendering pods that crash or hang.
func TestBadValuesFail(t *testing.T) {
	for _, tc := range []struct {
		name string
		// values is a values file, as a user writes it, over the defaults.
		values string
		want   string
	}{
		{"replicas with SQLite logs", "replicaCount: 3", "3 replicas would each keep their own SQLite decision log"},
		{"autoscaler with SQLite logs", "autoscaling: {enabled: true}", "6 replicas would each keep their own SQLite decision log"},
		{"autoscaler bounds upside down", withPostgres + "autoscaling: {enabled: true, minReplicas: 5, maxReplicas: 2}", "autoscaling: minReplicas 5 is over maxReplicas 2"},
		{"autoscaler on CPU without a CPU request", withPostgres + "autoscaling: {enabled: true}\nresources: {requests: {cpu: null}}", "needs resources.requests.cpu"},
		{"disruption budget blocking every eviction", withPostgres + "replicaCount: 2\npodDisruptionBudget: {minAvailable: 2, maxUnavailable: null}", "podDisruptionBudget.minAvailable 2 with 2 replicas: no pod could ever be evicted"},
		{"disruption budget with both bounds", "podDisruptionBudget: {minAvailable: 1}", "give exactly one of minAvailable and maxUnavailable"},
		{"API keys in the ConfigMap", "config: {keys: [k1]}", "config.keys: set by the chart or not supported"},
		{"listen in the configuration", "config: {listen: '0.0.0.0:9'}", "config.listen: set by the chart"},
		{"decision log URL in the ConfigMap", "config: {decision_log: {url: 'postgres://u:p@db/x'}}", "does not go in a ConfigMap; put it in a Secret"},
		{"URL Secret and SQLite path", withPostgres + "config: {decision_log: {path: d.db}}", "postgres.urlSecret and config.decision_log.path exclude each other"},
		{"URL Secret and log off as a bare off", withPostgres + "config: {decision_log: {off: true}}", "postgres.urlSecret and config.decision_log.off exclude each other"},
		{"URL Secret and log off as a quoted off", withPostgres + "config: {decision_log: {'off': true}}", "postgres.urlSecret and config.decision_log.off exclude each other"},
		{"no keys and auth on", "auth: {existingSecret: ''}", "auth.existingSecret: name the Secret"},
		{"auth disabled with a key Secret", "auth: {disabled: true}", "auth.disabled and auth.existingSecret exclude each other"},
		{"node key from nowhere", "config: {nodes: [{name: e, url: 'http://e', dialect: llamacpp, key_env: NODE_KEY}]}", "config.nodes[0] (e): key_env NODE_KEY is set from nowhere"},
		{"node key Secret without key_env", "config: {nodes: [{name: e, url: 'http://e', dialect: llamacpp, keySecret: {name: s, key: k}}]}", "config.nodes[0] (e): keySecret needs key_env"},
		{"a variable set twice", "extraEnv: [{name: SYSTEM1_KEYS, value: x}]", "the variable SYSTEM1_KEYS is set twice"},
		{"no nodes", "config: {nodes: []}", "/config/nodes"},
		{"calibration applied without fits", "config: {calibration: apply}", "config.calibration is apply: give the fits file's content in fits"},
		{"fits and refits", "config: {calibration: {mode: apply, refit_every: 10m}}\nfits: '{}'", "fits and config.calibration.refit_every exclude each other"},
		{"refits not a duration", "config: {calibration: {mode: apply, refit_every: often}}", `config.calibration.refit_every: "often" is not a duration`},
		{"fits path set by hand", "config: {gateway: {fits: /x.json}}", "config.gateway.fits: set by the chart"},
		{"drain not a duration", "config: {timeouts: {drain: soon}}", `config.timeouts.drain: "soon" is not a duration`},
		{"drain a bare number", "config: {timeouts: {drain: 30}}", `config.timeouts.drain: "30" is not a duration`},
		{"unknown dialect", "config: {nodes: [{name: e, url: 'http://e', dialect: llama}]}", "/config/nodes/0/dialect"},
		{"a misspelt value", "replicas: 2", "additional properties 'replicas' not allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "values.yaml")
			if err := os.WriteFile(file, []byte(tc.values+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			out, stderr, err := runHelm(t, append([]string{"template", "rel", chart}, valuesArgs(file)...)...)
			if err == nil {
				t.Fatalf("helm template with\n%s\nrendered:\n%s", tc.values, out)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("helm template with\n%s\nfailed without saying %q:\n%s", tc.values, tc.want, stderr)
			}
		})
	}
}

// The grace period follows timeouts.drain however it is written: the
// chart reads Go durations in its template, and this checks its reading
// against Go's own.
func TestGraceFollowsDrain(t *testing.T) {
	tail := shutdownTail(t)
	for _, drain := range []string{"30s", "1m30s", "1.5m", "2.5s", "500ms", "1h", "90s", "0", "0s", "1m0.5s"} {
		t.Run(drain, func(t *testing.T) {
			r := render(t, "", "config.timeouts.drain="+drain)
			d, err := time.ParseDuration(drain)
			if err != nil {
				t.Fatal(err)
			}
			if d == 0 {
				d = 30 * time.Second // serve's default
			}
			want := 5 + int64(math.Ceil(d.Seconds())) + tail
			if g := r.Deployment.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g != want {
				t.Errorf("drain %s: grace %v, want 5 + %v + %d = %d", drain, deref(g), d, tail, want)
			}
			checkRelease(t, r)
		})
	}
}

// The grace period adds timeouts.drain_delay, however it is written,
// to the drain.
func TestGraceFollowsDrainDelay(t *testing.T) {
	tail := shutdownTail(t)
	for _, delay := range []string{"0s", "10s", "2.5s", "1m"} {
		t.Run(delay, func(t *testing.T) {
			r := render(t, "", "config.timeouts.drain_delay="+delay)
			d, err := time.ParseDuration(delay)
			if err != nil {
				t.Fatal(err)
			}
			want := 5 + int64(math.Ceil(d.Seconds())) + 30 + tail
			if g := r.Deployment.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g != want {
				t.Errorf("drain_delay %s: grace %v, want 5 + %v + 30 + %d = %d", delay, deref(g), d, tail, want)
			}
			checkRelease(t, r)
		})
	}
}

// The values' schema lists the dialects system1 knows, and no other.
func TestSchemaDialects(t *testing.T) {
	b, err := os.ReadFile(root + "/" + chart + "/values.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties struct {
			Config struct {
				Properties struct {
					Nodes struct {
						Items struct {
							Properties struct {
								Dialect struct {
									Enum []string `json:"enum"`
								} `json:"dialect"`
							} `json:"properties"`
						} `json:"items"`
					} `json:"nodes"`
				} `json:"properties"`
			} `json:"config"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	got := schema.Properties.Config.Properties.Nodes.Items.Properties.Dialect.Enum
	if !slices.Equal(got, config.Dialects) {
		t.Errorf("the schema's dialects are %v; system1's %v", got, config.Dialects)
	}
}

// docs/deploy.md walks through every example values file.
func TestExamplesDocumented(t *testing.T) {
	doc, err := os.ReadFile(root + "/docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range valuesFiles(t)[1:] {
		if !strings.Contains(string(doc), f) {
			t.Errorf("docs/deploy.md does not mention %s", f)
		}
	}
}
