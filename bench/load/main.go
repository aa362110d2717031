// Command load sends a bounded, open-loop load of mixed System One requests
// through system1 to a fake engine with a realistic latency, on loopback
// only, and reports errors, latency percentiles, and system1's goroutines
// and resident memory before, during and after the run (read from its own
// /metrics). Run it through bench/load.sh, which builds system1.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"system1/internal/fakeengine"
	"system1/internal/procstat"
	"system1/internal/testbin"
)

func main() {
	bin := flag.String("system1", "bin/system1", "the system1 binary")
	total := flag.Int("n", 10000, "requests to send")
	rate := flag.Float64("rate", 500, "requests per second")
	latency := flag.Duration("engine-latency", 100*time.Millisecond, "the fake engine's latency per call")
	limit := flag.Duration("limit", 2*time.Minute, "the most the run may take")
	flag.Parse()
	if err := run(*bin, *total, *rate, *latency, *limit); err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}

func run(bin string, total int, rate float64, latency, limit time.Duration) error {
	engine := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Behavior: fakeengine.Behavior{Latency: latency}})
	defer engine.Close()
	dir, err := os.MkdirTemp("", "system1-load")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`timeouts: {request: 30s}
nodes:
  - {name: fake, url: %q, dialect: llamacpp, models: [fake], max_inflight: 1024, queue: 4096}
`, engine.URL)), 0o600); err != nil {
		return err
	}
	base, _, stop, err := testbin.Serve(bin, 30*time.Second, "--config", cfg, "--state-dir", filepath.Join(dir, "state"))
	if err != nil {
		return err
	}
	defer stop()

	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: 2048, MaxIdleConnsPerHost: 2048}, Timeout: 60 * time.Second}
	before := sample(base)

	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var (
		mu        sync.Mutex
		latencies []time.Duration
		errs      = map[string]int{}
		peak      metrics
		wg        sync.WaitGroup
	)
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-t.C:
				m := sample(base)
				mu.Lock()
				peak.goroutines = max(peak.goroutines, m.goroutines)
				peak.rss = max(peak.rss, m.rss)
				mu.Unlock()
			}
		}
	}()
	rng := rand.New(rand.NewPCG(1, 2))
	bodies := make([][]byte, total)
	for i := range bodies {
		bodies[i] = body(rng, i)
	}
	start := time.Now()
	interval := time.Duration(float64(time.Second) / rate)
	sent := 0
	for ; sent < total && ctx.Err() == nil; sent++ {
		if d := time.Until(start.Add(time.Duration(sent) * interval)); d > 0 {
			time.Sleep(d)
		}
		b := bodies[sent]
		wg.Go(func() {
			t0 := time.Now()
			status, err := post(ctx, hc, base, b)
			d := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				errs[err.Error()]++
			case status != http.StatusOK:
				errs["status "+strconv.Itoa(status)]++
			default:
				latencies = append(latencies, d)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(stopSampling)
	<-sampled
	hc.CloseIdleConnections()
	time.Sleep(5 * time.Second)
	after := sample(base)
	// system1 keeps idle connections to the engine for reuse (two
	// goroutines each) until they have been idle for its 30 s timeout;
	// after that only the baseline should be left.
	idleAt := time.Now()
	idle := after
	for idle.goroutines > before.goroutines+5 && time.Since(idleAt) < 45*time.Second {
		time.Sleep(time.Second)
		idle = sample(base)
		hc.CloseIdleConnections()
	}

	slices.Sort(latencies)
	failed := 0
	for _, n := range errs {
		failed += n
	}
	fmt.Printf("load: %d requests sent at %.0f/s over %s (achieved %.0f/s), fake engine latency %s per call\n\n",
		sent, rate, elapsed.Round(time.Millisecond), float64(sent)/elapsed.Seconds(), latency)
	fmt.Printf("| ok | errors | p50 (ms) | p99 (ms) | max (ms) |\n|---|---|---|---|---|\n| %d | %d | %.1f | %.1f | %.1f |\n\n",
		len(latencies), failed, procstat.MS(pct(latencies, .50)), procstat.MS(pct(latencies, .99)), procstat.MS(pct(latencies, 1)))
	fmt.Printf("| system1 | before | during (peak) | 5 s after | %.0f s after (engine connections idle) |\n|---|---|---|---|---|\n", 5+time.Since(idleAt).Seconds())
	fmt.Printf("| goroutines | %d | %d | %d | %d |\n", before.goroutines, peak.goroutines, after.goroutines, idle.goroutines)
	fmt.Printf("| RSS (MiB) | %.1f | %.1f | %.1f | %.1f |\n", procstat.MiB(before.rss), procstat.MiB(peak.rss), procstat.MiB(after.rss), procstat.MiB(idle.rss))
	for e, n := range errs {
		fmt.Printf("error x%d: %s\n", n, e)
	}
	if failed > 0 || sent < total {
		return fmt.Errorf("%d of %d requests failed or were not sent", failed+total-sent, total)
	}
	return nil
}

// body makes one of a mix of requests: one to three questions of every
// kind over a state of varying length.
func body(rng *rand.Rand, i int) []byte {
	qs := []string{
		`"topic":{"type":"choice","instructions":"Which topic?","criteria":{"world":null,"sports":null,"business":null,"scitech":null}}`,
		`"urgent":{"type":"noul","instructions":"Is it urgent?"}`,
		`"mood":{"type":"score","criteria":["calm","annoyed","angry"]}`,
	}
	k := 1 + rng.IntN(3)
	state := fmt.Sprintf("Request %d. %s", i, strings.Repeat("The customer wrote in about an order. ", 1+rng.IntN(20)))
	return []byte(fmt.Sprintf(`{"model":"fake","state":%q,"questions":{%s}}`, state, strings.Join(qs[:k], ",")))
}

func post(ctx context.Context, hc *http.Client, base string, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/systemone", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, err
	}
	return resp.StatusCode, nil
}

type metrics struct {
	goroutines int
	rss        int64 // bytes
}

// sample reads system1's goroutine count and resident memory from its own
// Prometheus metrics.
func sample(base string) metrics {
	m, _ := testbin.Metrics(base)
	return metrics{goroutines: int(m["go_goroutines"]), rss: int64(m["process_resident_memory_bytes"])}
}

func pct(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[min(len(d)-1, int(q*float64(len(d))))]
}
