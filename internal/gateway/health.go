package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"system1/internal/calibration"
	"system1/internal/decision"
	"system1/internal/fleet"
)

// Health statuses.
const (
	HealthOK       = "ok"       // the primary provider is up on every node that serves it
	HealthDegraded = "degraded" // the primary is up on only some of its nodes, or down with a fallback up
	HealthDown     = "down"     // no provider is up, or the configuration is broken
	HealthPaused   = "paused"   // turned off with system1 toggle off
)

// Provider roles.
const (
	RolePrimary  = "primary"
	RoleFallback = "fallback"
)

// Health is the gateway's health report (the MCP face's system1_health).
type Health struct {
	Status         string   `json:"status" jsonschema:"ok (the primary provider is up on every node that serves it), degraded (some of the primary's nodes are down and the others answer, or the primary is down and a fallback is up), down (no provider is up, or the configuration is broken) or paused (turned off by the user)."`
	Summary        string   `json:"summary" jsonschema:"The status in plain words."`
	GatewayVersion string   `json:"gateway_version"`
	SchemaVersion  string   `json:"schema_version"`
	Config         string   `json:"config" jsonschema:"The configuration file read."`
	ConfigErrors   []string `json:"config_errors" jsonschema:"Problems with the configuration; while there are any, decide answers config_error."`
	Paused         bool     `json:"paused"`
	StateFile      string   `json:"state_file" jsonschema:"The pause state file, read on every call."`
	Providers      []Probe  `json:"providers" jsonschema:"One probe per provider of the chain, in order. Probes send no user data."`
	// Nodes are the fleet's own view of each node, the same GET /health
	// shows, read after the probes have updated it.
	Nodes []fleet.State `json:"nodes" jsonschema:"The fleet's nodes, in configured order, after the probes: whether each is healthy (and if not, until when and why), its load, its errors, failovers and cooldowns, and whether it holds its constraint. GET /health shows the same."`
}

// Probe is one provider's health.
type Probe struct {
	Name      string `json:"name"`
	Kind      string `json:"kind"`
	Role      string `json:"role" jsonschema:"primary or fallback."`
	OK        bool   `json:"ok"`
	LatencyMS int64  `json:"latency_ms"`
	Detail    string `json:"detail"`
}

// Health probes every provider concurrently, each within its timeout.
func (g *Gateway) Health(ctx context.Context) *Health {
	h := &Health{GatewayVersion: g.opt.Version, SchemaVersion: SchemaVersion, Config: g.opt.ConfigPath,
		ConfigErrors: g.ConfigErrors(), StateFile: g.opt.StatePath, Providers: make([]Probe, len(g.links)), Nodes: []fleet.State{}}
	paused, stateErr := g.paused(g.log)
	h.Paused = paused
	var wg sync.WaitGroup
	down := make([][]string, len(g.links)) // each link's nodes that are down, with why
	for i, p := range g.links {
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, p.timeout)
			defer cancel()
			start := time.Now()
			ok, detail, d := p.probe(pctx)
			h.Providers[i] = Probe{Name: p.name, Kind: p.kind, Role: role(i), OK: ok, LatencyMS: since(start), Detail: detail}
			down[i] = d
		})
	}
	wg.Wait()
	var ignored []string
	if g.opt.Answer != nil {
		h.Nodes = g.opt.Answer.States()
		for _, s := range h.Nodes {
			if s.Constraint.State == fleet.ConstraintFailed {
				ignored = append(ignored, fmt.Sprintf("%s (%s)", s.Name, s.Constraint.Method))
			}
		}
	}
	var up []string
	for _, p := range h.Providers {
		if p.OK {
			up = append(up, p.Name)
		}
	}
	w := g.opt.Wording
	switch {
	case stateErr != nil:
		h.Status = HealthPaused
		h.Summary = "System 1 is paused: " + w.stateRepair(g.opt.StatePath, stateErr) + ". Until then " + w.decide() + " abstains without asking any model."
	case h.Paused:
		h.Status = HealthPaused
		off := ""
		if w.Off != "" {
			off = " (" + w.Off + ")"
		}
		h.Summary = "System 1 is paused by the user" + off + ": " + w.decide() + " abstains without asking any model until it is turned back on" + with(w.On) + "."
	case len(g.errs) > 0:
		h.Status = HealthDown
		h.Summary = "The configuration has errors, so " + w.decide() + " answers config_error: " + strings.Join(g.errs, "; ")
	case len(up) == 0:
		h.Status = HealthDown
		h.Summary = "No provider is up; " + w.decide() + " will answer with an error until one is."
	case h.Providers[0].OK && len(down[0]) > 0:
		h.Status = HealthDegraded
		h.Summary = fmt.Sprintf("The primary provider %s is up, but not on every node (down: %s); the others answer for it.", h.Providers[0].Name, strings.Join(down[0], ", "))
	case h.Providers[0].OK:
		h.Status = HealthOK
		h.Summary = fmt.Sprintf("The primary provider %s is up.", h.Providers[0].Name)
	default:
		h.Status = HealthDegraded
		h.Summary = fmt.Sprintf("The primary provider %s is down; decisions come from the fallback (up: %s).", h.Providers[0].Name, strings.Join(up, ", "))
	}
	if len(ignored) > 0 {
		h.Summary += fmt.Sprintf(" Warning: node %s ignores its constraint: its answers are read as before it, from its top log-probabilities, so options outside them get no probability; set constrain to the method its engine honours (vLLM >= 0.12: structured_outputs).",
			strings.Join(ignored, ", "))
	}
	return h
}

func role(i int) string {
	if i == 0 {
		return RolePrimary
	}
	return RoleFallback
}

