package testengine

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"system1/internal/testbin"
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
	bin string
	dir string
	env []string
	cmd *exec.Cmd
}

// OllamaConfig says how StartOllamaWith runs Ollama.
type OllamaConfig struct {
	// Parallel is OLLAMA_NUM_PARALLEL, the requests one model runs at
	// once; 0 is 1.
	Parallel int
}

// StartOllama runs the Ollama binary named by $SYSTEM1_OLLAMA (built by
// scripts/ollama.sh) on a free loopback port, with its own model store and
// home, until the test ends, and imports the shared tiny model as
// OllamaModel. Without the binary or the model the test skips with the
// reason, unless SYSTEM1_REQUIRE_OLLAMA=1, where it fails.
func StartOllama(t testing.TB) *Ollama {
	t.Helper()
	return StartOllamaWith(t, OllamaConfig{})
}

// StartOllamaWith is StartOllama as cfg says.
func StartOllamaWith(t testing.TB, cfg OllamaConfig) *Ollama {
	t.Helper()
	model := ModelPath()
	bin := testbin.Tool(t, "live Ollama", "SYSTEM1_OLLAMA", "scripts/ollama.sh", model)
	dir := t.TempDir()
	host := testbin.LoopbackAddr(t)
	o := &Ollama{URL: "http://" + host, Log: filepath.Join(dir, "ollama.log"), bin: bin, dir: dir}
	o.env = append(os.Environ(),
		"HOME="+filepath.Join(dir, "home"),
		"OLLAMA_HOST="+host,
		"OLLAMA_MODELS="+filepath.Join(dir, "models"),
		"OLLAMA_NUM_PARALLEL="+strconv.Itoa(max(cfg.Parallel, 1)),
		"OLLAMA_NOPRUNE=1",
	)
	for _, d := range []string{"home", "models"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(o.Stop)
	o.run(t)
	o.Create(t, OllamaModel, model)
	return o
}

// run starts `ollama serve` over o's store and waits until it answers.
func (o *Ollama) run(t testing.TB) {
	t.Helper()
	logf, err := os.OpenFile(o.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	o.cmd = exec.Command(o.bin, "serve")
	o.cmd.Env = o.env
	// Its own process group: ollama serve starts a runner process per
	// model, which Stop ends with it.
	o.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	launch(t, "ollama", o.cmd, logf, o.URL+"/api/version")
}

// Restart stops the server and starts it again on the same port and
// model store, as after an upgrade or a crash.
func (o *Ollama) Restart(t testing.TB) {
	t.Helper()
	o.Stop()
	o.run(t)
}

// Create imports the GGUF at path under name with `ollama create`,
// replacing whatever name was (a re-tag). The model has no chat template
// of its own, like stories260K: each message's text goes in as it is,
// the system message first, as the recorded replies were made.
func (o *Ollama) Create(t testing.TB, name, path string) {
	t.Helper()
	path, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	modelfile, err := os.CreateTemp(o.dir, "Modelfile-*")
	if err != nil {
		t.Fatal(err)
	}
	_, err = modelfile.WriteString("FROM " + path + "\nTEMPLATE \"\"\"{{- range .Messages }}{{ .Content }}\n{{ end }}\"\"\"\n")
	if cerr := modelfile.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	o.ollama(t, "create", name, "-f", modelfile.Name())
}

// Copy copies the model src to dst with `ollama cp`, replacing dst.
func (o *Ollama) Copy(t testing.TB, src, dst string) {
	t.Helper()
	o.ollama(t, "cp", src, dst)
}

// ollama runs the CLI against the server.
func (o *Ollama) ollama(t testing.TB, args ...string) {
	t.Helper()
	cmd := exec.Command(o.bin, args...)
	cmd.Env = o.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("ollama %v: %v\n%s", args, err, out.Bytes())
	}
}

// Stop kills the server and waits for it; stopping twice is fine.
func (o *Ollama) Stop() {
	if o.cmd == nil || o.cmd.ProcessState != nil || o.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-o.cmd.Process.Pid, syscall.SIGKILL)
	_ = o.cmd.Wait()
}
