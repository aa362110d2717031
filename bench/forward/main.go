// Command forward measures what system1 costs when it forwards
// POST /v1/systemone to a System One upstream (hosted Jev, laya-serve,
// another system1): an instant stand-in backend is called directly and
// through one or more system1 binaries (each a node of dialect systemone
// in front of the same backend), each by the same closed-loop connections
// on loopback, beside a bare Go reverse proxy (net/http/httputil, this
// program run again in its own process) as the reference: the least any
// gateway process adds. Targets take turns, round after round, the order
// rotated each round, so that the machine's other load falls on all of
// them alike. It prints every round's rows and then, per target, the
// median and the spread over rounds of the requests per second, p50 and
// p99, the latency added over the direct call of the same round, and the
// process's CPU time per request (user plus system, read from
// /proc/PID/stat), with the load average before and after; then the
// ratios of each round's figures to its references' in the same round
// (the first -system1 binary, the proxy, the direct call), which carry
// across machines and days where absolute times do not. With -profile it
// also takes a CPU profile of each binary, through its admin listener,
// during one more measurement of it. Run it through bench/forward.sh,
// which builds system1.
//
//	forward -system1 before=/tmp/system1-before -system1 after=bin/system1 -rounds 5
//	forward -system1 bin/system1 -system1 gogc400=bin/system1,GOGC=400
//	forward -system1 bin/system1 -cache 1024 # a cache hit over HTTP
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"system1/internal/procstat"
	"system1/internal/testbin"
)

// request asks one choice and one noul; reply is the stand-in's answer,
// which passes every client check system1 applies to an upstream.
const (
	request = `{"model":"jev-stub","state":"Ticket: I was charged twice for my subscription and want a refund.","questions":{` +
		`"dept":{"type":"choice","instructions":"Which department?","criteria":{"billing":null,"technical":null,"sales":null}},` +
		`"urgent":{"type":"noul","instructions":"Is it urgent?"}}}`
	reply = `{"model":"jev-stub","answers":{"dept":{"type":"choice","choice":"billing","confidence":0.82,` +
		`"probabilities":{"billing":0.88,"technical":0.12,"sales":0.0}},"urgent":{"type":"noul","noul":0.31}},` +
		`"usage":{"input_tokens":42,"output_tokens":2}}`
)

// binaries is the repeatable -system1 flag: NAME=PATH, or PATH named by
// its file name, then any environment variables for that process, each
// after a comma: after=bin/system1,GOGC=400.
type binaries []binary

type binary struct {
	name, path string
	env        []string
}

func (b *binaries) String() string { return fmt.Sprint(*b) }

func (b *binaries) Set(v string) error {
	parts := strings.Split(v, ",")
	name, path, ok := strings.Cut(parts[0], "=")
	if !ok {
		name, path = filepath.Base(parts[0]), parts[0]
	}
	if name == "" || name == "direct" || path == "" {
		return fmt.Errorf("want NAME=PATH or PATH, with a name other than direct: %q", v)
	}
	for _, e := range parts[1:] {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			return fmt.Errorf("%q: an environment variable is KEY=VALUE", e)
		}
	}
	*b = append(*b, binary{name, path, parts[1:]})
	return nil
}

func main() {
	var bins binaries
	flag.Var(&bins, "system1", "a system1 binary to measure, NAME=PATH or PATH, then ,KEY=VALUE for its environment; repeat it to compare binaries side by side (default bin/system1)")
	conns := flag.Int("c", 16, "concurrent connections")
	rate := flag.Float64("rate", 0, "requests per second over all connections (0: each connection sends its next request as soon as it has an answer)")
	duration := flag.Duration("duration", 5*time.Second, "how long each target is measured in each round")
	rounds := flag.Int("rounds", 1, "rounds: every target is measured once a round, in an order rotated each round")
	profile := flag.String("profile", "", "a folder: after the rounds, write NAME.pprof, a CPU profile of each system1 over one more measurement of it, and NAME.allocs.pprof, its allocations and heap in use after it")
	dlog := flag.String("decision-log", "on", "on: each system1 records every answer in its decision log, as serve does by default (SQLite in a temporary state folder); off: decision_log.off; both: each binary twice, NAME and NAME-nolog")
	cache := flag.Int("cache", 0, "cache.entries of each system1: with it on every request after a system1's first is a cache hit (this program asks the same request), so its CPU per request is a hit's over HTTP; 0: off")
	reference := flag.String("reference", "", "the system1 target the others' CPU per request is divided by, round by round (default the first)")
	proxyTo := flag.String("reverse-proxy-to", "", "run as the bare reverse proxy to this URL (how the proxy target is started)")
	flag.Parse()
	if *proxyTo != "" {
		if err := testbin.ReverseProxy(*proxyTo); err != nil {
			fmt.Fprintln(os.Stderr, "forward:", err)
			os.Exit(1)
		}
		return
	}
	if len(bins) == 0 {
		bins = binaries{{name: "system1", path: "bin/system1"}}
	}
	var logs []bool
	switch *dlog {
	case "on":
		logs = []bool{true}
	case "off":
		logs = []bool{false}
	case "both":
		logs = []bool{true, false}
	default:
		fmt.Fprintln(os.Stderr, "forward: -decision-log is on, off or both")
		os.Exit(2)
	}
	if err := run(bins, logs, *cache, load{*conns, *rate}, *duration, max(*rounds, 1), *profile, *reference); err != nil {
		fmt.Fprintln(os.Stderr, "forward:", err)
		os.Exit(1)
	}
}

