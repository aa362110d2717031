// Command throughput measures how close system1 gets to an engine's own
// throughput with every slot busy, on row-wise work: the same questions
// over many states. Against a llama-server it runs six ways side by
// side, rotating their order every round, each over rows of its own (a
// nonce opens every state, so no way reuses another's prompt cache):
//
//	(a) engine  llama-server driven directly at its best: the exact
//	            requests system1 makes for those rows (captured once
//	            through a proxy), each prompt sent once, one worker per
//	            slot pinned to it, a row's questions one after another
//	            on its worker's slot
//	(b) run     system1 run --config over the rows, as a user runs it
//	(b2) together  the same with prompts_per_call at half the slots
//	(c) batch   POST /v1/systemone/batch, up to 64 states a call
//	(d) single  one POST /v1/systemone per row, as many in flight as
//	            the engine has slots
//	(d2) serial the same with spread_slots off: a row's questions one
//	            after another on its state's slot, with no priming task
//	            (on a GPU a task's own cost can outweigh a prefill)
//
// and reports, per way, the median over rounds of questions per second
// and of evaluated tokens per second (prompt tokens llama-server computed
// plus tokens it generated, from its /metrics), with each way's ratio to
// (a). With -fake-rows it then measures system1's own cost per row
// against the fake engine (an instant llama.cpp dialect): system1 run and
// the batch route over 10,000 and 100,000 rows, with each of
// -prompts-per-call, their CPU time per row and peak resident memory.
// Run it through bench/throughput.sh.
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"system1/internal/fakeengine"
	"system1/internal/procstat"
	"system1/internal/testbin"
)

// questions are the job's: a three-way choice and a yes/no, as a ticket
// triage asks them.
const questions = `{"dept":{"type":"choice","instructions":"Which team should handle this ticket?",` +
	`"criteria":{"billing":"payments, refunds, invoices","engineering":"bugs, outages, errors","success":"accounts, renewals, onboarding"}},` +
	`"urgent":{"type":"noul","instructions":"Does this ticket need an answer today?"}}`

// k is the number of questions.
const k = 2

// bodies are the tickets' texts, about 60 to 90 tokens each.
var bodies = []string{
	"I was charged twice for the March invoice and the second charge has not been refunded yet, although your agent promised it within five days. Please send the refund to the original card and confirm by email.",
	"Since this morning the dashboard shows an error 502 whenever we open the reports tab, and the export job that runs at noon failed with the same error. Twelve people on our team cannot work.",
	"We are renewing our contract next month and would like to add ten seats, move to annual billing, and have someone walk our new managers through the admin settings during onboarding.",
	"The mobile app crashes as soon as I tap the camera button on Android 14. I reinstalled it twice and cleared the cache. My colleague on iOS has no problem with the same account.",
	"Our account was suspended for a failed payment, but the bank says the payment went through on the 3rd. We need access restored today because our customers depend on the booking page.",
	"Could you tell me how to change the owner of our workspace? The previous owner left the company and nobody can change the plan or download the invoices any more.",
	"The API returns 429 Too Many Requests far below the limit in our plan. We send about ten requests a minute and get throttled after three. This started after your update on Tuesday.",
	"Hello, I just want to say thanks for the quick help last week. Also, is there a discount for non-profit organisations? We are a small charity and the price is a stretch for us.",
}

// state is row i's state in a way's run: a nonce, then a ticket.
func state(nonce string, i int) string {
	return fmt.Sprintf("[%s] Ticket %d from customer %d: %s", nonce, 10000+i, 700+7*i%97, bodies[i%len(bodies)])
}

