// Command overhead measures the latency system1 adds to one engine call.
//
// It starts a fast fake engine (internal/fakeengine) and the system1
// binary in front of it, finds the exact engine request system1 makes for
// a one-question POST /v1/systemone, and then, at a fixed rate, sends
// that request to the engine directly and the System One request to
// system1, interleaved over the same period so that both see the same
// machine. It prints p50, p90, p99 and requests per second for both, and
// the difference, from one run. An optional closed-loop phase then
// measures the most requests per second each path sustains.
//
// Usage (bench/overhead.sh builds the binary and runs this):
//
//	overhead -system1 bench/out/system1 [-rate 200] [-duration 10s]
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"system1/internal/fakeengine"
	"system1/internal/testbin"
)

func main() {
	bin := flag.String("system1", "", "the system1 binary (required)")
	rate := flag.Int("rate", 200, "requests per second to each target")
	duration := flag.Duration("duration", 10*time.Second, "how long to send at the fixed rate")
	dialect := flag.String("dialect", "llamacpp", "the fake engine's dialect: llamacpp, openai or ollama")
	latency := flag.Duration("engine-latency", 0, "how long the fake engine takes to answer")
	saturate := flag.Duration("saturate", 3*time.Second, "closed-loop phase per target to find the most requests per second; 0 skips it")
	workers := flag.Int("workers", 8, "concurrent clients in the closed-loop phase")
	control := flag.Bool("control", true, "also measure a bare reverse proxy in its own process, the least any gateway process adds")
	proxyTo := flag.String("proxy", "", "run as the bare reverse proxy to this URL (used by -control)")
	flag.Parse()
	if *proxyTo != "" {
		log.Fatal(testbin.ReverseProxy(*proxyTo))
	}
	if *bin == "" || *rate <= 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*bin, fakeengine.Dialect(*dialect), *rate, *duration, *latency, *saturate, *workers, *control); err != nil {
		log.Fatal(err)
	}
}

// question is one choice: one engine call per request.
const question = `{"model":"fake","state":"Ticket: I was charged twice for my subscription.","questions":{` +
	`"dept":{"type":"choice","instructions":"Which department?","criteria":{"billing":null,"technical":null,"sales":null}}}}`

// target is one way to get the answer.
type target struct {
	name string
	url  string
	body []byte
	hc   *http.Client
}

func (t target) call() (time.Duration, error) {
	start := time.Now()
	_, err := testbin.Post(t.hc, t.url, bytes.NewReader(t.body))
	return time.Since(start), err
}

func run(bin string, d fakeengine.Dialect, rate int, duration, latency, saturate time.Duration, workers int, control bool) error {
	fake := fakeengine.New(fakeengine.Options{Dialect: d, Behavior: fakeengine.Behavior{Latency: latency}})
	defer fake.Close()

	dir, err := os.MkdirTemp("", "system1-overhead-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "system1.yaml")
	conf := fmt.Sprintf("nodes:\n  - name: fake\n    url: %s\n    dialect: %s\n    models: [fake]\n", fake.URL, d)
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		return err
	}
	base, stop, err := serve(bin, cfg, dir)
	if err != nil {
		return err
	}
	defer stop()

	client := func() *http.Client {
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512}}
	}
	via := target{name: "system1", url: base + "/v1/systemone", body: []byte(question), hc: client()}
	if _, err := via.call(); err != nil {
		return fmt.Errorf("first request through system1: %w", err)
	}
	calls := fake.Inferences()
	if len(calls) == 0 {
		return errors.New("system1 made no engine call")
	}
	direct := target{name: "direct", url: fake.URL + d.InferencePath(), body: calls[len(calls)-1].Body, hc: client()}
	targets := []target{direct, via}
	if control {
		url, _, stop, err := testbin.StartReverseProxy(dir, "-proxy", fake.URL)
		if err != nil {
			return err
		}
		defer stop()
		targets = append(targets, target{name: "bare proxy", url: url + d.InferencePath(), body: direct.body, hc: client()})
	}
	for range 200 { // warm both paths: connections, caches, the runtime
		for _, t := range targets {
			if _, err := t.call(); err != nil {
				return err
			}
		}
	}
	fake.Reset()

	fmt.Printf("system1 overhead: %s fake engine (answers in %v), one question per request = one engine call\n", d, latency)
	fmt.Printf("%d CPUs, GOMAXPROCS %d, %s; fixed rate %d req/s to each target for %v, interleaved\n\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), rate, duration)
	res := fixedRate(targets, rate, duration)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "target\trequests\terrors\tp50\tp90\tp99\tmax\treq/s\t")
	for i, t := range targets {
		r := res[i]
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%.1f\t\n", t.name, len(r.lat), r.errs,
			ms(r.q(.5)), ms(r.q(.9)), ms(r.q(.99)), ms(r.q(1)), r.rps())
	}
	for i, t := range targets[1:] {
		r := res[i+1]
		fmt.Fprintf(w, "added by %s\t\t\t%s\t%s\t%s\t\t\t\n", t.name,
			ms(r.q(.5)-res[0].q(.5)), ms(r.q(.9)-res[0].q(.9)), ms(r.q(.99)-res[0].q(.99)))
	}
	w.Flush()
	fmt.Printf("\ntarget: under 0.300 ms added at p50 and 1.000 ms at p99\n")

	if saturate > 0 {
		fmt.Printf("\nclosed loop, %d concurrent clients for %v each:\n\n", workers, saturate)
		w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(w, "target\trequests\terrors\tp50\tp99\treq/s\t")
		for _, t := range targets {
			r := closedLoop(t, workers, saturate)
			fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\t%.0f\t\n", t.name, len(r.lat), r.errs, ms(r.q(.5)), ms(r.q(.99)), r.rps())
		}
		w.Flush()
	}
	return nil
}