// target is what the load is sent to: the backend itself, or a system1
// process in front of it.
type target struct {
	name  string
	url   string
	pid   int    // 0 for the backend, which runs in this process
	admin string // the admin listener's URL, with -profile
	bin   string // the system1 binary; "" for the backend and the proxy
}

// proxyName is the bare reverse proxy's target.
const proxyName = "proxy"

// load is how targets are asked: by conns connections, at most rate
// requests a second in all (0: closed loop, each connection at once).
type load struct {
	conns int
	rate  float64
}

func run(bins binaries, logs []bool, cache int, ld load, duration time.Duration, rounds int, profile, reference string) error {
	conns := ld.conns
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	backend := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/systemone":
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, reply)
		case "/v1/models":
			io.WriteString(w, `{"models":[{"name":"jev-stub","description":"","release_date":"2026-11-30"}]}`)
		default:
			http.NotFound(w, r)
		}
	})}
	go backend.Serve(ln)
	defer backend.Close()
	base := "http://" + ln.Addr().String()

	dir, err := os.MkdirTemp("", "system1-forward")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	targets := []target{{name: "direct", url: base + "/v1/systemone"}}
	pu, proxy, stop, err := testbin.StartReverseProxy(dir, "-reverse-proxy-to", base)
	if err != nil {
		return err
	}
	defer stop()
	targets = append(targets, target{name: proxyName, url: pu + "/v1/systemone", pid: proxy.Process.Pid})
	for i, b := range bins {
		for _, log := range logs {
			if !log && len(logs) > 1 {
				b.name += "-nolog"
			}
			state := filepath.Join(dir, fmt.Sprintf("%d-%t", i, log))
			t, stop, err := start(b, state, base, log, cache, profile != "")
			if err != nil {
				return fmt.Errorf("%s: %w", b.name, err)
			}
			defer stop()
			targets = append(targets, t)
		}
	}

	if reference == "" {
		reference = targets[2].name // the first system1
	}
	if !slices.ContainsFunc(targets, func(t target) bool { return t.bin != "" && t.name == reference }) {
		return fmt.Errorf("-reference %q is not one of the system1 targets", reference)
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns * 2, MaxIdleConns: conns * 2 * len(targets)}}
	// Warm every path, and check that each system1's answer is a real one.
	for _, t := range targets {
		if body, err := testbin.Post(hc, t.url, strings.NewReader(request)); err != nil || !bytes.Contains(body, []byte(`"choice":"billing"`)) {
			return fmt.Errorf("%s did not answer: %v %s", t.name, err, body)
		}
	}

	loadBefore := procstat.LoadAverage()
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "round\ttarget\trequests\terrors\treq/s\tp50\tp99\tadded p50\tadded p99\tCPU per request\t\n")
	all := make(map[string][]result)
	for round := range rounds {
		got := make(map[string]result)
		// Rotated each round: no target is always measured first, right
		// after another's load, or last.
		for k := range targets {
			t := targets[(k+round)%len(targets)]
			got[t.name] = measure(hc, t, ld, duration)
		}
		for _, t := range targets {
			r := got[t.name]
			r.addedP50, r.addedP99 = r.p50-got["direct"].p50, r.p99-got["direct"].p99
			all[t.name] = append(all[t.name], r)
			fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t\n", round+1, t.name, r.ok, r.errors, r.rate(),
				msf(r.p50), msf(r.p99), procCell(t, "%+.3f ms", procstat.MS(r.addedP50)), procCell(t, "%+.3f ms", procstat.MS(r.addedP99)),
				procCell(t, "%.3f ms", r.cpuPerRequest()*1000))
		}
	}
	tw.Flush()
	loadAfter := procstat.LoadAverage()

	fmt.Printf("\nover %d round(s): median [min, max]\n", rounds)
	tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "target\treq/s\tp50 (ms)\tp99 (ms)\tadded p50 (ms)\tadded p99 (ms)\tCPU per request (ms)\t\n")
	for _, t := range targets {
		rs := all[t.name]
		n := len(rs)
		cells := []string{
			spread(n, func(i int) float64 { return rs[i].rate() }, "%.0f"),
			spread(n, func(i int) float64 { return procstat.MS(rs[i].p50) }, "%.3f"),
			spread(n, func(i int) float64 { return procstat.MS(rs[i].p99) }, "%.3f"),
			"-", "-", "-",
		}
		if t.pid != 0 {
			cells[3] = spread(n, func(i int) float64 { return procstat.MS(rs[i].addedP50) }, "%+.3f")
			cells[4] = spread(n, func(i int) float64 { return procstat.MS(rs[i].addedP99) }, "%+.3f")
			cells[5] = spread(n, func(i int) float64 { return rs[i].cpuPerRequest() * 1000 }, "%.3f")
		}
		fmt.Fprintf(tw, "%s\t%s\t\n", t.name, strings.Join(cells, "\t"))
	}
	tw.Flush()
	ratios(targets, all, rounds, reference)
	// Each process's peak resident memory over all its rounds (VmHWM),
	// the figure issue 34 bounds under this load.
	fmt.Printf("\npeak RSS over the rounds:")
	for _, t := range targets {
		if t.pid != 0 {
			peak, _ := procstat.Memory(t.pid, "VmHWM")
			fmt.Printf(" %s %.1f MiB;", t.name, procstat.MiB(peak))
		}
	}
	fmt.Println()
	pace := "closed loop"
	if ld.rate > 0 {
		pace = fmt.Sprintf("at most %g requests/s", ld.rate)
	}
	fmt.Printf("\n%s, %d connections, %s, %s per target per round, loopback; load average (1, 5, 15 min) %s before, %s after\n",
		time.Now().UTC().Format(time.DateOnly), conns, pace, duration, loadBefore, loadAfter)

	if profile != "" {
		if err := os.MkdirAll(profile, 0o755); err != nil {
			return err
		}
		for _, t := range targets {
			if t.bin == "" {
				continue
			}
			path := filepath.Join(profile, t.name+".pprof")
			r, err := profileDuring(hc, t, ld, duration, path)
			if err != nil {
				return fmt.Errorf("profiling %s: %w", t.name, err)
			}
			fmt.Printf("CPU profile of %s over %d requests, %.3f ms of CPU each: %s (go tool pprof -top %s %s)\n",
				t.name, r.ok, r.cpuPerRequest()*1000, path, t.bin, path)
		}
	}
	return nil
}

