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
		// The schema refuses these first (so that helm lint does too),
		// naming the two values either of which would do.
		{"replicas with SQLite logs", "replicaCount: 3", "at '/postgres/urlSecret/name': minLength: got 0, want 1\n    - at '/config': missing property 'decision_log'"},
		{"autoscaler with SQLite logs", "autoscaling: {enabled: true}", "at '/postgres/urlSecret/name': minLength: got 0, want 1\n    - at '/config': missing property 'decision_log'"},
		{"replicas with SQLite logs and keep_states", "replicaCount: 3\nconfig: {decision_log: {keep_states: true}}", "at '/config/decision_log': 'anyOf' failed"},
		{"autoscaler bounds upside down", withPostgres + "autoscaling: {enabled: true, minReplicas: 5, maxReplicas: 2}", "autoscaling: minReplicas 5 is over maxReplicas 2"},
		{"autoscaler on CPU without a CPU request", withPostgres + "autoscaling: {enabled: true}\nresources: {requests: {cpu: null}}", "needs resources.requests.cpu"},
		{"disruption budget blocking every eviction", withPostgres + "replicaCount: 2\npodDisruptionBudget: {minAvailable: 2, maxUnavailable: null}", "podDisruptionBudget.minAvailable 2 with 2 replicas: no pod could ever be evicted"},
		{"disruption budget keeping every pod as a share", withPostgres + "replicaCount: 2\npodDisruptionBudget: {minAvailable: '100%'}", "podDisruptionBudget.minAvailable 100% with 2 replicas: no pod could ever be evicted"},
		{"disruption budget keeping every pod as a share rounded up", withPostgres + "replicaCount: 2\npodDisruptionBudget: {minAvailable: '99%'}", "podDisruptionBudget.minAvailable 99% with 2 replicas: no pod could ever be evicted"},
		{"disruption budget keeping every pod as a quoted number", withPostgres + "replicaCount: 2\npodDisruptionBudget: {minAvailable: '2'}", "podDisruptionBudget.minAvailable 2 with 2 replicas: no pod could ever be evicted"},
		{"disruption budget evicting none", withPostgres + "replicaCount: 2\npodDisruptionBudget: {maxUnavailable: 0}", "at '/podDisruptionBudget/maxUnavailable'"},
		{"disruption budget evicting none as a quoted number", withPostgres + "replicaCount: 2\npodDisruptionBudget: {maxUnavailable: '0'}", "at '/podDisruptionBudget/maxUnavailable'"},
		{"disruption budget evicting a share of none", withPostgres + "replicaCount: 2\npodDisruptionBudget: {maxUnavailable: '0%'}", "at '/podDisruptionBudget/maxUnavailable'"},
		{"disruption budget with both bounds", "podDisruptionBudget: {minAvailable: 1, maxUnavailable: 1}", "/podDisruptionBudget"},
		{"API keys in the ConfigMap", "config: {keys: [k1]}", "config.keys: set by the chart or not supported"},
		{"listen in the configuration", "config: {listen: '0.0.0.0:9'}", "config.listen: set by the chart"},
		{"decision log URL in the ConfigMap", "config: {decision_log: {url: 'postgres://u:p@db/x'}}", "does not go in a ConfigMap; put it in a Secret"},
		{"URL Secret and SQLite path", withPostgres + "config: {decision_log: {path: d.db}}", "postgres.urlSecret and config.decision_log.path exclude each other"},
		{"URL Secret and log off as a bare off", withPostgres + "config: {decision_log: {off: true}}", "postgres.urlSecret and config.decision_log.off exclude each other"},
		{"URL Secret and log off as a quoted off", withPostgres + "config: {decision_log: {'off': true}}", "postgres.urlSecret and config.decision_log.off exclude each other"},
		{"no keys and auth on", "auth: {existingSecret: ''}", "auth.existingSecret: name the Secret"},
		{"auth disabled with a key Secret", "auth: {disabled: true}", "auth.disabled and auth.existingSecret exclude each other"},
		{"node key from nowhere", "config: {nodes: [{name: e, url: 'http://e', dialect: llamacpp, key_env: NODE_KEY}]}", "config.nodes[0] (e): key_env NODE_KEY is set from nowhere"},
		{"tracing headers from nowhere", "config: {tracing: {endpoint: 'http://otel:4318', headers_env: OTLP_HEADERS}}", "config.tracing.headers_env: OTLP_HEADERS is set from nowhere"},
		{"tracing headers from a misspelt variable", "config: {tracing: {endpoint: 'http://otel:4318', headers_env: OTLP_HEADER}}\nextraEnv: [{name: OTLP_HEADERS, valueFrom: {secretKeyRef: {name: otlp, key: headers}}}]", "config.tracing.headers_env: OTLP_HEADER is set from nowhere"},
		{"node key Secret without key_env", "config: {nodes: [{name: e, url: 'http://e', dialect: llamacpp, keySecret: {name: s, key: k}}]}", "config.nodes[0] (e): keySecret needs key_env"},
		{"a variable set twice", "extraEnv: [{name: SYSTEM1_KEYS, value: x}]", "the variable SYSTEM1_KEYS is set twice"},
		{"no nodes", "config: {nodes: []}", "/config/nodes"},
		{"calibration applied without fits", "config: {calibration: apply}", "config.calibration is apply: give the fits file's content in fits"},
		{"fits not applied", "fits: '{}'", "fits: a fits file is served only with config.calibration: apply"},
		{"fits with calibration off", "config: {calibration: 'off'}\nfits: '{}'", "fits: a fits file is served only with config.calibration: apply"},
		{"fits and refits", "config: {calibration: {mode: apply, refit_every: 10m}}\nfits: '{}'", "fits and config.calibration.refit_every exclude each other"},
		{"refits not a duration", "config: {calibration: {mode: apply, refit_every: often}}", `config.calibration.refit_every: "often" is not a duration`},
		{"decision log file on the read-only root", "config: {decision_log: {path: /data/decisions.db}}", "config.decision_log.path: /data/decisions.db is outside the state folder /var/lib/system1"},
		{"builds file beside the read-only configuration", "config: {fingerprint: {builds: builds.json}}", "config.fingerprint.builds: builds.json is not in the state folder /var/lib/system1"},
		{"builds file on the read-only root", "config: {fingerprint: {builds: /data/builds.json}}", "config.fingerprint.builds: /data/builds.json is not in the state folder /var/lib/system1"},
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

