// Package systemone is TypeSafe's System One wire format ("Jev"): the body of
// POST /v1/systemone, its answers and its errors, parsed into and written
// from the decision domain, a client for any System One endpoint, and the
// checks real clients apply to a response. Nothing outside this package
// knows the wire's field names.
package systemone

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"system1/internal/decision"
	"system1/internal/jsonx"
)

// Parsed is a request body read as far as it could be, with every problem
// found on the way. Only a request without problems may be asked.
type Parsed struct {
	decision.Request
	Problems []decision.Problem
	// Unknown are the top-level fields the wire does not define, in body
	// order. Validate does not report them: case files carry their own
	// fields beside a request. The HTTP face refuses them, as hosted Jev
	// does.
	Unknown []string
	// Images are what the request holds of Jev 1.14's images (see
	// Unsupported), which this server does not read.
	Images Unsupported
	// broken holds the top-level fields ("model") and questions
	// ("questions/<id>") that had a structural problem, so that limits are
	// not checked on what could not be read.
	broken map[string]bool
	// isJSON is set when the body is JSON, for ParseBatchRequest, which
	// reads it again.
	isJSON bool
}

// Validate returns the structural problems plus those of the request's
// limits, each once, in the order they were found.
func (p *Parsed) Validate(lim decision.Limits) []decision.Problem {
	out := append([]decision.Problem(nil), p.Problems...)
	for _, pr := range decision.Validate(p.Request, lim) {
		if (len(pr.Path) == 1 && p.broken[pr.Path[0]]) || (len(pr.Path) > 1 && p.broken["questions/"+pr.Path[1]]) {
			continue
		}
		out = append(out, pr)
	}
	return out
}

// ParseRequest reads a POST /v1/systemone body. Unknown top-level fields
// are listed in Unknown and Jev 1.14's images in Images, for the face to
// refuse; unknown fields inside a question are ignored, as Jev ignores
// them; "document" is accepted for "state", as TypeSafe's early clients
// sent it, and listed in Unknown when both are sent. The request keeps
// parts of the body verbatim (the state, descriptions), so it works on its
// own copy: the caller may reuse body.
func ParseRequest(body []byte) *Parsed {
	p := parseRequest(body)
	// A key twice inside the data (a state, instructions, a criterion's
	// text) is refused as in the wire's own fields, which parseRequest
	// names in their words: JSON readers disagree on which one wins.
	if !slices.ContainsFunc(p.Problems, func(pr decision.Problem) bool {
		return pr.Type == "duplicate_key" || pr.Type == "json_invalid" || pr.Type == "string_unicode"
	}) {
		if path, found := jsonx.DuplicateKey(body); found {
			p.fail("duplicate_key", fmt.Sprintf("the key %q appears twice; JSON readers disagree on which one wins, so send each key once", path[len(path)-1]), path...)
			p.broken[path[0]] = true
		}
	}
	return p
}

// fail records a problem at path, marking what it names as broken: a
// top-level field, or the question a path into one names.
func (p *Parsed) fail(typ, msg string, path ...string) {
	p.Problems = append(p.Problems, decision.Problem{Path: path, Msg: msg, Type: typ})
	switch {
	case len(path) == 1:
		p.broken[path[0]] = true
	case len(path) > 1 && path[0] == "questions":
		p.broken["questions/"+path[1]] = true
	}
}

