package fleet

import (
	"cmp"
	"context"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"system1/internal/config"
	"system1/internal/engine"
	"system1/internal/fingerprint"
	"system1/internal/redact"
)

// DefaultCanaryEvery is how often a (node, model)'s canary is asked again
// when the configuration does not say (fingerprint.canary_every).
const DefaultCanaryEvery = 10 * time.Minute

// FingerprintOptions configure how the router tells which build each
// node serves under each model name (docs/fingerprints.md).
type FingerprintOptions struct {
	// Off reads no identity and asks no canary: answers name no
	// fingerprint.
	Off bool
	// CanaryEvery is how often each (node, model)'s canary is asked
	// again; 0 is DefaultCanaryEvery.
	CanaryEvery time.Duration
	// Tolerance is how far the canary may move before the build counts as
	// changed, on a node that sets none of its own
	// (Node.FingerprintTolerance); 0 is fingerprint.DefaultTolerance.
	Tolerance float64
	// Log takes the line a change writes; nil is slog.Default().
	Log *slog.Logger
	// OnUse fingerprints the builds as requests use them, for the faces
	// that run no background probe (mcp, the command line), so that they
	// contact no node before they are asked: a request served by a build
	// never probed waits for its first probe (run beside its own engine
	// calls), and one served by a build last probed ProbeEvery ago or more
	// starts a new probe off its path.
	OnUse bool
	// ProbeEvery is how old a build's last probe may be before a request
	// using it probes it again, with OnUse; 0 is
	// config.DefaultProbeEvery.
	ProbeEvery time.Duration
	// Builds, when set, keeps the builds the router knows across
	// processes: loaded when the router is made, so that a reading
	// consistent with a build another process named takes its id, and
	// saved whenever a build is named or its noise first measured.
	Builds BuildStore
	// CheckEveryAnswers reads a (node, model)'s identity and canary again
	// once it has served this many answers since its last canary, off
	// the request path, so that a swap's uncertain window holds about
	// that many answers at most, not canary_every's worth; 0 never.
	CheckEveryAnswers int
	// NoiseTest holds canaries to the node's measured repeat noise too
	// (fingerprint.Tracker.NoiseTest); off, to the tolerance alone.
	NoiseTest bool
}

// UncertainRecorder keeps the windows in which a node may have served a
// model from either of two builds where every process's refits read
// them, such as the decision log (decisionlog.Log.RecordUncertain).
type UncertainRecorder interface {
	RecordUncertain(ctx context.Context, node, model string, from, to time.Time, was, now string) error
}

// uncertainWindow is a change of build's uncertain window: from the
// last canary that confirmed the old build to the probe that found it
// changed.
type uncertainWindow struct {
	node, model string
	from, to    time.Time
	was, now    string
}

// BuildStore keeps known builds (fingerprint.Build) where every process
// of a deployment reads them, such as a file beside the decision log.
type BuildStore interface {
	Load() ([]fingerprint.Build, error)
	Save([]fingerprint.Build) error
}

// FingerprintObserver is an Observer that is also told of the fingerprint
// probes, for metrics: the engine calls each canary reading cost, and
// each change of a served build.
type FingerprintObserver interface {
	Canary(node, model, outcome string, calls int)
	ModelChanged(node, model string)
}

// fingerprints is the router's state of the served builds, shared by
// every router Only makes of it.
type fingerprints struct {
	// FingerprintOptions are the router's, the defaults filled in; a nil
	// Builds keeps the builds named this process's alone.
	FingerprintOptions
	tracker *fingerprint.Tracker

	umu      sync.Mutex        // guards what follows
	recorder UncertainRecorder // nil: windows wait in pending
	pending  []uncertainWindow
}

