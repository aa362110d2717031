package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"system1/internal/calibration"
	"system1/internal/cases"
	"system1/internal/decision"
	"system1/internal/fakeengine"
	"system1/internal/systemone"
	"system1/internal/testbin"
)

// Headers of the server-side prediction sets: a later request asks for
// sets at a coverage with CoverageHeader, and a server that makes them
// answers SetsHeader (a server from before them sends none; the report
// says which it was).
const (
	CoverageHeader = "X-System1-Coverage"
	SetsHeader     = "X-System1-Sets"
)

// answer is one case as the server answered it.
type answer struct {
	Case      cases.Case
	RequestID string
	// Served is the distribution the server answered, Raw the engine's,
	// read back from the decision log after the run.
	Served, Raw decision.Distribution
	// Calibrated is the X-System1-Calibrated header.
	Calibrated bool
	// Version is the decision log's temperature step version ("" for
	// none): which fits revision calibrated the answer; Build the
	// fingerprint its record names.
	Version, Build string
	// Set is the server's prediction set (option indices), HasSet
	// whether it sent one.
	Set    []int
	HasSet bool
}

// prediction is the answer as a labelled case over dist.
func (a answer) prediction(dist decision.Distribution) calibration.Prediction {
	q := a.Case.Request.Questions[0]
	return calibration.Prediction{Kind: q.Kind, Dist: dist, Expected: a.Case.Expected[0], Options: len(q.Options), Request: a.RequestID}
}

// server is a running system1 serve.
type server struct {
	base    string
	cmd     *exec.Cmd
	exited  <-chan struct{}
	logPath string
	hc      *http.Client
}

// startServe runs bin serve with the configuration at cfg on a free
// loopback port, its state and log in dir, and waits until it listens.
func startServe(bin, cfg, dir string, concurrency int) (*server, error) {
	cmd := exec.Command(bin, "serve", "--config", cfg, "--listen", "127.0.0.1:0", "--state-dir", dir)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	logPath := filepath.Join(dir, "serve.log")
	base, exited, err := testbin.Listen(cmd, logPath, 30*time.Second)
	if err != nil {
		return nil, err
	}
	return &server{base: base, cmd: cmd, exited: exited, logPath: logPath,
		hc: &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: concurrency + 2}}}, nil
}

// waitBuild waits until the server's background probe has named the
// build of model (GET /health): an answer served before it names no
// build, and its outcome then counts toward no build's refit, so a first
// part of n answers would leave the refit short of min_outcomes n.
func (s *server) waitBuild(ctx context.Context, model string, within time.Duration) error {
	var health struct {
		Nodes []struct {
			Fingerprints []struct {
				Model string `json:"model"`
				ID    string `json:"fingerprint"`
			} `json:"fingerprints"`
		} `json:"nodes"`
	}
	deadline := time.Now().Add(within)
	for {
		_, body, err := s.call(ctx, http.MethodGet, "/health", nil, nil)
		if json.Unmarshal(body, &health) == nil { // a 503 while starting still says the nodes
			for _, n := range health.Nodes {
				for _, f := range n.Fingerprints {
					if f.Model == model && f.ID != "" {
						return nil
					}
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("GET /health named no build of %s within %s (last: %v %s):\n%s", model, within, err, head(body, 600), s.log())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.exited:
			return fmt.Errorf("system1 serve exited before it named a build:\n%s", s.log())
		case <-time.After(20 * time.Millisecond): // the probe is the server's own; nothing to wait on but its reply
		}
	}
}

// log is what the server has written to stderr so far.
func (s *server) log() []byte {
	b, _ := os.ReadFile(s.logPath)
	return b
}

// stop ends the server gracefully, so that its decision log writes what
// it has queued, and kills it if it has not exited within a minute.
func (s *server) stop() error {
	s.hc.CloseIdleConnections()
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.exited:
	case <-time.After(time.Minute):
		_ = s.cmd.Process.Kill()
		<-s.exited
		return errors.New("system1 serve did not stop within a minute of SIGINT; killed")
	}
	if code := s.cmd.ProcessState.ExitCode(); code != 0 {
		return fmt.Errorf("system1 serve exited %d:\n%s", code, s.notes(20))
	}
	return nil
}

// call sends a request and reads the whole reply; a status other than
// 200 is an error quoting the body.
func (s *server) call(ctx context.Context, method, path string, body []byte, header http.Header) (*http.Response, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, rd)
	if err != nil {
		return nil, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	maps.Copy(req.Header, header)
	resp, err := s.hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return resp, data, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, head(data, 600))
	}
	return resp, data, nil
}

