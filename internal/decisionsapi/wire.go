// Package decisionsapi is OpenAI's Decisions wire format (POST
// /v1/decisions): its request read into the decision domain, its answers
// and its errors written from it, a client for any Decisions endpoint, and
// the checks the real clients (OpenAI's Node SDK and its tool runner, the
// AI SDK, promptfoo) apply to a reply. Nothing outside this package knows
// the wire's field names. The contract is docs/decisions-wire.md.
package decisionsapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The wire's own limits, as OpenAI's Node SDK 7.55.0 states them. A
// server's lower limit wins (Parsed.Validate).
const (
	// MaxQuestions is how many questions one request may ask.
	MaxQuestions = 400
	// MaxChoices is how many choices one choice question may offer.
	MaxChoices = 255
	// MaxSafetyIdentifier is the longest safety_identifier, in UTF-16
	// code units as the JavaScript clients count it.
	MaxSafetyIdentifier = 128
	// The limits of one input_json part's data.
	MaxJSONDepth  = 32
	MaxJSONValues = 10_000
	MaxJSONBytes  = 256 << 10
)

// RequestIDHeader is the header every reply carries its request id in,
// success or error: the Node SDK reads it into _request_id and
// APIError.requestID.
const RequestIDHeader = "X-Request-Id"

// Places is how many decimals a reply reports probabilities, scores and
// confidences to: OpenAI's two, which the AI SDK's checks assume.
const Places = 2

// Error types and codes of OpenAI's error envelope, and the statuses they
// go with (wire doc section 5.2). The HTTP face picks one by situation and
// maps nothing itself.
const (
	TypeInvalidRequest = "invalid_request_error"
	TypeRateLimit      = "requests" // what OpenAI's own 429s carry
	TypeServer         = "server_error"

	CodeUnsupportedInput      = "unsupported_input"
	CodeInvalidAPIKey         = "invalid_api_key"
	CodeMissingScope          = "missing_scope" // system1's: OpenAI names none for it
	CodeModelNotFound         = "model_not_found"
	CodeContextLengthExceeded = "context_length_exceeded"
	CodeRateLimitExceeded     = "rate_limit_exceeded"
	// A key past its budget: OpenAI's type and code for an account out
	// of credit, a 429 that retrying soon does not cure.
	TypeInsufficientQuota = "insufficient_quota"
	CodeInsufficientQuota = "insufficient_quota"
)

// Error is a reply that is not an answer: an HTTP status and OpenAI's
// envelope {"error": {"message", "type", "param", "code"}}, as this
// server writes it and as the client reads an endpoint's refusal.
type Error struct {
	Status  int
	Type    string
	Code    string // "" is written as null; vLLM's integer code is read in decimal
	Param   string // "" is written as null
	Message string
	// RetryAfter is sent as retry-after and retry-after-ms (429 and 503),
	// and read back from them.
	RetryAfter time.Duration
	// Problems lists every problem of an invalid request, in request order;
	// Param and Message are made from them.
	Problems []Problem
}

// Problem is one thing wrong with a request: where (a JSON path such as
// questions[3].choices[1].value, "" for the body as a whole) and what.
type Problem struct {
	Param   string
	Message string
	// Unsupported marks input the server cannot read (an image), as
	// opposed to input that breaks the contract.
	Unsupported bool
}

func (e *Error) Error() string {
	return fmt.Sprintf("status %d: %s", e.Status, e.Detail())
}

// Detail is the error in the endpoint's words, with the field it named:
// "questions[2].choices: too many". What the status means for the
// request (the caller's, a rate limit, a node down) is the fleet's one
// rule (engine.StatusFailure), which reads it from Status.
func (e *Error) Detail() string {
	if e.Param != "" {
		return e.Param + ": " + e.Message
	}
	return e.Message
}

// Invalid is the 400 for a request with problems: every problem in the
// message, the first one's path as param, and code unsupported_input when
// every problem is input the server cannot read.
func Invalid(ps []Problem) *Error {
	e := &Error{Status: http.StatusBadRequest, Type: TypeInvalidRequest, Problems: ps, Code: CodeUnsupportedInput}
	msgs := make([]string, len(ps))
	for i, p := range ps {
		msgs[i] = p.Message
		if p.Param != "" {
			msgs[i] = p.Param + ": " + p.Message
		}
		if !p.Unsupported {
			e.Code = ""
		}
	}
	if len(ps) == 0 {
		e.Code = ""
	} else {
		e.Param = ps[0].Param
	}
	e.Message = strings.Join(msgs, "; ")
	return e
}