func newFingerprints(o FingerprintOptions) *fingerprints {
	if o.Off {
		return nil
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	o.Tolerance = cmp.Or(max(o.Tolerance, 0), fingerprint.DefaultTolerance)
	o.CanaryEvery = cmp.Or(max(o.CanaryEvery, 0), DefaultCanaryEvery)
	o.ProbeEvery = cmp.Or(max(o.ProbeEvery, 0), config.DefaultProbeEvery)
	o.CheckEveryAnswers = max(o.CheckEveryAnswers, 0)
	fp := &fingerprints{FingerprintOptions: o, tracker: fingerprint.NewTracker()}
	fp.tracker.NoiseTest = o.NoiseTest
	if fp.Builds != nil {
		bs, err := fp.Builds.Load()
		if err != nil {
			fp.Log.Warn("the known builds could not be read: builds are named by this process's own readings", "err", err)
		}
		fp.tracker.Learn(bs)
	}
	return fp
}

// save writes the known builds when a build was named or its noise
// first measured since the last save.
func (fp *fingerprints) save() {
	if fp.Builds == nil {
		return
	}
	if bs, grown := fp.tracker.Builds(); grown {
		if err := fp.Builds.Save(bs); err != nil {
			fp.Log.Warn("the known builds could not be saved: other processes name them by their own readings", "err", err)
		}
	}
}

// RecordUncertainTo has the windows in which a node may have served a
// model from either of two builds (a swap's, between the last canary
// that confirmed the old build and the probe that found the new one)
// kept by u, those found before included, so that no process's refit
// takes their answers for either build. A router whose fingerprints are
// off finds none.
func (r *Router) RecordUncertainTo(u UncertainRecorder) {
	fp := r.prints
	if fp == nil || u == nil {
		return
	}
	fp.umu.Lock()
	fp.recorder = u
	pending := fp.pending
	fp.pending = nil
	fp.umu.Unlock()
	for _, w := range pending {
		fp.record(u, w)
	}
}

// uncertain keeps w with the recorder, or until there is one.
func (fp *fingerprints) uncertain(w uncertainWindow) {
	fp.Log.Info("the answers of a changed build's uncertain window are kept out of both builds' refits",
		"node", w.node, "model", w.model, "from", w.from, "to", w.to, "was", w.was, "now", w.now)
	fp.umu.Lock()
	u := fp.recorder
	if u == nil {
		fp.pending = append(fp.pending, w)
	}
	fp.umu.Unlock()
	if u != nil {
		fp.record(u, w)
	}
}

func (fp *fingerprints) record(u UncertainRecorder, w uncertainWindow) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := u.RecordUncertain(ctx, w.node, w.model, w.from, w.to, w.was, w.now); err != nil {
		fp.Log.Warn("a changed build's uncertain window could not be kept: its answers may refit either build", "node", w.node, "model", w.model, "err", err)
	}
}

// tolerance is what n's canary is held to, its builds' ids are taken
// with and its changes say: the node's own, else the router's.
func (fp *fingerprints) tolerance(n *Node) float64 {
	return cmp.Or(max(n.FingerprintTolerance, 0), fp.Tolerance)
}

// build is what a node knows of the build it serves under one model
// name; under the node's lock. Its Fingerprint is what the node's state
// shows of it, but for the Model, which is the builds' key.
type build struct {
	Fingerprint
	canaryAt  time.Time // the last canary read, successful or not
	answers   int       // served since canaryAt, for CheckEveryAnswers
	suspected time.Time // the last check Suspect started
}

// Fingerprint is what the fleet knows of the build one node serves under
// one model name: the one view /health, system1_health and the page show.
type Fingerprint struct {
	Model string `json:"model"`
	// ID is the build's fingerprint (fingerprint.Tracker.ID): what
	// answers served by it and fits learnt on it carry.
	ID    string    `json:"fingerprint" jsonschema:"The build's fingerprint: a hash of what the backend reports of the build (a digest, a model file and its metadata) and of its canary's answers. Answers it serves and calibration fits learnt on it carry it. Empty until it is first probed."`
	Since time.Time `json:"since,omitzero" jsonschema:"When this build was first seen: the first probe of the model on the node, or the probe that found the change to it."`
	// Probed is the last probe.
	Probed    time.Time `json:"probed,omitzero"`
	Confirmed time.Time `json:"confirmed,omitzero" jsonschema:"When the last canary read that found this build began: answers since may be another build's until the next read, and are kept out of both builds' refits if it finds a change."`
	Changes   int64     `json:"changes" jsonschema:"Times the build served under this name on this node changed since the process started (system1_model_changes_total)."`
	Change    string    `json:"change,omitempty" jsonschema:"What the last change was: the identity fields that differ, or how far the canary moved."`
	// Error is why the last probe could not read the identity or the
	// canary: the build is unknown that time, not changed.
	Error string `json:"error,omitempty"`
}

