// Command forward measures what system1 costs when it forwards
// POST /v1/systemone to a System One upstream (hosted Jev, laya-serve,
// another system1): an instant stand-in backend is called directly and
// through system1 (a node of dialect systemone), each by 16 closed-loop
// connections on loopback, and both rows are printed side by side from one
// run: throughput, p50 and p99, and system1's CPU time per request, read
// from /proc. Run it through bench/forward.sh, which builds system1.
package main

import (
	"bufio"
	"bytes"
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
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
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

func main() {
	bin := flag.String("system1", "bin/system1", "the system1 binary")
	conns := flag.Int("c", 16, "concurrent connections")
	duration := flag.Duration("duration", 5*time.Second, "how long each target is measured")
	flag.Parse()
	if err := run(*bin, *conns, *duration); err != nil {
		fmt.Fprintln(os.Stderr, "forward:", err)
		os.Exit(1)
	}
}

func run(bin string, conns int, duration time.Duration) error {
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
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`listen: 127.0.0.1:0
nodes:
  - {name: upstream, url: %q, dialect: systemone, models: [jev-stub], max_inflight: 256}
`, base)), 0o600); err != nil {
		return err
	}
	cmd := exec.Command(bin, "serve", "--config", cfg)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	front, err := listening(stderr)
	if err != nil {
		return err
	}
	go io.Copy(io.Discard, stderr)

	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns * 2}}
	// Warm both paths, and check that system1's answer is a real one.
	if body, err := post(hc, front+"/v1/systemone"); err != nil || !bytes.Contains(body, []byte(`"choice":"billing"`)) {
		return fmt.Errorf("system1 did not forward: %v %s", err, body)
	}
	direct := measure(hc, base+"/v1/systemone", conns, duration, nil)
	via := measure(hc, front+"/v1/systemone", conns, duration, func() float64 { return cpuSeconds(cmd.Process.Pid) })

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "target\trequests\terrors\treq/s\tp50\tp99\tsystem1 CPU per request\t\n")
	for _, r := range []result{direct, via} {
		cpu := "-"
		if r.cpu > 0 {
			cpu = fmt.Sprintf("%.3f ms", r.cpu*1000/float64(r.ok))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%.3f ms\t%.3f ms\t%s\t\n", r.name, r.ok, r.errors, float64(r.ok)/r.elapsed.Seconds(), ms(r.p50), ms(r.p99), cpu)
	}
	tw.Flush()
	fmt.Printf("\n%d connections, %s each, loopback; target: under 0.100 ms of system1 CPU per request\n", conns, duration)
	return nil
}

type result struct {
	name       string
	ok, errors int
	elapsed    time.Duration
	p50, p99   time.Duration
	cpu        float64 // CPU seconds system1 spent during the run
}

func measure(hc *http.Client, url string, conns int, d time.Duration, cpu func() float64) result {
	name := "direct"
	if cpu != nil {
		name = "via system1"
	}
	var before float64
	if cpu != nil {
		before = cpu()
	}
	var mu sync.Mutex
	var lat []time.Duration
	errs := 0
	start := time.Now()
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			var mine []time.Duration
			bad := 0
			for time.Since(start) < d {
				t := time.Now()
				if _, err := post(hc, url); err != nil {
					bad++
					continue
				}
				mine = append(mine, time.Since(t))
			}
			mu.Lock()
			lat = append(lat, mine...)
			errs += bad
			mu.Unlock()
		})
	}
	wg.Wait()
	r := result{name: name, ok: len(lat), errors: errs, elapsed: time.Since(start)}
	if cpu != nil {
		r.cpu = cpu() - before
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		r.p50, r.p99 = lat[len(lat)/2], lat[len(lat)*99/100]
	}
	return r
}

func post(hc *http.Client, url string) ([]byte, error) {
	resp, err := hc.Post(url, "application/json", strings.NewReader(request))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("status %d", resp.StatusCode)
	}
	return body, err
}

// cpuSeconds reads a process's user plus system CPU time from
// /proc/PID/stat, in clock ticks of 1/100 s.
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100
}

func listening(r io.Reader) (string, error) {
	sc := bufio.NewScanner(r)
	re := regexp.MustCompile(`url=(http://\S+)`)
	for sc.Scan() {
		if g := re.FindStringSubmatch(sc.Text()); g != nil {
			return g[1], nil
		}
	}
	return "", fmt.Errorf("system1 exited before listening")
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
