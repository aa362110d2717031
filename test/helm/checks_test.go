package helm

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"system1/internal/config"
)

// Probe paths the chart's probes must use: /livez answers 200 while the
// process serves, /readyz 503 until the configuration, the decision log
// and a node per model are ready (issue 18).
const (
	livez  = "/livez"
	readyz = "/readyz"
)

// checkRelease checks what one rendering holds, beyond decoding: the
// pod's hardening, that the objects point at each other, the probes, the
// grace period against the drain, where each variable the configuration
// names comes from, and the configuration itself.
func checkRelease(t *testing.T, r *release) {
	t.Helper()
	if r.Deployment == nil || r.Service == nil || r.ConfigMap == nil {
		t.Fatalf("want a Deployment, a Service and a ConfigMap; got %+v", r)
	}
	d := r.Deployment
	pod := d.Spec.Template.Spec
	podLabels := d.Spec.Template.Labels
	if d.Spec.Selector == nil || !subset(d.Spec.Selector.MatchLabels, podLabels) || len(d.Spec.Selector.MatchLabels) == 0 {
		t.Errorf("the Deployment's selector %v does not select its pods %v", d.Spec.Selector, podLabels)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want system1 alone", len(pod.Containers))
	}
	c := pod.Containers[0]

	// Hardening: not root, read-only root file system, no privilege.
	if s := pod.SecurityContext; s == nil || s.RunAsNonRoot == nil || !*s.RunAsNonRoot || s.RunAsUser == nil || *s.RunAsUser == 0 {
		t.Errorf("the pod may run as root: %+v", pod.SecurityContext)
	}
	if s := c.SecurityContext; s == nil || s.ReadOnlyRootFilesystem == nil || !*s.ReadOnlyRootFilesystem ||
		s.AllowPrivilegeEscalation == nil || *s.AllowPrivilegeEscalation || s.Capabilities == nil || !slices.Contains(s.Capabilities.Drop, "ALL") {
		t.Errorf("the container is not hardened (read-only root, no privilege escalation, no capabilities): %+v", c.SecurityContext)
	}
	for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := c.Resources.Requests[res]; !ok || q.IsZero() {
			t.Errorf("no %s request: %+v", res, c.Resources)
		}
	}
	if q, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok || q.IsZero() {
		t.Errorf("no memory limit: %+v", c.Resources)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("the pod mounts a service account token; system1 never calls the Kubernetes API")
	}
	if sa := r.ServiceAccount; sa != nil && (sa.Name != pod.ServiceAccountName || sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken) {
		t.Errorf("service account %s (automount %v), the pod's %s", sa.Name, sa.AutomountServiceAccountToken, pod.ServiceAccountName)
	}

	// The command line, the files and where the binary may write.
	args := c.Args
	if len(args) == 0 || args[0] != "serve" {
		t.Fatalf("args %v: want serve", args)
	}
	cfgPath, stateDir := flagValue(args, "--config"), flagValue(args, "--state-dir")
	if cfgPath == "" || stateDir == "" {
		t.Fatalf("args %v: want --config and --state-dir", args)
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	mountOf := func(p string) (corev1.VolumeMount, corev1.Volume) {
		for _, m := range c.VolumeMounts {
			if p == m.MountPath || strings.HasPrefix(p, m.MountPath+"/") {
				return m, volumes[m.Name]
			}
		}
		t.Fatalf("%s is on no volume: the root file system is read-only", p)
		return corev1.VolumeMount{}, corev1.Volume{}
	}
	m, v := mountOf(cfgPath)
	if v.ConfigMap == nil || v.ConfigMap.Name != r.ConfigMap.Name || !m.ReadOnly {
		t.Errorf("--config %s is not on the ConfigMap %s, read-only: %+v %+v", cfgPath, r.ConfigMap.Name, m, v)
	}
	file, ok := r.ConfigMap.Data[path.Base(cfgPath)]
	if !ok {
		t.Fatalf("the ConfigMap has no %s: %v", path.Base(cfgPath), keys(r.ConfigMap.Data))
	}
	if _, v := mountOf(stateDir); v.EmptyDir == nil {
		t.Errorf("--state-dir %s is not on an emptyDir: %+v", stateDir, v)
	}
	if _, v := mountOf("/tmp"); v.EmptyDir == nil {
		t.Errorf("/tmp is not on an emptyDir: %+v", v)
	}
	for _, m := range c.VolumeMounts {
		if v := volumes[m.Name]; !m.ReadOnly && v.EmptyDir == nil {
			t.Errorf("volume %s is writable and not an emptyDir: %+v", m.Name, v)
		}
	}

	// The configuration: system1's own parse and checks.
	cfg, err := config.Parse([]byte(file))
	if err != nil {
		t.Fatalf("system1 refuses the rendered configuration: %v\n%s", err, file)
	}
	cfg.Normalize()
	if errs := cfg.Check(); len(errs) > 0 {
		t.Fatalf("the rendered configuration fails system1's checks: %v\n%s", errs, file)
	}
	if len(cfg.Nodes) == 0 {
		t.Error("the rendered configuration has no nodes: serve refuses it")
	}
	if len(cfg.Keys) > 0 || cfg.DecisionLog.URL != "" {
		t.Error("the ConfigMap holds API keys or a decision log URL, which are secrets")
	}

	// The port: the configuration listens where the container port and
	// the Service point.
	var port int32
	for _, p := range c.Ports {
		if p.Name == "http" {
			port = p.ContainerPort
		}
	}
	if port == 0 || cfg.Listen != fmt.Sprintf("0.0.0.0:%d", port) {
		t.Errorf("system1 listens on %q; the container's http port is %d", cfg.Listen, port)
	}
	if !subset(r.Service.Spec.Selector, podLabels) || len(r.Service.Spec.Selector) == 0 {
		t.Errorf("the Service selects %v; the pods are %v", r.Service.Spec.Selector, podLabels)
	}
	if len(r.Service.Spec.Ports) != 1 || r.Service.Spec.Ports[0].TargetPort != intstr.FromString("http") {
		t.Errorf("the Service's ports %+v do not target the container's http port", r.Service.Spec.Ports)
	}

	// Probes on the paths the server answers, on its port.
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		want  string
	}{{"startup", c.StartupProbe, livez}, {"liveness", c.LivenessProbe, livez}, {"readiness", c.ReadinessProbe, readyz}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("no HTTP %s probe", p.name)
			continue
		}
		if g := p.probe.HTTPGet; g.Path != p.want || g.Port != intstr.FromString("http") {
			t.Errorf("the %s probe asks %s on %s, want %s on http", p.name, g.Path, g.Port.String(), p.want)
		}
	}

	// The grace period outlasts the preStop sleep, the drain's delay, the
	// drain and what serve does after it (shutdownTail, from cmd/system1's
	// source).
	drain := cfg.Timeouts.Drain.Or(30 * time.Second)
	delay := cfg.Timeouts.DrainDelay.Or(0)
	var sleep int64
	if l := c.Lifecycle; l != nil && l.PreStop != nil && l.PreStop.Sleep != nil {
		sleep = l.PreStop.Sleep.Seconds
	}
	want := sleep + int64(math.Ceil(delay.Seconds())) + int64(math.Ceil(drain.Seconds())) + shutdownTail(t)
	if g := pod.TerminationGracePeriodSeconds; g == nil || *g != want || *g <= int64((delay+drain).Seconds()) {
		t.Errorf("terminationGracePeriodSeconds %v; want preStop %ds + drain_delay %s + drain %s + shutdown's tail %ds = %d", deref(g), sleep, delay, drain, shutdownTail(t), want)
	}

	// Every variable the configuration names is set, secrets from Secrets.
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	fromSecret := func(what, name string) {
		if e, ok := env[name]; !ok || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name == "" {
			t.Errorf("%s names $%s, which the container does not get from a Secret: %+v", what, name, e)
		}
	}
	if cfg.KeysEnv != "" {
		fromSecret("keys_env", cfg.KeysEnv)
	}
	if u := cfg.DecisionLog.URLEnv; u != "" {
		fromSecret("decision_log.url_env", u)
	}
	if h := cfg.Tracing.HeadersEnv; h != "" {
		if _, ok := env[h]; !ok {
			t.Errorf("tracing.headers_env $%s is not set in the container", h)
		}
	}
	for _, n := range cfg.Nodes {
		if _, ok := env[n.KeyEnv]; n.KeyEnv != "" && !ok {
			t.Errorf("node %s's key_env $%s is not set in the container", n.Name, n.KeyEnv)
		}
	}

	// The calibration fits, where the configuration says.
	if f := cfg.Gateway.Fits; f != "" {
		switch m, v := mountOf(f); {
		case v.ConfigMap != nil:
			if _, ok := r.ConfigMap.Data[strings.TrimPrefix(f, m.MountPath+"/")]; !ok {
				t.Errorf("gateway.fits %s is not in the ConfigMap", f)
			}
		case v.EmptyDir != nil:
			if cfg.Calibration.RefitEvery == 0 {
				t.Errorf("gateway.fits %s is in an emptyDir, yet nothing refits it", f)
			}
		}
	}

	// The builds file serve keeps beside the fits (fingerprint.builds,
	// by default builds.json in gateway.fits's folder) is written, so it
	// must be on an emptyDir: the ConfigMap's folder is read-only.
	if b := cfg.BuildsPath(); b != "" && !cfg.Fingerprint.Off {
		if _, v := mountOf(b); v.EmptyDir == nil {
			t.Errorf("system1 keeps its builds file %s on a read-only volume, not an emptyDir: it cannot save the builds it names", b)
		}
	}

	// Replicas: the HPA's or the Deployment's, and a log they share.
	least := int32(1)
	if r.HPA != nil {
		ref := r.HPA.Spec.ScaleTargetRef
		if ref.APIVersion != "apps/v1" || ref.Kind != "Deployment" || ref.Name != d.Name {
			t.Errorf("the autoscaler scales %+v, not the Deployment %s", ref, d.Name)
		}
		if d.Spec.Replicas != nil {
			t.Errorf("the Deployment pins %d replicas under an autoscaler", *d.Spec.Replicas)
		}
		if r.HPA.Spec.MinReplicas != nil {
			least = *r.HPA.Spec.MinReplicas
		}
	} else if d.Spec.Replicas == nil {
		t.Error("no replicas and no autoscaler")
	} else {
		least = *d.Spec.Replicas
	}
	if (r.HPA != nil || least > 1) && !cfg.DecisionLog.Off && cfg.DecisionLog.URLEnv == "" {
		t.Error("several replicas, each with its own SQLite decision log: want a shared PostgreSQL one")
	}
	if p := r.PDB; p != nil {
		if p.Spec.Selector == nil || !subset(p.Spec.Selector.MatchLabels, podLabels) || len(p.Spec.Selector.MatchLabels) == 0 {
			t.Errorf("the disruption budget selects %v; the pods are %v", p.Spec.Selector, podLabels)
		}
		if m := p.Spec.MinAvailable; m != nil && m.Type == intstr.Int && m.IntVal >= least {
			t.Errorf("the disruption budget keeps %d of %d pods: no eviction could ever happen", m.IntVal, least)
		}
	}
	// The pods' network: a policy on every pod (kube-score's
	// pod-networkpolicy), taking in nothing but system1's port and
	// covering both directions.
	np := r.NetworkPolicy
	if np == nil {
		t.Error("no NetworkPolicy: every pod and address may reach every port of the pods")
	} else {
		if !subset(np.Spec.PodSelector.MatchLabels, podLabels) || len(np.Spec.PodSelector.MatchLabels) == 0 {
			t.Errorf("the NetworkPolicy selects %v; the pods are %v", np.Spec.PodSelector.MatchLabels, podLabels)
		}
		if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
			t.Errorf("the NetworkPolicy's types %v: want Ingress and Egress", np.Spec.PolicyTypes)
		}
		for _, in := range np.Spec.Ingress {
			if len(in.Ports) == 0 {
				t.Errorf("the NetworkPolicy lets in every port: %+v", in)
			}
			for _, p := range in.Ports {
				if p.Port == nil || (*p.Port != intstr.FromString("http") && *p.Port != intstr.FromInt32(port)) {
					t.Errorf("the NetworkPolicy lets in port %v, not system1's %d", deref(p.Port), port)
				}
			}
		}
		if len(np.Spec.Ingress) == 0 {
			t.Error("the NetworkPolicy lets nothing in: no caller, probe or scrape reaches system1")
		}
		if len(np.Spec.Egress) == 0 {
			t.Error("the NetworkPolicy lets nothing out: system1 reaches no engine")
		}
	}
	// The replicas spread over the cluster's nodes (kube-score's
	// deployment-has-host-podantiaffinity): a term on the node's hostname
	// that selects the Deployment's own pods.
	spread := false
	if a := pod.Affinity; a != nil && a.PodAntiAffinity != nil {
		terms := a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		for _, w := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
		for _, term := range terms {
			if term.TopologyKey == "kubernetes.io/hostname" && term.LabelSelector != nil &&
				len(term.LabelSelector.MatchLabels) > 0 && subset(term.LabelSelector.MatchLabels, podLabels) {
				spread = true
			}
		}
	}
	if !spread {
		t.Errorf("no anti-affinity spreads the replicas over nodes: %+v", pod.Affinity)
	}
	if sm := r.ServiceMonitor; sm != nil {
		if !subset(sm.Spec.Selector.MatchLabels, r.Service.Labels) || len(sm.Spec.Selector.MatchLabels) == 0 {
			t.Errorf("the ServiceMonitor selects %v; the Service is labelled %v", sm.Spec.Selector.MatchLabels, r.Service.Labels)
		}
		for _, e := range sm.Spec.Endpoints {
			if e.Port != r.Service.Spec.Ports[0].Name || e.Path != "/metrics" {
				t.Errorf("the ServiceMonitor scrapes %+v, not the Service's %s port's /metrics", e, r.Service.Spec.Ports[0].Name)
			}
		}
	}
}