func main() {
	bin := flag.String("system1", "bin/system1", "the system1 binary")
	llama := flag.String("llama", "", "llama-server's URL (started with --metrics); empty skips the engine's part")
	model := flag.String("model", "rand-qwen2", "the model id llama-server serves")
	rows := flag.Int("rows", 16, "rows per way and round")
	rounds := flag.Int("rounds", 3, "rounds, each running every way once")
	only := flag.String("ways", strings.Join(ways, ","), "the ways to run against llama-server, comma-separated (an older build: without together, which needs prompts_per_call)")
	fakeRows := flag.String("fake-rows", "", "row counts for the fake engine's part, comma-separated (10000,100000); empty skips it")
	fakeSlots := flag.Int("fake-slots", 8, "the fake engine's slots")
	fakeLatency := flag.Duration("fake-latency", 0, "how long the fake engine takes to answer a call (0: at once)")
	perCall := flag.String("prompts-per-call", "0", "the node's prompts_per_call in the fake engine's part, each measured in turn, comma-separated (0,32)")
	flag.Parse()
	chosen := strings.Split(*only, ",")
	for _, w := range chosen {
		if !slices.Contains(ways, w) {
			fail(fmt.Errorf("-ways: %q is none of %s", w, strings.Join(ways, ", ")))
		}
	}
	if !slices.Contains(chosen, "engine") {
		fail(errors.New("-ways: engine, the way the others are measured against, is missing"))
	}
	ways = slices.DeleteFunc(ways, func(w string) bool { return !slices.Contains(chosen, w) })
	dir, err := os.MkdirTemp("", "system1-throughput")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "questions.json"), []byte(`{"model":"`+*model+`","questions":`+questions+`}`), 0o644); err != nil {
		fail(err)
	}
	fmt.Printf("%s, load average %s\n", time.Now().UTC().Format(time.RFC3339), procstat.LoadAverage())
	if *llama != "" {
		if err := engine(*bin, *llama, *model, dir, *rows, *rounds); err != nil {
			fail(err)
		}
	}
	if *fakeRows != "" {
		counts, err := numbers("-fake-rows", *fakeRows, 1)
		if err != nil {
			fail(err)
		}
		pers, err := numbers("-prompts-per-call", *perCall, 0)
		if err != nil {
			fail(err)
		}
		if err := fake(*bin, dir, counts, *fakeSlots, *fakeLatency, pers); err != nil {
			fail(err)
		}
	}
	fmt.Printf("\nload average at the end %s\n", procstat.LoadAverage())
}

// numbers reads a flag's comma-separated list of numbers of at least least.
func numbers(flag, list string, least int) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < least {
			return nil, fmt.Errorf("%s: %q is not a number of at least %d", flag, f, least)
		}
		out = append(out, n)
	}
	return out, nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "throughput:", err)
	os.Exit(1)
}

// session opens every nonce of this run, so that no state is one that
// an earlier run left in the engine's prompt cache.
var session = strconv.FormatInt(time.Now().UnixNano()%(1<<24), 36)

// ways are the ways, in the order of the first round.
var ways = []string{"engine", "run", "together", "batch", "single", "serial"}

// measured is one way's run: the questions answered, the tokens the
// engine evaluated, and how long it took.
type measured struct {
	questions int
	tokens    float64
	wall      time.Duration
}

func (m measured) qps() float64 { return float64(m.questions) / m.wall.Seconds() }
func (m measured) tps() float64 { return m.tokens / m.wall.Seconds() }