// result is one target's latencies over a phase.
type result struct {
	lat         []time.Duration
	errs        int
	first, last time.Time // first send, last completion
}

func (r *result) q(p float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	slices.Sort(r.lat)
	return r.lat[int(p*float64(len(r.lat)-1))]
}

func (r *result) rps() float64 {
	if len(r.lat) == 0 {
		return 0
	}
	return float64(len(r.lat)) / r.last.Sub(r.first).Seconds()
}

func (r *result) add(start time.Time, d time.Duration, err error) {
	if err != nil {
		r.errs++
		return
	}
	if r.first.IsZero() || start.Before(r.first) {
		r.first = start
	}
	if end := start.Add(d); end.After(r.last) {
		r.last = end
	}
	r.lat = append(r.lat, d)
}

// fixedRate sends to the targets in turn, each at rate per second, on a
// schedule that does not wait for answers (an open loop), so a slow
// answer cannot slow the schedule down and hide itself.
func fixedRate(targets []target, rate int, duration time.Duration) []*result {
	res := make([]*result, len(targets))
	for i := range res {
		res[i] = &result{}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	every := time.Second / time.Duration(rate*len(targets))
	start := time.Now()
	for i := 0; ; i++ {
		at := start.Add(time.Duration(i) * every)
		if at.Sub(start) >= duration {
			break
		}
		time.Sleep(time.Until(at)) // pacing the schedule
		t, r := targets[i%len(targets)], res[i%len(targets)]
		wg.Go(func() {
			sent := time.Now()
			d, err := t.call()
			mu.Lock()
			r.add(sent, d, err)
			mu.Unlock()
		})
	}
	wg.Wait()
	return res
}

// closedLoop runs workers that each send as soon as their last answer
// came, for d.
func closedLoop(t target, workers int, d time.Duration) *result {
	r := &result{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var done atomic.Bool
	time.AfterFunc(d, func() { done.Store(true) })
	for range workers {
		wg.Go(func() {
			for !done.Load() {
				sent := time.Now()
				lat, err := t.call()
				mu.Lock()
				r.add(sent, lat, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return r
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d.Microseconds())/1000) }

// serve starts system1 serve on a free loopback port, its log in dir,
// returning its URL once it listens and a function that stops it.
func serve(bin, cfg, dir string) (string, func(), error) {
	cmd := exec.Command(bin, "serve", "--config", cfg, "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	base, exited, err := testbin.Listen(cmd, filepath.Join(dir, "system1.log"), 30*time.Second)
	if err != nil {
		return "", nil, err
	}
	return base, func() { _ = cmd.Process.Signal(os.Interrupt); <-exited }, nil
}
