// Package httpapi is system1's HTTP face: POST /v1/systemone, the System One
// wire that clients of TypeSafe's hosted Jev use with only the base URL
// changed; GET /v1/models; POST /v1/decide, the gateway's contract;
// health, liveness, readiness and metrics; with bearer keys, rate limits,
// body limits and one log line per request on every route.
package httpapi

import (
	"cmp"
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"system1/internal/answer"
	"system1/internal/decisionlog"
	"system1/internal/gateway"
	"system1/internal/metrics"
	"system1/internal/outcomes"
	"system1/internal/tracing"
)

// Options configure a Server.
type Options struct {
	// Answer is the answer path /v1/systemone calls (and whose fleet
	// /v1/models, /health and the request limits read), with the fits it
	// applies and the decision log it records in; required.
	Answer  *answer.Service
	Log     *slog.Logger
	Metrics *metrics.Metrics
	// Keys are the accepted bearer keys, with their names, scopes and
	// rates; none turns auth off.
	Keys []Key
	// RatePerSecond and Burst bound each key without a Rate of its own
	// (each client address when auth is off); 0 is unlimited.
	RatePerSecond float64
	Burst         int
	// Rounding is the decimals /v1/systemone reports; -1 is full precision.
	Rounding int
	// RequestTimeout bounds one request, every engine call included.
	RequestTimeout time.Duration
	// MaxBodyBytes bounds a request body.
	MaxBodyBytes int64
	// GuessesPerMinute and GuessBurst bound the wrong keys one client
	// address may present (a /64 for IPv6): past the burst it gets 429s,
	// whatever key it sends, until the allowance refills. Zero is the
	// default, DefaultGuessesPerMinute and DefaultGuessBurst.
	GuessesPerMinute float64
	GuessBurst       int
	// Feedback records the outcomes POST /v1/feedback reports; nil
	// answers every call that the log is off.
	Feedback *outcomes.Feedback
	// DecisionLog is what GET /v1/calibration reports on; nil answers
	// that the log is off.
	DecisionLog *decisionlog.Log
	// Tracker keeps the statistics GET /v1/calibration reports from;
	// nil with a DecisionLog makes one over it.
	Tracker *outcomes.Tracker
	// TargetError is the default target error of the gates GET
	// /v1/calibration suggests (0: outcomes.DefaultTargetError).
	TargetError float64
	// Drift are the windows and alarm of GET /v1/calibration's drift
	// entry; zero values are the defaults.
	Drift outcomes.DriftOptions
	// Loop is the server's learning loop, which GET /v1/calibration says
	// the state of (its loop); nil leaves that out.
	Loop *outcomes.LoopOptions
	// Decide is the gateway POST /v1/decide asks; nil leaves the route
	// out.
	Decide *gateway.Gateway
	// Ready says which conditions of readiness are not met, for GET
	// /readyz: none (an empty result) is ready. Nil is always ready.
	Ready func() []NotReady
	// Spend counts each key's spend in its budget's period; nil (or a
	// key it does not count) enforces no budget.
	Spend *decisionlog.Spend
	// Tracer traces each request (internal/tracing); nil traces
	// nothing.
	Tracer *tracing.Tracer
	// NoPage leaves out the page at /, /docs and /openapi.json: an API
	// alone.
	NoPage  bool
	Version string
}

// Server serves the HTTP API.
type Server struct {
	opt     Options
	keys    []key
	limiter *limiter
	guesses *limiter // wrong keys, per client address
	handler http.Handler
	table   []Route // what each route needs, as routes() registers them
}

// key is a configured key as the server keeps it: its digest, never the
// key itself, and the bucket that limits it.
type key struct {
	Key     // its Secret cleared
	digest  [sha256.Size]byte
	limiter *limiter
}

var _ http.Handler = (*Server)(nil)

// Defaults for Options left zero.
const (
	DefaultRequestTimeout = 30 * time.Second
	DefaultMaxBodyBytes   = 4 << 20
	// A client address may present 10 wrong keys at once, then one every
	// 6 seconds: no help to a guesser, no bother to a user who mistyped.
	DefaultGuessesPerMinute = 10
	DefaultGuessBurst       = 10
)

// New builds a server.
func New(opt Options) *Server {
	opt.RequestTimeout = cmp.Or(max(opt.RequestTimeout, 0), DefaultRequestTimeout)
	opt.MaxBodyBytes = cmp.Or(max(opt.MaxBodyBytes, 0), DefaultMaxBodyBytes)
	opt.GuessesPerMinute = cmp.Or(max(opt.GuessesPerMinute, 0), DefaultGuessesPerMinute)
	opt.GuessBurst = cmp.Or(max(opt.GuessBurst, 0), DefaultGuessBurst)
	opt.Log = cmp.Or(opt.Log, slog.New(slog.DiscardHandler))
	if opt.Metrics == nil {
		opt.Metrics = metrics.New()
	}
	if opt.Tracker == nil && opt.DecisionLog != nil {
		opt.Tracker = outcomes.NewTracker(opt.DecisionLog)
	}
	s := &Server{opt: opt, limiter: newLimiter(opt.RatePerSecond, opt.Burst),
		guesses: newLimiter(opt.GuessesPerMinute/60, opt.GuessBurst)}
	for _, k := range opt.Keys {
		lim := s.limiter
		if k.Rate != nil {
			lim = newLimiter(k.Rate.PerSecond, k.Rate.Burst)
		}
		digest := sha256.Sum256([]byte(k.Secret))
		k.Secret = ""
		s.keys = append(s.keys, key{Key: k, digest: digest, limiter: lim})
	}
	s.handler = s.routes()
	return s
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// AuthOn reports whether callers must present a key.
func (s *Server) AuthOn() bool { return len(s.keys) > 0 }

// authenticate returns the index of the caller's key, -1 for none or a
// wrong one. The token is read as HTTP defines it: the scheme "Bearer" in
// any case, then the token with only spaces and tabs trimmed (never other
// Unicode spaces, so that a token of U+00A0 is not an empty one). Keys are
// compared as SHA-256 digests in constant time, every key every time, so
// neither a key's content nor its length leaks through timing.
func (s *Server) authenticate(r *http.Request) int {
	token := presentedKey(r)
	if token == "" {
		return -1
	}
	sum := sha256.Sum256([]byte(token))
	found := -1
	for i, k := range s.keys {
		if subtle.ConstantTimeCompare(sum[:], k.digest[:]) == 1 {
			found = i
		}
	}
	return found
}

// presentedKey is the key a request offers: a Bearer token, else
// X-Api-Key's value; "" for none (another scheme's credentials, such as
// a proxy's Basic, offer none).
func presentedKey(r *http.Request) string {
	token, ok := bearer(r.Header.Get("Authorization"))
	if !ok {
		token = strings.Trim(r.Header.Get("X-Api-Key"), " \t") // Kev's proxy sends this
	}
	return token
}

// bearer reads an Authorization header of the Bearer scheme (RFC 6750;
// the scheme is case-insensitive, RFC 9110 section 11.1).
func bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.Trim(h, " \t"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.Trim(token, " \t"), true
}