// shutdownTail is what serve may take after the drain, in whole seconds:
// cancelGrace for the cancelled requests to answer, then logCloseTimeout
// for the decision log's queue with traceCloseTimeout for the tracer's
// last spans beside it, all read from cmd/system1's source, so that the
// chart's shutdownTailSeconds cannot drift from them unnoticed.
func shutdownTail(t *testing.T) int64 {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, root+"/cmd/system1", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"cancelGrace", "logCloseTimeout", "traceCloseTimeout"}
	found := map[string]time.Duration{}
	for _, p := range pkgs {
		for _, f := range p.Files {
			ast.Inspect(f, func(n ast.Node) bool {
				vs, ok := n.(*ast.ValueSpec)
				if !ok || len(vs.Names) != 1 || len(vs.Values) != 1 {
					return true
				}
				if name := vs.Names[0].Name; slices.Contains(names, name) {
					d, err := durationExpr(vs.Values[0])
					if err != nil {
						t.Fatalf("cmd/system1's %s: %v", name, err)
					}
					found[name] = d
				}
				return true
			})
		}
	}
	if len(found) != len(names) {
		t.Fatalf("cmd/system1 no longer declares %v (found %v): the chart's shutdownTailSeconds is cancelGrace plus the longer of the other two; update both", names, found)
	}
	// The tracer closes beside the decision log (closeLogAndTracer).
	return int64(math.Ceil((found["cancelGrace"] + max(found["logCloseTimeout"], found["traceCloseTimeout"])).Seconds()))
}

// durationExpr evaluates N * time.Unit.
func durationExpr(e ast.Expr) (time.Duration, error) {
	b, ok := e.(*ast.BinaryExpr)
	if !ok || b.Op != token.MUL {
		return 0, fmt.Errorf("not N * time.Unit")
	}
	lit, ok := b.X.(*ast.BasicLit)
	sel, ok2 := b.Y.(*ast.SelectorExpr)
	if !ok || !ok2 || lit.Kind != token.INT {
		return 0, fmt.Errorf("not N * time.Unit")
	}
	n, err := strconv.Atoi(lit.Value)
	if err != nil {
		return 0, err
	}
	unit := map[string]time.Duration{"Millisecond": time.Millisecond, "Second": time.Second, "Minute": time.Minute}[sel.Sel.Name]
	if unit == 0 {
		return 0, fmt.Errorf("unit %s", sel.Sel.Name)
	}
	return time.Duration(n) * unit, nil
}

func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

func subset(a, b map[string]string) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// rawConfig is the rendered configuration as plain YAML values.
func rawConfig(t *testing.T, file string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(file), &m); err != nil {
		t.Fatalf("the rendered configuration is not YAML: %v", err)
	}
	return m
}