// served reports the build n serves under model now, as the background
// probes last saw it: its fingerprint ("" when it was not probed, or
// fingerprints are off) and since when.
func (n *Node) served(model string) (fingerprint string, since time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if b := n.buildLocked(model); b != nil {
		return b.ID, b.Since
	}
	return "", time.Time{}
}

// Fingerprint is the fingerprint of the build n serves under model (see
// served).
func (n *Node) Fingerprint(model string) string {
	id, _ := n.served(model)
	return id
}

// priorModel is model as the label priors key it: with the fingerprint
// of the build n serves under it, so that a content-free reading of one
// build is never divided out of another's answers.
func (n *Node) priorModel(model string) string {
	if id, _ := n.served(model); id != "" {
		return model + "\x00" + id
	}
	return model
}

// buildLocked is what n knows of the build it serves under model, read
// as the engine reads names (on Ollama "m" is "m:latest"); nil when it
// was not probed. The caller holds n.mu.
func (n *Node) buildLocked(model string) *build {
	if b := n.builds[model]; b != nil || n.Dialect != "ollama" {
		return b // only Ollama reads another name as this one
	}
	for m, b := range n.builds {
		if n.sameModel(m, model) {
			return b
		}
	}
	return nil
}

// fingerprintsLocked lists what n knows of its builds, by model; the
// caller holds n.mu.
func (n *Node) fingerprintsLocked() []Fingerprint {
	var out []Fingerprint
	for m, b := range n.builds {
		f := b.Fingerprint
		f.Model = m
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Model < out[j].Model })
	return out
}

// identifier is a backend that can read the identity of what it serves
// and ask it the canary.
type identifier interface {
	identity(ctx context.Context, model string) (fingerprint.Identity, error)
	canary(ctx context.Context, model string) (fingerprint.Reading, engine.CanaryUsage, error)
}

var (
	_ identifier = (*engineBackend)(nil)
	_ identifier = (*upstreamBackend)(nil)
)

func (b *engineBackend) identity(ctx context.Context, model string) (fingerprint.Identity, error) {
	if id, ok := b.e.(engine.Identifier); ok {
		return id.Identity(ctx, model)
	}
	return fingerprint.Identity{}, nil
}

func (b *engineBackend) canary(ctx context.Context, model string) (fingerprint.Reading, engine.CanaryUsage, error) {
	return engine.ReadCanary(ctx, b.e, model)
}

func (b *upstreamBackend) identity(ctx context.Context, model string) (fingerprint.Identity, error) {
	return b.c.Identity(ctx, model)
}

// canary asks an upstream the canary in one call through the node's
// gate. A question a Decisions endpoint refused has no distribution and
// is read as uninformative, as an engine's question whose labels the
// model ranked none of.
func (b *upstreamBackend) canary(ctx context.Context, model string) (fingerprint.Reading, engine.CanaryUsage, error) {
	var reply *forwarded
	err := engine.Call(ctx, func(ctx context.Context) (err error) {
		reply, err = b.send(ctx, fingerprint.Request(model))
		return err
	})
	if err != nil {
		return fingerprint.Reading{}, engine.CanaryUsage{Calls: 1}, err
	}
	use := engine.CanaryUsage{Calls: 1, InputTokens: reply.input, OutputTokens: reply.output}
	r, err := fingerprint.NewReading(reply.dists, reply.model)
	return r, use, err
}

