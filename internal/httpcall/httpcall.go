// Package httpcall is system1's one outgoing HTTP helper: it sends a
// request to an engine or a System One endpoint with its bearer key and
// reads the reply, bounded, the same way for every dialect. What a reply
// means is the caller's to say; what went wrong on the way is said here.
package httpcall

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"system1/internal/retryafter"
	"system1/internal/tracing"
)

// DefaultMaxBody bounds a reply unless the caller says otherwise.
const DefaultMaxBody = 8 << 20

// StatusError is a reply whose status is not 200: the status, the body
// with the key redacted (some servers echo the key they were sent, and the
// body's message goes on to logs, callers and /health), and how long the
// server asked to be left alone.
type StatusError struct {
	Code       int
	Body       []byte
	RetryAfter time.Duration
}

func (e *StatusError) Error() string { return fmt.Sprintf("HTTP %d", e.Code) }

// ErrTooLarge marks a reply over the size limit: an error, never a
// truncated body.
var ErrTooLarge = errors.New("reply too large")

// Send sends a request of method to url with header's fields and body,
// as JSON (nil: none, and no Content-Type), and returns what Do returns.
func Send(ctx context.Context, hc *http.Client, method, url string, header http.Header, body []byte, key string, maxBody int64) ([]byte, error) {
	hr, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	maps.Copy(hr.Header, header)
	if body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	return Do(hc, hr, key, maxBody)
}

// Do sends hr with the bearer key (none when key is empty) through hc (nil
// is http.DefaultClient) and returns the body of a 200 reply of at most
// maxBody bytes (0 or less is DefaultMaxBody). Another status is a
// *StatusError, with as much of its body as came within the limit; a 200
// reply over the limit wraps ErrTooLarge; a failure to
// send or read is returned as it came, wrapped once.
func Do(hc *http.Client, hr *http.Request, key string, maxBody int64) ([]byte, error) {
	hc = cmp.Or(hc, http.DefaultClient)
	maxBody = cmp.Or(max(maxBody, 0), DefaultMaxBody)
	if key != "" {
		hr.Header.Set("Authorization", "Bearer "+key)
	}
	// The caller's trace goes on to the engine (nothing when tracing is
	// off).
	tracing.Inject(hr.Context(), hr.Header)
	resp, err := hc.Do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := ReadAll(io.LimitReader(resp.Body, maxBody+1), resp.ContentLength)
	if resp.StatusCode != http.StatusOK {
		// The status and its Retry-After stand however the body came (cut
		// short, too long): the body only explains them.
		data = data[:min(int64(len(data)), maxBody)]
		return nil, &StatusError{Code: resp.StatusCode, Body: Redact(data, key), RetryAfter: retryafter.Parse(resp.Header, time.Now())}
	}
	if err != nil {
		return nil, fmt.Errorf("reading the reply: %w", err)
	}
	if int64(len(data)) > maxBody {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrTooLarge, maxBody)
	}
	return data, nil
}

// ReadAll reads r to its end as io.ReadAll does, into one buffer when
// declared, the length its sender declared (a Content-Length), is known
// and at most maxPresized: io.ReadAll's growth made four to six
// allocations of a 2 KB body, a third of a forwarded request's bytes. A
// larger declared length is not trusted with an allocation up front;
// one the body overruns is finished by io.ReadAll.
func ReadAll(r io.Reader, declared int64) ([]byte, error) {
	if declared <= 0 || declared > maxPresized {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, declared+1) // one byte over, to read EOF without growing
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		switch {
		case err == io.EOF:
			return b, nil
		case err != nil:
			return b, err
		case len(b) == cap(b):
			rest, err := io.ReadAll(r)
			return append(b, rest...), err
		}
	}
}

const maxPresized = 64 << 10

// Redact replaces key in body with [redacted].
func Redact(body []byte, key string) []byte {
	if key == "" {
		return body
	}
	return bytes.ReplaceAll(body, []byte(key), []byte("[redacted]"))
}

// excerptMost is the most bytes of an error body Excerpt keeps.
const excerptMost = 200

// Excerpt is an error body as a message where its wire's envelope gives
// none: its start, trimmed, at most excerptMost bytes cut at a
// character's start (never inside a multi-byte one), or "(empty body)".
func Excerpt(body []byte) string {
	s := strings.TrimSpace(string(body))
	if len(s) > excerptMost {
		n := excerptMost
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	if s == "" {
		s = "(empty body)"
	}
	return s
}