// engine runs the ways against llama-server and prints the table.
func engine(bin, llama, model, dir string, rows, rounds int) error {
	slots, err := totalSlots(llama)
	if err != nil {
		return err
	}
	cfg, cfgTogether, cfgSerial := filepath.Join(dir, "engine.yaml"), filepath.Join(dir, "together.yaml"), filepath.Join(dir, "serial.yaml")
	// Half the slots a call: one call runs while the next gathers.
	per := max(2, slots/2)
	for _, c := range [][2]string{{cfg, ""}, {cfgTogether, fmt.Sprintf(", prompts_per_call: %d", per)}, {cfgSerial, ", spread_slots: false"}} {
		if err := writeConfig(c[0], llama, model, c[1]); err != nil {
			return err
		}
	}
	base, _, stop, err := testbin.Serve(bin, time.Minute, "--config", cfg, "--state-dir", filepath.Join(dir, "state-serve"))
	if err != nil {
		return err
	}
	defer stop()
	warm := []string{base}
	var serialBase string
	if slices.Contains(ways, "serial") {
		var stopSerial func()
		if serialBase, _, stopSerial, err = testbin.Serve(bin, time.Minute, "--config", cfgSerial, "--state-dir", filepath.Join(dir, "state-serial")); err != nil {
			return err
		}
		defer stopSerial()
		warm = append(warm, serialBase)
	}
	// The labels' tokens, the connections: what a warm server has.
	for _, b := range warm {
		if _, err := single(b, model, []string{state("warm", 0)}, 1); err != nil {
			return fmt.Errorf("warming up: %w", err)
		}
	}
	capture, err := captureRequests(bin, llama, model, dir, rows)
	if err != nil {
		return fmt.Errorf("capturing system1's requests: %w", err)
	}
	fmt.Printf("\nllama-server %s, model %s, %d slots; %d rows of %d questions per way and round, %d rounds\n",
		llama, model, slots, rows, k, rounds)
	got := map[string][]measured{}
	for r := range rounds {
		order := append(slices.Clone(ways[r%len(ways):]), ways[:r%len(ways)]...)
		for _, way := range order {
			nonce := fmt.Sprintf("%s-r%d-%s", session, r, way)
			states := make([]string, rows)
			for i := range states {
				states[i] = state(fmt.Sprintf("%s-%03d", nonce, i), i)
			}
			before, err := testbin.Metrics(llama)
			if err != nil {
				return fmt.Errorf("llama-server's counters (start it with --metrics): %w", err)
			}
			start := time.Now()
			var answered int
			switch way {
			case "engine":
				answered, err = direct(llama, capture, nonce, rows, slots)
			case "run":
				answered, err = run(bin, cfg, dir, states)
			case "together":
				answered, err = run(bin, cfgTogether, dir, states)
			case "batch":
				answered, err = batch(base, model, states, 1)
			case "single":
				answered, err = single(base, model, states, slots)
			case "serial":
				answered, err = single(serialBase, model, states, slots)
			}
			wall := time.Since(start)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r, way, err)
			}
			after, err := testbin.Metrics(llama)
			if err != nil {
				return err
			}
			m := measured{questions: answered * k, wall: wall,
				tokens: after["llamacpp:prompt_tokens_total"] - before["llamacpp:prompt_tokens_total"] +
					after["llamacpp:tokens_predicted_total"] - before["llamacpp:tokens_predicted_total"]}
			got[way] = append(got[way], m)
			fmt.Printf("  round %d %-6s %5.2f questions/s %7.1f tokens/s (%d rows answered, %.0f tokens, %.1f s)\n",
				r, way, m.qps(), m.tps(), answered, m.tokens, wall.Seconds())
		}
	}
	names := map[string]string{"engine": "(a) llama-server directly", "run": "(b) `system1 run --config`",
		"together": fmt.Sprintf("(b2) `system1 run --config`, prompts_per_call %d", per),
		"batch":    "(c) `POST /v1/systemone/batch`", "single": fmt.Sprintf("(d) `POST /v1/systemone`, %d in flight", slots),
		"serial": fmt.Sprintf("(d2) `POST /v1/systemone`, %d in flight, spread_slots off", slots)}
	a := median(got["engine"], measured.qps)
	fmt.Println()
	fmt.Println("| way | questions/s | of (a) | evaluated tokens/s | tokens per question |")
	fmt.Println("|---|---|---|---|---|")
	for _, way := range ways {
		q, t := median(got[way], measured.qps), median(got[way], measured.tps)
		fmt.Printf("| %s | %.2f | %.2f | %.0f | %.0f |\n", names[way], q, q/a, t, t/q)
	}
	return nil
}

// median is the median of f over ms.
func median(ms []measured, f func(measured) float64) float64 {
	v := make([]float64, len(ms))
	for i, m := range ms {
		v[i] = f(m)
	}
	return procstat.Median(v)
}

// writeConfig writes a configuration of one llama.cpp node, with the
// node's keys extra (", spread_slots: false") after its own; builds before
// a key need it left out.
func writeConfig(path, url, model, extra string) error {
	return os.WriteFile(path, fmt.Appendf(nil, `timeouts: {request: 300s, write: 310s}
nodes:
  - {name: llama, url: %q, dialect: llamacpp, models: [%s], timeout: 300s%s}
`, url, model, extra), 0o644)
}

// captured are the requests system1 made to llama-server for the rows of
// a capture run, per row: each distinct prompt once, with the most
// log-probabilities asked of it, the row's nonce in place to be replaced.
type captured map[int][]map[string]any

// captureNonce is the nonce of the capture run's row i.
func captureNonce(i int) string { return fmt.Sprintf("%s-cap-%03d", session, i) }

var captureRow = regexp.MustCompile(`\[[0-9a-z]+-cap-(\d{3})\]`)

