package decisionsapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"

	"system1/internal/decision"
	"system1/internal/jsonx"
)

// Parsed is a Decisions request read into the domain as far as it could
// be, with every problem found on the way. Only a request that Validate
// passes may be asked.
type Parsed struct {
	decision.Request
	// Asked holds, aligned with Request.Questions, what the domain has no
	// field for: each question's name and its choices' typed values and
	// levels' labels, so that answers go back as they were asked.
	Asked []Asked

	problems []Problem
	// broken holds the top-level fields ("model", "input", "questions")
	// and questions (by index) that had a structural problem, so that
	// limits are not checked on what could not be read.
	broken  map[string]bool
	brokenQ map[int]bool
}

// Asked is one question as the caller named and typed it.
type Asked struct {
	// Name is the question's name; Named is false for an unnamed question,
	// which is answered with name null and has an internal id in the domain
	// that no name of the request can equal.
	Name  string
	Named bool
	// Values are a choice's values as JSON ("billing", true), aligned with
	// the question's options: true and "true" are distinct choices.
	Values []json.RawMessage
	// Labels are a score's level labels, aligned with its levels.
	Labels []string
}

// ParseRequest reads a POST /v1/decisions body: every structural problem
// at once, each named by its JSON path. Text and JSON are read into the
// domain's state and instructions by the rules of docs/decisions-wire.md
// ("Reading the input"); images are refused as unsupported input. The
// request keeps parts of the body verbatim, so it works on its own copy.
func ParseRequest(body []byte) *Parsed {
	body = bytes.Clone(body)
	p := &Parsed{broken: map[string]bool{}, brokenQ: map[int]bool{}}
	breakAll := func() { p.broken["model"], p.broken["input"], p.broken["questions"] = true, true, true }
	if !json.Valid(body) {
		p.fail("", "the body is not valid JSON")
		breakAll()
		return p
	}
	if path, isKey, bad := jsonx.InvalidText(body); bad {
		// Decoding would put U+FFFD in its place: a name or value would
		// come back changed.
		if isKey {
			p.fail(paramOf(body, path[:len(path)-1]), fmt.Sprintf("the key %q is not valid UTF-8 (or holds an unpaired surrogate escape); send UTF-8 text", path[len(path)-1]))
		} else {
			p.fail(paramOf(body, path), "the string is not valid UTF-8 (or holds an unpaired surrogate escape); send UTF-8 text")
		}
		breakAll()
		return p
	}
	top, ok := p.object("", body)
	if !ok {
		breakAll()
		return p
	}
	for _, m := range top {
		switch m.Key {
		case "model":
			p.readModel(m.Value)
		case "input":
			p.readInput(m.Value)
		case "questions":
			p.readQuestions(m.Value)
		case "prompt_cache_key":
			p.optionalString(m.Key, m.Value)
		case "prompt_cache_options":
			p.readCacheOptions(m.Value)
		case "safety_identifier":
			if s, ok := p.optionalString(m.Key, m.Value); ok && len(utf16.Encode([]rune(s))) > MaxSafetyIdentifier {
				p.fail(m.Key, fmt.Sprintf("safety_identifier is %d characters; at most %d are accepted", len(utf16.Encode([]rune(s))), MaxSafetyIdentifier))
			}
		default:
			p.fail(param("", m.Key), "unknown field; a decision request takes model, input, questions, prompt_cache_key, prompt_cache_options and safety_identifier")
		}
	}
	for _, f := range []string{"model", "input", "questions"} {
		if _, ok := jsonx.Lookup(top, f); !ok {
			p.fail(f, "Field required")
		}
	}
	return p
}

