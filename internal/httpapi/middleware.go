package httpapi

import (
	"cmp"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"system1/internal/answer"
	"system1/internal/decision"
	"system1/internal/decisionlog"
	"system1/internal/decisionsapi"
	"system1/internal/httpcall"
	"system1/internal/redact"
	"system1/internal/systemone"
	"system1/internal/tracing"
)

type ctxKey int

const requestKey ctxKey = 0

// requestInfo is what observe keeps for one request, in one context
// value: its id and what its handler adds to its log line.
type requestInfo struct {
	id    string
	notes []slog.Attr
	// caller is whom the rate limit counts the request against, set by
	// api: "" where none is counted; limiter is the bucket it counts in.
	caller  string
	limiter *limiter
	// key is the name of the key the request presented: "" for none, or
	// a wrong one, or with auth off.
	key string
}

// info is observe's requestInfo of the request under ctx, or an empty
// one, kept nowhere, outside observe (a handler called alone).
func info(ctx context.Context) *requestInfo {
	if ri, ok := ctx.Value(requestKey).(*requestInfo); ok {
		return ri
	}
	return &requestInfo{}
}

// RequestID returns the request's id, as sent in the wire's request-id
// header.
func RequestID(ctx context.Context) string { return info(ctx).id }

// recorder remembers the status a handler wrote.
type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) {
	r.status = cmp.Or(r.status, code)
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.status = cmp.Or(r.status, http.StatusOK)
	return r.ResponseWriter.Write(b)
}

// Unwrap gives http.ResponseController the connection's writer, so that
// a handler can move its write deadline (the batches do) through observe.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// observe gives every request an id (returned in the request-id header),
// traces it, logs one line for it and counts it. The line is written only when the
// logger takes info lines, as one record handed to the handler: no
// caller lookup (its source would be this function for every request)
// and no second clock reading.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ri := &requestInfo{id: decisionlog.NewRequestID()}
		w.Header().Set(systemone.RequestIDHeader, ri.id)
		rec := &recorder{ResponseWriter: w}
		tr := s.opt.Tracer
		if untraced[r.URL.Path] {
			tr = nil
		}
		ctx, span := tr.StartRequest(r.Context(), r, ri.id)
		r = r.WithContext(context.WithValue(ctx, requestKey, ri))
		next.ServeHTTP(rec, r)
		status := cmp.Or(rec.status, http.StatusOK) // a handler that wrote nothing sent a 200
		if Abandoned(r.Context()) {
			status = StatusClientClosedRequest
		}
		if isUnmatched(r.Pattern) {
			r.Pattern = "" // no route served it: the span is named by its method alone
		}
		tracing.EndRequest(span, r, status)
		d := time.Since(start)
		s.opt.Metrics.Request(cmp.Or(r.Pattern, unmatchedRoute), strconv.Itoa(status), ri.key, d)
		h := s.opt.Log.Handler()
		if !h.Enabled(r.Context(), slog.LevelInfo) {
			return
		}
		line := slog.NewRecord(start.Add(d), slog.LevelInfo, "request", 0)
		line.AddAttrs(slog.String("id", ri.id), slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Int("status", status), slog.Float64("ms", float64(d.Microseconds())/1000), slog.String("remote", r.RemoteAddr))
		if ri.key != "" {
			line.AddAttrs(slog.String("key", ri.key))
		}
		line.AddAttrs(ri.notes...)
		_ = h.Handle(r.Context(), line) // a log that cannot be written is not the request's failure
	})
}

// StatusClientClosedRequest is what the log line, the metrics and the
// trace say of a request its client abandoned before the answer (an
// SDK's timeout or abort): 499, as nginx and other proxies count it, so
// that it is not read as an outage (a 503). The client is gone, so what
// the handler wrote reaches no one.
const StatusClientClosedRequest = 499

