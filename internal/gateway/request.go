package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"system1/internal/answer"
	"system1/internal/decision"
	"system1/internal/decisionlog"
	"system1/internal/jsonx"
)

// requestFields are the fields of a decide request.
var requestFields = []string{"question", "options", "context", "min_confidence", "request_id", "schema_version", "debias", "prior", "min_label_mass", "none_option", "coverage"}

// unknownFields names the keys that are not among known, sorted, with
// the fields known; "" when there is none.
func unknownFields(keys, known []string) string {
	var unknown []string
	for _, k := range keys {
		if !slices.Contains(known, k) {
			unknown = append(unknown, strconv.Quote(k))
		}
	}
	if len(unknown) == 0 {
		return ""
	}
	slices.Sort(unknown)
	return fmt.Sprintf("unknown field(s) %s; the fields are %s", strings.Join(unknown, ", "), strings.Join(known, ", "))
}

// ParseRequest reads a decide request and checks it against the contract,
// returning every problem found, in field order; none means the request
// may be asked. A null value counts as the field left out.
func ParseRequest(raw []byte) (Request, []string) {
	var req Request
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return req, []string{"the request is empty; send a JSON object with at least a question"}
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return req, []string{"the request must be a JSON object with at least a question"}
	}
	// encoding/json keeps the last of a key silently, and replaces
	// invalid UTF-8 with U+FFFD: an option would come back changed.
	var dup *jsonx.DuplicateKeyError
	if _, err := jsonx.Members(raw); errors.As(err, &dup) {
		return req, []string{fmt.Sprintf("the request has the key %q twice; send each field once", dup.Key)}
	}
	if path, isKey, bad := jsonx.InvalidText(raw); bad {
		return req, []string{textProblem(path, isKey)}
	}
	// A key twice inside a field's data (the context) likewise: JSON
	// readers disagree on which one wins.
	if path, found := jsonx.DuplicateKey(raw); found {
		return req, []string{fmt.Sprintf("%s: the key %q appears twice; send each key once", strings.Join(path, "."), path[len(path)-1])}
	}
	var ps []string
	bad := func(format string, a ...any) { ps = append(ps, fmt.Sprintf(format, a...)) }
	if p := unknownFields(slices.Collect(maps.Keys(fields)), requestFields); p != "" {
		ps = append(ps, p)
	}
	present := func(k string) (json.RawMessage, bool) {
		v, ok := fields[k]
		return v, ok && string(v) != "null"
	}
	// read decodes field k into dst where it is given; false when it is
	// given but not a JSON value of kind.
	read := func(k, kind string, dst any) bool {
		v, ok := present(k)
		return !ok || jsonx.Kind(v) == kind && json.Unmarshal(v, dst) == nil
	}
	// number reads field k, nil where it is not given; false when it is
	// given but not a number that valid (nil: any) accepts.
	number := func(k string, valid func(float64) bool) (*float64, bool) {
		var f float64
		if v, ok := present(k); !ok {
			return nil, true
		} else if jsonx.Kind(v) != "number" || json.Unmarshal(v, &f) != nil || valid != nil && !valid(f) {
			return nil, false
		}
		return &f, true
	}

	typed := map[string]bool{} // fields with a type problem: Check has nothing to add
	if !read("question", "string", &req.Question) {
		bad("question must be a string")
		typed["question"] = true
	}
	if v, ok := present("options"); ok {
		var items []json.RawMessage
		if err := json.Unmarshal(v, &items); err != nil {
			bad("options must be an array of strings")
			// none_option's checks read options too: none was read
			typed["options"], typed["none_option"] = true, true
		} else {
			req.Options = make([]string, 0, len(items))
			for i, it := range items {
				var s string
				if err := json.Unmarshal(it, &s); err != nil || jsonx.Kind(it) != "string" {
					bad("options[%d] must be a string", i)
					typed["options"] = true
					continue
				}
				req.Options = append(req.Options, s)
			}
		}
	}
	if v, ok := present("context"); ok {
		if jsonx.Kind(v) != "object" {
			bad("context must be a JSON object")
		} else {
			req.Context = v
		}
	}
	var ok bool
	if req.MinConfidence, ok = number("min_confidence", nil); !ok { // its range is Check's
		bad("min_confidence must be a number in [0,1]")
	}
	if v, ok := present("request_id"); ok {
		if jsonx.Kind(v) != "string" || json.Unmarshal(v, &req.RequestID) != nil {
			bad("request_id must be a string of 1 to %d characters", decisionlog.MaxRequestIDChars)
		} else if req.RequestID == "" {
			bad("request_id must not be empty; leave it out to have one generated")
		}
	}
	if _, given := present("schema_version"); !read("schema_version", "string", &req.SchemaVersion) || given && req.SchemaVersion == "" {
		bad("schema_version must be the string %q", SchemaVersion) // "" too, which the schema's enum does not allow
	}
	if !read("none_option", "boolean", &req.NoneOption) {
		bad("none_option must be true or false")
	}
	if req.MinLabelMass, ok = number("min_label_mass", func(f float64) bool { return f >= 0 && f <= 1 }); !ok {
		bad("min_label_mass must be a number in [0,1]")
	}
	if req.Coverage, ok = number("coverage", func(f float64) bool { return answer.CheckCoverage(f) == nil }); !ok {
		bad("%v", answer.CheckCoverage(-1))
	}
	if _, ok := present("debias"); ok && (!read("debias", "string", &req.Debias) || req.Debias == "" || !decision.ValidDebias(req.Debias)) {
		bad("debias must be \"permute\" or \"off\"")
		req.Debias = ""
	}
	if _, ok := present("prior"); ok && (!read("prior", "string", &req.Prior) || req.Prior == "" || !decision.ValidPrior(req.Prior)) {
		bad("prior must be \"batch\", \"content_free\" or \"off\"")
		req.Prior = ""
	}
	for _, p := range req.Check() {
		field, _, _ := strings.Cut(p, " ")
		field, _, _ = strings.Cut(field, "[")
		if !typed[field] {
			ps = append(ps, p)
		}
	}
	return req, ps
}

