package testengine

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// OllamaModel is the name the tiny model is imported under; Ollama lists
// it as OllamaModel + ":latest".
const OllamaModel = "stories"

// Ollama is a running `ollama serve` with the tiny model imported.
type Ollama struct {
	URL string
	// Log is the server's log file, which says when Ollama truncated a
	// prompt.
	Log string
	cmd *exec.Cmd
}

// StartOllama runs the Ollama binary named by $SYSTEM1_OLLAMA (built by
// scripts/ollama.sh) on a free loopback port, with its own model store and
// home, until the test ends, and imports the shared tiny model as
// OllamaModel. Without the binary or the model the test skips with the
// reason, unless SYSTEM1_REQUIRE_OLLAMA=1, where it fails.
func StartOllama(t testing.TB) *Ollama {
	t.Helper()
	bin, model := os.Getenv("SYSTEM1_OLLAMA"), ModelPath()
	missing := ""
	switch {
	case bin == "":
		missing = "SYSTEM1_OLLAMA is not set"
	default:
		for _, f := range []string{bin, model} {
			if _, err := os.Stat(f); err != nil {
				missing = err.Error()
			}
		}
	}
	if missing != "" {
		msg := fmt.Sprintf("live Ollama unavailable: %s (build it with scripts/ollama.sh and set SYSTEM1_OLLAMA to the path it prints)", missing)
		if os.Getenv("SYSTEM1_REQUIRE_OLLAMA") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	model, err := filepath.Abs(model)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	host := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	env := append(os.Environ(),
		"HOME="+filepath.Join(dir, "home"),
		"OLLAMA_HOST="+host,
		"OLLAMA_MODELS="+filepath.Join(dir, "models"),
		"OLLAMA_NUM_PARALLEL=1",
		"OLLAMA_NOPRUNE=1",
	)
	for _, d := range []string{"home", "models"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	logPath := filepath.Join(dir, "ollama.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve")
	cmd.Env, cmd.Stdout, cmd.Stderr = env, logf, logf
	// Its own process group: ollama serve starts a runner process per
	// model, which Stop ends with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	o := &Ollama{URL: "http://" + host, Log: logPath, cmd: cmd}
	t.Cleanup(o.Stop)
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(o.URL + "/api/version")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logPath)
			t.Fatalf("ollama did not answer in 60s:\n%s", log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// stories260K has no chat template: each message's text goes in as it
	// is, the system message first, as the recorded replies were made.
	modelfile := filepath.Join(dir, "Modelfile")
	if err := os.WriteFile(modelfile, []byte("FROM "+model+"\nTEMPLATE \"\"\"{{- range .Messages }}{{ .Content }}\n{{ end }}\"\"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	create := exec.Command(bin, "create", OllamaModel, "-f", modelfile)
	create.Env = env
	var out bytes.Buffer
	create.Stdout, create.Stderr = &out, &out
	if err := create.Run(); err != nil {
		t.Fatalf("ollama create %s: %v\n%s", OllamaModel, err, out.Bytes())
	}
	return o
}

// Logged reports whether the server's log holds s.
func (o *Ollama) Logged(t testing.TB, s string) bool {
	t.Helper()
	log, err := os.ReadFile(o.Log)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Contains(log, []byte(s))
}

// Stop kills the server and waits for it; stopping twice is fine.
func (o *Ollama) Stop() {
	if o.cmd.ProcessState != nil || o.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-o.cmd.Process.Pid, syscall.SIGKILL)
	_ = o.cmd.Wait()
}

// StartContext runs llama-server like Start but with a context of ctx
// tokens per slot, smaller than the model's, for tests of prompts that do
// not fit.
func StartContext(t testing.TB, slots, ctx int) *Server {
	t.Helper()
	return start(t, slots, ctx)
}