// ratios prints, for each system1 target, the median and range over
// rounds of its figures divided by its references' in the same round:
// CPU per request against the reference system1 target's (ref, or the
// first) and the proxy's, req/s against the proxy's, and the latency
// added over the direct call less the proxy's. A round's ratio compares
// two targets measured seconds apart, under the same load.
func ratios(targets []target, all map[string][]result, rounds int, ref string) {
	proxy := all[proxyName]
	fmt.Printf("\nagainst the references of the same round, median [min, max] over %d round(s)\n", rounds)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "target\tCPU per request / %s's\tCPU per request / proxy's\treq/s / proxy's\tadded p50 over proxy's (ms)\t\n", ref)
	for _, t := range targets {
		if t.bin == "" {
			continue
		}
		rs, first := all[t.name], all[ref]
		n := len(rs)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", t.name,
			spread(n, func(i int) float64 { return rs[i].cpuPerRequest() / first[i].cpuPerRequest() }, "%.2f"),
			spread(n, func(i int) float64 { return rs[i].cpuPerRequest() / proxy[i].cpuPerRequest() }, "%.2f"),
			spread(n, func(i int) float64 { return rs[i].rate() / proxy[i].rate() }, "%.2f"),
			spread(n, func(i int) float64 { return procstat.MS(rs[i].addedP50 - proxy[i].addedP50) }, "%+.3f"))
	}
	tw.Flush()
}