// Abandoned reports whether the client of a request went away: the
// server cancelled the request's context without a cause of its own
// (serve cancels the requests left after the drain with one, and a
// timeout is a deadline).
func Abandoned(ctx context.Context) bool {
	return context.Cause(ctx) == context.Canceled
}

// errorWriter writes an error in a wire's shape: the status, the kind of
// error as a System One error type (systemone.Authentication, RateLimit,
// InvalidRequest, TooLarge) and the message.
type errorWriter func(w http.ResponseWriter, status int, typ, msg string)

// A wire is what a route's wire decides beyond its handler, chosen by
// the route when it is registered (routes): how its errors are written,
// those its middleware answers (401, 413, 415, 429) and a 405 on its path
// included, and the header that carries the request's id on each reply,
// where the wire has one of its own.
type wire struct {
	errs      errorWriter
	requestID string
	// noKey403 makes a request that carries no key header at all a 403
	// "Must supply an API key!", as hosted Jev answers it, where a wrong
	// key stays a 401.
	noKey403 bool
}

// The wires of the API routes.
var (
	systemOneWire   = wire{errs: writeError}
	jevWire         = wire{errs: writeError, noKey403: true} // the routes hosted Jev answers, and their batch
	decisionsWire   = wire{errs: writeDecisionsAPIError, requestID: decisionsapi.RequestIDHeader}
	modelsWire      = wire{errs: writeModelsAPIError, requestID: decisionsapi.RequestIDHeader}
	decideWire      = wire{errs: writeDecideError}
	decideBatchWire = wire{errs: writeDecideBatchError}
)

// start gives a reply of the wire its request-id header.
func (wr wire) start(w http.ResponseWriter, r *http.Request) {
	if wr.requestID != "" {
		w.Header().Set(wr.requestID, RequestID(r.Context()))
	}
}

