package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"system1/internal/systemone"
)

// DefaultSystemOneMaxOptions is a systemone provider's option cap unless
// configured: hosted Jev's.
const DefaultSystemOneMaxOptions = 255

// systemOneProvider asks any System One endpoint.
type systemOneProvider struct {
	name, model, url string
	keyEnv           string
	key              string
	timeout          time.Duration
	maxOptions       int
	client           *systemone.Client
	http             *http.Client

	// After a 429 (or 529) the endpoint is not asked again until the
	// pause it asked for (Retry-After, at least a second) is over.
	mu         sync.Mutex
	coolUntil  time.Time
	coolReason string
}

func newSystemOneProvider(name, model, url, keyEnv, key string, timeout time.Duration, maxOptions int, hc *http.Client) *systemOneProvider {
	if maxOptions <= 0 {
		maxOptions = DefaultSystemOneMaxOptions
	}
	capturing := &http.Client{Transport: capture{base: hc.Transport}, Timeout: hc.Timeout}
	return &systemOneProvider{
		name: name, model: model, url: url, keyEnv: keyEnv, key: key, timeout: timeout, maxOptions: maxOptions,
		client: &systemone.Client{BaseURL: url, Key: key, HTTP: capturing},
		http:   hc,
	}
}

func (p *systemOneProvider) Name() string           { return p.name }
func (p *systemOneProvider) Kind() string           { return "systemone" }
func (p *systemOneProvider) Model() string          { return p.model }
func (p *systemOneProvider) Timeout() time.Duration { return p.timeout }

func (p *systemOneProvider) MaxOptions(context.Context) (int, error) { return p.maxOptions, nil }

// problem is why the provider cannot be asked at all, known without asking.
func (p *systemOneProvider) problem() string {
	if p.keyEnv != "" && p.key == "" {
		return fmt.Sprintf("its key variable %s is not set", p.keyEnv)
	}
	return ""
}

func (p *systemOneProvider) Ask(ctx context.Context, q Query) (Reading, error) {
	if pr := p.problem(); pr != "" {
		return Reading{}, &Failure{Outcome: OutcomeError, Err: errors.New(pr)}
	}
	if until, why := p.cooling(); why != "" {
		return Reading{}, &Failure{Outcome: OutcomeError, Err: fmt.Errorf("not asked: %s and asked to be left alone until %s", why, until.Format(time.RFC3339))}
	}
	req := q.Request(p.model)
	var body capturedBody
	reply, err := p.client.Ask(context.WithValue(ctx, captureKey{}, &body), req)
	if err != nil {
		var se *systemone.StatusError
		switch {
		case errors.As(err, &se):
			if se.Code == http.StatusTooManyRequests || se.Code == 529 {
				p.cool(max(se.RetryAfter, time.Second), fmt.Sprintf("it answered HTTP %d", se.Code))
			}
			return Reading{}, &Failure{Outcome: OutcomeError, Caller: se.CallerError(), Err: fmt.Errorf("HTTP %d: %s", se.Code, se.Message)}
		case errors.Is(err, systemone.ErrMalformed):
			return Reading{}, &Failure{Outcome: OutcomeMalformed, Err: err}
		}
		if ctx.Err() != nil {
			return Reading{}, &Failure{Outcome: OutcomeTimeout, Err: err}
		}
		return Reading{}, Classify(err)
	}
	r := Reading{Dist: reply.Dists[0], Model: reply.Model, Detail: "answered by model " + reply.Model}
	r.Abstain = endpointAbstained(body.data)
	return r, nil
}

// cool keeps the endpoint from being asked for d.
func (p *systemOneProvider) cool(d time.Duration, why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if until := time.Now().Add(d); until.After(p.coolUntil) {
		p.coolUntil, p.coolReason = until, why
	}
}

// cooling returns when the endpoint's pause ends and why it began; no
// reason when it is not paused.
func (p *systemOneProvider) cooling() (time.Time, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Now().Before(p.coolUntil) {
		return p.coolUntil, p.coolReason
	}
	return time.Time{}, ""
}

// endpointAbstained reads laya-serve's abstention gate from the raw reply:
// an answer marked "abstention": "abstained" or "low_confidence": true.
func endpointAbstained(body []byte) string {
	var top struct {
		Answers map[string]struct {
			Abstention    string   `json:"abstention"`
			LowConfidence bool     `json:"low_confidence"`
			Threshold     *float64 `json:"abstention_threshold"`
		} `json:"answers"`
	}
	if json.Unmarshal(body, &top) != nil {
		return ""
	}
	a, ok := top.Answers["decision"]
	if !ok || (a.Abstention != "abstained" && !a.LowConfidence) {
		return ""
	}
	if a.Threshold != nil {
		return fmt.Sprintf("the endpoint marked its answer abstained (its confidence was under its own threshold %v)", *a.Threshold)
	}
	return "the endpoint marked its answer abstained (low confidence)"
}

// Probe asks GET /health, then GET /v1/models: no user data is sent.
func (p *systemOneProvider) Probe(ctx context.Context) (bool, string) {
	if pr := p.problem(); pr != "" {
		return false, "not asked: " + pr
	}
	root := strings.TrimSuffix(strings.TrimRight(p.url, "/"), "/v1/systemone")
	var notes []string
	for _, path := range []string{"/health", "/v1/models"} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, root+path, nil)
		if err != nil {
			return false, err.Error()
		}
		if p.key != "" {
			req.Header.Set("Authorization", "Bearer "+p.key)
		}
		resp, err := p.http.Do(req)
		if err != nil {
			notes = append(notes, fmt.Sprintf("GET %s: %v", path, err))
			if ctx.Err() != nil {
				break
			}
			continue
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return true, fmt.Sprintf("GET %s: 200", path)
		}
		notes = append(notes, fmt.Sprintf("GET %s: HTTP %d", path, resp.StatusCode))
	}
	return false, strings.Join(notes, "; ")
}

func (p *systemOneProvider) Info(context.Context) ProviderInfo {
	info := ProviderInfo{Name: p.name, Kind: "systemone", Model: p.model, URL: p.url, TimeoutMS: p.timeout.Milliseconds(),
		Capabilities: Kinds[1].Capabilities, Problem: p.problem()}
	info.Capabilities.Note = ""
	info.Capabilities.MaxOptions = p.maxOptions
	return info
}

// capture keeps a copy of a successful reply's body for the request whose
// context carries a *capturedBody, so that fields the System One client
// does not read (laya-serve's abstention marks) can be read too.
type capture struct{ base http.RoundTripper }

type captureKey struct{}

type capturedBody struct{ data []byte }

// maxReply bounds the body kept, as the System One client bounds its read.
const maxReply = 8 << 20

func (c capture) RoundTrip(r *http.Request) (*http.Response, error) {
	base := c.base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	into, ok := r.Context().Value(captureKey{}).(*capturedBody)
	if !ok || resp.StatusCode != http.StatusOK {
		return resp, nil
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxReply))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	into.data = data
	resp.Body = io.NopCloser(bytes.NewReader(data))
	return resp, nil
}