// helm lint --strict refuses what helm template refuses for the replicas
// and the disruption budget, through the values' schema: lint renders the
// templates with their refusals turned into log lines, so a chart whose
// guards live only there lints values it will not install. Values that
// work lint clean.
func TestLintRefusesWhatTemplateRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  []string
		ok   bool
	}{
		{"two replicas, SQLite logs", []string{"replicaCount=2"}, false},
		{"an autoscaler, SQLite logs", []string{"autoscaling.enabled=true"}, false},
		{"both disruption bounds", []string{"podDisruptionBudget.minAvailable=1", "podDisruptionBudget.maxUnavailable=1"}, false},
		{"no pod evictable", []string{"podDisruptionBudget.maxUnavailable=0", "replicaCount=2", "postgres.urlSecret.name=pg"}, false},
		{"two replicas sharing PostgreSQL", []string{"replicaCount=2", "postgres.urlSecret.name=pg"}, true},
		{"two replicas, no log", []string{"replicaCount=2", "config.decision_log.off=true"}, true},
		{"an autoscaler sharing PostgreSQL", []string{"autoscaling.enabled=true", "postgres.urlSecret.name=pg"}, true},
		{"a share of the pods kept", []string{"podDisruptionBudget.minAvailable=50%", "replicaCount=2", "postgres.urlSecret.name=pg"}, true},
		{"one disruption bound", []string{"podDisruptionBudget.minAvailable=1", "replicaCount=2", "postgres.urlSecret.name=pg"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, tmplErr := runHelm(t, append([]string{"template", "rel", chart}, valuesArgs("", tc.set...)...)...)
			out, stderr, lintErr := runHelm(t, append([]string{"lint", "--strict", chart}, valuesArgs("", tc.set...)...)...)
			if (tmplErr == nil) != tc.ok {
				t.Errorf("helm template --set %v: %v, want ok=%v", tc.set, tmplErr, tc.ok)
			}
			if (lintErr == nil) != tc.ok || strings.Contains(out+stderr, "funcMap fail") {
				t.Errorf("helm lint --strict --set %v: %v, want ok=%v:\n%s%s", tc.set, lintErr, tc.ok, out, stderr)
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

// podAntiAffinity hard requires one replica per node, none drops the
// chart's term, and an affinity.podAntiAffinity of one's own replaces
// it; a NetworkPolicy narrowed by egressTo lets out DNS and those peers
// alone, and ingressFrom narrows who may call.
func TestSpreadAndNetworkValues(t *testing.T) {
	hard := render(t, "", "podAntiAffinity=hard").Deployment.Spec.Template.Spec.Affinity
	if hard == nil || hard.PodAntiAffinity == nil || len(hard.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 ||
		len(hard.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 0 {
		t.Errorf("podAntiAffinity=hard: %+v", hard)
	}
	if none := render(t, "", "podAntiAffinity=none").Deployment.Spec.Template.Spec.Affinity; none != nil {
		t.Errorf("podAntiAffinity=none: %+v", none)
	}
	own := render(t, "", "affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight=7",
		"affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.topologyKey=zone").Deployment.Spec.Template.Spec.Affinity
	if own == nil || own.PodAntiAffinity == nil || len(own.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 ||
		own.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].Weight != 7 {
		t.Errorf("affinity.podAntiAffinity of one's own: %+v", own)
	}
	np := render(t, "", "networkPolicy.egressTo[0].ipBlock.cidr=10.0.0.0/8", "networkPolicy.ingressFrom[0].namespaceSelector.matchLabels.team=gw").NetworkPolicy
	if np == nil || len(np.Spec.Egress) != 2 || len(np.Spec.Egress[0].Ports) != 2 || np.Spec.Egress[0].Ports[0].Port.IntValue() != 53 ||
		len(np.Spec.Egress[1].To) != 1 || np.Spec.Egress[1].To[0].IPBlock == nil || np.Spec.Egress[1].To[0].IPBlock.CIDR != "10.0.0.0/8" {
		t.Errorf("egressTo: %+v", np)
	}
	if np == nil || len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 1 || np.Spec.Ingress[0].From[0].NamespaceSelector == nil {
		t.Errorf("ingressFrom: %+v", np)
	}
	if off := render(t, "", "networkPolicy.enabled=false").NetworkPolicy; off != nil {
		t.Errorf("networkPolicy.enabled=false rendered %+v", off)
	}
}

// A key named off, written bare as in the file, reaches system1 as off:
// Helm reads values as YAML 1.1, where a bare off as a key is false, and
// the chart writes it back for every section that has one.
func TestOffKeysRendered(t *testing.T) {
	for _, tc := range []struct {
		name, values string
		off          func(*config.Config) bool
	}{
		{"decision log off bare", "config: {decision_log: {off: true}}", func(c *config.Config) bool { return c.DecisionLog.Off }},
		{"decision log off quoted", "config: {decision_log: {'off': true}}", func(c *config.Config) bool { return c.DecisionLog.Off }},
		{"fingerprints off bare", "config: {fingerprint: {off: true, canary_every: 1h}}", func(c *config.Config) bool {
			return c.Fingerprint.Off && time.Duration(c.Fingerprint.CanaryEvery) == time.Hour
		}},
		{"fingerprints off quoted", "config: {fingerprint: {'off': true}}", func(c *config.Config) bool { return c.Fingerprint.Off }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "values.yaml")
			if err := os.WriteFile(file, []byte(tc.values+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			r := render(t, file)
			checkRelease(t, r)
			cfg, err := config.Parse([]byte(r.ConfigMap.Data["system1.yaml"]))
			if err != nil {
				t.Fatal(err)
			}
			if !tc.off(cfg) {
				t.Errorf("%s rendered without its off:\n%s", tc.values, r.ConfigMap.Data["system1.yaml"])
			}
		})
	}
}

// Fits shipped in the ConfigMap are served from its read-only folder;
// the builds file serve keeps beside them (docs/fingerprints.md) goes to
// the state folder instead, and the pod serves.
func TestShippedFits(t *testing.T) {
	bin := system1(t)
	fits, err := os.ReadFile(filepath.Join(root, "internal/calibration/testdata/fits-v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	quoted, err := json.Marshal(string(fits))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, values, builds string }{
		{"fingerprints on", "config: {calibration: apply}\n", "/var/lib/system1/builds.json"},
		{"fingerprints off", "config: {calibration: apply, fingerprint: {off: true}}\n", ""},
		{"builds file given", "config: {calibration: apply, fingerprint: {builds: /var/lib/system1/b.json}}\n", "/var/lib/system1/b.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "values.yaml")
			if err := os.WriteFile(file, []byte(tc.values+"fits: "+string(quoted)+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			r := render(t, file)
			checkRelease(t, r)
			cfg, err := config.Parse([]byte(r.ConfigMap.Data["system1.yaml"]))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Gateway.Fits != "/etc/system1/fits.json" || r.ConfigMap.Data["fits.json"] != string(fits) {
				t.Errorf("gateway.fits %s, the ConfigMap's fits.json %q", cfg.Gateway.Fits, r.ConfigMap.Data["fits.json"])
			}
			if cfg.Fingerprint.Builds != tc.builds {
				t.Errorf("fingerprint.builds %q, want %q", cfg.Fingerprint.Builds, tc.builds)
			}
			runPod(t, bin, r)
		})
	}
}