// probeOnUse, on a router that fingerprints on use, starts a probe of the
// build n serves under model unless one is running, when no probe of it
// is known or the last is ProbeEvery old. It returns a channel closed when
// the probe of a build never probed is done, for the request to wait on;
// nil when the request need not wait. The probe is the background's
// (fingerprintModel), detached from the request: a caller who gives up
// does not end a probe other requests wait on.
func (r *Router) probeOnUse(n *Node, model string) <-chan struct{} {
	fp := r.prints
	b, ok := n.Backend.(identifier)
	if fp == nil || !fp.OnUse || !ok {
		return nil
	}
	model = n.listedName(model)
	now := r.now()
	n.mu.Lock()
	defer n.mu.Unlock()
	st := n.buildLocked(model)
	done := n.probing[model]
	if done == nil && (st == nil || now.Sub(st.Probed) >= fp.ProbeEvery) {
		done = r.startProbeLocked(n, b, model, false)
	}
	if st != nil {
		return nil
	}
	return done
}

// startProbeLocked probes the build n serves under model off the
// request path, its canary too when canary is set, and returns a channel
// closed when it is done. The caller holds n.mu and saw no probe of it
// running.
func (r *Router) startProbeLocked(n *Node, b identifier, model string, canary bool) chan struct{} {
	done := make(chan struct{})
	if n.probing == nil {
		n.probing = map[string]chan struct{}{}
	}
	n.probing[model] = done
	go func() {
		r.fingerprintModel(context.Background(), n, b, model, canary)
		n.mu.Lock()
		delete(n.probing, model)
		n.mu.Unlock()
		close(done)
	}()
	return done
}

// countServed counts k answers n served under model and, every
// CheckEveryAnswers of them since its last canary, reads its identity
// and canary again off the request path: a swap between two canaries is
// then found within about that many answers, which bounds the uncertain
// window kept out of the refits in answers, not only in time.
func (r *Router) countServed(n *Node, model string, k int) {
	fp := r.prints
	b, ok := n.Backend.(identifier)
	if fp == nil || fp.CheckEveryAnswers == 0 || k == 0 || !ok {
		return
	}
	model = n.listedName(model)
	n.mu.Lock()
	defer n.mu.Unlock()
	st := n.builds[model]
	if st == nil {
		return // never probed: its first probe reads the canary
	}
	st.answers += k
	if st.answers >= fp.CheckEveryAnswers && n.probing[model] == nil {
		r.startProbeLocked(n, b, model, true)
	}
}

// listedName is model as n's models name it, the name its builds are
// probed under: on Ollama "m" is listed as "m:latest".
func (n *Node) listedName(model string) string {
	for _, m := range n.Models() {
		if n.sameModel(m, model) {
			return m
		}
	}
	return model
}

// fingerprintNode probes the builds n serves under the names requests use
// (Models), one model after another: each model's identity (calls that run
// no model) at every probe, and its canary when it is first probed, every
// CanaryEvery, at once when its identity changed, and when the node came
// back from being down (back), since a swap needs a restart. The canary's calls go through the node's
// gate like any engine call (a slot each, the node's timeout), from the
// background probe, never a request's path. A change is logged, counted
// and shown in the node's state; fits learnt on the old build stop
// applying, since answers now carry the new fingerprint.
func (r *Router) fingerprintNode(ctx context.Context, n *Node, back bool) {
	b, ok := n.Backend.(identifier)
	if r.prints == nil || !ok {
		return
	}
	for _, m := range n.Models() {
		if ctx.Err() != nil {
			return
		}
		r.fingerprintModel(ctx, n, b, m, back)
	}
}