// ask asks every case on /v1/systemone, concurrency at a time, and
// returns the answers in the cases' order. Any failed request fails the
// run: a benchmark over the answers that happened to come back would
// measure something else.
func (s *server) ask(ctx context.Context, cs []cases.Case, concurrency int, header http.Header) ([]answer, error) {
	out := make([]answer, len(cs))
	errs := make([]error, len(cs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for i := range next {
				out[i], errs[i] = s.askOne(ctx, cs[i], header)
			}
		})
	}
	for i := range cs {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("case %s: %w", cs[i].ID, err)
		}
	}
	return out, nil
}

func (s *server) askOne(ctx context.Context, c cases.Case, header http.Header) (answer, error) {
	req := c.Request
	req.Model = fakeengine.DefaultModel
	resp, body, err := s.call(ctx, http.MethodPost, "/v1/systemone", systemone.AppendRequest(nil, req), header)
	if err != nil {
		return answer{}, err
	}
	reply, err := systemone.ParseResponse(req, body)
	if err != nil {
		return answer{}, fmt.Errorf("reply: %w", err)
	}
	a := answer{Case: c, RequestID: resp.Header.Get(systemone.RequestIDHeader), Served: reply.Dists[0],
		Calibrated: resp.Header.Get("X-System1-Calibrated") == "true"}
	if a.RequestID == "" {
		return answer{}, errors.New("the reply has no request id")
	}
	if h := resp.Header.Get(SetsHeader); h != "" {
		q := req.Questions[0]
		if a.Set, a.HasSet, err = parseSets(h, q); err != nil {
			return answer{}, fmt.Errorf("%s: %w", SetsHeader, err)
		}
	}
	return a, nil
}

// parseSets reads the question's prediction set from SetsHeader, as the
// server writes it (internal/httpapi's SetsHeader): "q=key,key; q2=;
// q3 unavailable", the option keys of each question's set, an empty set
// as "q2=", and "unavailable" where the server has no set (too few
// outcomes for the coverage). A set too long to list by key is given by
// position, "q=mask:c8" (hex digits, one per four options in order, the
// first of each four the highest bit), as servers since issue 30 write
// it. It reports false for an unavailable set, and for one an older
// server cut to fit the header ("...").
func parseSets(h string, q decision.Question) ([]int, bool, error) {
	for item := range strings.SplitSeq(h, ";") {
		item = strings.TrimSpace(item)
		if id, ok := strings.CutSuffix(item, " unavailable"); ok {
			if id == q.ID {
				return nil, false, nil
			}
			continue
		}
		id, keys, ok := strings.Cut(item, "=")
		if !ok {
			return nil, false, fmt.Errorf("%q is not question=keys or question unavailable", item)
		}
		if id != q.ID {
			continue
		}
		if strings.HasSuffix(keys, "...") {
			return nil, false, nil // cut: too long for the header; not read
		}
		if mask, ok := strings.CutPrefix(keys, "mask:"); ok {
			set, err := maskSet(mask, len(q.Options))
			return set, err == nil, err
		}
		set := []int{}
		for k := range strings.SplitSeq(keys, ",") {
			if k = strings.TrimSpace(k); k == "" {
				continue
			}
			i := slices.IndexFunc(q.Options, func(o decision.Option) bool { return o.Key == k })
			if i < 0 {
				return nil, false, fmt.Errorf("%q is not an option of question %q", k, q.ID)
			}
			set = append(set, i)
		}
		slices.Sort(set)
		return slices.Compact(set), true, nil
	}
	return nil, false, fmt.Errorf("no set for question %q in %q", q.ID, h)
}

// maskSet reads a set given by position: hex digits, one per four
// options in order, the first of each four the highest bit.
func maskSet(mask string, n int) ([]int, error) {
	if len(mask) != (n+3)/4 {
		return nil, fmt.Errorf("mask %q has %d digits for %d options, want %d", mask, len(mask), n, (n+3)/4)
	}
	set := []int{}
	for j := range len(mask) {
		d, err := strconv.ParseUint(mask[j:j+1], 16, 8)
		if err != nil {
			return nil, fmt.Errorf("mask %q: %q is not a hex digit", mask, mask[j])
		}
		for b := range 4 {
			if d&(8>>b) == 0 {
				continue
			}
			if i := 4*j + b; i < n {
				set = append(set, i)
			} else {
				return nil, fmt.Errorf("mask %q names option %d of %d", mask, i+1, n)
			}
		}
	}
	return set, nil
}