// Validate returns nil when the request can be asked, else the 400 that
// lists every problem: the structural ones ParseRequest found, then those
// of the limits. The wire's limits (MaxQuestions, MaxChoices) and lim,
// the server's for the model, both apply: the stricter wins, and the
// message states it.
func (p *Parsed) Validate(lim decision.Limits) *Error {
	ps := append([]Problem(nil), p.problems...)
	lim = Limits(lim)
	index := make(map[string]int, len(p.Questions))
	for i, q := range p.Questions {
		index[q.ID] = i
	}
	for _, dp := range decision.Validate(p.Request, lim) {
		if at, ok := p.domainParam(dp.Path, index); ok {
			ps = append(ps, Problem{Param: at, Message: dp.Msg})
		}
	}
	if len(ps) == 0 {
		return nil
	}
	return Invalid(ps)
}

// domainParam turns the path of a domain problem into this wire's JSON
// path, or reports false for one about a part that already has a
// structural problem.
func (p *Parsed) domainParam(path []string, index map[string]int) (string, bool) {
	if len(path) == 0 {
		return "", true
	}
	top := map[string]string{"model": "model", "state": "input", "questions": "questions"}[path[0]]
	if len(path) == 1 || path[0] != "questions" {
		return top, !p.broken[top]
	}
	i, ok := index[path[1]]
	if !ok || p.brokenQ[i] || p.broken["questions"] {
		return "", false
	}
	at := fmt.Sprintf("questions[%d]", i)
	if len(path) < 3 {
		return at, true
	}
	if path[2] != "criteria" {
		return at + "." + path[2], true
	}
	at += "." + optionsField[p.Questions[i].Kind]
	if len(path) > 3 {
		if j := p.Questions[i].OptionIndex(path[3]); j >= 0 {
			return fmt.Sprintf("%s[%d]", at, j), true
		}
	}
	return at, true
}

// fail records a problem at at; a top-level field it names is broken.
func (p *Parsed) fail(at, msg string) {
	p.problems = append(p.problems, Problem{Param: at, Message: msg})
	if at == "model" || at == "input" || at == "questions" {
		p.broken[at] = true
	}
}

// object splits the JSON object at path at into its members, reporting a
// value that is not an object or a key sent twice.
func (p *Parsed) object(at string, raw json.RawMessage) ([]jsonx.Member, bool) {
	ms, err := jsonx.Members(raw)
	var dup *jsonx.DuplicateKeyError
	switch {
	case errors.As(err, &dup):
		p.fail(param(at, dup.Key), "the key appears twice; send each field once")
		return nil, false
	case err != nil:
		msg := "must be a JSON object"
		if at == "" {
			msg = "the body " + msg
		}
		p.fail(at, msg)
		return nil, false
	}
	return ms, true
}

// only reports every member of ms not among the fields allowed at at.
func (p *Parsed) only(at string, ms []jsonx.Member, what string, allowed ...string) bool {
	ok := true
	for _, m := range ms {
		if !slices.Contains(allowed, m.Key) {
			p.fail(param(at, m.Key), fmt.Sprintf("unknown field; %s takes %s", what, list(allowed)))
			ok = false
		}
	}
	return ok
}

// str reads the string field key of ms; a missing one is a problem when
// required, null counts as missing when nullable.
func (p *Parsed) str(at string, ms []jsonx.Member, key string, required, nullable bool) (string, bool) {
	raw, present := jsonx.Lookup(ms, key)
	at = param(at, key)
	switch k := jsonx.Kind(raw); {
	case !present || (nullable && k == "null"):
		if required {
			p.fail(at, "Field required")
		}
		return "", false
	case k != "string":
		p.fail(at, key+" must be a string")
		return "", false
	}
	var s string
	_ = json.Unmarshal(raw, &s) // checked: a valid JSON string
	return s, true
}

func (p *Parsed) optionalString(at string, raw json.RawMessage) (string, bool) {
	switch jsonx.Kind(raw) {
	case "null":
		return "", false
	case "string":
		var s string
		_ = json.Unmarshal(raw, &s)
		return s, true
	}
	p.fail(at, at+" must be a string or null")
	return "", false
}