// start runs one system1 serve in front of the backend at base, its
// config and state (the decision log, unless it is off) in the folder
// state, its decision cache of cache entries (0: off), with an admin
// listener when profiling, and returns it once it listens.
func start(b binary, state, base string, log bool, cache int, admin bool) (target, func(), error) {
	conf := fmt.Sprintf("listen: 127.0.0.1:0\nnodes:\n  - {name: upstream, url: %q, dialect: systemone, models: [jev-stub], max_inflight: 256}\n", base)
	if !log {
		conf += "decision_log: {off: true}\n"
	}
	if cache > 0 {
		conf += fmt.Sprintf("cache: {entries: %d}\n", cache)
	}
	if admin {
		conf += "admin: {listen: 127.0.0.2:0}\n"
	}
	if err := os.MkdirAll(state, 0o700); err != nil {
		return target{}, nil, err
	}
	cfg := filepath.Join(state, "config.yaml")
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		return target{}, nil, err
	}
	cmd := exec.Command(b.path, "serve", "--config", cfg, "--state-dir", state)
	cmd.Env = append(os.Environ(), b.env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return target{}, nil, err
	}
	if err := cmd.Start(); err != nil {
		return target{}, nil, err
	}
	stop := func() { cmd.Process.Kill(); cmd.Wait() }
	t := target{name: b.name, pid: cmd.Process.Pid, bin: b.path}
	sc := bufio.NewScanner(stderr)
	re := regexp.MustCompile(`msg="?(listening|admin listening)"? url=(http://\S+)`)
	for (t.url == "" || (admin && t.admin == "")) && sc.Scan() {
		switch g := re.FindStringSubmatch(sc.Text()); {
		case g == nil:
		case g[1] == "listening":
			t.url = g[2] + "/v1/systemone"
		default:
			t.admin = g[2]
		}
	}
	if t.url == "" || (admin && t.admin == "") {
		stop()
		return target{}, nil, errors.New("exited before listening")
	}
	go io.Copy(io.Discard, stderr) // the request log lines, written as in production
	return t, stop, nil
}

type result struct {
	ok, errors         int
	elapsed            time.Duration
	p50, p99           time.Duration
	addedP50, addedP99 time.Duration // over the direct call in the same round
	cpu                time.Duration // CPU system1 spent during the measurement
}

func (r result) rate() float64 { return float64(r.ok) / r.elapsed.Seconds() }

func (r result) cpuPerRequest() float64 {
	if r.ok == 0 {
		return 0
	}
	return r.cpu.Seconds() / float64(r.ok)
}

func measure(hc *http.Client, t target, ld load, d time.Duration) result {
	var before time.Duration
	if t.pid != 0 {
		before, _ = procstat.CPU(t.pid)
	}
	var pace <-chan time.Time // a request may go at each tick; ticks nobody takes are dropped
	if ld.rate > 0 {
		tick := time.NewTicker(time.Duration(float64(time.Second) / ld.rate))
		defer tick.Stop()
		pace = tick.C
	}
	var mu sync.Mutex
	var lat []time.Duration
	errs := 0
	start := time.Now()
	var wg sync.WaitGroup
	for range ld.conns {
		wg.Go(func() {
			var mine []time.Duration
			bad := 0
			for time.Since(start) < d {
				if pace != nil {
					<-pace
				}
				t0 := time.Now()
				if _, err := testbin.Post(hc, t.url, strings.NewReader(request)); err != nil {
					bad++
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			errs += bad
			mu.Unlock()
		})
	}
	wg.Wait()
	r := result{ok: len(lat), errors: errs, elapsed: time.Since(start)}
	if t.pid != 0 {
		after, _ := procstat.CPU(t.pid)
		r.cpu = after - before
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		r.p50, r.p99 = lat[len(lat)/2], lat[len(lat)*99/100]
	}
	return r
}

// profileDuring loads t for d while its admin listener takes a CPU
// profile of as many whole seconds, written to path, and returns the
// measurement, so that a profile's shares can be read per request.
func profileDuring(hc *http.Client, t target, ld load, d time.Duration, path string) (result, error) {
	secs := max(int(d.Seconds()), 1)
	type got struct {
		body []byte
		err  error
	}
	done := make(chan got, 1)
	go func() {
		b, err := testbin.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", t.admin, secs))
		done <- got{b, err}
	}()
	r := measure(hc, t, ld, time.Duration(secs)*time.Second+500*time.Millisecond)
	g := <-done
	if g.err != nil {
		return r, g.err
	}
	if err := os.WriteFile(path, g.body, 0o644); err != nil {
		return r, err
	}
	// The allocations since the process started and the heap in use at
	// the last collection, beside the CPU profile.
	b, err := testbin.Get(t.admin + "/debug/pprof/allocs")
	if err != nil {
		return r, err
	}
	return r, os.WriteFile(strings.TrimSuffix(path, ".pprof")+".allocs.pprof", b, 0o644)
}

// spread is the median of f over rounds 0 to n-1 and its range,
// "m [lo, hi]".
func spread(n int, f func(round int) float64, format string) string {
	v := make([]float64, n)
	for i := range v {
		v[i] = f(i)
	}
	slices.Sort(v)
	med := v[n/2]
	if n%2 == 0 {
		med = (v[n/2-1] + v[n/2]) / 2
	}
	if n == 1 {
		return fmt.Sprintf(format, med)
	}
	return fmt.Sprintf(format+" ["+format+", "+format+"]", med, v[0], v[n-1])
}

// procCell is v in format, or "-" for the backend, which is no process
// of its own.
func procCell(t target, format string, v float64) string {
	if t.pid == 0 {
		return "-"
	}
	return fmt.Sprintf(format, v)
}

func msf(d time.Duration) string { return fmt.Sprintf("%.3f ms", procstat.MS(d)) }
