package scripts

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"

	"system1/internal/fakeengine"
	"system1/internal/testbin"
)

// standIn is the variable under which this test binary, run again, is a
// stand-in llama-server (standInLlamaServer) instead of the tests.
const standIn = "SYSTEM1_TEST_STAND_IN_LLAMA_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(standIn) == "1" {
		os.Exit(standInLlamaServer(os.Args[1:]))
	}
	testbin.Main(m)
}

// standInLlamaServer answers as llama-server does where scripts/run.sh
// and system1 serve reach it (the fake engine's llama.cpp dialect), on
// the --port run.sh gives it, serving the model under its -a alias, until
// run.sh stops it.
func standInLlamaServer(args []string) int {
	var port, alias string
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "--port":
			port = args[i+1]
		case "-a":
			alias = args[i+1]
		}
	}
	if port == "" || alias == "" {
		fmt.Fprintf(os.Stderr, "stand-in llama-server: no --port or -a in %q\n", args)
		return 2
	}
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{alias}})
	defer f.Close()
	u, err := url.Parse(f.URL)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv := &http.Server{Addr: "127.0.0.1:" + port, Handler: httputil.NewSingleHostReverseProxy(u)}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "stand-in llama-server:", err)
		return 1
	}
	return 0
}

// engine returns the llama-server for a whole run of run.sh and a model
// it serves: the real one when $SYSTEM1_LLAMA_SERVER names it (as
// scripts/test.sh does) with the project's tiny model, else this test
// binary as a stand-in with a file that starts like a GGUF.
func engine(t *testing.T) (server, model string) {
	t.Helper()
	if server = os.Getenv("SYSTEM1_LLAMA_SERVER"); server != "" {
		model, err := filepath.Abs(filepath.Join(repoRoot(t), "..", "shared", "models", "stories260K.gguf"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(model); err != nil {
			t.Skipf("no tiny model for the real engine: %v", err)
		}
		return server, model
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	server = filepath.Join(dir, "llama-server")
	script := fmt.Sprintf("#!/bin/sh\n%s=1 exec '%s' \"$@\"\n", standIn, exe)
	if err := os.WriteFile(server, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	model = filepath.Join(dir, "stand-in.gguf")
	if err := os.WriteFile(model, []byte("GGUF stand-in"), 0o644); err != nil {
		t.Fatal(err)
	}
	return server, model
}
