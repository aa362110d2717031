package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"system1/internal/answer"
	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/decisionlog"
	"system1/internal/fleet"
	"system1/internal/gateway"
	"system1/internal/httpapi"
	"system1/internal/metrics"
	"system1/internal/outcomes"
	"system1/internal/pause"
)

// The metrics are told of the builds the fleet finds too: the fleet asks
// its observer for that at run time.
var _ fleet.FingerprintObserver = (*metrics.Metrics)(nil)

const serveUsage = `usage: system1 serve [flags]

Serves the HTTP API (POST /v1/systemone, /v1/decide, /v1/decisions, /v1/feedback and the rest of
docs/http-api.md), the page at / and /metrics on the configuration's listen address (default
127.0.0.1:3000) until SIGINT or SIGTERM, then drains the requests in flight.

exit status: 0 stopped and drained, 1 an error (the configuration, the listener) or requests still
in flight when the drain timed out, 2 usage.

flags:
`

// cmdServe is system1 serve: the configuration read, the face built over
// it, served until a signal, then drained.
func cmdServe(ctx context.Context, args []string, e env) error {
	fs := flags("serve", e, serveUsage)
	cfgFlag := fs.String("config", "", "configuration file "+configDefault)
	listen := fs.String("listen", "", "address to listen on, overriding the config's listen")
	stateDir := fs.String("state-dir", "", "folder of the pause state file and the decision log "+stateDirDefault)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := noArguments(fs, e); err != nil {
		return err
	}
	log := logger(e)
	keepGCFloor(e.getenv, serveFloor)
	cfg, err := serveConfig(ctx, configPath(*cfgFlag, e.getenv), *listen, log)
	if cfg == nil {
		return err // nil too when a signal stopped the reading
	}
	s, err := buildServe(ctx, cfg, *stateDir, e, log)
	if errors.Is(err, errStoppedStarting) {
		log.Info("stopped by a signal while starting", "request_id", "-")
		return nil
	}
	if err != nil {
		return err
	}
	// Closed after the drain: the requests in flight record their
	// answers and end their spans.
	defer s.close()
	return serveHTTP(ctx, cfg, s, log)
}

