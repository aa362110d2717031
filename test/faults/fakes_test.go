package faults_test

import (
	"context"
	"math"
	"testing"
	"time"

	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/fakeengine"
)

// A target is where a row's fault is put: an engine node of one of
// fakeengine's dialects, or a System One endpoint (an upstream node of
// the fleet, a systemone provider of the gateway).
type target string

const (
	llamacpp  = target(fakeengine.LlamaCpp)
	openai    = target(fakeengine.OpenAI)
	ollama    = target(fakeengine.Ollama)
	systemOne = target("systemone")
	// systemOneNode is a System One endpoint configured as a fleet node
	// (dialect: systemone) behind an engine provider; systemOne, on the
	// gateway's rows, is the same endpoint as a systemone provider.
	systemOneNode = target("systemone-node")
)

var (
	engines    = []target{llamacpp, openai, ollama}
	everywhere = []target{llamacpp, openai, ollama, systemOne}
)

// Faults only a System One endpoint has, besides the engines'.
const (
	OutsideOptions = fakeengine.OutsideOptions
	Late           = fakeengine.Late
)

// upstream starts the fake System One endpoint behaving as b: the
// Halving distribution over each question's options, unrounded (4/7,
// 2/7, 1/7 for three options; a noul 2/3), so that system1 reports
// exactly what it reports over a fake engine, or b's fault.
func upstream(b fakeengine.Behavior) *fakeengine.SystemOne {
	r := fakeengine.Reply{Fault: b.Fault, Label: b.Label, Model: fakeModel, Dist: halving}
	if b.Fault == fakeengine.Status {
		r.Status, r.RetryAfter = b.Status, b.RetryAfter
	}
	return fakeengine.NewSystemOne(r)
}

// halving is fakeengine.Halving renormalised over n options, as system1
// reports it: 2^(n-1-i) / (2^n - 1).
func halving(n int) decision.Distribution {
	d := make(decision.Distribution, n)
	total := math.Exp2(float64(n)) - 1
	for i := range d {
		d[i] = math.Exp2(float64(n-1-i)) / total
	}
	return d
}

// A node is one fake, an engine or a System One endpoint, and system1's
// configuration of it.
type node struct {
	target target
	engine *fakeengine.Fake
	up     *fakeengine.SystemOne
	cfg    config.Node
}

// fakeModel is the model every node claims in its configuration.
const fakeModel = fakeengine.DefaultModel

// startNode starts a fake of the target's kind behaving as b, configured
// as claiming models (fakeModel when none), with the given timeout.
func startNode(t testing.TB, name string, tg target, b fakeengine.Behavior, timeout time.Duration, models ...string) *node {
	t.Helper()
	if len(models) == 0 {
		models = []string{fakeModel}
	}
	n := &node{target: tg}
	var url string
	dialect := string(tg)
	if tg == systemOne || tg == systemOneNode {
		dialect = "systemone"
		n.up = upstream(b)
		t.Cleanup(n.up.Close)
		url = n.up.URL
	} else {
		if b.Fault == Late { // an engine's late answer: its latency, past the node's timeout
			b = fakeengine.Behavior{Latency: time.Minute}
		}
		n.engine = fakeengine.New(fakeengine.Options{Dialect: fakeengine.Dialect(tg), Behavior: b})
		t.Cleanup(n.engine.Close)
		url = n.engine.URL
	}
	n.cfg = config.Node{Name: name, URL: url, Dialect: dialect, Models: models, Timeout: config.Duration(timeout)}
	return n
}

// calls counts the inference requests the node got: engine chat calls,
// or System One requests.
func (n *node) calls() int {
	if n.up != nil {
		return int(n.up.Calls.Load())
	}
	return len(n.engine.Inferences())
}

// arrived waits until the node has received its first inference request.
func (n *node) arrived(t testing.TB) {
	t.Helper()
	if n.up != nil {
		select {
		case <-n.up.Arrived:
		case <-time.After(10 * time.Second):
			t.Fatal("the upstream got no request")
		}
		return
	}
	// fakeengine signals nothing on arrival: poll its record.
	eventually(t, "the engine got a request", func() bool { return n.calls() > 0 })
}

// release lets a Late upstream answer (engines answer late by latency).
func (n *node) release() {
	if n.up != nil {
		n.up.Release()
	}
}

// waitIdle waits until the fake is handling no request.
func (n *node) waitIdle(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	if n.up != nil {
		err = n.up.WaitIdle(ctx)
	} else {
		err = n.engine.WaitIdle(ctx)
	}
	if err != nil {
		t.Fatalf("node %s is still handling a request: %v", n.cfg.Name, err)
	}
}

func (n *node) close() {
	if n.up != nil {
		n.up.Close()
	} else {
		n.engine.Close()
	}
}