func parseRequest(body []byte) *Parsed {
	body = bytes.Clone(body)
	p := &Parsed{broken: map[string]bool{}}
	// A body that cannot be read leaves every field unread.
	unread := func(typ, msg string, path ...string) *Parsed {
		p.fail(typ, msg, path...)
		p.broken["model"], p.broken["state"], p.broken["questions"] = true, true, true
		return p
	}
	if !json.Valid(body) {
		return unread("json_invalid", "body is not valid JSON")
	}
	p.isJSON = true
	if path, isKey, bad := jsonx.InvalidText(body); bad {
		// Decoding would replace it with U+FFFD: an id would come back
		// changed, a state would not be what was sent.
		if isKey {
			key := path[len(path)-1]
			return unread("string_unicode", fmt.Sprintf("the key %q is not valid UTF-8 (or holds an unpaired surrogate escape); send UTF-8 text", key), path[:len(path)-1]...)
		}
		return unread("string_unicode", "the string is not valid UTF-8 (or holds an unpaired surrogate escape); send UTF-8 text", path...)
	}
	top, err := jsonx.Members(body)
	var dup *jsonx.DuplicateKeyError
	switch {
	case jsonx.IsDuplicate(err, &dup):
		return unread("duplicate_key", fmt.Sprintf("the key %q appears twice; send each field once", dup.Key), dup.Key)
	case err != nil:
		return unread("model_attributes_type", "body must be a JSON object")
	}
	field := func(key string) (json.RawMessage, bool) { return jsonx.Lookup(top, key) }
	for _, m := range top {
		switch m.Key {
		case "model", "state", "questions":
		case "document":
			if _, both := field("state"); both { // one of the two would be dropped in silence
				p.Unknown = append(p.Unknown, m.Key)
			}
		case FeatureAssets, FeatureImages:
			if !empty(m.Value) {
				p.Images.Fields = append(p.Images.Fields, m.Key)
			}
		default:
			p.Unknown = append(p.Unknown, m.Key)
		}
	}
	slices.Sort(p.Images.Fields) // assets, then images, as Features names them

	switch raw, ok := field("model"); {
	case !ok:
		p.fail("missing", "Field required", "model")
	case jsonx.Kind(raw) != "string":
		p.fail("string_type", "model must be a string", "model")
	case string(raw) == `""`: // sent, so not "Field required"
		p.fail("string_too_short", "model must not be empty; GET /v1/models lists the models served", "model")
	default:
		p.Model = jsonx.Text(raw)
	}

	state, ok := field("state")
	if !ok {
		state, ok = field("document")
	}
	switch k := jsonx.Kind(state); {
	case !ok || k == "null":
		p.fail("missing", "Field required", "state")
	case k != "string" && k != "object" && k != "array":
		p.fail("union_type", "state must be a string, an object or an array", "state")
	default:
		p.State = state
	}

	raw, ok := field("questions")
	if !ok || jsonx.Kind(raw) == "null" {
		p.fail("missing", "Field required", "questions")
		return p
	}
	qs, err := jsonx.Members(raw)
	switch {
	case jsonx.IsDuplicate(err, &dup):
		p.fail("duplicate_key", fmt.Sprintf("question id %q appears twice; every question needs its own id", dup.Key), "questions", dup.Key)
		p.broken["questions"] = true
		return p
	case err != nil:
		p.fail("dict_type", "questions must be an object of id -> question: "+err.Error(), "questions")
		return p
	}
	if len(qs) == 0 {
		p.fail("too_short", "questions must hold at least one question", "questions")
	}
	for _, m := range qs {
		q := p.parseQuestion(m.Key, m.Value)
		if q.Kind == FeatureBox {
			p.Images.Box = append(p.Images.Box, m.Key)
		}
		p.Questions = append(p.Questions, q) // kept even when broken, so the question count stays true
	}
	return p
}