// captureRequests runs the rows once through a system1 whose node is a
// proxy in front of llama-server, and keeps what it sent.
func captureRequests(bin, llama, model, dir string, rows int) (captured, error) {
	target, err := url.Parse(llama)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	got := captured{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions" {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var m map[string]any
			if json.Unmarshal(body, &m) == nil {
				if row := captureRow.FindStringSubmatch(string(body)); row != nil {
					i, _ := strconv.Atoi(row[1])
					mu.Lock()
					got[i] = keep(got[i], m)
					mu.Unlock()
				}
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	defer srv.Close()
	cfg := filepath.Join(dir, "capture.yaml")
	if err := writeConfig(cfg, srv.URL, model, ""); err != nil {
		return nil, err
	}
	base, _, stop, err := testbin.Serve(bin, time.Minute, "--config", cfg, "--state-dir", filepath.Join(dir, "state-capture"))
	if err != nil {
		return nil, err
	}
	defer stop()
	states := make([]string, rows)
	for i := range states {
		states[i] = state(captureNonce(i), i)
	}
	if _, err := single(base, model, states, 1); err != nil {
		return nil, err
	}
	for i := range rows {
		if len(got[i]) != k {
			return nil, fmt.Errorf("row %d: %d distinct prompts captured, want %d", i, len(got[i]), k)
		}
	}
	return got, nil
}

// keep adds request m to a row's: a prompt already there keeps the
// request asking for more log-probabilities (system1 asks again for more
// when labels are missing from the first answer).
func keep(reqs []map[string]any, m map[string]any) []map[string]any {
	key := fmt.Sprint(m["messages"])
	for i, r := range reqs {
		if fmt.Sprint(r["messages"]) == key {
			if num(m["top_logprobs"]) > num(r["top_logprobs"]) {
				reqs[i] = m
			}
			return reqs
		}
	}
	return append(reqs, m)
}

func num(v any) float64 {
	f, _ := v.(float64)
	return f
}

// direct replays the captured requests with the nonce of this run, one
// worker per slot, each pinned to its slot and asking its rows'
// questions one after another; it returns the rows answered.
func direct(llama string, c captured, nonce string, rows, slots int) (int, error) {
	return fanOut(rows, slots, func(w, i int) (int, error) {
		for _, m := range c[i] {
			m := maps.Clone(m)
			m["id_slot"] = w
			b, _ := json.Marshal(m)
			b = bytes.ReplaceAll(b, []byte("["+captureNonce(i)+"]"), []byte(fmt.Sprintf("[%s-%03d]", nonce, i)))
			if err := post(llama+"/v1/chat/completions", b, nil); err != nil {
				return 0, err
			}
		}
		return 1, nil
	})
}

// run writes the states as a rows file and runs system1 run over them;
// it returns the rows answered.
func run(bin, cfg, dir string, states []string) (int, error) {
	cmd, stderr, out, err := runCommand(bin, cfg, dir, filepath.Join(dir, "questions.json"), "", states)
	if err != nil {
		return 0, err
	}
	// Exit 3 is a run that wrote every row, some as error rows: the rows
	// answered are still the count.
	if err := cmd.Run(); err != nil && cmd.ProcessState.ExitCode() != 3 {
		return 0, fmt.Errorf("system1 run: %v\n%s", err, stderr.String())
	}
	return answeredLines(out)
}

// runCommand writes the states as a rows file in dir and returns a
// system1 run over them with the configuration cfg, its stderr kept, and
// the path of its answers; prefix starts the names of its files there.
func runCommand(bin, cfg, dir, questions, prefix string, states []string) (*exec.Cmd, *bytes.Buffer, string, error) {
	var rows bytes.Buffer
	for i, s := range states {
		st, _ := json.Marshal(s)
		fmt.Fprintf(&rows, `{"id":%d,"state":%s}`+"\n", i, st)
	}
	in, out := filepath.Join(dir, prefix+"rows.jsonl"), filepath.Join(dir, prefix+"answers.jsonl")
	if err := os.WriteFile(in, rows.Bytes(), 0o644); err != nil {
		return nil, nil, "", err
	}
	_ = os.Remove(out)
	cmd := exec.Command(bin, "run", "--config", cfg, "--state-dir", filepath.Join(dir, "state-"+prefix+"run"),
		"--questions", questions, "--in", in, "--out", out)
	stderr := new(bytes.Buffer)
	cmd.Stderr = stderr
	return cmd, stderr, out, nil
}

// answeredLines counts the answer lines (not error lines) of a run's
// output.
func answeredLines(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if !bytes.Contains(sc.Bytes(), []byte(`"error":`)) {
			n++
		}
	}
	return n, sc.Err()
}

// batch asks the states through the batch route, 64 a call, inFlight
// calls at once; it returns the states answered.
func batch(base, model string, states []string, inFlight int) (int, error) {
	chunks := slices.Collect(slices.Chunk(states, 64))
	return fanOut(len(chunks), inFlight, func(_, i int) (int, error) {
		ss, _ := json.Marshal(chunks[i])
		body := fmt.Sprintf(`{"model":%q,"states":%s,"questions":%s}`, model, ss, questions)
		var reply struct {
			Results []struct {
				Answers map[string]json.RawMessage `json:"answers"`
			} `json:"results"`
		}
		err := post(base+"/v1/systemone/batch", []byte(body), &reply)
		answered := 0
		for _, r := range reply.Results {
			if len(r.Answers) == k {
				answered++
			}
		}
		return answered, err
	})
}

// single asks each state in a POST /v1/systemone of its own, inFlight at
// once; it returns the states answered.
func single(base, model string, states []string, inFlight int) (int, error) {
	return fanOut(len(states), inFlight, func(_, i int) (int, error) {
		st, _ := json.Marshal(states[i])
		body := fmt.Sprintf(`{"model":%q,"state":%s,"questions":%s}`, model, st, questions)
		var reply struct {
			Answers map[string]json.RawMessage `json:"answers"`
		}
		err := post(base+"/v1/systemone", []byte(body), &reply)
		if err == nil && len(reply.Answers) == k {
			return 1, nil
		}
		return 0, err
	})
}

// fanOut calls ask on items 0 to n-1, by inFlight workers (ask is told
// which), and returns the sum of the states each call answered and the
// first error.
func fanOut(n, inFlight int, ask func(worker, item int) (int, error)) (int, error) {
	work := make(chan int)
	var mu sync.Mutex
	answered := 0
	var firstErr error
	var wg sync.WaitGroup
	for w := range inFlight {
		wg.Go(func() {
			for i := range work {
				got, err := ask(w, i)
				mu.Lock()
				answered += got
				firstErr = cmp.Or(firstErr, err)
				mu.Unlock()
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	return answered, firstErr
}

var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}, Timeout: 30 * time.Minute}

// post sends body and decodes a 200's reply into out (when not nil).
func post(u string, body []byte, out any) error {
	b, err := testbin.Post(client, u, bytes.NewReader(body))
	if err != nil || out == nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// totalSlots reads llama-server's slots from /props.
func totalSlots(llama string) (int, error) {
	b, err := testbin.Get(llama + "/props")
	if err != nil {
		return 0, err
	}
	var p struct {
		TotalSlots int `json:"total_slots"`
	}
	if err := json.Unmarshal(b, &p); err != nil || p.TotalSlots < 1 {
		return 0, fmt.Errorf("llama-server's /props gives no total_slots (%v)", err)
	}
	return p.TotalSlots, nil
}

// fake measures system1's own cost per row against the fake engine,
// which answers at once: system1 run's and the batch route's CPU time
// per row and peak resident memory, at each row count.
func fake(bin, dir string, counts []int, slots int, latency time.Duration, pers []int) error {
	eng := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Slots: slots, Behavior: fakeengine.Behavior{Latency: latency}})
	defer eng.Close()
	// The fake keeps every request it was sent; this run sends millions.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for t := time.NewTicker(time.Second); ctx.Err() == nil; <-t.C {
			eng.Reset()
		}
	}()
	// Each way runs with each prompts_per_call: 0 (the default) sends each
	// question in an engine call of its own.
	cfgs := map[int]string{}
	for _, per := range pers {
		cfgs[per] = filepath.Join(dir, fmt.Sprintf("fake-%d.yaml", per))
		extra := "" // the key left out, as builds before it need
		if per > 0 {
			extra = fmt.Sprintf(", prompts_per_call: %d", per)
		}
		if err := writeConfig(cfgs[per], eng.URL, fakeengine.DefaultModel, extra); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "questions.json"), []byte(`{"model":"`+fakeengine.DefaultModel+`","questions":`+questions+`}`), 0o644); err != nil {
		return err
	}
	fmt.Printf("\nsystem1's own cost against the fake engine (llama.cpp dialect, answering in %v, %d slots), %d questions a row, the decision log on\n\n", latency, slots, k)
	fmt.Println("| way | prompts_per_call | rows | rows/s | CPU per row (µs) | peak RSS (MiB) |")
	fmt.Println("|---|--:|---|---|---|---|")
	for _, n := range counts {
		for _, per := range pers {
			if err := fakeRows(bin, dir, cfgs[per], per, n); err != nil {
				return err
			}
		}
	}
	return nil
}