// Suspect reads again, off the request path, the identity and canary of
// every build a node serves under model, as when a drift alarm says the
// answers' raw distributions moved: a swap is then found without waiting
// for canary_every, and its uncertain window ends there. A build checked
// on suspicion less than notWithin ago, never probed, or being probed is
// left alone, so that an alarm that lasts reads each canary once. It
// returns how many checks it started.
func (r *Router) Suspect(model string, notWithin time.Duration) int {
	if r.prints == nil {
		return 0
	}
	now, started := r.now(), 0
	for _, n := range r.nodes {
		b, ok := n.Backend.(identifier)
		if !ok {
			continue
		}
		for _, m := range n.Models() {
			if !n.sameModel(m, model) {
				continue
			}
			n.mu.Lock()
			if st := n.builds[m]; st != nil && n.probing[m] == nil && (st.suspected.IsZero() || now.Sub(st.suspected) >= notWithin) {
				st.suspected = now
				r.startProbeLocked(n, b, m, true)
				started++
			}
			n.mu.Unlock()
		}
	}
	return started
}

// fingerprintModel probes the build n serves under model; its canary
// when due, or at once with back (the node came back from being down,
// the answers it served since the last canary reached CheckEveryAnswers,
// or Suspect).
func (r *Router) fingerprintModel(ctx context.Context, n *Node, b identifier, model string, back bool) {
	fp := r.prints
	k, tol := fingerprint.Key{Node: n.Name, Model: model}, fp.tolerance(n)
	var errs []string
	idCtx, cancel := context.WithTimeout(ctx, n.Timeout)
	id, err := b.identity(idCtx, model)
	cancel()
	if err != nil {
		id = fingerprint.Identity{} // unknown this time, not a change
		errs = append(errs, "identity: "+err.Error())
	}
	now := r.now()
	n.mu.Lock()
	st := n.builds[model]
	due := back || st == nil || now.Sub(st.canaryAt) >= fp.CanaryEvery
	n.mu.Unlock()
	p := fingerprint.Print{Identity: id}
	ref, seen := fp.tracker.Reference(k)
	if seen && fingerprint.Compare(ref, p, tol).Changed {
		due = true // a new identity's canary is read with it, so that the new reference has both
	}
	read := false // a canary was read: the build it finds is confirmed from now
	if due {
		reading, use, err := b.canary(engine.WithGate(ctx, gate{n: n}), model)
		outcome := "ok"
		if err != nil {
			outcome = "failed"
			errs = append(errs, "canary: "+err.Error())
		} else {
			p.Canary, read = reading, true
		}
		if o, ok := r.obs.(FingerprintObserver); ok {
			o.Canary(n.Name, model, outcome, use.Calls)
		}
	}
	if ctx.Err() != nil {
		return // a probe given up on says nothing of the build
	}
	c := fp.tracker.Observe(k, p, tol)
	n.mu.Lock()
	if n.builds == nil {
		n.builds = map[string]*build{}
	}
	if st = n.builds[model]; st == nil {
		st = &build{Fingerprint: Fingerprint{Since: now}}
		n.builds[model] = st
	}
	was, from := st.ID, cmp.Or(st.Confirmed, st.Since)
	st.ID, st.Probed, st.Error = fp.tracker.ID(k), now, strings.Join(errs, "; ")
	if due {
		st.canaryAt, st.answers = now, 0
	}
	if c.Changed {
		st.Since, st.Changes, st.Change = now, st.Changes+1, c.String()
		st.Confirmed = time.Time{}
	}
	if read {
		st.Confirmed = now
	}
	is := st.ID
	n.mu.Unlock()
	fp.save()
	if c.Changed {
		// Answers from the last canary that found the old build to now
		// may be either build's: both builds' refits leave them out.
		fp.uncertain(uncertainWindow{node: n.Name, model: model, from: from, to: r.now(), was: was, now: is})
		fp.Log.Warn("the build a node serves under a model name changed: fits learnt on the old build no longer apply to its answers",
			"node", n.Name, "model", model, "change", redact.Text(c.String()), "was", was, "now", is)
		if o, ok := r.obs.(FingerprintObserver); ok {
			o.ModelChanged(n.Name, model)
		}
	}
}