func (p *Parsed) readModel(raw json.RawMessage) {
	var s string
	switch {
	case jsonx.Kind(raw) != "string" || json.Unmarshal(raw, &s) != nil:
		p.fail("model", "model must be a string")
	case s == "":
		p.fail("model", "model must not be empty")
	default:
		p.Model = s
	}
}

func (p *Parsed) readCacheOptions(raw json.RawMessage) {
	const at = "prompt_cache_options"
	if jsonx.Kind(raw) == "null" {
		return
	}
	ms, ok := p.object(at, raw)
	if !ok {
		return
	}
	p.only(at, ms, at, "mode", "ttl")
	if mode, ok := p.str(at, ms, "mode", false, true); ok && mode != "implicit" && mode != "explicit" {
		p.fail(at+".mode", "mode must be implicit, explicit or null")
	}
	if ttl, ok := p.str(at, ms, "ttl", false, true); ok && ttl != "30m" {
		p.fail(at+".ttl", `ttl must be "30m", the only supported value`)
	}
}

// The three question types and the domain kinds they are read into.
var questionKinds = map[string]decision.Kind{
	"predicate": decision.Noul,
	"choice":    decision.Choice,
	"score":     decision.Score,
}

// optionsField is the question field that holds a kind's options, which
// a domain problem about a question's criteria refers to.
var optionsField = map[decision.Kind]string{decision.Choice: "choices", decision.Score: "levels"}

// Limits are a server's limits for a model on this wire: the wire's own
// (MaxQuestions, MaxChoices) where they are stricter.
func Limits(lim decision.Limits) decision.Limits {
	lim.MaxQuestions = min(lim.MaxQuestions, MaxQuestions)
	lim.MaxChoiceOptions = min(lim.MaxChoiceOptions, MaxChoices)
	return lim
}

// Capabilities are what a model under a server's limits can be asked on
// this wire, its question types in the wire's words.
func Capabilities(lim decision.Limits) decision.Capabilities {
	return Limits(lim).Capabilities(TypeName)
}

// TypeName is a question kind's type on this wire: a noul is a
// predicate; choice and score keep the domain's names.
func TypeName(k decision.Kind) string {
	if k == decision.Noul {
		return "predicate"
	}
	return string(k)
}

func (p *Parsed) readQuestions(raw json.RawMessage) {
	if jsonx.Kind(raw) != "array" {
		p.fail("questions", "questions must be an array of questions")
		return
	}
	items := elements(raw)
	if len(items) == 0 {
		p.fail("questions", "at least one question is required")
		return
	}
	p.Questions = make([]decision.Question, len(items))
	p.Asked = make([]Asked, len(items))
	// Names are the questions' ids; an unnamed question, one named "" (an
	// id nothing can be keyed by: a header's item, a log's question, a
	// feedback's), or one whose name repeats an earlier one, gets an id no
	// name can be. The answer still echoes the name as sent.
	names := make(map[string]int, len(items))
	for i, it := range items {
		p.Questions[i], p.Asked[i] = p.readQuestion(i, it)
		a := p.Asked[i]
		if !a.Named {
			continue
		}
		if j, dup := names[a.Name]; dup {
			p.fail(fmt.Sprintf("questions[%d].name", i), fmt.Sprintf("the name %q is also questions[%d]'s; names must be unique", a.Name, j))
			p.brokenQ[i] = true
			continue
		}
		names[a.Name] = i
	}
	for i := range p.Questions {
		if j, ok := names[p.Asked[i].Name]; ok && j == i && p.Asked[i].Named && p.Asked[i].Name != "" {
			p.Questions[i].ID = p.Asked[i].Name
			continue
		}
		id := fmt.Sprintf("questions[%d]", i)
		for _, taken := names[id]; taken; _, taken = names[id] {
			id += "#"
		}
		p.Questions[i].ID = id
	}
}

