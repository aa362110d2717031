package httpapi

import (
	"slices"

	"system1/internal/decision"
	"system1/internal/decisionlog"
)

// A Scope is what a key may be allowed: the routes routes() registers
// under it.
type Scope string

// The scopes a key may hold (config.Scopes names the same, and a test
// holds the two together); a key written as a plain string holds them
// all.
const (
	ScopeDecide   Scope = "decide"   // both wires, decide, and their batches
	ScopeFeedback Scope = "feedback" // outcomes reported
	ScopeRead     Scope = "read"     // the reports of the decision log and the shadow rollouts
	ScopeAdmin    Scope = "admin"    // no route on the public listener yet: admin.listen is apart
)

// Scopes are every scope, in the order documented.
var Scopes = []Scope{ScopeDecide, ScopeFeedback, ScopeRead, ScopeAdmin}

// What a route needs besides the scopes: AnyKey is any configured key,
// whatever its scopes (the model list, which every client asks); Open
// is no key at all (probes, scrapes and the page).
const (
	AnyKey Scope = "any key"
	Open   Scope = "open"
)

// A Route is one route of the HTTP surface and what it needs.
type Route struct {
	Method, Path string
	Needs        Scope
}

// Routes are the server's routes with what each needs, in the order
// routes() registers them: the one table of scopes, which
// docs/http-api.md shows and its tests check.
func (s *Server) Routes() []Route { return slices.Clone(s.table) }

// Key is a bearer key callers may present.
type Key struct {
	// Name is what metrics and the log report the key by, never the key.
	Name   string
	Secret string
	// Scopes are the scopes it holds; nil is every scope.
	Scopes []Scope
	// Rate is its own token bucket in place of Options' rate; nil takes
	// Options'.
	Rate *Rate
	// Budget is what it may spend a period; nil is no limit.
	Budget *Budget
}

// Budget is a key's spending limit: USD a Per (in UTC), counted by
// Options.Spend from the answers' cost.
type Budget struct {
	USD decision.USD
	Per decisionlog.Period
}

// Rate is a token bucket: PerSecond 0 is unlimited.
type Rate struct {
	PerSecond float64
	Burst     int
}

// allows reports whether the key holds scope s, or s needs none.
func (k Key) allows(s Scope) bool {
	return s == AnyKey || s == Open || k.Scopes == nil || slices.Contains(k.Scopes, s)
}