// maxFeedback is the most outcomes sent in one /v1/feedback batch (the
// server takes up to 1,000).
const maxFeedback = 500

// feedback sends each answer's outcome on /v1/feedback.
func (s *server) feedback(ctx context.Context, as []answer) error {
	for chunk := range slices.Chunk(as, maxFeedback) {
		items := make([]map[string]string, len(chunk))
		for i, a := range chunk {
			q := a.Case.Request.Questions[0]
			items[i] = map[string]string{"request_id": a.RequestID, "question": q.ID, "outcome": q.Options[a.Case.Expected[0]].Key}
		}
		body, err := json.Marshal(map[string]any{"outcomes": items})
		if err != nil {
			return err
		}
		if _, _, err := s.call(ctx, http.MethodPost, "/v1/feedback", body, nil); err != nil {
			return err
		}
	}
	return nil
}

// serverReport is the part of GET /v1/calibration the benchmark reads.
type serverReport struct {
	FitVersion string `json:"fit_version"`
	Buckets    []struct {
		Model  string        `json:"model"`
		Kind   decision.Kind `json:"kind"`
		Bucket string        `json:"bucket"`
		Gate   struct {
			Threshold *float64 `json:"threshold"`
		} `json:"gate"`
	} `json:"buckets"`
}

// calibrationReport reads GET /v1/calibration over the last day at the
// target error.
func (s *server) calibrationReport(ctx context.Context, target float64) (serverReport, error) {
	var rep serverReport
	_, body, err := s.call(ctx, http.MethodGet, "/v1/calibration?window=1d&target_error="+strconv.FormatFloat(target, 'g', -1, 64), nil, nil)
	if err != nil {
		return rep, err
	}
	if err := json.Unmarshal(body, &rep); err != nil {
		return rep, fmt.Errorf("GET /v1/calibration: %w", err)
	}
	return rep, nil
}

// waitRefit waits until the server reports a fits revision other than
// before, or logs that it refused a refit over all n outcomes, or within
// passes. It returns the new revision ("" when refused) and why a refit
// was refused.
func (s *server) waitRefit(ctx context.Context, before string, n int, target float64, within time.Duration) (rev, why string, err error) {
	deadline := time.Now().Add(within)
	// The server's log line for a refit it refused over the n outcomes
	// (not one refused for too few).
	re := regexp.MustCompile(`msg="refit refused".* outcomes=` + strconv.Itoa(n) + ` .*why=("[^"]*"|\S+)`)
	for {
		rep, err := s.calibrationReport(ctx, target)
		if err != nil {
			return "", "", err
		}
		if rep.FitVersion != before {
			return rep.FitVersion, "", nil
		}
		if m := re.FindSubmatch(s.log()); m != nil {
			w := string(m[1])
			if u, err := strconv.Unquote(w); err == nil {
				w = u
			}
			return "", w, nil
		}
		if time.Now().After(deadline) {
			return "", "", fmt.Errorf("the server neither adopted nor refused a refit over the %d outcomes within %s "+
				"(GET /v1/calibration still reports fits revision %q; its log has no \"refit adopted\" or \"refit refused\" with outcomes=%d): "+
				"does this binary refit on calibration.refit_every? Its log, but for request lines, ends:\n%s", n, within, before, n, s.notes(20))
		}
		select {
		case <-s.exited:
			return "", "", fmt.Errorf("system1 serve exited while waiting for the refit:\n%s", s.notes(20))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// notes are the last n lines of the server's log that are not one
// request's line.
func (s *server) notes(n int) string {
	var out []string
	for line := range strings.Lines(string(s.log())) {
		if !strings.Contains(line, " msg=request ") {
			out = append(out, strings.TrimRight(line, "\n"))
		}
	}
	return strings.Join(out[max(len(out)-n, 0):], "\n")
}

// head is the first n bytes of b, as text.
func head(b []byte, n int) string {
	if len(b) > n {
		b = append(b[:n:n], "…"...)
	}
	return strings.TrimSpace(string(b))
}
