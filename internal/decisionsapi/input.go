package decisionsapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"system1/internal/jsonx"
)

// piece is one content part's value: text, or JSON data.
type piece struct {
	text string
	data json.RawMessage // set for JSON
}

// partSpec is one part type a content array takes, with its fields.
type partSpec struct {
	typ    string
	fields []string
}

// The parts each place takes (OpenAI's Node SDK 7.55.0 types). An
// input_image is refused wherever it is: this server reads no images.
var (
	instructionParts = []partSpec{{"input_text", []string{"type", "text"}}, {"input_json", []string{"type", "data"}}}
	userParts        = []partSpec{{"input_text", []string{"type", "text", "prompt_cache_breakpoint"}}, {"input_json", []string{"type", "data"}}}
	textParts        = []partSpec{{"input_text", []string{"type", "text", "prompt_cache_breakpoint"}}}
	assistantParts   = []partSpec{{"output_text", []string{"type", "text"}}, {"refusal", []string{"type", "refusal"}}}
)

// render writes content for the model: one text part as that string, one
// JSON part as its data, several text parts joined by a blank line, any
// other mix as an array of the parts' values in order (text as strings).
// No parts is the empty string.
func render(ps []piece) json.RawMessage {
	switch {
	case len(ps) == 1 && ps[0].data != nil:
		return ps[0].data
	case !slices.ContainsFunc(ps, func(pc piece) bool { return pc.data != nil }): // all text
		texts := make([]string, len(ps))
		for i, pc := range ps {
			texts[i] = pc.text
		}
		return appendJSON(nil, strings.Join(texts, "\n\n"))
	}
	vals := make([]json.RawMessage, len(ps))
	for i, pc := range ps {
		vals[i] = pc.data
		if pc.data == nil {
			vals[i] = appendJSON(nil, pc.text)
		}
	}
	return appendJSON(nil, vals)
}

// readInput reads input into the state. A string is the state as is. An
// array of user messages holding only text and JSON is the content of
// all their parts, in order, rendered as one message's is (so one
// input_json part is the JSON state as sent, and text alone is one
// string). Any other array (other roles, tool calls and outputs) is an
// array of its items, each rendered with its role or type, in order.
func (p *Parsed) readInput(raw json.RawMessage) {
	switch jsonx.Kind(raw) {
	case "string":
		p.State = raw
		return
	case "array":
	default:
		p.fail("input", "input must be a string or an array of input items")
		return
	}
	items := elements(raw)
	if len(items) == 0 {
		p.fail("input", "input must hold at least one item")
		return
	}
	before := len(p.problems)
	rendered := make([]json.RawMessage, len(items))
	var all []piece
	allUser := true
	calls := map[string]string{}
	for i, it := range items {
		r, pieces, user := p.readItem(fmt.Sprintf("input[%d]", i), it, calls)
		rendered[i] = r
		all = append(all, pieces...)
		allUser = allUser && user
	}
	if len(p.problems) > before {
		p.broken["input"] = true
		return
	}
	if allUser {
		p.State = render(all)
		return
	}
	p.State = appendJSON(nil, rendered)
}

