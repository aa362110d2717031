// Command questions measures what the number of questions in one request
// costs: the latency of POST /v1/systemone with 1, 10, 100 and 1,000
// choice questions of four options over one state, and system1's peak
// resident memory while it answers them, against the fake engine (an
// instant llama.cpp dialect) or a real llama-server (-llama: the URL of one
// serving the tiny model). Each count gets a fresh system1 process, so its
// peak (VmHWM) is that count's. It prints the table and the cost of one
// more question (the slope from 1 to 1,000). Run it through
// bench/questions.sh.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"system1/internal/fakeengine"
	"system1/internal/procstat"
	"system1/internal/testbin"
)

func main() {
	bin := flag.String("system1", "bin/system1", "the system1 binary")
	llama := flag.String("llama", "", "a llama-server's URL; empty: the fake engine")
	model := flag.String("model", fakeengine.DefaultModel, "the model id")
	reps := flag.Int("reps", 5, "requests per count")
	flag.Parse()
	engine, dialect := *llama, "llamacpp"
	if engine == "" {
		f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp})
		defer f.Close()
		engine = f.URL
	}
	counts := []int{1, 10, 100, 1000}
	type row struct {
		p50    time.Duration
		peak   float64 // MiB
		before float64
	}
	rows := map[int]row{}
	for _, n := range counts {
		lat, before, peak, err := measure(*bin, engine, dialect, *model, n, *reps)
		if err != nil {
			fmt.Fprintln(os.Stderr, "questions:", err)
			os.Exit(1)
		}
		rows[n] = row{p50: lat, peak: peak, before: before}
	}
	name := "fake engine (llama.cpp dialect, instant)"
	if *llama != "" {
		name = "llama-server, model " + *model
	}
	fmt.Printf("%s, %d requests a count, choice questions of 4 options over one state\n\n", name, *reps)
	fmt.Println("| questions | p50 latency (ms) | per question (ms) | system1 peak RSS (MiB) | RSS at start (MiB) |")
	fmt.Println("|---|---|---|---|---|")
	for _, n := range counts {
		r := rows[n]
		fmt.Printf("| %d | %.1f | %.3f | %.1f | %.1f |\n", n, procstat.MS(r.p50), procstat.MS(r.p50)/float64(n), r.peak, r.before)
	}
	a, b := rows[1], rows[1000]
	fmt.Printf("\none more question: +%.3f ms, +%.1f KiB of peak RSS (the slope from 1 to 1,000)\n",
		procstat.MS(b.p50-a.p50)/999, (b.peak-a.peak)*1024/999)
}

// measure starts system1 over the engine, sends reps requests of n
// questions one after another, and returns their median latency and
// system1's resident memory before the first and at its peak.
func measure(bin, engine, dialect, model string, n, reps int) (time.Duration, float64, float64, error) {
	dir, err := os.MkdirTemp("", "system1-questions")
	if err != nil {
		return 0, 0, 0, err
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `timeouts: {request: 300s, write: 310s}
nodes:
  - {name: n, url: %q, dialect: %s, models: [%s], timeout: 60s}
`, engine, dialect, model), 0o600); err != nil {
		return 0, 0, 0, err
	}
	base, cmd, stop, err := testbin.Serve(bin, 30*time.Second, "--config", cfg, "--state-dir", filepath.Join(dir, "state"))
	if err != nil {
		return 0, 0, 0, err
	}
	defer stop()
	pid := cmd.Process.Pid
	if _, err := ask(base, body(model, 1, -1), 1); err != nil { // the labels' tokens, connections
		return 0, 0, 0, err
	}
	before, err := procstat.Memory(pid, "VmRSS")
	if err != nil {
		return 0, 0, 0, err
	}
	var lat []time.Duration
	for r := range reps {
		d, err := ask(base, body(model, n, r), n)
		if err != nil {
			return 0, 0, 0, err
		}
		lat = append(lat, d)
	}
	peak, err := procstat.Memory(pid, "VmHWM")
	slices.Sort(lat)
	return lat[len(lat)/2], procstat.MiB(before), procstat.MiB(peak), err
}

// body is n choice questions over a state that is new each time.
func body(model string, n, rep int) []byte {
	qs := map[string]any{}
	for i := range n {
		qs[fmt.Sprintf("q%04d", i)] = map[string]any{"type": "choice", "instructions": fmt.Sprintf("Which fits item %d best?", i),
			"criteria": map[string]any{"alpha": nil, "beta": nil, "gamma": nil, "delta": nil}}
	}
	b, _ := json.Marshal(map[string]any{"model": model, "state": fmt.Sprintf("Request %d of a run at %d: one short state.", rep, time.Now().UnixNano()), "questions": qs})
	return b
}

// ask posts one request of n questions and checks that every one was
// answered.
func ask(base string, b []byte, n int) (time.Duration, error) {
	start := time.Now()
	out, err := testbin.Post(http.DefaultClient, base+"/v1/systemone", bytes.NewReader(b))
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	var reply struct {
		Answers map[string]json.RawMessage `json:"answers"`
	}
	if err := json.Unmarshal(out, &reply); err != nil {
		return 0, err
	}
	if len(reply.Answers) != n {
		return 0, fmt.Errorf("%d answers for %d questions", len(reply.Answers), n)
	}
	return d, nil
}