// fakeRows runs n rows through system1 run and the batch route, with the
// configuration at cfg, and prints their rows of the table.
func fakeRows(bin, dir, cfg string, per, n int) error {
	// Each configuration keeps a state folder of its own.
	dir = filepath.Join(dir, fmt.Sprintf("fake-%d", per))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	states := make([]string, n)
	for i := range states {
		states[i] = state(fmt.Sprintf("fake-%d", i), i)
	}
	cmd, stderr, out, err := runCommand(bin, cfg, dir, filepath.Join(filepath.Dir(dir), "questions.json"), "fake-", states)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("system1 run: %v", err)
	}
	runPeak := watchPeak(cmd.Process.Pid)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("system1 run: %v\n%s", err, stderr.String())
	}
	wall := time.Since(start)
	got, err := answeredLines(out)
	if err != nil || got != n {
		return fmt.Errorf("system1 run answered %d of %d rows (%v)\n%s", got, n, err, stderr.String())
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	fmt.Printf("| `system1 run --config` | %d | %d | %.0f | %.0f | %.1f |\n", per, n, float64(n)/wall.Seconds(),
		float64(cpu.Microseconds())/float64(n), runPeak())

	wall, cpu, peak, err := serveBatches(bin, cfg, dir, states)
	if err != nil {
		return err
	}
	fmt.Printf("| `POST /v1/systemone/batch` (system1 serve) | %d | %d | %.0f | %.0f | %.1f |\n", per, n, float64(n)/wall.Seconds(),
		float64(cpu.Microseconds())/float64(n), peak)
	return nil
}