// readQuestion reads one question; the kind stays empty when its type
// cannot be read.
func (p *Parsed) readQuestion(i int, raw json.RawMessage) (decision.Question, Asked) {
	at := fmt.Sprintf("questions[%d]", i)
	var q decision.Question
	var a Asked
	bad := len(p.problems)
	defer func() {
		if len(p.problems) > bad {
			p.brokenQ[i] = true
		}
	}()
	ms, ok := p.object(at, raw)
	if !ok {
		return q, a
	}
	typ, ok := p.str(at, ms, "type", true, false)
	if !ok {
		return q, a
	}
	kind, known := questionKinds[typ]
	if typ == "box" {
		// Jev 1.14's box question, which finds its target in an image:
		// unsupported input, as an image is, not a type never heard of.
		p.problems = append(p.problems, Problem{Param: at + ".type", Unsupported: true,
			Message: "box questions are not supported: they need an image, and this server reads text and JSON only"})
		return q, a
	}
	if !known {
		p.fail(at+".type", fmt.Sprintf("type %q is not one of predicate, choice, score", typ))
		return q, a
	}
	q.Kind = kind
	fields := []string{"type", "name", "instructions"}
	if f := optionsField[kind]; f != "" {
		fields = append(fields, f)
	}
	p.only(at, ms, "a "+typ+" question", fields...)
	a.Name, a.Named = p.str(at, ms, "name", false, true)
	if raw, ok := jsonx.Lookup(ms, "instructions"); ok {
		q.Instructions = p.readInstructions(at+".instructions", raw)
	}
	switch kind {
	case decision.Noul:
		q.Options = decision.NoulOptions(nil, nil)
	case decision.Choice:
		q.Options, a.Values = p.readChoices(at+".choices", ms)
	case decision.Score:
		q.Options, a.Labels = p.readLevels(at+".levels", ms)
	}
	return q, a
}

// readInstructions reads a question's instructions: a string as is, an
// array of parts rendered as content is; null is none.
func (p *Parsed) readInstructions(at string, raw json.RawMessage) json.RawMessage {
	switch jsonx.Kind(raw) {
	case "null":
		return nil
	case "string":
		return raw
	case "array":
		parts, ok := p.readParts(at, raw, instructionParts)
		if !ok || len(parts) == 0 {
			return nil
		}
		return render(parts)
	}
	p.fail(at, "instructions must be a string, an array of input_text and input_json parts, or null")
	return nil
}

func (p *Parsed) readChoices(at string, ms []jsonx.Member) ([]decision.Option, []json.RawMessage) {
	raw, ok := jsonx.Lookup(ms, "choices")
	if !ok {
		p.fail(at, "Field required: a choice question needs choices, an array of {value, description}")
		return nil, nil
	}
	if jsonx.Kind(raw) != "array" {
		p.fail(at, "choices must be an array of {value, description}")
		return nil, nil
	}
	type choice struct {
		text  string // the value's text: the string, or true / false
		typed json.RawMessage
		isStr bool
		desc  json.RawMessage
	}
	var cs []choice
	seen := map[string]int{}
	strs := map[string]bool{}
	for j, it := range elements(raw) {
		cat := fmt.Sprintf("%s[%d]", at, j)
		fs, ok := p.object(cat, it)
		if !ok {
			continue
		}
		if !p.only(cat, fs, "a choice", "value", "description") {
			continue
		}
		var c choice
		v, ok := jsonx.Lookup(fs, "value")
		switch k := jsonx.Kind(v); {
		case !ok:
			p.fail(cat+".value", "Field required")
			continue
		case k == "string":
			_ = json.Unmarshal(v, &c.text)
			if c.text == "" {
				p.fail(cat+".value", "a choice's value must not be empty")
				continue
			}
			c.isStr, c.typed = true, appendJSON(nil, c.text)
		case k == "boolean":
			var b bool
			_ = json.Unmarshal(v, &b)
			c.text = strconv.FormatBool(b)
			c.typed = []byte(c.text)
		default:
			p.fail(cat+".value", "a choice's value must be a string or a boolean")
			continue
		}
		if k, dup := seen[string(c.typed)]; dup {
			p.fail(cat+".value", fmt.Sprintf("%s is also %s[%d].value; each choice must be unique", c.typed, at, k))
			continue
		}
		seen[string(c.typed)] = j
		if d, ok := jsonx.Lookup(fs, "description"); ok {
			switch jsonx.Kind(d) {
			case "null":
			case "string":
				c.desc = d
			default:
				p.fail(cat+".description", "a description must be a string")
				continue
			}
		}
		strs[c.text] = strs[c.text] || c.isStr
		cs = append(cs, c)
	}
	opts := make([]decision.Option, len(cs))
	vals := make([]json.RawMessage, len(cs))
	for j, c := range cs {
		key := c.text
		// The domain keys options by text; a boolean beside the string of
		// the same text is told apart, to the model too.
		for !c.isStr && strs[key] {
			key += " (boolean)"
		}
		opts[j] = decision.Option{Key: key, Name: key, Text: c.desc}
		vals[j] = c.typed
	}
	return opts, vals
}