// The rendered forms of the items of an input that is not only user
// messages: fields in a fixed order, ids and statuses left out (they say
// nothing of the content).
type (
	renderedMessage struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	renderedCall struct {
		Type      string `json:"type"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Namespace string `json:"namespace,omitempty"`
		Arguments string `json:"arguments,omitempty"`
		Input     string `json:"input,omitempty"`
	}
	renderedOutput struct {
		Type   string          `json:"type"`
		CallID string          `json:"call_id"`
		Output json.RawMessage `json:"output"`
	}
)

// The tool items: each output type and the call type it answers.
var outputOf = map[string]string{
	"function_call_output":    "function_call",
	"custom_tool_call_output": "custom_tool_call",
}

// readItem reads one input item: its rendering, its parts when it is a
// user message, and whether it is one. calls holds the call ids so far,
// each with its item type, for outputs to match.
func (p *Parsed) readItem(at string, raw json.RawMessage, calls map[string]string) (json.RawMessage, []piece, bool) {
	ms, ok := p.object(at, raw)
	if !ok {
		return nil, nil, false
	}
	typ, hasType := p.str(at, ms, "type", false, false)
	_, hasRole := jsonx.Lookup(ms, "role")
	switch {
	case hasRole || typ == "message":
		if hasType && typ != "message" {
			p.fail(at+".type", fmt.Sprintf("a message's type is \"message\" or absent, not %q", typ))
			return nil, nil, false
		}
		return p.readMessage(at, ms)
	case typ == "function_call" || typ == "custom_tool_call":
		arg := map[string]string{"function_call": "arguments", "custom_tool_call": "input"}[typ]
		p.only(at, ms, "a "+typ+" item", "type", "call_id", "name", arg, "id", "namespace", "status")
		id, _ := p.str(at, ms, "call_id", true, false)
		name, _ := p.str(at, ms, "name", true, false)
		text, _ := p.str(at, ms, arg, true, false)
		ns, _ := p.str(at, ms, "namespace", false, true)
		p.str(at, ms, "id", false, true)
		p.status(at, ms)
		if k, dup := calls[id]; dup && id != "" {
			p.fail(at+".call_id", fmt.Sprintf("call_id %q is already a %s's; each call needs its own", id, k))
		}
		calls[id] = typ
		c := renderedCall{Type: typ, CallID: id, Name: name, Namespace: ns}
		if typ == "function_call" {
			c.Arguments = text
		} else {
			c.Input = text
		}
		return appendJSON(nil, c), nil, false
	case outputOf[typ] != "":
		p.only(at, ms, "a "+typ+" item", "type", "call_id", "output", "id", "status")
		id, ok := p.str(at, ms, "call_id", true, false)
		if call := outputOf[typ]; ok && calls[id] != call {
			p.fail(at+".call_id", fmt.Sprintf("no %s item before this one has call_id %q; each tool output must follow its call", call, id))
		}
		p.str(at, ms, "id", false, true)
		p.status(at, ms)
		var pieces []piece
		if out, ok := jsonx.Lookup(ms, "output"); ok {
			pieces, _ = p.readContent(at+".output", out, textParts, "a tool output")
		} else {
			p.fail(at+".output", "Field required")
		}
		return appendJSON(nil, renderedOutput{Type: typ, CallID: id, Output: render(pieces)}), nil, false
	case !hasType:
		p.fail(at, "an input item needs a role (a message) or a type")
	default:
		p.fail(at+".type", fmt.Sprintf("type %q is not an input item: message, function_call, function_call_output, custom_tool_call or custom_tool_call_output", typ))
	}
	return nil, nil, false
}

func (p *Parsed) readMessage(at string, ms []jsonx.Member) (json.RawMessage, []piece, bool) {
	role, ok := p.str(at, ms, "role", true, false)
	if !ok {
		return nil, nil, false
	}
	var parts []partSpec
	fields := []string{"type", "role", "content"}
	switch role {
	case "user":
		parts = userParts
	case "developer", "system":
		parts = textParts
	case "assistant":
		parts = assistantParts
		fields = append(fields, "phase")
		if ph, ok := p.str(at, ms, "phase", false, true); ok && ph != "commentary" && ph != "final_answer" {
			p.fail(at+".phase", "phase must be commentary, final_answer or null")
		}
	default:
		p.fail(at+".role", fmt.Sprintf("role %q is not one of user, developer, system, assistant", role))
		return nil, nil, false
	}
	p.only(at, ms, "a message", fields...)
	content, ok := jsonx.Lookup(ms, "content")
	if !ok {
		p.fail(at+".content", "Field required")
		return nil, nil, false
	}
	pieces, _ := p.readContent(at+".content", content, parts, "a "+role+" message")
	return appendJSON(nil, renderedMessage{Role: role, Content: render(pieces)}), pieces, role == "user"
}

func (p *Parsed) status(at string, ms []jsonx.Member) {
	if s, ok := p.str(at, ms, "status", false, true); ok && s != "in_progress" && s != "completed" && s != "incomplete" {
		p.fail(at+".status", "status must be in_progress, completed, incomplete or null")
	}
}

// readContent reads content: a string, or an array of the parts specs
// allows.
func (p *Parsed) readContent(at string, raw json.RawMessage, specs []partSpec, what string) ([]piece, bool) {
	switch jsonx.Kind(raw) {
	case "string":
		var s string
		_ = json.Unmarshal(raw, &s)
		return []piece{{text: s}}, true
	case "array":
		return p.readParts(at, raw, specs)
	}
	p.fail(at, "content must be a string or an array of parts")
	return nil, false
}

// readParts reads an array of content parts, each of a type specs allows.
func (p *Parsed) readParts(at string, raw json.RawMessage, specs []partSpec) ([]piece, bool) {
	before := len(p.problems)
	var out []piece
	for j, it := range elements(raw) {
		pat := fmt.Sprintf("%s[%d]", at, j)
		ms, ok := p.object(pat, it)
		if !ok {
			continue
		}
		typ, ok := p.str(pat, ms, "type", true, false)
		if !ok {
			continue
		}
		if typ == "input_image" {
			p.problems = append(p.problems, Problem{Param: pat, Unsupported: true,
				Message: "images are not supported: this server reads text and JSON only"})
			continue
		}
		i := slices.IndexFunc(specs, func(s partSpec) bool { return s.typ == typ })
		if i < 0 {
			names := make([]string, len(specs))
			for j, s := range specs {
				names[j] = s.typ
			}
			p.fail(pat+".type", fmt.Sprintf("part type %q is not taken here; this place takes %s", typ, list(names)))
			continue
		}
		if !p.only(pat, ms, "an "+typ+" part", specs[i].fields...) {
			continue
		}
		p.breakpoint(pat, ms)
		switch typ {
		case "input_text", "output_text":
			if s, ok := p.str(pat, ms, "text", true, false); ok {
				out = append(out, piece{text: s})
			}
		case "refusal":
			if s, ok := p.str(pat, ms, "refusal", true, false); ok {
				out = append(out, piece{data: appendJSON(nil, map[string]string{"refusal": s})})
			}
		case "input_json":
			data, ok := jsonx.Lookup(ms, "data")
			if !ok {
				p.fail(pat+".data", "Field required")
				continue
			}
			if p.readJSONData(pat+".data", data) {
				out = append(out, piece{data: data})
			}
		}
	}
	return out, len(p.problems) == before
}

func (p *Parsed) breakpoint(at string, ms []jsonx.Member) {
	raw, ok := jsonx.Lookup(ms, "prompt_cache_breakpoint")
	if !ok || jsonx.Kind(raw) == "null" {
		return
	}
	at += ".prompt_cache_breakpoint"
	fs, ok := p.object(at, raw)
	if !ok || !p.only(at, fs, "a prompt cache breakpoint", "mode") {
		return
	}
	if mode, _ := p.str(at, fs, "mode", true, false); mode != "explicit" {
		p.fail(at+".mode", `mode must be "explicit"`)
	}
}

// readJSONData checks an input_json part's data: an object or an array of
// objects, within the wire's size, depth and value limits, no key twice.
func (p *Parsed) readJSONData(at string, raw json.RawMessage) bool {
	notObject := func(e json.RawMessage) bool { return jsonx.Kind(e) != "object" }
	if k := jsonx.Kind(raw); k != "object" && (k != "array" || slices.ContainsFunc(elements(raw), notObject)) {
		p.fail(at, "data must be a JSON object or an array of objects")
		return false
	}
	var b bytes.Buffer
	_ = json.Compact(&b, raw) // valid, as checked for the body
	if b.Len() > MaxJSONBytes {
		p.fail(at, fmt.Sprintf("data is %d bytes of compact JSON; at most %d are accepted", b.Len(), MaxJSONBytes))
		return false
	}
	count := 0
	if msg := walkJSON(raw, 1, &count); msg != "" {
		p.fail(at, msg)
		return false
	}
	return true
}

// walkJSON counts the values of raw, a container at depth depth, as the
// AI SDK does (every value counts, containers nest at most MaxJSONDepth
// levels), and reports a limit passed or a key sent twice.
func walkJSON(raw json.RawMessage, depth int, count *int) string {
	if *count++; *count > MaxJSONValues {
		return fmt.Sprintf("data holds more than %d values", MaxJSONValues)
	}
	var kids []json.RawMessage
	switch jsonx.Kind(raw) {
	case "object":
		ms, err := jsonx.Members(raw)
		if dup := (*jsonx.DuplicateKeyError)(nil); errors.As(err, &dup) {
			return fmt.Sprintf("the key %q appears twice in one object; send each key once", dup.Key)
		}
		for _, m := range ms {
			kids = append(kids, m.Value)
		}
	case "array":
		kids = elements(raw)
	default:
		return ""
	}
	if depth > MaxJSONDepth {
		return fmt.Sprintf("data nests deeper than %d levels", MaxJSONDepth)
	}
	for _, kid := range kids {
		if msg := walkJSON(kid, depth+1, count); msg != "" {
			return msg
		}
	}
	return ""
}