// serveConfig reads and checks the configuration serve runs on, with
// listen (the flag's, when set) and its default applied. A signal while
// it is read is no error: nil and nil.
func serveConfig(ctx context.Context, path, listen string, log *slog.Logger) (*config.Config, error) {
	log.Info("reading the configuration", "config", path)
	cfg, err := readConfig(ctx, path, ": serve needs one that lists the engines (nodes) to serve", (*config.Config).Check)
	if errors.Is(err, context.Canceled) {
		log.Info("stopped by a signal while reading the configuration")
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	cfg.Listen = cmp.Or(listen, cfg.Listen, config.DefaultListen)
	if cfg.Admin.Listen == cfg.Listen { // --listen's, which Check did not see
		return nil, fmt.Errorf("configuration %s: admin.listen: %s is the public listener's address (--listen); the admin listener needs its own", cfg.Path, cfg.Listen)
	}
	return cfg, nil
}

// errStoppedStarting is buildServe's end when a signal came before it
// was done: serve stops, and exits 0.
var errStoppedStarting = errors.New("stopped by a signal while starting")

// serving is what serve builds before it listens: the HTTP face, the
// readiness /readyz answers from, and close, which closes what the
// requests record to once they have drained.
type serving struct {
	api   http.Handler
	ready *readiness
	close func()
}

// buildServe builds the fleet, the answer paths, the decision log and
// the HTTP face over them from cfg, and starts the background work (the
// probes, the ECE gauge, the refits). Nothing listens yet.
func buildServe(ctx context.Context, cfg *config.Config, stateDir string, e env, log *slog.Logger) (*serving, error) {
	m := metrics.New()
	router, err := fleet.FromConfig(cfg, fleet.Options{Getenv: e.getenv, Observer: m, Fingerprint: fleet.FingerprintOptions{Log: log}})
	if err != nil {
		return nil, err
	}
	m.WatchNodes(func() []metrics.Node {
		var out []metrics.Node
		for _, s := range router.States() {
			n := metrics.Node{Name: s.Name, Healthy: s.Healthy, InFlight: s.InFlight, Queued: s.Queued, Constraint: s.Constraint.State}
			if l := s.PromptLists; l != nil {
				n.Listed, n.ListCalls, n.ListPrompts = true, l.Calls, l.Prompts
			}
			out = append(out, n)
		}
		return out
	})
	ready := &readiness{router: router, models: configuredModels(cfg), log: log}
	go every(ctx, cfg.ProbeEvery.Or(config.DefaultProbeEvery), func() {
		router.Probe(ctx)
		ready.nodes()
	})

	// With the decision log on, the loop learns from outcomes unless the
	// configuration says otherwise.
	cfg.Learn(stateDir, e.getenv)
	fits, err := servingFits(cfg, log)
	if err != nil {
		return nil, err
	}
	if cfg.Calibration.RefitEvery > 0 && cfg.DecisionLog.Off { // serve is what refits
		return nil, errRefitsWithoutTheLog
	}
	keys, err := cfg.APIKeys(e.getenv)
	if err != nil {
		return nil, fmt.Errorf("configuration %s: %w", cfg.Path, err)
	}
	// No nodes is a mistake to say at start-up, not in each 503. (The old
	// form's systemone providers are nodes by now.)
	if len(cfg.Nodes) == 0 {
		return nil, fmt.Errorf("configuration %s: nodes: none configured, so nothing could be answered (every /v1/systemone and /v1/decide request would fail): add a node (see the README's configuration section)", cfg.Path)
	}
	// As keys_env's keys: a variable that holds no usable URL stops the
	// start, as a bad decision_log.url does, rather than leave a replica
	// recording nowhere.
	if _, err := cfg.DecisionLog.PostgresURL(e.getenv); err != nil {
		return nil, fmt.Errorf("configuration %s: %w", cfg.Path, err)
	}
	tr, err := setupTracing(ctx, cfg.Tracing, log)
	if err != nil {
		return nil, fmt.Errorf("configuration %s: %w", cfg.Path, err)
	}
	dlog := openDecisionLog(ctx, cfg.DecisionLog, stateDir, e, log, m)
	if ctx.Err() != nil { // a signal while the log opened (up to 30 s): nothing is served
		closeLogAndTracer(dlog, tr, log)
		return nil, errStoppedStarting
	}
	if dlog == nil && !cfg.DecisionLog.Off {
		ready.logProblem = "the decision log could not be opened (the start-up log says why): answers would not be recorded"
	}
	ready.logGone = dlog.Gone
	shadow := newShadow(cfg, dlog, m, log)
	// The shadow stops before the log closes, so that its last answers
	// are recorded; the tracer closes beside the log.
	s := &serving{ready: ready, close: func() { shadow.Close(); closeLogAndTracer(dlog, tr, log) }}
	// One tracker keeps the calibration statistics for the report, the
	// ECE gauge and the refits, reading each outcome once.
	var tracker *outcomes.Tracker
	if dlog != nil {
		tracker = outcomes.NewTracker(dlog)
	}
	// /v1/systemone applies the fits only with calibration: apply, decide
	// applies gateway.fits whenever it is set (one file, reloaded once,
	// when both do); while it does not load, decide answers config_error.
	dfits, err := decideFits(cfg, fits, log)
	var decideErrs []error
	if err != nil {
		decideErrs = []error{err}
	}
	// One cache for both faces: its key holds the fits, which may differ.
	cache := decisionCache(cfg)
	if cache != nil {
		m.WatchCache(cache.Hits, cache.Misses, cache.Bypassed, cache.Coalesced)
		log.Info("decision cache on", "entries", cfg.Cache.Entries, "ttl", time.Duration(cfg.Cache.TTL))
	}
	spend, err := keySpend(ctx, dlog, keys, m, log)
	if err != nil {
		// The keys' spend could not be read, so no budget could be held.
		return nil, fmt.Errorf("decision log: reading the keys' spend: %w", err)
	}
	s.api = httpapi.New(httpapi.Options{
		Answer:           answerPath(cfg, fits, dlog, answer.Options{Router: router, Shadow: shadow, Meter: m}).WithCache(cache),
		Log:              log,
		Metrics:          m,
		Keys:             apiKeys(keys),
		RatePerSecond:    cfg.RateLimit.PerSecond,
		Burst:            cfg.RateLimit.Burst,
		GuessesPerMinute: cfg.RateLimit.WrongKeys.PerMinute,
		GuessBurst:       cfg.RateLimit.WrongKeys.Burst,
		Rounding:         cfg.Decimals(),
		RequestTimeout:   cfg.Timeouts.Request.Or(httpapi.DefaultRequestTimeout),
		MaxBodyBytes:     cfg.MaxBodyBytes,
		Feedback:         outcomes.NewFeedback(dlog),
		DecisionLog:      dlog,
		Spend:            spend,
		Tracker:          tracker,
		TargetError:      cfg.Calibration.TargetError,
		Drift:            driftOptions(cfg.Drift),
		Loop:             loopOptions(cfg.Calibration, fits),
		// POST /v1/decide: the gateway over the same fleet and decision
		// log.
		Decide: gateway.New(gateway.Options{Config: cfg, ConfigPath: cfg.Path, ConfigErrors: decideErrs,
			Answer: answerPath(cfg, dfits, dlog, answer.Options{Router: router, Shadow: shadow, Meter: m}).WithCache(cache), Log: log, StatePath: pause.Path(stateDir, e.getenv),
			Version: version, Face: decisionlog.FaceDecide}),
		Version: version,
		Ready:   ready.check,
		Tracer:  tr,
	})
	if tracker != nil {
		// A drift alarm reads the model's canaries at once, once a drift
		// window: a swap is found, and its uncertain window closed, without
		// waiting for canary_every.
		window := cmp.Or(time.Duration(cfg.Drift.Window), outcomes.DefaultDriftWindow)
		suspect := func(model string) { router.Suspect(model, window) }
		go every(ctx, time.Minute, func() { watchECE(ctx, m, tracker, fits, driftOptions(cfg.Drift), suspect, log) })
	}
	if fits != nil && cfg.Calibration.RefitEvery > 0 {
		if tracker == nil {
			log.Warn("calibration.refit_every is set but the decision log could not be opened: no refits")
		} else {
			go refitLoop(ctx, fits, tracker, cfg.Calibration, cascades(cfg), tr, log)
		}
	}
	if len(keys) == 0 {
		log.Warn("auth off: no keys configured (set keys or keys_env in the configuration)")
	} else {
		log.Info("auth on", "keys", len(keys))
	}
	return s, nil
}

// serveHTTP serves s on cfg's listeners (HTTP, HTTPS with tls, the admin
// listener) until one fails or ctx ends, then drains them.
func serveHTTP(ctx context.Context, cfg *config.Config, s *serving, log *slog.Logger) error {
	// Requests run under base, which the shutdown cancels once the drain
	// timeout has passed (see shutdown).
	base, cancelBase := context.WithCancelCause(context.Background())
	// The cause tells these cancellations from a client that went away
	// (httpapi.Abandoned), which is logged and counted as a 499.
	cancelRequests := func() { cancelBase(errDrainPassed) }
	defer cancelRequests()
	// The HTTPS listener's server is another of the same.
	newServer := func() *http.Server {
		return &http.Server{
			Handler:           s.api,
			BaseContext:       func(net.Listener) context.Context { return base },
			ReadHeaderTimeout: cfg.Timeouts.ReadHeader.Or(5 * time.Second),
			ReadTimeout:       cfg.Timeouts.Read.Or(30 * time.Second),
			WriteTimeout:      cfg.Timeouts.Write.Or(cfg.Timeouts.Request.Or(httpapi.DefaultRequestTimeout) + 10*time.Second),
			IdleTimeout:       cfg.Timeouts.Idle.Or(120 * time.Second),
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		}
	}
	srv := newServer()
	servers := []*http.Server{srv}
	errc := make(chan error, 3)
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	log.Info("listening", "url", "http://"+ln.Addr().String(), "nodes", len(cfg.Nodes), "version", version)
	for _, nr := range s.ready.check() {
		log.Info("not ready yet: GET /readyz answers 503 until this is met", "request_id", "-", "check", nr.Check, "detail", nr.Detail)
	}
	go func() { errc <- srv.Serve(ln) }()

	if cfg.TLS.Cert != "" {
		tsrv, err := startTLS(cfg, newServer(), errc, log)
		if err != nil {
			return err
		}
		servers = append(servers, tsrv)
	}
	if cfg.Admin.Listen != "" {
		asrv, err := startAdmin(cfg.Admin.Listen, srv, errc, log)
		if err != nil {
			return err
		}
		servers = append(servers, asrv)
	}

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// /readyz turns first, while the listeners still serve, so that a
	// load balancer polling it stops sending before they close.
	s.ready.drain()
	if d := cfg.Timeouts.DrainDelay.Or(0); d > 0 {
		log.Info("draining: GET /readyz answers 503; serving on for timeouts.drain_delay before the listeners close", "request_id", "-", "drain_delay", d)
		select {
		case err := <-errc:
			return err
		case <-time.After(d):
		}
	}
	return shutdown(servers, cfg.Timeouts.Drain.Or(30*time.Second), cancelRequests, log)
}

// startTLS serves tsrv over HTTPS on cfg's tls listener; Serve's end
// goes to errc.
func startTLS(cfg *config.Config, tsrv *http.Server, errc chan<- error, log *slog.Logger) (*http.Server, error) {
	cert, err := tls.LoadX509KeyPair(cfg.Resolve(cfg.TLS.Cert), cfg.Resolve(cfg.TLS.Key))
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	tsrv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	tln, err := net.Listen("tcp", cmp.Or(cfg.TLS.Listen, config.DefaultTLSListen))
	if err != nil {
		return nil, err
	}
	log.Info("listening", "url", "https://"+tln.Addr().String())
	go func() { errc <- tsrv.ServeTLS(tln, "", "") }()
	return tsrv, nil
}

// cancelGrace is how long requests cancelled at the end of the drain get
// to write their error answers before their connections are closed.
const cancelGrace = 5 * time.Second

// errDrainPassed is the cause the requests still in flight are cancelled
// with once the drain has passed.
var errDrainPassed = errors.New("shutting down: the drain timeout passed")

// shutdown stops the servers gracefully: every listener closes at once,
// so no new connection is accepted, and the requests in flight finish,
// for at most drain. It then returns nil, and serve exits 0. Past the
// drain, the requests still in flight are cancelled (cancelRequests
// cancels their contexts), so that each caller gets a complete error
// answer rather than a cut connection; after cancelGrace more, whatever
// is left is closed. shutdown then returns an error, and serve exits 1:
// the drain did not finish, and a supervisor should know it.
func shutdown(servers []*http.Server, drain time.Duration, cancelRequests func(), log *slog.Logger) error {
	log.Info("shutting down: no new connections, finishing requests in flight", "drain", drain)
	all := func(d time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		errs := make([]error, len(servers))
		var wg sync.WaitGroup
		for i, s := range servers {
			wg.Go(func() { errs[i] = s.Shutdown(ctx) })
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	err := all(drain)
	if err == nil {
		log.Info("stopped")
		return nil
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Error("drain timeout passed with requests in flight: cancelling them", "drain", drain)
	cancelRequests()
	if all(cancelGrace) != nil {
		for _, s := range servers {
			_ = s.Close()
		}
	}
	return fmt.Errorf("shutdown: the drain timeout of %s passed with requests in flight; they were cancelled", drain)
}

// every calls f now and every d after until ctx ends.
func every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		f()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// spendEvery is how often a replica reads its keys' spend from the log
// again, which bounds how long it is blind to what other replicas
// sharing the log spent (docs/http-api.md#budgets).
const spendEvery = time.Second

// keySpend counts the keys' spend (every key's, for the metric; the
// budgets' periods from the log), refreshed every spendEvery until ctx
// ends; nil without the decision log or keys.
func keySpend(ctx context.Context, dlog *decisionlog.Log, keys []config.Key, m *metrics.Metrics, log *slog.Logger) (*decisionlog.Spend, error) {
	budgets := map[string]decisionlog.Period{}
	for _, k := range keys {
		if k.Budget != nil {
			budgets[k.Name] = decisionlog.Period(k.Budget.Per)
		}
	}
	if dlog == nil {
		if len(budgets) > 0 {
			log.Warn("the keys' budgets are not held: the decision log, where their spend is kept, did not open", "keys", len(budgets))
		}
		return nil, nil
	}
	if len(keys) == 0 {
		return nil, nil
	}
	sp, err := dlog.Spend(ctx, budgets, m.KeySpent)
	if err != nil {
		return nil, err
	}
	if len(budgets) > 0 {
		go sp.Run(ctx, spendEvery)
	}
	return sp, nil
}

// apiKeys are the configuration's keys as the HTTP face takes them.
func apiKeys(keys []config.Key) []httpapi.Key {
	out := make([]httpapi.Key, len(keys))
	for i, k := range keys {
		out[i] = httpapi.Key{Name: k.Name, Secret: k.Key}
		for _, sc := range k.Scopes {
			out[i].Scopes = append(out[i].Scopes, httpapi.Scope(sc))
		}
		if r := k.RateLimit; r != nil {
			out[i].Rate = &httpapi.Rate{PerSecond: r.PerSecond, Burst: r.Burst}
		}
		if b := k.Budget; b != nil {
			out[i].Budget = &httpapi.Budget{USD: decision.USD(*b.USD), Per: decisionlog.Period(b.Per)}
		}
	}
	return out
}