// serveBatches starts system1 serve and asks the states through the batch
// route, 64 a call and 4 calls at once, returning how long that took,
// the CPU time serve spent on it and its peak resident memory (MiB).
func serveBatches(bin, cfg, dir string, states []string) (time.Duration, time.Duration, float64, error) {
	base, cmd, stop, err := testbin.Serve(bin, time.Minute, "--config", cfg, "--state-dir", filepath.Join(dir, "state-fake-serve"))
	if err != nil {
		return 0, 0, 0, err
	}
	defer stop()
	pid := cmd.Process.Pid
	if _, err := single(base, fakeengine.DefaultModel, states[:1], 1); err != nil {
		return 0, 0, 0, err
	}
	before, err := procstat.CPU(pid)
	if err != nil {
		return 0, 0, 0, err
	}
	start := time.Now()
	got, err := batch(base, fakeengine.DefaultModel, states, 4)
	wall := time.Since(start)
	if err != nil || got != len(states) {
		return 0, 0, 0, fmt.Errorf("the batch route answered %d of %d states (%v)", got, len(states), err)
	}
	after, err := procstat.CPU(pid)
	if err != nil {
		return 0, 0, 0, err
	}
	peak, err := procstat.Memory(pid, "VmHWM")
	return wall, after - before, procstat.MiB(peak), err
}

// watchPeak reads process pid's peak resident memory (VmHWM) every 20 ms
// until it exits or stop is called; stop, called once the process is
// reaped, returns the last read, in MiB. The child's own getrusage peak
// will not do: the child of a large parent (this program holds every
// row) inherits its peak through vfork and exec, which made a run of
// 100,000 rows seem to peak at 135 MiB where it held 45.
func watchPeak(pid int) (stop func() float64) {
	var (
		mu      sync.Mutex
		peak    float64
		stopped bool
	)
	go func() {
		for {
			mem, err := procstat.Memory(pid, "VmHWM")
			mu.Lock()
			if err != nil || stopped { // gone, or reaped and its pid free again
				mu.Unlock()
				return
			}
			peak = procstat.MiB(mem)
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		return peak
	}
}
