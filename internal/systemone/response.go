package systemone

import (
	"strconv"
	"strings"
	"time"

	"system1/internal/decision"
)

// Usage counts tokens as the engines reported them, summed over calls.
type Usage struct {
	InputTokens  int
	OutputTokens int
	// Estimated is set when an engine reported no counts and they were
	// estimated at four characters per token.
	Estimated bool
}

// Response is an answered request, ready to be written.
type Response struct {
	Model     string
	Questions []decision.Question
	Answers   []decision.Answer // aligned with Questions
	Usage     Usage
	Latency   time.Duration
}

// AppendJSON writes the response body in Jev's shape: answers in question
// order, probabilities in option order, token counts as JSON integers,
// plus a top-level latency_ms.
func (r *Response) AppendJSON(b []byte) []byte {
	b = append(b, `{"model":`...)
	b = appendString(b, r.Model)
	b = append(b, `,"answers":{`...)
	for i, q := range r.Questions {
		b = comma(b, i)
		b = appendString(b, q.ID)
		b = append(b, ':')
		b = appendAnswer(b, q, r.Answers[i])
	}
	b = append(b, `},"usage":`...)
	b = r.Usage.appendJSON(b)
	b = append(b, `,"latency_ms":`...)
	b = strconv.AppendInt(b, r.Latency.Milliseconds(), 10)
	return append(b, '}')
}

// appendJSON writes the usage object: token counts as JSON integers,
// and "estimated" only when they were.
func (u Usage) appendJSON(b []byte) []byte {
	b = append(b, `{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(u.InputTokens), 10)
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, int64(u.OutputTokens), 10)
	if u.Estimated {
		b = append(b, `,"estimated":true`...)
	}
	return append(b, '}')
}

func appendAnswer(b []byte, q decision.Question, a decision.Answer) []byte {
	b = append(b, `{"type":`...)
	b = appendString(b, string(q.Kind))
	switch q.Kind {
	case decision.Noul:
		b = append(b, `,"noul":`...)
		b = appendFloat(b, a.Noul)
	case decision.Choice:
		b = append(b, `,"choice":`...)
		b = appendString(b, a.Choice)
		b = append(b, `,"confidence":`...)
		b = appendFloat(b, a.Confidence)
		b = appendProbabilities(b, q, a)
	case decision.Score:
		b = append(b, `,"score":`...)
		b = appendFloat(b, a.Score)
		b = append(b, `,"confidence":`...)
		b = appendFloat(b, a.Confidence)
		b = append(b, `,"legend":{`...)
		for i, o := range q.Options {
			b = comma(b, i)
			b = appendString(b, o.Key)
			b = append(b, ':')
			b = appendRaw(b, o.Legend)
		}
		b = append(b, '}')
		b = appendProbabilities(b, q, a)
	}
	return append(b, '}')
}

func appendProbabilities(b []byte, q decision.Question, a decision.Answer) []byte {
	b = append(b, `,"probabilities":{`...)
	for i, o := range q.Options {
		b = comma(b, i)
		b = appendString(b, o.Key)
		b = append(b, ':')
		b = appendFloat(b, a.Probabilities[i])
	}
	return append(b, '}')
}

// Error types carried in error bodies.
const (
	InvalidRequest = "invalid_request_error"
	Authentication = "authentication_error"
	Permission     = "permission_error" // a key without the route's scope: 403
	RateLimit      = "rate_limit_error"
	// InsufficientQuota is a key past its budget (OpenAI's word for
	// it): a 429 until the budget's period resets.
	InsufficientQuota = "insufficient_quota"
	NotFound          = "not_found_error"
	TooLarge          = "request_too_large"
	Unavailable       = "service_unavailable_error"
	Internal          = "api_error"
)

// Where a 422's problem is: the first element of its loc, as FastAPI
// writes it.
const (
	InBody   = "body"
	InQuery  = "query"
	InHeader = "header"
)

// ValidationMessage is a 422's error.message: every problem, each after
// the field it names (or the part of the request, in).
func ValidationMessage(in string, ps []decision.Problem) string {
	msgs := make([]string, len(ps))
	for i, p := range ps {
		msgs[i] = param(p.Path) + ": " + p.Msg
		if len(p.Path) == 0 {
			msgs[i] = in + ": " + p.Msg
		}
	}
	return strings.Join(msgs, "; ")
}

// AppendValidationError writes a 422 body that both kinds of client parse:
// an OpenAI-style error naming the first field and listing every problem in
// its message, and FastAPI's detail list with one entry per problem. The
// problems were found in one part of the request: the body, the query or
// the headers (InBody, InQuery, InHeader), which begins each problem's loc.
func AppendValidationError(b []byte, in string, ps []decision.Problem) []byte {
	b = append(b, `{"error":{"message":`...)
	b = appendString(b, ValidationMessage(in, ps))
	b = append(b, `,"type":"invalid_request_error","param":`...)
	if len(ps) > 0 && len(ps[0].Path) > 0 {
		b = appendString(b, param(ps[0].Path))
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `},"detail":[`...)
	for i, p := range ps {
		b = comma(b, i)
		b = append(b, `{"loc":[`...)
		b = appendString(b, in)
		for _, s := range p.Path {
			b = append(b, ',')
			b = appendString(b, s)
		}
		b = append(b, `],"msg":`...)
		b = appendString(b, p.Msg)
		b = append(b, `,"type":`...)
		b = appendString(b, p.Type)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// AppendError writes any other error body, in both shapes clients read:
// {"error": {"message", "type"}} and Jev's {"detail": {"error_type",
// "message"}}.
func AppendError(b []byte, typ, msg string) []byte {
	b = append(b, `{"error":{"message":`...)
	b = appendString(b, msg)
	b = append(b, `,"type":`...)
	b = appendString(b, typ)
	b = append(b, `},"detail":`...)
	b = AppendErrorDetail(b, typ, msg)
	return append(b, '}')
}

// AppendErrorDetail writes the detail of an error body alone,
// {"error_type", "message"}: what Jev's clients read of it, for a route
// both wires' clients call that answers in another envelope beside it.
func AppendErrorDetail(b []byte, typ, msg string) []byte {
	b = append(b, `{"error_type":`...)
	b = appendString(b, typ)
	b = append(b, `,"message":`...)
	b = appendString(b, msg)
	return append(b, '}')
}

func param(path []string) string { return strings.Join(path, ".") }