// parseQuestion reads the question id, recording its problems in p.
func (p *Parsed) parseQuestion(id string, raw json.RawMessage) decision.Question {
	q := decision.Question{ID: id}
	fail := func(typ, msg string, field ...string) {
		p.fail(typ, msg, append([]string{"questions", id}, field...)...)
	}
	if id == "" { // hosted Jev refuses it so (jev-1.14.md §7); its answer's headers could not name it
		fail("value_error", "Question key cannot be empty.")
		return q
	}
	fs, err := jsonx.Members(raw)
	var dup *jsonx.DuplicateKeyError
	switch {
	case jsonx.IsDuplicate(err, &dup):
		fail("duplicate_key", fmt.Sprintf("the key %q appears twice in the question; send each field once", dup.Key), dup.Key)
		return q
	case err != nil:
		fail("model_type", "a question must be an object")
		return q
	}
	field := func(key string) (json.RawMessage, bool) { return jsonx.Lookup(fs, key) }

	t, ok := field("type")
	kind := decision.Kind(jsonx.Text(t)) // a value that is not a string reads as its JSON, never a kind
	switch {
	case !ok:
		fail("union_tag_not_found", "Field required: type (choice, noul or score)", "type")
		return q
	case jsonx.Kind(t) != "string" || !kind.Valid():
		fail("union_tag_invalid", fmt.Sprintf("type %s is not one of choice, noul, score", bytes.TrimSpace(t)), "type")
		if kind == FeatureBox {
			q.Kind = kind // Jev 1.14's box question, which the caller refuses as an image
		}
		return q
	}
	q.Kind = kind

	if in, ok := field("instructions"); ok {
		if q.Instructions, ok = entry(in); !ok {
			fail("union_type", "instructions must be a string, an object, an array or null", "instructions")
		}
	}

	crit, hasCrit := field("criteria")
	hasCrit = hasCrit && jsonx.Kind(crit) != "null"
	switch q.Kind {
	case decision.Choice:
		if !hasCrit {
			fail("missing", "Field required: a choice needs criteria, an object of option -> description", "criteria")
			break
		}
		ms, err := jsonx.Members(crit)
		if jsonx.IsDuplicate(err, &dup) {
			fail("duplicate_key", fmt.Sprintf("option %q appears twice; options must be unique", dup.Key), "criteria", dup.Key)
			break
		}
		if err != nil {
			fail("dict_type", "choice criteria must be an object of option -> description: "+err.Error(), "criteria")
			break
		}
		for _, m := range ms {
			if m.Key == "" {
				fail("string_too_short", "an option key must not be empty", "criteria", m.Key)
				continue
			}
			text, ok := entry(m.Value)
			if !ok {
				fail("union_type", "a description must be a string, an object, an array or null", "criteria", m.Key)
				continue
			}
			q.Options = append(q.Options, decision.Option{Key: m.Key, Name: m.Key, Text: text})
		}
	case decision.Score:
		if !hasCrit {
			fail("missing", "Field required: a score needs criteria, an ordered array of levels", "criteria")
			break
		}
		// A level named twice is that, not criteria of the wrong shape.
		if _, err := jsonx.Members(crit); jsonx.IsDuplicate(err, &dup) {
			fail("duplicate_key", fmt.Sprintf("level %q appears twice; levels must be unique", dup.Key), "criteria", dup.Key)
			break
		}
		opts, msg := scoreLevels(crit)
		if msg != "" {
			fail("list_type", msg, "criteria")
			break
		}
		q.Options = opts
	case decision.Noul:
		var sides [2]json.RawMessage
		if hasCrit {
			ms, err := jsonx.Members(crit)
			if jsonx.IsDuplicate(err, &dup) {
				fail("duplicate_key", fmt.Sprintf("the side %q appears twice; send each side once", dup.Key), "criteria", dup.Key)
				break
			}
			if err != nil {
				fail("dict_type", "noul criteria must be an object with the sides true and false", "criteria")
				break
			}
			for _, m := range ms {
				i, side := map[string]int{"true": 0, "false": 1}[m.Key]
				if !side {
					fail("extra_forbidden", fmt.Sprintf("noul criteria take only the sides true and false, not %q", m.Key), "criteria", m.Key)
					continue
				}
				text, ok := entry(m.Value)
				if !ok {
					fail("union_type", "a description must be a string, an object, an array or null", "criteria", m.Key)
					continue
				}
				sides[i] = text
			}
		}
		q.Options = decision.NoulOptions(sides[0], sides[1])
	}
	return q
}

// entry accepts a question's instructions or a criterion's description:
// a string, object or array, or null for none.
func entry(raw json.RawMessage) (json.RawMessage, bool) {
	switch jsonx.Kind(raw) {
	case "null":
		return nil, true
	case "string", "object", "array":
		return raw, true
	}
	return nil, false
}

// scoreLevels reads score criteria: an ordered array of levels (the legend
// echoes each as sent), or an object whose key order is the level order
// (the legend maps position -> key). An object keyed "0".."k-1" in order is
// the int-keyed form older Python SDKs sent, read as an array.
func scoreLevels(raw json.RawMessage) ([]decision.Option, string) {
	level := func(i int, name string, text, legend json.RawMessage) decision.Option {
		return decision.Option{Key: strconv.Itoa(i), Name: name, Text: text, Legend: legend}
	}
	var opts []decision.Option
	switch jsonx.Kind(raw) {
	case "array":
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, err.Error()
		}
		for i, it := range items {
			text, ok := entry(it)
			if !ok {
				return nil, fmt.Sprintf("level %d must be a string, an object, an array or null", i)
			}
			opts = append(opts, level(i, "", text, it))
		}
	case "object":
		ms, err := jsonx.Members(raw)
		if err != nil {
			return nil, err.Error()
		}
		numbered := true
		for i, m := range ms {
			if m.Key == "" {
				return nil, "a level's key must not be empty"
			}
			numbered = numbered && m.Key == strconv.Itoa(i)
		}
		for i, m := range ms {
			text, ok := entry(m.Value)
			if !ok {
				return nil, fmt.Sprintf("level %q must be a string, an object, an array or null", m.Key)
			}
			if numbered {
				opts = append(opts, level(i, "", text, m.Value))
				continue
			}
			opts = append(opts, level(i, m.Key, text, appendString(nil, m.Key)))
		}
	default:
		return nil, "score criteria must be an ordered array of levels, or an object whose key order is the level order"
	}
	return opts, ""
}
