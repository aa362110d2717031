package helm

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"

	"system1/internal/config"
	"system1/internal/testbin"
)

var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

// system1 builds the system1 binary once per test process, in the
// repository's own module.
func system1(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "system1-helm-"); buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "system1")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/system1")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/system1: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// The rendered pod, played on this machine without a cluster: the
// ConfigMap's files in a folder standing for its mount, an empty folder
// for each emptyDir, the container's arguments and variables (each Secret
// reference given a made-up value), and the real binary. It must start,
// answer its probes' paths and the ServiceMonitor's, write where the
// chart gave it room, and stop cleanly on SIGTERM.
//
// The nodes are cluster names that resolve nowhere here; the run points
// them at a closed loopback port, so no lookup leaves the machine.
func TestRenderedConfigServes(t *testing.T) {
	helm(t) // skips first when there is no Helm, before any build
	bin := system1(t)
	for _, file := range valuesFiles(t) {
		t.Run(name(file), func(t *testing.T) {
			r := render(t, file)
			if r.Deployment == nil || r.ConfigMap == nil {
				t.Fatal("no Deployment or ConfigMap")
			}
			runPod(t, bin, r)
		})
	}
}

func runPod(t *testing.T, bin string, r *release) {
	pod := r.Deployment.Spec.Template.Spec
	c := pod.Containers[0]
	dir := t.TempDir()

	// Each mount is a folder; the root file system is none of them.
	mounts := map[string]string{}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = filepath.Join(dir, m.Name)
		if err := os.MkdirAll(mounts[m.MountPath], 0o755); err != nil {
			t.Fatal(err)
		}
	}
	local := func(p string) string {
		for mp, l := range mounts {
			if rest, ok := strings.CutPrefix(p, mp+"/"); ok {
				return filepath.Join(l, rest)
			}
			if p == mp {
				return l
			}
		}
		return p
	}

	for _, m := range c.VolumeMounts {
		cm := volumes[m.Name].ConfigMap
		if cm == nil {
			continue
		}
		if cm.Name != r.ConfigMap.Name {
			t.Fatalf("volume %s mounts ConfigMap %s, not the chart's %s", m.Name, cm.Name, r.ConfigMap.Name)
		}
		for k, v := range r.ConfigMap.Data {
			if k == "system1.yaml" {
				v = podConfig(t, v, local)
			}
			if err := os.WriteFile(filepath.Join(mounts[m.MountPath], k), []byte(v), 0o444); err != nil {
				t.Fatal(err)
			}
		}
	}
	addr, err := testbin.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, a := range c.Args {
		args = append(args, local(a))
	}
	args = append(args, "--listen", addr)
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = podEnv(t, c.Env)
	if tmp, ok := mounts["/tmp"]; ok {
		cmd.Env = append(cmd.Env, "TMPDIR="+tmp)
	}
	var out testbin.Output
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	defer func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	base := "http://" + addr
	if err := testbin.WaitHealthy(base, exited, time.Minute); err != nil {
		t.Fatalf("system1 did not start on the rendered configuration: %v\n%s", err, out.String())
	}

	// The probes' paths and the ServiceMonitor's.
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	get := func(p string) int {
		resp, err := client.Get(base + p)
		if err != nil {
			t.Fatalf("GET %s: %v", p, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	paths := map[string]bool{}
	for _, p := range []*corev1.Probe{c.StartupProbe, c.LivenessProbe, c.ReadinessProbe} {
		if p != nil && p.HTTPGet != nil {
			paths[p.HTTPGet.Path] = true
		}
	}
	if sm := r.ServiceMonitor; sm != nil {
		for _, e := range sm.Spec.Endpoints {
			paths[e.Path] = true
		}
	}
	// What each path must answer here, where no node can answer a probe:
	// live, not ready.
	want := map[string]int{livez: http.StatusOK, readyz: http.StatusServiceUnavailable, "/metrics": http.StatusOK}
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		code := get(p)
		switch {
		case want[p] == 0:
			t.Errorf("the chart asks %s, which this test does not know", p)
		case code != want[p]:
			t.Errorf("GET %s: %d, want %d while no node answers", p, code, want[p])
		}
	}

	// The state folder holds what the binary writes: the SQLite decision
	// log when it is the log, the refitted fits when it refits.
	cfg, err := config.Parse([]byte(mustRead(t, local(flagValue(c.Args, "--config")))))
	if err != nil {
		t.Fatal(err)
	}
	stateDir := local(flagValue(c.Args, "--state-dir"))
	var written []string
	if !cfg.DecisionLog.Off && cfg.DecisionLog.URL == "" && cfg.DecisionLog.URLEnv == "" {
		written = append(written, cfg.DecisionLog.File(stateDir, func(string) string { return "" }))
	}
	if cfg.Calibration.RefitEvery > 0 {
		written = append(written, cfg.Gateway.Fits)
	}
	for _, f := range written {
		if !strings.HasPrefix(f, stateDir+"/") {
			t.Errorf("system1 writes %s, outside the state folder's emptyDir", f)
		} else if _, err := os.Stat(f); err != nil {
			t.Errorf("system1 did not write %s: %v\n%s", f, err, out.String())
		}
	}

	// SIGTERM, as the kubelet sends it after the preStop sleep: a clean
	// stop, nothing in flight.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(2 * time.Minute): // a hang guard, not a timing
		t.Fatalf("system1 did not stop on SIGTERM\n%s", out.String())
	}
	if waitErr != nil {
		t.Errorf("system1 stopped with %v on SIGTERM\n%s", waitErr, out.String())
	}
}

