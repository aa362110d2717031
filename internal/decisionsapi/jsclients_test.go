package decisionsapi

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"system1/internal/decision"
)

// The official clients, run by test/js-decisions/decisions.test.mjs,
// against a server made of this package's server side alone: its parser,
// its answers and its errors, behind the routes, key and headers the HTTP
// face will give them. It needs node and `npm ci` in test/js-decisions;
// without them it is skipped, saying so.
func TestOfficialClients(t *testing.T) {
	dir, err := filepath.Abs("../../test/js-decisions")
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai")); err != nil {
		t.Skipf("the clients are not installed: run npm ci in %s", dir)
	}
	const key, model = "sk-system1-test", "tiny"
	// labelMass is what the fixture's engine puts on the labels; a caller
	// asking for more gets a refusal for every question.
	const labelMass = 0.9
	var requestID atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/decisions", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+key {
			writeError(w, Unauthorized("Incorrect API key provided."))
			return
		}
		body, _ := io.ReadAll(r.Body)
		p := ParseRequest(body)
		if e := p.Validate(decision.DefaultLimits()); e != nil {
			writeError(w, e)
			return
		}
		switch p.Model {
		case model:
		case "down":
			writeError(w, ServiceUnavailable("no node could answer", 0))
			return
		case "not-served":
			writeError(w, NotServed("the engine cannot serve decisions for this model"))
			return
		default:
			writeError(w, ModelNotFound(p.Model))
			return
		}
		res := Response{Model: model, Request: p, Refused: make([]bool, len(p.Questions)), Usage: Usage{InputTokens: 25 * len(p.Questions), OutputTokens: len(p.Questions)}}
		min, _ := strconv.ParseFloat(r.Header.Get("X-System1-Min-Label-Mass"), 64)
		for i, q := range p.Questions {
			// The engine's reading: the first option likelier than the rest.
			d := make(decision.Distribution, len(q.Options))
			d[0] = 0.64
			for j := 1; j < len(d); j++ {
				d[j] = 0.36 / float64(len(d)-1)
			}
			res.Dists = append(res.Dists, d)
			res.Refused[i] = labelMass < min
		}
		out, err := res.AppendJSON(nil)
		if err != nil {
			writeError(w, Internal(err.Error()))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(RequestIDHeader, "req_"+strconv.FormatInt(requestID.Add(1), 10))
		mux.ServeHTTP(w, r)
	}))
	defer srv.Close()
	// A server that takes one request and rate-limits the rest.
	var taken atomic.Bool
	limited := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(RequestIDHeader, "req_limited")
		if taken.Swap(true) {
			writeError(w, TooManyRequests("rate limit exceeded", 1500*time.Millisecond))
			return
		}
		mux.ServeHTTP(w, r)
	}))
	defer limited.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-concurrency=1", "decisions.test.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SYSTEM1_URL="+srv.URL, "SYSTEM1_MODEL="+model, "SYSTEM1_API_KEY="+key,
		"SYSTEM1_REFUSAL_HEADER=X-System1-Min-Label-Mass: 0.99", "SYSTEM1_DOWN_MODEL=down", "SYSTEM1_NOT_SERVED_MODEL=not-served",
		"SYSTEM1_LIMITED_URL="+limited.URL)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("node --test: %v\n%s", err, out)
	}
	for _, want := range []string{"# pass 11", "# fail 0", "# skipped 0"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("the clients' run does not say %q:\n%s", want, out)
		}
	}
}

func writeError(w http.ResponseWriter, e *Error) {
	e.SetHeaders(w.Header())
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_, _ = w.Write(e.AppendJSON(nil))
}
