package testbin

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Listen is driven by a shell standing in for system1 serve: what it
// reads is the log line, whatever writes it.
func TestListen(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		within       time.Duration
		url, err     string
	}{
		{"listens", `echo 'time=x level=INFO msg=listening url=http://127.0.0.1:4321' >&2; sleep 30`, time.Minute, "http://127.0.0.1:4321", ""},
		{"exits first", `echo 'no config here' >&2; exit 1`, time.Minute, "", "exited before it listened:\nno config here"},
		{"never listens", `echo 'starting' >&2; sleep 30`, 50 * time.Millisecond, "", "did not listen within 50ms:\nstarting"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("sh", "-c", tc.script)
			url, exited, err := Listen(cmd, filepath.Join(t.TempDir(), "serve.log"), tc.within)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Listen: %v, want an error holding %q", err, tc.err)
				}
				if cmd.ProcessState == nil {
					t.Fatal("the process was left running")
				}
				return
			}
			if err != nil || url != tc.url {
				t.Fatalf("Listen = %q, %v; want %q", url, err, tc.url)
			}
			_ = cmd.Process.Kill()
			<-exited
		})
	}
}

func TestMetrics(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, "# HELP x a counter\n# TYPE x counter\nllamacpp:prompt_tokens_total 812\n"+
			`system1_refusals_total{model="m",reason="a b"} 3`+"\nbad_sample notanumber\n")
	}))
	defer srv.Close()
	m, err := Metrics(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"llamacpp:prompt_tokens_total": 812, `system1_refusals_total{model="m",reason="a b"}`: 3}
	if len(m) != len(want) {
		t.Fatalf("Metrics = %v, want %v", m, want)
	}
	for k, v := range want {
		if m[k] != v {
			t.Fatalf("Metrics[%s] = %v, want %v (all: %v)", k, m[k], v, m)
		}
	}
	if _, err := Metrics(srv.URL + "/nowhere"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("a missing /metrics: %v, want an error naming the status", err)
	}
}