// podConfig is the rendered configuration as this machine runs it: every
// path under a mount made local (local), and every node pointed at a
// closed loopback port.
func podConfig(t *testing.T, file string, local func(string) string) string {
	t.Helper()
	closed, err := testbin.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	m := rawConfig(t, file)
	nodes, _ := m["nodes"].([]any)
	for _, n := range nodes {
		node := n.(map[string]any)
		u, err := url.Parse(fmt.Sprint(node["url"]))
		if err != nil {
			t.Fatal(err)
		}
		u.Host = closed
		node["url"] = u.String()
	}
	b, err := yaml.Marshal(localPaths(m, local))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// localPaths applies local to every absolute path among v's strings.
func localPaths(v any, local func(string) string) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = localPaths(e, local)
		}
	case []any:
		for i, e := range x {
			x[i] = localPaths(e, local)
		}
	case string:
		if strings.HasPrefix(x, "/") {
			return local(x)
		}
	}
	return v
}

// podEnv is the container's environment, alone: each value as given, each
// Secret reference a made-up value of its own.
func podEnv(t *testing.T, env []corev1.EnvVar) []string {
	t.Helper()
	var out []string
	for _, e := range env {
		switch {
		case e.ValueFrom == nil:
			out = append(out, e.Name+"="+e.Value)
		case e.ValueFrom.SecretKeyRef != nil:
			out = append(out, e.Name+"="+secretValue(e))
		default:
			t.Fatalf("variable %s comes from %+v, which this test cannot play", e.Name, e.ValueFrom)
		}
	}
	return out
}

// secretValue stands for a Secret's value: a PostgreSQL URL for the
// decision log's ($SYSTEM1_POSTGRES_URL when a database runs here, else
// a closed port), a key for the rest.
func secretValue(e corev1.EnvVar) string {
	if e.Name == "SYSTEM1_DECISION_LOG_URL" {
		if u := os.Getenv("SYSTEM1_POSTGRES_URL"); u != "" {
			return u
		}
		return "postgres://system1@127.0.0.1:1/system1?connect_timeout=2"
	}
	return "secret-" + e.ValueFrom.SecretKeyRef.Name + "-" + e.ValueFrom.SecretKeyRef.Key
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