// Capabilities describe the gateway (the MCP face's system1_capabilities).
type Capabilities struct {
	GatewayVersion string          `json:"gateway_version"`
	SchemaVersion  string          `json:"schema_version"`
	Tools          []string        `json:"tools" jsonschema:"The tools this server lists."`
	Config         string          `json:"config" jsonschema:"The configuration file read."`
	ConfigErrors   []string        `json:"config_errors"`
	Paused         bool            `json:"paused"`
	Threshold      float64         `json:"threshold" jsonschema:"The default minimum confidence; a request's min_confidence overrides it."`
	TimeoutMS      int64           `json:"timeout_ms" jsonschema:"The default per-attempt timeout, in milliseconds."`
	DeadlineMS     int64           `json:"deadline_ms" jsonschema:"The overall deadline of one call, in milliseconds."`
	Providers      []ProviderInfo  `json:"providers" jsonschema:"The provider chain, in order."`
	ProviderKinds  []KindInfo      `json:"provider_kinds" jsonschema:"The provider kinds this gateway knows, with what each declares it can do."`
	Calibration    Calibration     `json:"calibration"`
	Models         []ModelInfo     `json:"models" jsonschema:"Every model the nodes serve, every alias whose target is served and every cascade whose stages are, with what it can be asked on POST /v1/systemone (POST /v1/decisions names a noul predicate and caps 400 questions and 255 choices)."`
	RequestSchema  json.RawMessage `json:"request_schema" jsonschema:"The JSON Schema of a decide request."`
	ResponseSchema json.RawMessage `json:"response_schema" jsonschema:"The JSON Schema of a decide response."`
}

// ModelInfo is one model the fleet answers to and what it can be asked.
type ModelInfo struct {
	Model        string                `json:"model"`
	AliasOf      string                `json:"alias_of,omitempty" jsonschema:"The served model, for an alias."`
	Stages       []string              `json:"stages,omitempty" jsonschema:"For a cascade: its stages, asked in turn per question (docs/cascades.md)."`
	Capabilities decision.Capabilities `json:"capabilities"`
}

// Calibration describes the fits loaded.
type Calibration struct {
	File string `json:"file" jsonschema:"The fits file, or empty when none is configured."`
	Fits []Fit  `json:"fits" jsonschema:"The fits loaded, each applied as its calibrator says to the answers of its provider or model, kind, option-count bucket and build."`
}

// Fit is one loaded fit.
type Fit struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
	Kind     string `json:"kind" jsonschema:"choice (options given) or noul (yes/no)."`
	Bucket   string `json:"bucket" jsonschema:"The option-count bucket."`
	// Fingerprint is the build the fit was learnt on; empty for a fit
	// of every build.
	Fingerprint string  `json:"fingerprint,omitempty" jsonschema:"The build of the model the fit was learnt on, whose answers alone it calibrates; absent for a fit of every build."`
	Temperature float64 `json:"temperature"`
	// Calibrator names what the fit applies, as an answer's calibration
	// step does (calibration.Calibrator's String).
	Calibrator string `json:"calibrator" jsonschema:"What the fit applies, as a decide answer's calibration step names it: T=1.2 (a temperature, p_i proportional to p_i^(1/T)), T=1.2/level (a score's, keeping its expected level), T=1.2/b=+0.31,-0.12 (a temperature and a bias per option position), any of them then /map= (a confidence map), or none (a fit kept for its prediction sets, which calibrates nothing)."`
	N          int    `json:"n" jsonschema:"Cases it was fitted on."`
	// Gate is the fit's suggested gate, nil when it has none.
	Gate *float64 `json:"gate,omitempty" jsonschema:"The confidence gate suggested with the fit from its held-out outcomes: decide grades its answers against it. Absent when the fit has none (decide grades by the threshold)."`
}

// Capabilities describes the gateway. Tools is left empty for the face to
// fill.
func (g *Gateway) Capabilities(ctx context.Context) *Capabilities {
	c := &Capabilities{GatewayVersion: g.opt.Version, SchemaVersion: SchemaVersion, Tools: []string{}, Config: g.opt.ConfigPath,
		ConfigErrors: g.ConfigErrors(), Threshold: g.threshold, TimeoutMS: g.timeout.Milliseconds(), DeadlineMS: g.deadline.Milliseconds(),
		Providers: make([]ProviderInfo, len(g.links)), ProviderKinds: Kinds,
		Calibration:   Calibration{File: g.fitsPath, Fits: []Fit{}},
		RequestSchema: schemaJSON(RequestSchema()), ResponseSchema: schemaJSON(ResponseSchema())}
	c.Paused, _ = g.paused(g.log)
	c.Models = []ModelInfo{}
	if g.opt.Answer != nil {
		for _, m := range g.opt.Answer.Models() {
			if m.Limits != nil {
				c.Models = append(c.Models, ModelInfo{Model: m.ID, AliasOf: m.AliasOf, Stages: m.Stages, Capabilities: m.Limits.Capabilities(decision.KindName)})
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	for i, p := range g.links {
		c.Providers[i] = p.info(ctx)
		c.Providers[i].Role = role(i)
	}
	if fits := g.fits(); fits != nil {
		for _, f := range fits.Fits {
			ft := Fit{Provider: f.Provider, Model: f.Model, Kind: string(f.Kind), Bucket: f.Bucket, Fingerprint: f.Fingerprint,
				Temperature: f.Temperature, Calibrator: f.Calibrator().String(), N: f.N}
			if f.Gate != nil {
				ft.Gate = &f.Gate.Threshold
			}
			c.Calibration.Fits = append(c.Calibration.Fits, ft)
		}
	}
	return c
}

// fits are the fits the answer path applies now; nil when none are
// loaded.
func (g *Gateway) fits() *calibration.Fits {
	if g.opt.Answer == nil {
		return nil
	}
	return g.opt.Answer.Fits()
}