// InvalidParam is the 400 for one problem at param.
func InvalidParam(param, msg string) *Error {
	return Invalid([]Problem{{Param: param, Message: msg}})
}

// Unauthorized is the 401 for a missing or wrong key.
func Unauthorized(msg string) *Error {
	return &Error{Status: http.StatusUnauthorized, Type: TypeInvalidRequest, Code: CodeInvalidAPIKey, Message: msg}
}

// Forbidden is the 403 for a key without the scope the route needs.
func Forbidden(msg string) *Error {
	return &Error{Status: http.StatusForbidden, Type: TypeInvalidRequest, Code: CodeMissingScope, Message: msg}
}

// ModelNotFound is the 404 for a model no node serves.
func ModelNotFound(model string) *Error {
	return &Error{Status: http.StatusNotFound, Type: TypeInvalidRequest, Code: CodeModelNotFound, Param: "model",
		Message: "The model " + strconv.Quote(model) + " does not exist or is not served here."}
}

// ContextLengthExceeded is the 400 for an input longer than the model
// reads.
func ContextLengthExceeded(msg string) *Error {
	return &Error{Status: http.StatusBadRequest, Type: TypeInvalidRequest, Code: CodeContextLengthExceeded, Param: "input", Message: msg}
}

// NotServed is the 400 for a request the engine says it cannot serve
// (its 501: no decision support for the model). The SDKs retry a 5xx
// twice; this will not change on a retry.
func NotServed(msg string) *Error {
	return &Error{Status: http.StatusBadRequest, Type: TypeInvalidRequest, Param: "model", Message: msg}
}

// TooManyRequests is the 429 for a caller over its rate, or nodes that
// all asked for a pause.
func TooManyRequests(msg string, wait time.Duration) *Error {
	return &Error{Status: http.StatusTooManyRequests, Type: TypeRateLimit, Code: CodeRateLimitExceeded, Message: msg, RetryAfter: wait}
}

// InsufficientQuota is the 429 for a key past its budget.
func InsufficientQuota(msg string) *Error {
	return &Error{Status: http.StatusTooManyRequests, Type: TypeInsufficientQuota, Code: CodeInsufficientQuota, Message: msg}
}

// ServiceUnavailable is the 503 for a request no node could answer now.
func ServiceUnavailable(msg string, wait time.Duration) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Type: TypeServer, Message: msg, RetryAfter: wait}
}

// Internal is the 500 for a bug: a state the server should never reach.
func Internal(msg string) *Error {
	return &Error{Status: http.StatusInternalServerError, Type: TypeServer, Message: msg}
}

// SetHeaders sets retry-after (whole seconds, rounded up) and
// retry-after-ms, both of which the SDKs honour, when the error asks for
// a pause. A spent budget also says x-should-retry: false, since the Node
// SDK would otherwise retry it twice (a reset past 60 s is not waited for).
func (e *Error) SetHeaders(h http.Header) {
	if e.Type == TypeInsufficientQuota {
		h.Set("X-Should-Retry", "false")
	}
	if e.RetryAfter > 0 {
		SetRetryAfter(h, e.RetryAfter)
	}
}

// SetRetryAfter says when to come back in both headers clients read
// (Retry-After in whole seconds, rounded up, Retry-After-Ms exactly:
// OpenAI's SDKs and Jev's Python SDK honour either), for every pause
// either wire asks for; it returns the seconds.
func SetRetryAfter(h http.Header, wait time.Duration) int {
	secs := int(math.Ceil(wait.Seconds()))
	h.Set("Retry-After", strconv.Itoa(secs))
	h.Set("Retry-After-Ms", strconv.FormatInt(wait.Milliseconds(), 10))
	return secs
}

// AppendJSON writes the error envelope.
func (e *Error) AppendJSON(b []byte) []byte {
	b = append(b, `{"error":{"message":`...)
	b = appendJSON(b, e.Message)
	b = append(b, `,"type":`...)
	b = appendJSON(b, e.Type)
	b = append(b, `,"param":`...)
	b = appendNullable(b, e.Param)
	b = append(b, `,"code":`...)
	b = appendNullable(b, e.Code)
	return append(b, "}}"...)
}

func appendNullable(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return appendJSON(b, s)
}

// appendJSON writes v as compact JSON, leaving <, > and & as they are:
// what a caller sent comes back as sent.
func appendJSON(b []byte, v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // strings, numbers and raw JSON already checked always encode
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}