// api wraps an authenticated, rate-limited API route of wire wr that
// needs scope: a missing or wrong key is a 401, a key without the scope a
// 403 naming it, a key past its budget (on a route that spends) or a
// caller over its rate a 429 with Retry-After, each written as wr writes
// errors; the key's name goes with the request to the answer path's
// records, and the whole request runs under timeout with its body
// bounded.
func (s *Server) api(wr wire, scope Scope, h http.HandlerFunc, timeout time.Duration) http.Handler {
	errs := wr.errs
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wr.start(w, r)
		ri := info(r.Context())
		// Whom the rate limit counts, in which bucket: the key, else the
		// address.
		caller, lim := "", s.limiter
		if s.AuthOn() {
			k, ok, wait := s.checkKey(r)
			if !ok {
				secs := decisionsapi.SetRetryAfter(w.Header(), wait)
				errs(w, http.StatusTooManyRequests, systemone.RateLimit,
					fmt.Sprintf("too many wrong API keys from this address; retry after %d s", secs))
				return
			}
			if k < 0 && wr.noKey403 && len(r.Header.Values("Authorization")) == 0 && len(r.Header.Values("X-Api-Key")) == 0 {
				errs(w, http.StatusForbidden, systemone.Authentication,
					"Must supply an API key! Check your request and try again.")
				return
			}
			if k < 0 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="system1"`)
				errs(w, http.StatusUnauthorized, systemone.Authentication,
					"Cannot authenticate with the server. Please check your API key and try again.")
				return
			}
			key := s.keys[k]
			ri.key = key.Name
			if !key.allows(scope) {
				errs(w, http.StatusForbidden, systemone.Permission, // the key's name, never the key
					fmt.Sprintf("the key %q does not hold the scope %q, which %s needs", key.Name, scope, r.Pattern))
				return
			}
			if scope == ScopeDecide && !s.withinBudget(w, errs, key.Key) {
				return
			}
			r = r.WithContext(answer.WithKey(r.Context(), key.Name))
			caller, lim = "key:"+strconv.Itoa(k), key.limiter
		}
		if caller == "" && lim != nil {
			caller = "addr:" + clientKey(r.RemoteAddr)
		}
		ri.caller, ri.limiter = caller, lim
		if ok, wait := lim.allow(caller, time.Now()); !ok {
			secs := decisionsapi.SetRetryAfter(w.Header(), wait)
			errs(w, http.StatusTooManyRequests, systemone.RateLimit,
				fmt.Sprintf("rate limit exceeded; retry after %d s", secs))
			return
		}
		body, ok := s.limitBody(w, r, errs)
		if !ok {
			return
		}
		r.Body = body
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		h(w, r.WithContext(ctx))
	})
}

// withinBudget answers a 429 naming k's budget, with Retry-After until
// its period resets, when k has spent it; the routes that spend (those
// of ScopeDecide) ask it. The spend is what the log and this process
// counted (decisionlog.Spend), so replicas may go past it by what the
// others spent since the last read (docs/http-api.md#budgets).
func (s *Server) withinBudget(w http.ResponseWriter, errs errorWriter, k Key) bool {
	if k.Budget == nil || s.opt.Spend == nil {
		return true
	}
	spent, next, ok := s.opt.Spend.Spent(k.Name)
	if !ok || spent < k.Budget.USD {
		return true
	}
	secs := decisionsapi.SetRetryAfter(w.Header(), time.Until(next))
	errs(w, http.StatusTooManyRequests, systemone.InsufficientQuota,
		fmt.Sprintf("the key %q has spent $%s of its budget of $%s a %s (UTC); it resets at %s, in %d s",
			k.Name, spent, k.Budget.USD, k.Budget.Per, next.UTC().Format(time.RFC3339), secs))
	return false
}

// checkKey authenticates a request under its address's allowance of
// wrong keys. While the address is over it, ok is false and the key is
// not looked at, so a guesser learns nothing from a throttled guess; the
// decision depends only on how many wrong keys the address sent, never on
// how near a guess came. k is the key's index, -1 for none or a wrong one.
func (s *Server) checkKey(r *http.Request) (k int, ok bool, wait time.Duration) {
	failed, ok, wait := s.guesses.attempt(clientKey(r.RemoteAddr), time.Now())
	if !ok {
		return -1, false, wait
	}
	if k = s.authenticate(r); k < 0 {
		failed()
	}
	return k, true, 0
}

// limitBody bounds a request body to max_body_bytes, decompressing a
// gzip one, whose limit applies to what it decompresses to (the
// compressed bytes are bounded too), so that a zip bomb costs no more
// memory than a plain body at the limit. Any other Content-Encoding is a
// 415 naming it.
func (s *Server) limitBody(w http.ResponseWriter, r *http.Request, errs errorWriter) (io.ReadCloser, bool) {
	limited := http.MaxBytesReader(w, r.Body, s.opt.MaxBodyBytes)
	if r.ContentLength > s.opt.MaxBodyBytes {
		// Refused before a byte is read, so a client that sent Expect:
		// 100-continue is not asked for a body that will not be read.
		limited = tooLarge{r.Body, s.opt.MaxBodyBytes}
	}
	encs := r.Header.Values("Content-Encoding")
	enc := ""
	if len(encs) == 1 {
		enc = strings.ToLower(strings.Trim(encs[0], " \t"))
	}
	switch {
	case len(encs) == 0 || (len(encs) == 1 && (enc == "" || enc == "identity")):
		return limited, true
	case len(encs) == 1 && (enc == "gzip" || enc == "x-gzip"):
		return http.MaxBytesReader(w, &gunzip{src: limited}, s.opt.MaxBodyBytes), true
	}
	errs(w, http.StatusUnsupportedMediaType, systemone.InvalidRequest,
		fmt.Sprintf("Content-Encoding %q is not supported: send the body uncompressed, or with Content-Encoding: gzip",
			headerName(strings.Join(encs, ", "))))
	return nil, false
}

// tooLarge is a body declared over the limit: every read fails as
// http.MaxBytesReader's would at the limit.
type tooLarge struct {
	io.ReadCloser
	limit int64
}

func (t tooLarge) Read([]byte) (int, error) { return 0, &http.MaxBytesError{Limit: t.limit} }

// gunzip decompresses a gzip body as it is read, from the first read on,
// so that a header that is not gzip is a read error like any other.
type gunzip struct {
	src io.ReadCloser
	zr  *gzip.Reader
}

func (g *gunzip) Read(p []byte) (int, error) {
	if g.zr == nil {
		zr, err := gzip.NewReader(g.src)
		if err != nil {
			return 0, gzipError(err)
		}
		g.zr = zr
	}
	n, err := g.zr.Read(p)
	if err != nil && err != io.EOF {
		err = gzipError(err)
	}
	return n, err
}

func (g *gunzip) Close() error { return g.src.Close() }

// gzipError names the encoding in a decompression error, but leaves the
// body limit's error as it is.
func gzipError(err error) error {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return err
	}
	return fmt.Errorf("the body is not valid gzip (Content-Encoding: gzip): %w", err)
}

// readBody reads a request body, every route's, writing a failure as
// errs writes the route's errors: 413 over the limit, 408 when it did not
// arrive within the server's read timeout, else 400 with the reader's
// error, any address taken out.
func readBody(w http.ResponseWriter, r *http.Request, errs errorWriter) ([]byte, bool) {
	body, err := httpcall.ReadAll(r.Body, r.ContentLength)
	if err == nil {
		return body, true
	}
	tooBig, isTooBig := errors.AsType[*http.MaxBytesError](err)
	ne, isNet := errors.AsType[net.Error](err)
	switch {
	case isTooBig:
		errs(w, http.StatusRequestEntityTooLarge, systemone.TooLarge,
			fmt.Sprintf("the request body is over the limit of %d bytes (max_body_bytes; a gzip body counts as it decompresses)", tooBig.Limit))
	case isNet && ne.Timeout():
		errs(w, http.StatusRequestTimeout, systemone.InvalidRequest, "the request body did not arrive within the server's read timeout")
	default:
		errs(w, http.StatusBadRequest, systemone.InvalidRequest, "reading the request body: "+redact.Text(err.Error()))
	}
	return nil, false
}

// writeOK answers v as JSON; a value that does not encode (a NaN) is a
// 500.
func writeOK(w http.ResponseWriter, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, systemone.Internal, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, append(data, '\n'))
}

// writeReport answers a report read from the decision log, a 503 when it
// could not be read.
func writeReport(w http.ResponseWriter, r *http.Request, rep any, err error) {
	if err != nil {
		writeLogFailure(w, r, "reading the decision log", err.Error())
		return
	}
	writeOK(w, rep)
}

// writeLogFailure answers a 503 for the decision log failing to do what
// a request needed. The log's error stays on the request's log line: a
// PostgreSQL driver's names the database's user, address and host name,
// which are the operator's, as a node's are.
func writeLogFailure(w http.ResponseWriter, r *http.Request, doing, err string) {
	noteLog(r.Context(), "error", err)
	writeError(w, http.StatusServiceUnavailable, systemone.Unavailable,
		doing+" failed; the server's log line for this request says why")
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeInvalid answers a 422 in /v1's validation shape, for problems
// found in one part of the request (systemone.InBody, InQuery or
// InHeader).
func writeInvalid(w http.ResponseWriter, in string, ps ...decision.Problem) {
	writeJSON(w, http.StatusUnprocessableEntity, systemone.AppendValidationError(nil, in, ps))
}

// writeError is System One's errorWriter. Its 405 is FastAPI's bare
// detail, as hosted Jev answers it.
func writeError(w http.ResponseWriter, status int, typ, msg string) {
	if status == http.StatusMethodNotAllowed {
		writeJSON(w, status, systemone.MethodNotAllowedBody)
		return
	}
	writeJSON(w, status, systemone.AppendError(nil, typ, msg))
}