// readLevels reads a score's levels, lowest first. A level without a
// description reads as Jev's plain string level (the label is what the
// model reads of it); one with a description is named by its label.
func (p *Parsed) readLevels(at string, ms []jsonx.Member) ([]decision.Option, []string) {
	raw, ok := jsonx.Lookup(ms, "levels")
	if !ok {
		p.fail(at, "Field required: a score question needs levels, an ordered array of {label, description}")
		return nil, nil
	}
	if jsonx.Kind(raw) != "array" {
		p.fail(at, "levels must be an ordered array of {label, description}")
		return nil, nil
	}
	var opts []decision.Option
	var labels []string
	for j, it := range elements(raw) {
		lat := fmt.Sprintf("%s[%d]", at, j)
		fs, ok := p.object(lat, it)
		if !ok || !p.only(lat, fs, "a level", "label", "description") {
			continue
		}
		before := len(p.problems)
		label, _ := p.str(lat, fs, "label", true, false)
		desc, hasDesc := p.str(lat, fs, "description", false, true)
		if len(p.problems) > before {
			continue
		}
		o := decision.Option{Key: strconv.Itoa(len(opts)), Text: appendJSON(nil, label), Legend: appendJSON(nil, label)}
		if hasDesc {
			o.Name, o.Text = label, appendJSON(nil, desc)
			o.Legend = appendJSON(nil, struct {
				Label       string `json:"label"`
				Description string `json:"description"`
			}{label, desc})
		}
		opts = append(opts, o)
		labels = append(labels, label)
	}
	return opts, labels
}

// elements splits a JSON array, valid as checked once for the body.
func elements(raw json.RawMessage) []json.RawMessage {
	var out []json.RawMessage
	_ = json.Unmarshal(raw, &out)
	return out
}

// identifier is a key written after a dot in a JSON path; any other is
// written quoted in brackets.
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// param appends key to the JSON path at.
func param(at, key string) string {
	switch {
	case !identifier.MatchString(key):
		return at + "[" + strconv.Quote(key) + "]"
	case at == "":
		return key
	}
	return at + "." + key
}

// paramOf writes the JSON path of path (keys, and array indexes in
// decimal, as jsonx reports them) in body.
func paramOf(body []byte, path []string) string {
	at := ""
	raw := json.RawMessage(body)
	for _, seg := range path {
		switch jsonx.Kind(raw) {
		case "array":
			n, _ := strconv.Atoi(seg)
			at += "[" + seg + "]"
			if es := elements(raw); n < len(es) {
				raw = es[n]
			}
		default:
			at = param(at, seg)
			ms, _ := jsonx.Members(raw)
			raw, _ = jsonx.Lookup(ms, seg)
		}
	}
	return at
}

func list(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
