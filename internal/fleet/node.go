// Package fleet routes questions across engine nodes: it resolves a model
// id to the nodes that serve it, answers each question on the first node
// that can, fails over off nodes that refuse, time out or answer garbage,
// and cools failing nodes down.
package fleet

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"system1/internal/config"
	"system1/internal/engine"
	"system1/internal/engine/llamacpp"
	"system1/internal/engine/ollama"
	"system1/internal/engine/openai"
)

// DefaultLabels is how many labels one call reads on an openai node unless
// its config says otherwise: the 20 alternatives most APIs return.
const DefaultLabels = 20

// DefaultTimeout bounds one engine call unless the node's config says
// otherwise.
const DefaultTimeout = 30 * time.Second

// Node is one engine node.
type Node struct {
	Name    string
	Dialect string
	Engine  engine.Engine
	// MaxOptions caps the options of one question on this node.
	MaxOptions int
	Timeout    time.Duration

	claimed []string // models from the config; nil means discover them

	mu          sync.Mutex
	discovered  []string
	discoverErr error
	coolUntil   time.Time
	coolReason  string
	failures    []time.Time // recent failures, within the window
}

// NewNode builds a node from its configuration. getenv reads its key.
func NewNode(c config.Node, getenv func(string) string, hc *http.Client) (*Node, error) {
	key := ""
	if c.KeyEnv != "" {
		key = getenv(c.KeyEnv)
	}
	n := &Node{
		Name:       c.Name,
		Dialect:    c.Dialect,
		MaxOptions: c.MaxOptions,
		Timeout:    c.Timeout.Or(DefaultTimeout),
		claimed:    slices.Clone(c.Models),
	}
	if n.MaxOptions == 0 {
		n.MaxOptions = config.MaxOptions
	}
	switch c.Dialect {
	case "llamacpp":
		n.Engine = &llamacpp.Engine{BaseURL: c.URL, Key: key, HTTP: hc, PerCall: c.MaxLabels}
	case "ollama":
		n.Engine = &ollama.Engine{BaseURL: c.URL, Key: key, HTTP: hc}
	case "openai":
		labels := c.MaxLabels
		if labels == 0 {
			labels = DefaultLabels
		}
		n.Engine = &openai.Engine{BaseURL: c.URL, Key: key, HTTP: hc, Constrain: c.Constrain, TopLogprobs: labels}
	default:
		return nil, fmt.Errorf("node %s: dialect %q is not llamacpp, ollama or openai", c.Name, c.Dialect)
	}
	return n, nil
}

// Models are the models the node serves: those its config claims, else
// those it last listed.
func (n *Node) Models() []string {
	if n.claimed != nil {
		return n.claimed
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.discovered
}

// Serves reports whether the node serves model.
func (n *Node) Serves(model string) bool { return slices.Contains(n.Models(), model) }

// Discover refreshes the node's model list from the node itself, unless
// the config lists its models.
func (n *Node) Discover(ctx context.Context) error {
	if n.claimed != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, n.Timeout)
	defer cancel()
	models, err := n.Engine.Models(ctx)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.discoverErr = err
	if err == nil {
		n.discovered = models
	}
	return err
}

// State is a node's health as the router sees it.
type State struct {
	Name       string    `json:"name"`
	Dialect    string    `json:"dialect"`
	Models     []string  `json:"models"`
	Healthy    bool      `json:"healthy"`
	CoolUntil  time.Time `json:"cool_until,omitzero"`
	CoolReason string    `json:"cool_reason,omitempty"`
	Error      string    `json:"error,omitempty"` // last discovery error
}

// State reports the node's health at now.
func (n *Node) State(now time.Time) State {
	models := n.Models()
	n.mu.Lock()
	defer n.mu.Unlock()
	s := State{Name: n.Name, Dialect: n.Dialect, Models: models, Healthy: !now.Before(n.coolUntil)}
	if !s.Healthy {
		s.CoolUntil, s.CoolReason = n.coolUntil, n.coolReason
	}
	if n.discoverErr != nil {
		s.Error = n.discoverErr.Error()
	}
	return s
}

// FromConfig builds a router over the configured nodes. Engine calls share
// one HTTP client whose connections are kept alive per node; every call is
// bounded by its node's timeout.
func FromConfig(nodes []config.Node, aliases map[string]string, getenv func(string) string, obs Observer) (*Router, error) {
	hc := &http.Client{Transport: &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
	}}
	var ns []*Node
	for _, c := range nodes {
		n, err := NewNode(c, getenv, hc)
		if err != nil {
			return nil, err
		}
		ns = append(ns, n)
	}
	return NewRouter(ns, aliases, DefaultPolicy, obs), nil
}