// Check reports what is wrong with a request's values: lengths, counts,
// ranges, duplicates.
func (r Request) Check() []string {
	var ps []string
	bad := func(format string, a ...any) { ps = append(ps, fmt.Sprintf(format, a...)) }
	if n := utf8.RuneCountInString(r.Question); strings.TrimSpace(r.Question) == "" {
		bad("question is required: the decision to make, as a non-blank string")
	} else if n > MaxQuestionChars {
		bad("question is %d characters; at most %d are accepted", n, MaxQuestionChars)
	}
	if r.Options != nil {
		if n := len(r.Options); n < MinOptions || n > MaxOptions {
			bad("options has %d item(s); give %d to %d options, or leave options out for a yes or no answer", n, MinOptions, MaxOptions)
		}
		seen := map[string]int{}
		for i, o := range r.Options {
			switch n := utf8.RuneCountInString(o); {
			case strings.TrimSpace(o) == "":
				bad("options[%d] is empty", i)
			case n > MaxOptionChars:
				bad("options[%d] is %d characters; at most %d are accepted", i, n, MaxOptionChars)
			}
			if j, ok := seen[o]; ok {
				bad("options[%d] repeats options[%d] (%q); options must be unique", i, j, o)
			} else {
				seen[o] = i
			}
		}
	}
	if r.NoneOption && r.Options == nil {
		bad("none_option applies to a choice: give options, or leave none_option out for a yes or no answer")
	}
	if r.NoneOption && slices.Contains(r.Options, decision.NoneOption) {
		bad("options hold %q, the implicit option none_option adds; leave it out or drop none_option", decision.NoneOption)
	}
	if len(r.Context) > MaxContextBytes {
		bad("context is %d bytes of JSON; at most %d are accepted", len(r.Context), MaxContextBytes)
	}
	if c := r.MinConfidence; c != nil && (math.IsNaN(*c) || *c < 0 || *c > 1) {
		bad("min_confidence is %v; it must be in [0,1]", *c)
	}
	if n := utf8.RuneCountInString(r.RequestID); n > decisionlog.MaxRequestIDChars {
		bad("request_id is %d characters; at most %d are accepted", n, decisionlog.MaxRequestIDChars)
	}
	if r.SchemaVersion != "" && r.SchemaVersion != SchemaVersion {
		bad("schema_version %q is not supported; this gateway speaks schema version %q", r.SchemaVersion, SchemaVersion)
	}
	return ps
}

// requestID finds a usable request_id in a raw request, even one with
// other problems, so that every answer can echo it; else it makes one.
func requestID(raw []byte, fallback string) string {
	// A map, not a struct: encoding/json matches a struct's keys without
	// regard to case, so "REQUEST_ID" would be read as request_id.
	var f map[string]json.RawMessage
	var id string
	if json.Unmarshal(raw, &f) == nil && json.Unmarshal(f["request_id"], &id) == nil && jsonx.TextOK(f["request_id"]) &&
		id != "" && utf8.RuneCountInString(id) <= decisionlog.MaxRequestIDChars {
		return id
	}
	if fallback != "" {
		return fallback
	}
	return decisionlog.NewRequestID()
}

// textProblem names where a request holds text that is not valid UTF-8:
// "options[1]", "context", "question".
func textProblem(path []string, isKey bool) string {
	if len(path) == 0 || (isKey && len(path) == 1) || !slices.Contains(requestFields, path[0]) {
		return "the request has a key or a field that is not valid UTF-8 (or an unpaired surrogate escape); send UTF-8 text"
	}
	field := path[0]
	if field == "options" && len(path) > 1 {
		field += "[" + path[1] + "]"
	}
	if isKey {
		return field + " has a key that is not valid UTF-8 (or an unpaired surrogate escape); send UTF-8 text"
	}
	return field + " is not valid UTF-8 (or holds an unpaired surrogate escape); send UTF-8 text"
}
